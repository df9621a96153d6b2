"""MCP servers as a source of tools: the adapter between the official ``mcp`` SDK and relay's
tool layer (docs/tools.md).

The core never imports this room. The face (:func:`relay.open_session`) starts the configured
servers when a session opens (:func:`._session.open_mcp_servers`, which needs the ``mcp``
extra), which registers their tools in the session's tool registry and keeps them current as
the servers' lists change (:mod:`._listing`); each call then goes through the registry like
any other tool's. What can be said without the SDK (tool names, what a result reads as) is in
plain functions here, :mod:`._names` and :mod:`._results`.
"""
