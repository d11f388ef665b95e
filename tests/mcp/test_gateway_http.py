"""The gateway over streamable HTTP (127.0.0.1, free ports) in front of an HTTP upstream.

Both are real processes started once for the module: the upstream SDK server
(tests/mcp/upstream_server.py --http PORT) and ``icore mcp MANIFEST --http HOST:PORT``.
Clients are the SDK's streamable-HTTP client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.adapters import load_jsonl

from .conftest import (
    UPSTREAM,
    free_port,
    http_client,
    http_upstream_gateway,
    process,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("gw-http")
    with http_upstream_gateway(folder, folder / "up.log") as url:
        yield url, folder


def _books(folder: Path) -> list[dict[str, Any]]:
    return [x["args"] for x in upstream_log(folder / "up.log") if x["tool"] == "book"]


def test_two_sessions_one_changes_while_other_acts(gateway: tuple[str, Path]) -> None:
    url, folder = gateway
    planned, changed = anyio.Event(), anyio.Event()
    results: dict[str, Any] = {}

    async def reader_then_actor() -> None:  # session A: plans from price 100
        async with http_client(url, "alice") as a:
            got = await a.read_resource("memo://price")
            results["planned_from"] = got.contents[0].text  # type: ignore[union-attr]
            await a.read_resource("memo://city")
            planned.set()
            await changed.wait()
            # B changed the price meanwhile: A's plan is stale and is not forwarded
            results["stale"] = await a.call_tool("book", {"city": "Porto", "price": 100})
            results["books_after_stale"] = list(_books(folder))
            results["replan"] = await a.call_tool("book", {"city": "Porto", "price": 250})

    async def writer() -> None:  # session B: changes the resource, then acts fresh
        async with http_client(url, "bob") as b:
            await planned.wait()
            await b.call_tool("set_price", {"value": "250"})
            got = await b.read_resource("memo://price")
            assert got.contents[0].text == "250"  # type: ignore[union-attr]
            await b.read_resource("memo://city")
            changed.set()
            results["fresh"] = await b.call_tool("book", {"city": "Porto", "price": 250})

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader_then_actor)
            tg.start_soon(writer)

    anyio.run(main)
    assert results["planned_from"] == "100"
    stale = results["stale"]
    assert stale.is_error and "(stale)" in text(stale) and "250" in text(stale)
    assert {"city": "Porto", "price": 100} not in results["books_after_stale"]
    assert not results["fresh"].is_error and not results["replan"].is_error
    books = _books(folder)
    assert {"city": "Porto", "price": 100} not in books  # the stale call never arrived
    assert books.count({"city": "Porto", "price": 250}) == 2  # B's fresh one, A's replan
    trace = load_jsonl(folder / "trace.jsonl")
    agents = set(trace.agents)
    assert any(a.startswith("alice#") for a in agents)
    assert any(a.startswith("bob#") for a in agents)


async def _until_recorded(folder: Path, agent: str) -> None:
    """Until the trace has the result line of ``agent``'s ``slow`` call (a hang guard of
    60 s: a loaded machine), instead of sleeping past the call's length."""
    def done() -> bool:
        for row in (folder / "trace.jsonl").read_text().splitlines():
            try:
                x = json.loads(row)
            except ValueError:  # a line being written
                continue
            if x.get("tool") == "slow" and x.get("kind") == "tool_output" and \
                    str(x.get("agent", "")).startswith(agent):
                return True
        return False
    with anyio.fail_after(60):
        while not done():
            await anyio.sleep(0.05)


def test_client_disconnect_mid_call(gateway: tuple[str, Path]) -> None:
    url, folder = gateway

    async def quitter() -> None:
        async with http_client(url, "quitter") as c:
            await c.call_tool("slow", {"seconds": 1.5})

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(quitter)
            with anyio.fail_after(60):  # a loaded machine: wait for the call upstream
                while not any(x["tool"] == "slow" for x in upstream_log(folder / "up.log")):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()  # the client disconnects mid-call
        # the gateway stays up for everyone else
        async with http_client(url, "after") as d:
            r = await d.call_tool("echo", {"text": "still serving"})
            assert text(r) == "still serving"
        await _until_recorded(folder, "quitter#")  # the call ran to its end upstream

    anyio.run(main)
    assert any(x["tool"] == "slow" for x in upstream_log(folder / "up.log"))
    trace = (folder / "trace.jsonl").read_text()
    assert "quitter#" in trace and "still serving" in trace
    # the call the upstream ran is in the trace with its result, although nobody read it
    lines = [json.loads(x) for x in trace.splitlines() if x.strip()]
    slow = [x for x in lines if x.get("tool") == "slow" and x.get("kind") == "tool_output"]
    assert len(slow) == 1 and str(slow[0]["agent"]).startswith("quitter#")


