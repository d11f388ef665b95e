"""An upstream MCP server with a resource over the 4 MiB a fact version holds.

Run: python upstream_bigres.py. ``memo://huge`` is ``$HUGE_BYTES`` bytes of text (default
5 MiB); ``memo://small`` is short; the tool ``use`` answers at once.
"""

from __future__ import annotations

import os

from mcp.server import MCPServer

mcp = MCPServer("big-upstream")


@mcp.resource("memo://huge")
def huge() -> str:
    """A text of $HUGE_BYTES bytes."""
    return "x" * int(os.environ.get("HUGE_BYTES", str(5 << 20)))


@mcp.resource("memo://small")
def small() -> str:
    """A short text."""
    return "small"


@mcp.tool()
def use(n: int) -> str:
    """Answer at once."""
    return f"used {n}"


if __name__ == "__main__":
    mcp.run()
