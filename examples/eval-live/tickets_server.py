"""The MCP server of the live corpus: one tool, ``read_ticket``, that returns TICKET.md of
the working directory (each run's copy of its case's fixture).

relay eval --live starts it for every run when the base configuration names it (docs/eval.md):

    [mcp_servers.tickets]
    command = "/path/to/python"    # one with the mcp package
    args = ["examples/eval-live/tickets_server.py"]
"""

from pathlib import Path


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tickets", log_level="WARNING")

    @server.tool()
    def read_ticket() -> str:
        """Read the ticket this work is about."""
        path = Path("TICKET.md")
        return path.read_text(encoding="utf-8") if path.exists() else "No ticket."

    server.run()


if __name__ == "__main__":
    main()
