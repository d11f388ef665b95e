"""The upstream MCP server ``icore bench mcp`` times (``python -m icore.mcp._bench_upstream``).

Three trivial tools (``ping``, ``act``, ``act_res``), the constant resources
``bench://r0`` ... ``bench://r63`` (the D(a) of ``act_res``, read again at each of its
calls through the gateway) and ``bench://value``; ``--http PORT`` serves streamable HTTP
on 127.0.0.1, else stdio.
"""

from __future__ import annotations

import sys
from typing import Any

RESOURCES = 64
"""How many constant resources ``bench://r<i>`` the server serves (d <= 64)."""


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

    @server.tool()
    def act_res(n: int) -> int:
        """Return n (the protected tool whose D(a) are this server's resources)."""
        return n

    @server.resource("bench://value")
    def value() -> str:
        """A constant resource."""
        return "1"

    def constant(i: int) -> Any:
        def read() -> str:
            return str(i)
        return read

    for i in range(RESOURCES):
        server.resource(f"bench://r{i}", name=f"r{i}")(constant(i))

    if len(argv) == 2 and argv[0] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
