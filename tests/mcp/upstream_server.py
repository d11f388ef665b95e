"""An upstream MCP server for the gateway tests, written with the SDK (MCPServer).

Run: python upstream_server.py [--http PORT]. Every tool call is appended to the file
named by $UPSTREAM_LOG (one JSON line), so a test can prove a call never reached it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import uuid

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel

mcp = MCPServer("trip-upstream", instructions="Trips: read memo://price before booking.")
STATE: dict[str, str] = {"price": "100", "city": "Porto"}


def _log(tool: str, args: dict[str, object], **extra: object) -> None:
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "args": args, "pid": os.getpid(), **extra})
                    + "\n")


@mcp.tool()
def book(city: str, price: int) -> str:
    """Book a trip to city at price."""
    _log("book", {"city": city, "price": price})
    return f"booked {city} at {price}"


@mcp.tool()
def echo(text: str, ctx: Context) -> str:
    """Echo text back."""
    request = ctx.request_context.request
    client = getattr(request, "client", None)  # HTTP: the peer and its client software
    _log("echo", {"text": text}, peer=None if client is None else client.port,
         agent=None if request is None else request.headers.get("user-agent"))
    return text


@mcp.tool()
async def set_price(value: str, ctx: Context) -> str:
    """Change the price (a write: notifies resources/updated)."""
    _log("set_price", {"value": value})
    STATE["price"] = value
    await ctx.session.send_resource_updated("memo://price")
    return f"price is {value}"


@mcp.tool()
def set_city(value: str) -> str:
    """Change the city (no notification: the manifest declares the write)."""
    _log("set_city", {"value": value})
    STATE["city"] = value
    return f"city is {value}"


@mcp.tool()
def book_lane(city: str, lane: str = "north", note: str | None = None) -> str:
    """Book a slot in a city's lane (defaults: lane north, no note)."""
    _log("book_lane", {"city": city, "lane": lane, "note": note})
    return f"booked {city} via {lane}"


@mcp.tool()
def book_day(city: str, day: datetime.date, at: datetime.datetime | None = None,
             ref: uuid.UUID | None = None) -> str:
    """Book a trip to city on a day (format date), optionally at a time and with a ref."""
    _log("book_day", {"city": city, "day": day.isoformat(),
                      "at": None if at is None else at.isoformat(),
                      "ref": None if ref is None else str(ref)})
    return f"booked {city} on {day.isoformat()}"


@mcp.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer (a hang when seconds is large)."""
    _log("slow", {"seconds": seconds})
    time.sleep(seconds)
    return "slept"


class _Approval(BaseModel):
    approve: bool


@mcp.tool()
async def approve(amount: int, ctx: Context) -> str:
    """Ask the client's human to approve (elicitation), then answer."""
    _log("approve", {"amount": amount})
    r = await ctx.elicit(f"Approve {amount}?", _Approval)
    return f"approval: {r.action}"


@mcp.tool()
async def freeze(seconds: float) -> str:
    """Block the whole server (its event loop) this long: nothing else is answered."""
    _log("freeze", {"seconds": seconds})
    time.sleep(seconds)
    return "thawed"


@mcp.tool()
def crash() -> str:
    """Exit the process mid-call."""
    _log("crash", {})
    os._exit(3)


@mcp.resource("memo://price")
def price() -> str:
    """The current price."""
    return STATE["price"]


@mcp.tool()
def set_read_delay(seconds: float) -> str:
    """Make reads of memo://city take this long (a slow read racing a call)."""
    STATE["read_delay"] = str(seconds)
    return f"city reads take {seconds} s"


@mcp.resource("memo://city")
async def city() -> str:
    """The current city (after the read delay, if one is set)."""
    import anyio
    await anyio.sleep(float(STATE.get("read_delay", "0")))
    return STATE["city"]


@mcp.prompt()
def plan_trip(city: str) -> str:
    """A prompt to plan a trip."""
    return f"Plan a trip to {city}."


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
