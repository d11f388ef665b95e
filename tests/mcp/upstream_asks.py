"""An upstream whose tools ask the client (elicitation, sampling) mid-call (#29).

Run: python upstream_asks.py [--http PORT]. Each tool appends a JSON line to
$UPSTREAM_LOG when it starts and when it ends (with the answer it got), so a test can
prove the call ran to its end.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import NotificationParams
from pydantic import BaseModel

mcp = MCPServer("asks-upstream")


def _log(tool: str, **extra: object) -> None:
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "pid": os.getpid(), **extra}) + "\n")


class _Approval(BaseModel):
    approve: bool


@mcp.tool()
async def approve(amount: int, ctx: Context) -> str:
    """Ask the client's human to approve paying amount (elicitation), then answer."""
    _log("approve", amount=amount)
    try:
        r = await ctx.elicit(f"Pay {amount}?", _Approval)
    except Exception as exc:
        _log("approve_done", amount=amount, error=str(exc))
        raise
    data = getattr(r, "data", None)
    _log("approve_done", amount=amount, action=r.action,
         approve=None if data is None else data.approve)
    return f"approval: {r.action}" + ("" if data is None else f" approve={data.approve}")


class _Noted(BaseModel):
    approve: bool
    note: str = ""


@mcp.tool()
async def approve_noted(amount: int, ctx: Context) -> str:
    """Ask a two-field form (approve, note: QA qa-new11 S2), then answer what it got."""
    try:
        r = await ctx.elicit(f"Pay {amount}?", _Noted)
    except Exception as exc:
        return f"error: {exc}"
    data = getattr(r, "data", None)
    return f"approval: {r.action}" + ("" if data is None else f" approve={data.approve}")


class _Name(BaseModel):
    name: str


@mcp.tool()
async def ask_name(amount: int, ctx: Context) -> str:
    """Ask a free-input form (no yes/no field), then answer it."""
    r = await ctx.elicit(f"Who pays {amount}?", _Name)
    data = getattr(r, "data", None)
    return f"name: {r.action}" + ("" if data is None else f" {data.name}")


@mcp.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model to summarize text (sampling), then answer its summary."""
    from mcp_types import SamplingMessage, TextContent
    _log("summarize", text=text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampling is deprecated in 2026-07-28
        r = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=50, related_request_id=ctx.request_id)
    said = getattr(r.content, "text", "")
    _log("summarize_done", said=said)
    return f"summary: {said}"


@mcp.tool()
async def where(ctx: Context) -> str:
    """Ask the client for its roots (``roots/list``), then answer their URIs."""
    _log("where")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in 2026-07-28
            r = await ctx.session.list_roots()
    except Exception as exc:
        _log("where_done", error=str(exc))
        raise
    uris = [str(x.uri) for x in r.roots]
    _log("where_done", roots=uris)
    return " ".join(uris)


async def _roots_changed(ctx: Any, params: Any) -> None:
    """The client's roots changed: list them again (outside any call), log what came."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = await ctx.session.list_roots()
    except Exception as exc:
        _log("roots_changed", error=str(exc))
        return
    _log("roots_changed", roots=[str(x.uri) for x in r.roots])


mcp._lowlevel_server.add_notification_handler(
    "notifications/roots/list_changed", NotificationParams, _roots_changed)


@mcp.tool()
async def sign_in(eid: str, ctx: Context) -> str:
    """Send the client's human to a URL (URL-mode elicitation ``eid``), then say it ended
    (``notifications/elicitation/complete``) and answer what the human said."""
    r = await ctx.elicit_url("Sign in at the bank", f"https://bank.example/auth/{eid}", eid)
    await ctx.session.send_elicit_complete(eid)
    return f"url: {r.action}"


@mcp.tool()
async def needs_auth(eid: str) -> str:
    """Answer -32042 (URL elicitation ``eid`` required before this call can run)."""
    from mcp.shared.exceptions import UrlElicitationRequiredError
    from mcp_types import ElicitRequestURLParams
    _log("needs_auth", eid=eid)
    raise UrlElicitationRequiredError([ElicitRequestURLParams(
        message="Authorize first", url=f"https://bank.example/auth/{eid}",
        elicitation_id=eid)])


@mcp.tool()
async def finish_auth(eid: str, ctx: Context) -> str:
    """The out-of-band interaction ``eid`` ended: say so to the client."""
    await ctx.session.send_elicit_complete(eid)
    return f"completed {eid}"


@mcp.tool()
async def nap(seconds: float) -> str:
    """Sleep ``seconds``, then answer (a call that stays in flight a while)."""
    import anyio
    await anyio.sleep(seconds)
    return f"slept {seconds:g}"


@mcp.tool()
def echo(text: str) -> str:
    """Echo text back."""
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
