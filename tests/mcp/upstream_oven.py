"""An upstream MCP server (SDK MCPServer) serving a resource template and a static resource
whose URIs another instance serves too: two of them behind one gateway clash.

Run: python upstream_oven.py (stdio). $OVEN_SITE names this instance (in every content);
every tool call is appended to $UPSTREAM_LOG (one JSON line).
"""

from __future__ import annotations

import json
import os

from mcp.server import MCPServer

SITE = os.environ.get("OVEN_SITE", "site")
mcp = MCPServer(f"oven-{SITE}")
SLOTS: dict[str, str] = {}


@mcp.resource("oven://{oven}/slot")
def slot(oven: str) -> str:
    """The next free slot of an oven."""
    return f"{SITE}:{oven}:{SLOTS.get(oven, '09:00')}"


@mcp.resource("oven://menu")
def menu() -> str:
    """The menu."""
    return f"{SITE} menu"


@mcp.tool()
def bake(oven: str, slot: str) -> str:
    """Bake in an oven at a slot (the slot is taken)."""
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": "bake", "site": SITE, "oven": oven}) + "\n")
    SLOTS[oven] = "10:00" if slot == "09:00" else "11:00"
    return f"{SITE} baked in {oven} at {slot}"


@mcp.prompt()
def plan_bake(oven: str) -> str:
    """A prompt to plan a bake."""
    return f"Plan a bake in {SITE}'s oven {oven}."


if __name__ == "__main__":
    mcp.run()
