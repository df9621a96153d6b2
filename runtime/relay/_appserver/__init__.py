"""``relay app-server``: Codex's app-server protocol, JSON-RPC over standard input and output,
served with relay's sessions, one per thread (docs/codex-compat.md).

The pure parts are plain modules: the framing (:mod:`._rpc`), the parameters (:mod:`._params`),
the methods served and refused (:mod:`._methods`), relay's events as notifications
(:mod:`._notes`, with the items of :mod:`relay._codex`), a thread's configuration and
history (:mod:`._threads`). Around them are the server (:mod:`._server`), the standard streams
(:mod:`._stdio`) and the command (:mod:`._command`).
"""
