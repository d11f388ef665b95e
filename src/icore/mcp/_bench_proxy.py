"""The SDK's floor for ``icore bench mcp``: a pass-through MCP proxy with no icore code.

Run as a script (``python _bench_proxy.py UPSTREAM [--http PORT]``; it imports only the
``mcp`` SDK, never ``icore``): a low-level SDK ``Server`` whose ``tools/list`` and
``tools/call`` forward to one upstream over one kept-alive SDK ``ClientSession``.
``UPSTREAM`` is a streamable-HTTP URL, else a command line (stdio) split on spaces. Served
over the SDK's own stdio transport, or streamable HTTP with JSON responses (as the
gateway). The difference between this proxy and the direct call is the cost of any MCP
hop built on the SDK; the difference between the gateway and this proxy is icore's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any


async def _serve(upstream: str, port: int | None) -> None:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server import Server

    async with contextlib.AsyncExitStack() as stack:
        if upstream.startswith(("http://", "https://")):
            r, w = await stack.enter_async_context(streamable_http_client(upstream))
        else:
            cmd, *args = upstream.split(" ")
            r, w = await stack.enter_async_context(
                stdio_client(StdioServerParameters(command=cmd, args=args,
                                                   env=dict(os.environ))))
        up = await stack.enter_async_context(ClientSession(r, w))
        await up.initialize()

        async def list_tools(ctx: Any, params: Any) -> Any:
            return await up.list_tools()

        async def call_tool(ctx: Any, params: Any) -> Any:
            return await up.call_tool(params.name, params.arguments)

        server = Server("sdk-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        if port is None:
            from mcp.server.stdio import stdio_server
            async with stdio_server() as (sr, sw):
                await server.run(sr, sw, server.create_initialization_options())
        else:
            import uvicorn
            app = server.streamable_http_app(host="127.0.0.1", json_response=True)
            cfg = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            await uvicorn.Server(cfg).serve()


def main(argv: list[str]) -> None:
    """``UPSTREAM [--http PORT]``."""
    import anyio
    port = int(argv[2]) if len(argv) == 3 and argv[1] == "--http" else None
    anyio.run(_serve, argv[0], port)


if __name__ == "__main__":
    main(sys.argv[1:])
