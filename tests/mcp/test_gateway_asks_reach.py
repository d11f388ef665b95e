"""Who an upstream's question can reach, and which call an answer belongs to (#29).

Real parts: ``icore mcp --http`` in a subprocess in front of a real upstream
(tests/mcp/upstream_asks.py over streamable HTTP); clients are the SDK's
``ClientSession`` and a raw HTTP client that declares every capability but never opens
the GET stream (the only channel the gateway, which answers POSTs with JSON, can send
it a request on). The manifest's ``ask_timeout_s`` is a day: a question waiting for an
answer that cannot come would hang the test instead of passing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from icore.adapters import load_jsonl, trace_lineages

from .conftest import upstream_log
from .test_gateway_asks import BUDGET, _concurrently, _http, _http_gateway

_H = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _no_stream_calls(url: str, calls: list[tuple[str, dict[str, Any]]]
                           ) -> list[dict[str, Any]]:
    """A handshake client over raw HTTP with every capability and no GET stream: the
    results of ``calls`` (after reading the budget)."""
    import httpx2
    async with httpx2.AsyncClient(timeout=120) as c:
        r = await c.post(url, headers=_H, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "clientInfo": {"name": "nostream",
                                                                "version": "1"},
                "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}}}})
        assert r.status_code == 200, r.text
        h = {**_H, "mcp-session-id": r.headers["mcp-session-id"],
             "mcp-protocol-version": r.json()["result"]["protocolVersion"]}
        r = await c.post(url, headers=h, json={"jsonrpc": "2.0",
                                               "method": "notifications/initialized"})
        assert r.status_code == 202, r.text
        out = []
        for i, (name, args) in enumerate([("icore_get_fact", {"key": BUDGET}), *calls]):
            r = await c.post(url, headers=h, json={
                "jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": {"name": name, "arguments": args}})
            assert r.status_code == 200, r.text
            out.append(r.json()["result"])
        return out[1:]


def test_http_session_without_a_get_stream_is_answered_at_once(tmp_path: Path) -> None:
    """An HTTP session that declared elicitation, sampling and roots but never opens a
    GET stream cannot be sent the upstream's question: the upstream is answered (``...
    not supported by the client: its HTTP session has no GET stream open``) after at
    most the first stream's grace, not after ``ask_timeout_s`` (a day), and the call's
    error says so."""
    log = tmp_path / "up.log"
    with _http_gateway(tmp_path, log, ask_timeout_s=86400) as url:
        async def main() -> list[dict[str, Any]]:
            with anyio.fail_after(120):  # a hang guard, not a measure
                return await _no_stream_calls(url, [("approve", {"amount": 4}),
                                                    ("summarize", {"text": "t"}),
                                                    ("where", {})])
        got = anyio.run(main)
    why = "not supported by the client: its HTTP session has no GET stream open"
    for r, head in zip(got, ("Elicitation", "Sampling", "List roots"), strict=True):
        said = r["content"][0]["text"]
        assert r["isError"] and f"{head} {why}" in said, said
        assert "which this client does not support or cannot receive" in said, said
    done = [x for x in upstream_log(log) if x["tool"] in ("approve_done", "where_done")]
    assert [x["error"].startswith(("Elicitation " + why, "List roots " + why))
            for x in done] == [True, True], done


def test_http_answers_link_to_their_own_call_by_task(tmp_path: Path) -> None:
    """Two sessions call the protected tool with the same arguments; the second's human
    answers (rejects) before the first's (approves). Each answer line names its call's
    ``task``, and the audit links each answer to exactly that call (by tool and
    arguments alone the reject would go to the first call)."""
    import mcp_types as types
    log = tmp_path / "up.log"
    first_asked, second_done = anyio.Event(), anyio.Event()

    async def alice_says(context: Any, params: Any) -> Any:
        first_asked.set()
        with anyio.fail_after(60):  # the other session's answer comes first
            await second_done.wait()
        return types.ElicitResult(action="accept", content={"approve": True})

    async def bob_says(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="decline")

    async def alice(url: str) -> None:
        async with _http(url, "alice", elicitation_callback=alice_says) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            r = await s.call_tool("approve", {"amount": 1})
            assert not r.is_error and "accept" in str(r.content), r

    async def bob(url: str) -> None:
        async with _http(url, "bob", elicitation_callback=bob_says) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            with anyio.fail_after(60):
                await first_asked.wait()
            r = await s.call_tool("approve", {"amount": 1})
            assert not r.is_error and "decline" in str(r.content), r
        second_done.set()

    with _http_gateway(tmp_path, log) as url:
        _concurrently(url, alice, bob)
    trace = tmp_path / "trace.jsonl"
    answers = [json.loads(x) for x in trace.read_text().splitlines() if '"answered_by"' in x]
    assert [(a["agent"].split("#")[0], a["decision"]) for a in answers] == [
        ("bob", "reject"), ("alice", "approve")]
    assert all(a["task"] == a["ask"]["task"] and a["task"].startswith(a["agent"] + "/")
               for a in answers), answers
    t = load_jsonl(trace)
    lineages = trace_lineages(t.planfence, t.steps)
    assert [(a.action.split("#")[0], a.human) for a in lineages] == [
        ("alice", "approved"), ("bob", "rejected")]


def test_sessionless_client_is_answered_at_once(tmp_path: Path) -> None:
    """A sessionless 2026-07-28 client (the SDK's default ``mcp.Client``) declares
    sampling but has no channel for a server's request: the upstream's ``create_message``
    is answered at once saying so (the in-band ``InputRequiredResult`` form is not
    translated, docs/mcp.md)."""
    import mcp_types as types

    from mcp import Client
    log = tmp_path / "up.log"

    async def sample(context: Any, params: Any) -> Any:
        return types.CreateMessageResult(role="assistant", model="m", content=types.
                                         TextContent(type="text", text="asked"))

    with _http_gateway(tmp_path, log, ask_timeout_s=86400) as url:
        async def main() -> Any:
            with anyio.fail_after(120):  # a hang guard, not a measure
                async with Client(url, sampling_callback=sample) as c:
                    assert c.protocol_version == "2026-07-28"
                    return await c.call_tool("summarize", {"text": "t"})
        r = anyio.run(main)
    said = r.content[0].text
    assert r.is_error and "Sampling not supported by the client: its connection has no " \
        "channel for a server's request (a sessionless 2026-07-28 client)" in said, said
