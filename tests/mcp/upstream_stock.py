"""A warehouse upstream for the gateway's concurrency tests (QA qa-mcp7, #25).

Run: python upstream_stock.py [--http PORT]. State in $STOCK_STATE (``{"stock": {sku:
units}}``); each ``purge_sku`` appends ``start`` and ``end`` lines to $STOCK_LOG. With
``meet=N`` a purge waits (up to 10 s) until N purges have started before it writes, and
says in its ``end`` line whether they met: proof that calls ran at the same time.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server import MCPServer

STATE = Path(os.environ["STOCK_STATE"])
LOG = Path(os.environ["STOCK_LOG"])
mcp = MCPServer("warehouse")


def _log(**kw: object) -> None:
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(kw) + "\n")


def _starts() -> int:
    return sum(1 for x in LOG.read_text(encoding="utf-8").splitlines() if '"start"' in x)


@mcp.resource("wh://stock/{sku}")
def stock(sku: str) -> str:
    """Units of a SKU on hand."""
    return str(json.loads(STATE.read_text(encoding="utf-8"))["stock"][sku])


@mcp.tool()
async def purge_sku(sku: str, reason: str = "cleanup", meet: int = 0,
                    hold: float = 0, until: str = "") -> str:
    """DESTRUCTIVE: set the stock of sku to 0 (``hold``: seconds in flight first;
    ``until``: a file whose creation ends the hold, waited for up to 20 s)."""
    _log(event="start", sku=sku)
    met = not meet
    with anyio.move_on_after(10):
        while meet and not met:
            met = _starts() >= meet
            await anyio.sleep(0.02)
    await anyio.sleep(hold)
    with anyio.move_on_after(20):
        while until and not Path(until).exists():
            await anyio.sleep(0.02)
    st = json.loads(STATE.read_text(encoding="utf-8"))
    n, st["stock"][sku] = st["stock"][sku], 0
    STATE.write_text(json.dumps(st), encoding="utf-8")
    _log(event="end", sku=sku, removed=n, met=met)
    return f"purged {sku} ({n} units), reason={reason}"


@mcp.tool()
async def purge_zone(zone: str) -> str:
    """DESTRUCTIVE: set the stock of every sku ``<zone>-*`` to 0."""
    _log(event="start", sku=f"{zone}-*")
    await anyio.sleep(0.3)
    st = json.loads(STATE.read_text(encoding="utf-8"))
    gone = {k: v for k, v in st["stock"].items() if k.startswith(f"{zone}-")}
    st["stock"].update(dict.fromkeys(gone, 0))
    STATE.write_text(json.dumps(st), encoding="utf-8")
    _log(event="end", sku=f"{zone}-*", removed=sum(gone.values()))
    return f"purged zone {zone}: {gone}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