def test_a_cancelled_call_runs_to_its_end_and_is_recorded(gateway: tuple[str, Path]) -> None:
    """The client cancels one in-flight call (the SDK sends ``notifications/cancelled``)
    and stays connected: the gateway does not cut the call short (the upstream runs it),
    and its result is in the trace (it was lost: the handler was cancelled before it
    wrote it; a protected call lost its gate decision too, the QA's repro)."""
    url, folder = gateway
    n0 = len(upstream_log(folder / "up.log"))

    async def main() -> None:
        async with http_client(url, "canceller") as c:
            await c.read_resource("memo://city")
            await c.read_resource("fact://plan/goal")
            r = await c.call_tool("set_city", {"value": "Braga"})  # a protected call
            assert not r.is_error, text(r)
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call_tool, "slow", {"seconds": 1.0})
                with anyio.fail_after(60):
                    while not any(x["tool"] == "slow"
                                  for x in upstream_log(folder / "up.log")[n0:]):
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # this request only; the session stays open
            await _until_recorded(folder, "canceller#")  # it ran to its end upstream
            r = await c.call_tool("echo", {"text": "after the cancel"})
            assert text(r) == "after the cancel"

    anyio.run(main)
    lines = [json.loads(x) for x in (folder / "trace.jsonl").read_text().splitlines()
             if x.strip()]
    mine = [x for x in lines if str(x.get("agent", "")).startswith("canceller#")]
    slow = [x for x in mine if x.get("tool") == "slow" and x.get("kind") == "tool_output"]
    assert len(slow) == 1 and slow[0]["exitcode"] == 0
    assert any(x.get("tool") == "set_city" and x.get("kind") == "tool_output" for x in mine)


def test_unprotected_tools_pass_through(gateway: tuple[str, Path]) -> None:
    """Passed through unchanged, over one kept-alive upstream connection: the upstream
    answers with SSE streams, and the gateway reads each to its end (the SDK's client
    alone would open a TCP connection per call)."""
    url, folder = gateway

    async def main() -> None:
        async with http_client(url) as s:
            for i in range(12):
                r = await s.call_tool("echo", {"text": f"hi {i}"})
                assert not r.is_error and text(r) == f"hi {i}"
                assert r.structured_content == {"result": f"hi {i}"}

    anyio.run(main)
    peers = [x["peer"] for x in upstream_log(folder / "up.log")
             if x["tool"] == "echo" and x["args"]["text"].startswith("hi ")]
    assert len(peers) == 12 and len(set(peers)) <= 2, peers


def test_gateway_killed_loses_nothing_committed(tmp_path: Path) -> None:
    """SIGKILL the gateway mid-session: its trace up to the kill and the owners' versions
    (SQLite) survive; a restarted gateway serves the same versions and keeps the old
    trace beside the new one."""
    import signal

    folder = tmp_path
    log = folder / "up.log"
    import hashlib
    manifest = write_manifest(folder, {"trip": {
        "command": sys.executable, "args": [str(UPSTREAM)], "env": {"UPSTREAM_LOG": str(log)},
        "timeout_s": 10}}, store={"backend": "sqlite", "path": "facts"},
        http={"clients": {n: {"token_sha256": hashlib.sha256(n.encode()).hexdigest()}
                          for n in ("before", "after")}})
    with open(manifest, encoding="utf-8") as f:  # client "before" writes the planner's plan
        m = yaml.safe_load(f)
    m["facts"]["writers"] = {"planner": ["before"]}
    manifest.write_text(yaml.safe_dump(m), encoding="utf-8")
    port = free_port()
    args = [sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
            f"127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}/mcp"

    async def first() -> Any:
        async with http_client(url, "before", token="before") as s:
            await s.call_tool("icore_put_fact", {"key": "fact://plan/goal", "value": "Faro"})
            got = await s.read_resource("fact://plan/goal")
            return got.meta

    with process(args) as gw:
        wait_port(port, gw)
        meta1 = anyio.run(first)
        gw.send_signal(signal.SIGKILL)
        gw.wait(timeout=10)
    before = load_jsonl(folder / "trace.jsonl")
    assert any(s.agent.startswith("before#") for s in before.steps)
    assert "Faro" in (folder / "trace.jsonl").read_text()

    async def second() -> Any:
        async with http_client(url, "after", token="after") as s:
            got = await s.read_resource("fact://plan/goal")
            assert got.contents[0].text == '"Faro"'  # type: ignore[union-attr]
            return got.meta

    with process(args) as gw:
        wait_port(port, gw)
        meta2 = anyio.run(second)
    assert meta1["icore/version"] == meta2["icore/version"]  # the same committed version
    old, new = (folder / "trace-1.jsonl").read_text(), (folder / "trace.jsonl").read_text()
    assert "before#" in old and "Faro" in old and "after#" not in old
    assert "after#" in new and "before#" not in new
