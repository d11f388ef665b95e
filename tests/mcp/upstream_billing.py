"""A billing upstream whose error results may or may not have acted (QA qa-new15b S2).

Run: python upstream_billing.py. The Python SDK's ``MCPServer`` over stdio; state in
$BILL_STATE (``{"total": cents}``), each charge that took effect appended to $BILL_LOG.
``charge(cents, fail)``: ``fail="after"`` charges, then raises ``ToolError`` (the SDK answers an
``isError`` result: an error after the effect, as the TypeScript SDK's McpServer does
for a result that breaks its outputSchema); ``fail="before"`` raises before charging
(an error with no effect). ``add_tool(name)`` adds a tool and sends
``notifications/tools/list_changed``; ``rename_charge(name)`` serves ``charge`` under
``name`` from then on (and notifies). ``fail="hang"`` charges, then sleeps 5 s before it
answers (past a gateway's short ``timeout_s``), ``fail="slow"`` 1 s (past a client's),
``fail="sleep:S"`` S seconds; ``fail="die"`` charges, then the process exits at once
without answering (a stdio pipe closed, an HTTP connection dropped).
``bill://card`` never changes (a charge's D(a) that its effect leaves alone).
``python upstream_billing.py --http PORT`` serves streamable HTTP on 127.0.0.1:PORT.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

STATE = Path(os.environ["BILL_STATE"])
LOG = Path(os.environ["BILL_LOG"])
mcp = MCPServer("billing")


def _total() -> int:
    return int(json.loads(STATE.read_text(encoding="utf-8"))["total"]) \
        if STATE.exists() else 0


@mcp.resource("bill://total")
def total() -> str:
    """The cents charged so far."""
    return str(_total())


@mcp.resource("bill://card")
def card() -> str:
    """The card charged (a charge does not change it)."""
    return "visa-4242"


@mcp.tool()
async def charge(cents: int, fail: str = "") -> str:
    """Charge ``cents``."""
    if fail == "before":
        raise ToolError("card declined")
    STATE.write_text(json.dumps({"total": _total() + cents}), encoding="utf-8")
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"charged": cents}) + "\n")
    if fail == "after":
        raise ToolError("receipt printer jammed")
    if fail in ("hang", "slow"):
        await anyio.sleep(5 if fail == "hang" else 1)
    if fail.startswith("sleep:"):
        await anyio.sleep(float(fail[6:]))
    if fail == "die":
        os._exit(3)
    return f"charged {cents}"


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool ``name`` (it echoes) and tell the client the list changed."""
    def echo(x: str = "") -> str:
        return x
    mcp.add_tool(echo, name=name)
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def rename_charge(name: str, ctx: Context) -> str:
    """Serve ``charge`` as ``name`` from now on (and notify)."""
    mcp.remove_tool("charge")
    mcp.add_tool(charge, name=name)
    await ctx.session.send_tool_list_changed()
    return f"charge is now {name}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
