"""Serve the gateway to MCP clients: stdio (what Claude Desktop and Cursor launch) or HTTP.

:func:`serve_stdio` speaks JSON-RPC on this process's stdin/stdout (logs go to stderr);
:func:`serve_http` serves the streamable-HTTP transport at ``http://HOST:PORT/mcp``
(one gateway session per MCP session id; each answer a JSON response, not a per-request
SSE stream: the gateway sends nothing during a request, and notifications such as
``resources/updated`` go on the session's standalone stream), printing one ready line
on stderr.
"""

from __future__ import annotations

import logging
import sys

import anyio

from icore._extras import require
from icore.mcp._gateway import Gateway
from icore.mcp._manifest import GatewayManifest

log = logging.getLogger("icore.mcp")


async def serve_stdio(manifest: GatewayManifest) -> None:
    """Run the gateway over stdio until the client closes stdin.

    Raises:
        MissingExtra: the ``mcp`` extra is not installed.
    """
    require("mcp.server.stdio", "mcp", feature="icore mcp")
    from mcp.server.stdio import stdio_server

    async with Gateway(manifest) as gw, stdio_server() as (read, write):
        gw.single_client = True
        await gw.server.run(read, write, gw.server.create_initialization_options())


async def serve_http(manifest: GatewayManifest, host: str = "127.0.0.1", port: int = 8808
                     ) -> None:
    """Run the gateway over streamable HTTP at ``http://host:port/mcp`` until cancelled.

    Args:
        manifest: the gateway manifest.
        host: interface to bind (``127.0.0.1``: loopback only).
        port: TCP port (0..65535).

    Raises:
        MissingExtra: the ``mcp`` extra (or uvicorn) is not installed.
        OSError: the port cannot be bound.
    """
    require("mcp.server", "mcp", feature="icore mcp")
    uvicorn = require("uvicorn", "mcp", feature="icore mcp --http")

    async with Gateway(manifest) as gw:
        app = gw.server.streamable_http_app(host=host, json_response=True)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                lifespan="on")
        server = uvicorn.Server(config)

        async def ready() -> None:
            while not server.started:
                await anyio.sleep(0.02)
            print(f"icore mcp: serving http://{host}:{port}/mcp", file=sys.stderr,
                  flush=True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ready)
            await server.serve()
            tg.cancel_scope.cancel()
