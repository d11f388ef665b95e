"""A second upstream for the gateway tests: the SDK's low-level ``Server`` over stdio.

Its data lives in the JSON file $LEDGER_STATE, which a test edits directly: a change the
server never notifies anyone of (another agent writing the database). It supports
``resources/subscribe`` (the gateway subscribes itself); every subscription and every
tool call is appended to $LEDGER_LOG, so a test can prove a call never reached it.

State: ``{"accounts": {"main": 500}, "read_delay": 0, "fail": false}``; reading
``acct://<name>/balance`` waits ``read_delay`` seconds first, and fails when ``fail``.
Each read is logged as ``<read>``. ``deposit`` changes a balance and notifies
``resources/updated`` (as a well-behaved server does; ``notify_delay`` seconds after its
answer, from a background task, when the state sets it); ``crash`` exits mid-call. Over
stdio the server logs ``<start>`` with its pid.
Another writer: a test puts ``"pending": {"account": A, "value": V}`` in the state; a
watcher applies it and notifies ``acct://A/balance`` to every session seen (stdio), then
logs ``<notified>``. ``LEDGER_TEMPLATE_ONLY``: no resource listed, served through the
template only.
``--http PORT``: streamable HTTP on 127.0.0.1 instead of stdio.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

STATE = Path(os.environ["LEDGER_STATE"])
_LATE: set[Any] = set()
LOG = os.environ.get("LEDGER_LOG")


def _state() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(STATE.read_text(encoding="utf-8"))
    return data


def _log(tool: str, args: dict[str, Any]) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "args": args}) + "\n")


TOOLS = [
    types.Tool(name="charge", description="Charge an account.",
               input_schema={"type": "object", "required": ["account", "amount"],
                             "properties": {"account": {"type": "string"},
                                            "amount": {"type": "integer"}}}),
    types.Tool(name="deposit", description="Add to a balance (notifies the update).",
               input_schema={"type": "object", "required": ["account", "amount"],
                             "properties": {"account": {"type": "string"},
                                            "amount": {"type": "integer"}}}),
    types.Tool(name="crash", description="Exit mid-call.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="audit_note", description="Write a note (unprotected).",
               input_schema={"type": "object", "required": ["text"],
                             "properties": {"text": {"type": "string"}}}),
]


_SESSIONS: set[Any] = set()


async def _watch_writer() -> None:
    """Apply another writer's pending change and notify it to every session seen."""
    while True:
        await anyio.sleep(0.05)
        try:
            s = _state()
        except ValueError:  # the test is writing the file: look again
            continue
        ch = s.pop("pending", None)
        if ch is None:
            continue
        s["accounts"][ch["account"]] = ch["value"]
        STATE.write_text(json.dumps(s), encoding="utf-8")
        for session in list(_SESSIONS):
            await session.send_resource_updated(f"acct://{ch['account']}/balance")
        _log("<notified>", ch)


async def list_tools(ctx: Any, params: Any) -> Any:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: Any) -> Any:
    args = dict(params.arguments or {})
    _SESSIONS.add(ctx.session)
    _log(params.name, args)
    if params.name == "crash":
        os._exit(3)
    if params.name == "deposit":
        s = _state()
        s["accounts"][args["account"]] += args["amount"]
        STATE.write_text(json.dumps(s), encoding="utf-8")
        uri = f"acct://{args['account']}/balance"
        delay = float(s.get("notify_delay") or 0)
        if not delay:
            await ctx.session.send_resource_updated(uri)
        else:  # notified from a background task after the answer (an outbox)
            async def late() -> None:
                await anyio.sleep(delay)
                await ctx.session.send_resource_updated(uri)
            _LATE.add(asyncio.get_running_loop().create_task(late()))
    text = f"{params.name} ok: {json.dumps(args, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_resources(ctx: Any, params: Any) -> Any:
    if os.environ.get("LEDGER_TEMPLATE_ONLY"):
        return types.ListResourcesResult(resources=[])
    return types.ListResourcesResult(resources=[
        types.Resource(uri=f"acct://{n}/balance", name=f"{n}-balance", mime_type="text/plain")
        for n in _state()["accounts"]])


async def list_templates(ctx: Any, params: Any) -> Any:
    return types.ListResourceTemplatesResult(resource_templates=[
        types.ResourceTemplate(uri_template="acct://{name}/balance", name="balance")])


async def read_resource(ctx: Any, params: Any) -> Any:
    uri = str(params.uri)
    _SESSIONS.add(ctx.session)
    _log("<read>", {"uri": uri})
    s = _state()
    if s.get("read_delay"):
        await anyio.sleep(float(s["read_delay"]))
    if s.get("fail"):
        raise ValueError("the ledger database is locked")
    name = uri.removeprefix("acct://").removesuffix("/balance")
    if name not in s["accounts"]:
        raise ValueError(f"no account {name!r}")
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=uri, text=str(s["accounts"][name]), mime_type="text/plain")])


async def subscribe(ctx: Any, params: Any) -> Any:
    _SESSIONS.add(ctx.session)
    _log("<subscribe>", {"uri": str(params.uri)})
    if os.environ.get("LEDGER_REFUSE_SUBSCRIBE"):  # declares subscribe, then refuses it
        raise ValueError("subscriptions are switched off on this ledger")
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: Any) -> Any:
    return types.EmptyResult()


server = Server("ledger", on_list_tools=list_tools, on_call_tool=call_tool,
                on_list_resources=list_resources, on_list_resource_templates=list_templates,
                on_read_resource=read_resource, on_subscribe_resource=subscribe,
                on_unsubscribe_resource=unsubscribe)


async def main() -> None:
    _log("<start>", {"pid": os.getpid()})
    async with stdio_server() as (r, w), anyio.create_task_group() as tg:
        tg.start_soon(_watch_writer)
        await server.run(r, w, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def main_http(port: int) -> None:
    """Streamable HTTP on 127.0.0.1 (notifications on each session's GET stream)."""
    import uvicorn
    # LEDGER_STATELESS: no session id, so no GET stream (subscriptions can never notify)
    app = server.streamable_http_app(host="127.0.0.1",
                                     stateless_http=bool(os.environ.get("LEDGER_STATELESS")))
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                        log_level="warning")).serve()


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        anyio.run(main_http, int(sys.argv[2]))
    else:
        anyio.run(main)
