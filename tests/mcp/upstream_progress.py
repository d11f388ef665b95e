"""An upstream whose tools report progress mid-call (``ctx.report_progress``).

Run: python upstream_progress.py [--http PORT]. ``count`` reports ``steps`` progress
notifications (each message names the call's ``label``), then answers; ``plain`` answers
at once. Both are MCP tools of the SDK's ``MCPServer``.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

mcp = MCPServer("progress-upstream")


@mcp.tool()
async def count(label: str, steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications naming ``label``, then answer."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"{label} {i}/{steps}")
        await anyio.sleep(0.02)
    return f"{label} counted {steps}"


@mcp.tool()
def plain(label: str) -> str:
    """Answer at once."""
    return label


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
