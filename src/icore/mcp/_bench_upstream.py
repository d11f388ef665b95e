"""The upstream MCP server ``icore bench mcp`` times (``python -m icore.mcp._bench_upstream``).

Two trivial tools (``ping`` and ``act``) and one resource; ``--http PORT`` serves
streamable HTTP on 127.0.0.1, else stdio.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    """Run the server (stdio, or ``--http PORT``)."""
    from mcp.server import MCPServer

    server = MCPServer("icore-bench-upstream")

    @server.tool()
    def ping(n: int) -> int:
        """Return n (the unprotected tool)."""
        return n

    @server.tool()
    def act(n: int) -> int:
        """Return n (the protected tool in the benchmark's manifest)."""
        return n

    @server.resource("bench://value")
    def value() -> str:
        """A constant resource."""
        return "1"

    if len(argv) == 2 and argv[0] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
