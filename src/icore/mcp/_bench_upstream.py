"""The upstream MCP server ``icore bench mcp`` times (``python -m icore.mcp._bench_upstream``).

Four trivial tools (``ping``, ``act``, ``act_res``, ``act_trust``), the constant
resources ``bench://r0`` ... ``bench://r63`` (the D(a) of ``act_res``, read again at each
of its calls through the gateway) and ``bench://value``; ``--http PORT`` serves
streamable HTTP on 127.0.0.1, else stdio. ``--trusted`` serves instead only the constant
resources ``bench://t0`` ... ``bench://t63`` (the D(a) of ``act_trust``) and accepts
``resources/subscribe`` (the upstream the benchmark's manifest marks ``trust_updates``;
no tool call goes to it, since one would end its trust until the next read).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server import MCPServer

RESOURCES = 64
"""How many constant resources ``bench://r<i>`` the server serves (d <= 64)."""


def _trusted(server: MCPServer[Any]) -> None:
    """``bench://t<i>`` and ``resources/subscribe`` (accepted, no-op)."""
    from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

    _constants(server, "t")

    async def subscribe(ctx: Any, params: Any) -> Any:
        return EmptyResult()  # constant resources: never an update to send

    low = server._lowlevel_server  # MCPServer has no subscribe decorator
    low.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, subscribe)


def main(argv: list[str]) -> None:
    """Run the server (stdio, or ``--http PORT``; ``--trusted``: see the module)."""
    from mcp.server import MCPServer

    server = MCPServer("icore-bench-upstream")
    if "--trusted" in argv:
        argv = [a for a in argv if a != "--trusted"]
        _trusted(server)
        _run(server, argv)
        return

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

    @server.tool()
    def act_trust(n: int) -> int:
        """Return n (protected by the other upstream's resources, trusted to notify)."""
        return n

    @server.resource("bench://value")
    def value() -> str:
        """A constant resource."""
        return "1"

    _constants(server, "r")
    _run(server, argv)


def _constants(server: MCPServer[Any], prefix: str) -> None:
    """The constant resources ``bench://<prefix><i>`` (text ``<i>``), i < RESOURCES."""
    def constant(i: int) -> Any:
        def read() -> str:
            return str(i)
        return read

    for i in range(RESOURCES):
        server.resource(f"bench://{prefix}{i}", name=f"{prefix}{i}")(constant(i))


def _run(server: MCPServer[Any], argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
