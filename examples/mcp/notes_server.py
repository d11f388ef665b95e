"""A tiny upstream MCP server for the gateway example (the official SDK's MCPServer).

Two resources (a trip's price and city), a tool that changes the price (and says so with
notifications/resources/updated), and the tool the gateway protects: ``book``.

Run it behind the gateway: ``icore mcp examples/mcp/gateway.yaml``.
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

mcp = MCPServer("trip-notes")
TRIP = {"price": "100", "city": "Porto"}


@mcp.resource("memo://price")
def price() -> str:
    """The trip's current price (EUR)."""
    return TRIP["price"]


@mcp.resource("memo://city")
def city() -> str:
    """The trip's destination."""
    return TRIP["city"]


@mcp.tool()
async def set_price(value: str, ctx: Context) -> str:
    """Change the price (other sessions' plans that read the old price become stale)."""
    TRIP["price"] = value
    await ctx.session.send_resource_updated("memo://price")
    return f"price is now {value}"


@mcp.tool()
def book(city: str, price: int) -> str:
    """Book the trip to ``city`` at ``price`` (protected by the gateway)."""
    return f"booked {city} at {price} EUR"


@mcp.tool()
def weather(city: str) -> str:
    """Today's weather (not protected: passes straight through)."""
    return f"sunny in {city}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
