"""Clients of the MCP 2026-07-28 revision over ``--http``: no session, one identity.

The revision dropped the handshake and ``Mcp-Session-Id``: each request stands alone.
What still identifies a client across its requests is the authenticated principal of its
bearer token (the SDK's ``principal_components``), so a gateway with ``http.clients``
ties a client's reads to its calls by it. Real processes: the upstream SDK server, the
gateway (``icore mcp --http``); clients: the SDK's default ``mcp.Client`` (which
negotiates 2026-07-28) and the OpenAI Agents SDK's ``MCPServerStreamableHttp``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    UPSTREAM,
    free_port,
    process,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)

ALICE, BOB, CAROL = "alice-token-7f3a", "bob-token-19c2", "carol-token-a81e"


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One upstream; a gateway with two clients' tokens, and one with none."""
    folder = tmp_path_factory.mktemp("gw-identity")
    log = folder / "up.log"
    p_up, p_gw, p_anon = free_port(), free_port(), free_port()
    os.environ["UPSTREAM_LOG"] = str(log)
    os.environ["ICORE_TEST_ALICE"] = ALICE
    up = {"trip": {"url": f"http://127.0.0.1:{p_up}/mcp", "timeout_s": 5}}
    clients = {"alice": {"token_env": "ICORE_TEST_ALICE"},
               "bob": {"token_sha256": hashlib.sha256(BOB.encode()).hexdigest()},
               "carol": {"token_sha256": hashlib.sha256(CAROL.encode()).hexdigest()}}
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    with_ids = write_manifest(folder / "a", up, http={"clients": clients})
    anon = write_manifest(folder / "b", up)
    try:
        with process([sys.executable, str(UPSTREAM), "--http", str(p_up)]) as u:
            wait_port(p_up, u)
            with process([sys.executable, "-m", "icore", "mcp", str(with_ids), "--http",
                          f"127.0.0.1:{p_gw}"]) as g1, \
                    process([sys.executable, "-m", "icore", "mcp", str(anon), "--http",
                             f"127.0.0.1:{p_anon}"]) as g2:
                wait_port(p_gw, g1)
                wait_port(p_anon, g2)
                yield {"url": f"http://127.0.0.1:{p_gw}/mcp",
                       "anon": f"http://127.0.0.1:{p_anon}/mcp", "log": log,
                       "folder": folder}
    finally:
        os.environ.pop("UPSTREAM_LOG", None)
        os.environ.pop("ICORE_TEST_ALICE", None)


