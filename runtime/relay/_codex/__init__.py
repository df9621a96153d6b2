"""Codex's shapes of relay's items, in one room (docs/codex-compat.md).

relay speaks Codex's protocols through two faces: ``relay exec --json`` writes Codex's exec
event stream, ``relay app-server`` Codex's app-server protocol. Both show the same things (a
command, a tool call, a patch, the plan), so the shapes live here, once: :mod:`._calls` reads a
relay tool call as Codex's kinds; :mod:`._items` makes the app-server's thread items;
:mod:`._exec` makes the exec stream's items from those, as Codex derives its exec stream from
its app-server items. Each face frames them (JSON-RPC notifications, or JSON lines) and keeps
what it must remember between events.

This room imports only :mod:`relay._base`: what it reads is the protocol, never a tool's text.
"""