@contextlib.asynccontextmanager
async def _client(url: str, token: str | None) -> AsyncIterator[Any]:
    """The SDK's default high-level client (mode="auto": protocol 2026-07-28)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as c:
        yield c


def _books(log: Path) -> list[dict[str, Any]]:
    return [x["args"] for x in upstream_log(log) if x["tool"] == "book"]


def test_default_client_reads_then_calls_by_its_token(gateways: dict[str, Any]) -> None:
    url, log = gateways["url"], gateways["log"]

    async def main() -> None:
        async with _client(url, ALICE) as alice, _client(url, BOB) as bob:
            assert alice.protocol_version == "2026-07-28"  # no session, no handshake
            await alice.read_resource("memo://price")
            await alice.read_resource("memo://city")
            r = await alice.call_tool("book", {"city": "Porto", "price": 100})
            assert not r.is_error, text(r)  # her reads, other requests, tied by the token
            # bob changes the price through the gateway; alice's plan is now stale
            await bob.call_tool("set_price", {"value": "310"})
            r = await alice.call_tool("book", {"city": "Porto", "price": 100})
            assert r.is_error and "(stale)" in text(r) and "310" in text(r), text(r)
            r = await alice.call_tool("book", {"city": "Porto", "price": 310})  # the replan
            assert not r.is_error, text(r)
            # bob never read anything: his call is not_read, not alice's reads
            r = await bob.call_tool("book", {"city": "Porto", "price": 310})
            assert r.is_error and "(not_read)" in text(r), text(r)

    anyio.run(main)
    assert _books(log) == [{"city": "Porto", "price": 100}, {"city": "Porto", "price": 310}]
    trace = (gateways["folder"] / "a" / "trace.jsonl").read_text(encoding="utf-8")
    assert '"alice#' in trace and '"bob#' in trace


def test_wrong_or_missing_token_is_refused(gateways: dict[str, Any]) -> None:
    """Every HTTP request to a gateway with ``http.clients`` needs one of their tokens."""
    import httpx2
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "in"}}}
    for token in (None, "not-a-token"):
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        r = httpx2.post(gateways["url"], json=body, headers=headers, timeout=30)
        assert r.status_code == 401, (token, r.status_code, r.text)
    assert "in" not in [x["args"].get("text") for x in upstream_log(gateways["log"])]


def test_no_identity_fails_closed_telling_the_operator(gateways: dict[str, Any]) -> None:
    """Without ``http.clients`` a 2026-07-28 request has no identity: the protected call
    is refused with what to configure, never "read and retry" (the model would loop)."""
    log = gateways["log"]
    n = len(_books(log))

    async def main() -> Any:
        async with _client(gateways["anon"], None) as c:
            assert c.protocol_version == "2026-07-28"
            await c.read_resource("memo://price")
            await c.read_resource("memo://city")
            first = await c.call_tool("book", {"city": "Porto", "price": 310})
            again = await c.call_tool("book", {"city": "Porto", "price": 310})
            ok = await c.call_tool("echo", {"text": "unprotected still works"})
            return first, again, ok

    first, again, ok = anyio.run(main)
    for r in (first, again):
        t = text(r)
        assert r.is_error and "(no_session)" in t, t
        assert "http.clients" in t and "Retrying cannot help" in t and "now read" not in t
        assert r.meta is not None and r.meta["icore/gate"]["reason"] == "no_session"
    assert text(ok) == "unprotected still works"
    assert len(_books(log)) == n  # never reached the upstream
    # the audit sees one anonymous client, not one agent per request
    lines = [json.loads(x) for x in (gateways["folder"] / "b" / "trace.jsonl").read_text(
        encoding="utf-8").splitlines()]
    agents = {x["agent"] for x in lines if "agent" in x} - {"gateway"}
    assert len(agents) == 1 and next(iter(agents)).startswith("anonymous-http#"), agents


def test_handshake_session_with_a_token_is_named_by_it(gateways: dict[str, Any]) -> None:
    """A handshake (legacy) session opened with a client's token is that client's agent
    in the trace, not the SDK's ``clientInfo`` name."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {BOB}"}) as http, \
                Client(streamable_http_client(gateways["url"], http_client=http),
                       mode="legacy") as c:
            assert c.protocol_version != "2026-07-28"  # a session, with a handshake
            await c.read_resource("memo://price")
            await c.call_tool("echo", {"text": "legacy bob"})

    anyio.run(main)
    lines = [json.loads(x) for x in (gateways["folder"] / "a" / "trace.jsonl").read_text(
        encoding="utf-8").splitlines()]
    who = {x["agent"] for x in lines if x.get("tool") == "echo"
           and x.get("args") == {"text": "legacy bob"}}
    assert len(who) == 1 and next(iter(who)).startswith("bob#"), who
    assert not any(str(x.get("agent", "")).startswith("mcp#") for x in lines)


def test_openai_agents_http_client_with_a_token(gateways: dict[str, Any]) -> None:
    pytest.importorskip("agents")
    from agents.mcp import MCPServerStreamableHttp

    from .test_framework_client import book_twice

    log = gateways["log"]
    n = len(_books(log))
    args = {"city": "Porto", "price": 310}
    server = MCPServerStreamableHttp(params={
        "url": gateways["url"], "headers": {"Authorization": f"Bearer {CAROL}"}},
        client_session_timeout_seconds=30)
    model, result = anyio.run(book_twice, server, args)
    assert "Booked Porto" in str(result.final_output)
    shown = str(model.inputs[1])
    assert "PlanFence blocked book" in shown and "memo://price" in shown
    assert _books(log)[n:] == [args]  # the first call was refused; the second ran
