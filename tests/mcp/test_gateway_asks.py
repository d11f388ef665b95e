"""An upstream's questions to the client (elicitation, sampling) through the gateway (#29).

Real parts: the SDK's client (over stdio, launching ``icore mcp``; over HTTP, to
``icore mcp --http`` in a subprocess) and a real upstream (tests/mcp/upstream_asks.py,
over stdio or streamable HTTP) whose tools call ``ctx.elicit`` / ``create_message`` and
log when they start and end. The question goes to the session whose call raised it, the
answer back to the upstream, and the trace records it (``icore audit``: approved or
rejected by a human).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.adapters import load_jsonl, trace_lineages

from .conftest import env, free_port, http_client, process, text, upstream_log, wait_port

UPSTREAM = Path(__file__).resolve().parent / "upstream_asks.py"
BUDGET = "fact://plan/budget"


def _manifest(folder: Path, upstream: dict[str, Any], **extra: Any) -> Path:
    m = {"name": "asks-gateway", "upstreams": {"asks": upstream},
         "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {BUDGET: 100}},
         "tools": {"approve": {"depends_on": [BUDGET]}},
         "trace": str(folder / "trace.jsonl"), **extra}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _stdio_upstream(log: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(UPSTREAM)],
            "env": {"UPSTREAM_LOG": str(log)}, "timeout_s": timeout_s}


@contextlib.asynccontextmanager
async def _stdio(manifest: Path, **callbacks: Any) -> AsyncIterator[Any]:
    """The SDK's client launching ``icore mcp MANIFEST``, with ``callbacks``."""
    import os

    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)], env=env())
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), \
                ClientSession(r, w, **callbacks) as s:
            await s.initialize()
            yield s


def _humans(trace: Path) -> list[str | None]:
    """``icore audit``'s word on each protected action: approved / rejected by a human."""
    t = load_jsonl(trace)
    return [a.human for a in trace_lineages(t.planfence, t.steps)]


def _answer(action: str, approve: bool | None = None, wait_s: float = 0.0) -> Any:
    import mcp_types as types

    async def elicit(context: Any, params: Any) -> Any:
        await anyio.sleep(wait_s)
        return types.ElicitResult(action=action, content=None if approve is None
                                  else {"approve": approve})
    return elicit


def test_stdio_question_reaches_the_human_and_the_audit(tmp_path: Path) -> None:
    """A protected call's upstream asks for approval (``ctx.elicit``): the stdio client's
    human answers (after the upstream's 1.5 s ``timeout_s``: a human's wait does not
    count against it), the upstream gets the answer and the call's result is its; the
    trace holds the question and the answer, and the audit shows the action approved,
    then (a declined question) rejected, by a human."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log, timeout_s=1.5))
    asked: list[str] = []
    said = iter([_answer("accept", True, wait_s=2.5), _answer("decline")])

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return await next(said)(context, params)

    async def main() -> None:
        async with _stdio(manifest, elicitation_callback=elicit) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            r = await s.call_tool("approve", {"amount": 5})
            assert not r.is_error and text(r) == "approval: accept approve=True", text(r)
            r = await s.call_tool("approve", {"amount": 6})
            assert not r.is_error and text(r) == "approval: decline", text(r)

    anyio.run(main)
    assert asked == ["Pay 5?", "Pay 6?"]
    done = [x for x in upstream_log(log) if x["tool"] == "approve_done"]
    assert [(x["amount"], x["action"]) for x in done] == [(5, "accept"), (6, "decline")]
    assert len({x["pid"] for x in upstream_log(log)}) == 1  # never relaunched (timeout)
    trace = tmp_path / "trace.jsonl"
    answers = [json.loads(x) for x in trace.read_text().splitlines()
               if '"answered_by"' in x]
    assert [(a["decision"], a["tool"], a["args"], a["ask"]["action"]) for a in answers] == [
        ("approve", "approve", {"amount": 5}, "accept"),
        ("reject", "approve", {"amount": 6}, "decline")]
    assert _humans(trace) == ["approved", "rejected"]


def test_stdio_sampling_reaches_the_clients_model(tmp_path: Path) -> None:
    """An upstream asking the client's model (``create_message``) gets the client's
    completion; the trace names the model that answered."""
    import mcp_types as types
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log))

    async def sample(context: Any, params: Any) -> Any:
        said = params.messages[0].content.text
        return types.CreateMessageResult(
            role="assistant", model="test-model",
            content=types.TextContent(type="text", text=f"short {said}"))

    async def main() -> None:
        async with _stdio(manifest, sampling_callback=sample) as s:
            r = await s.call_tool("summarize", {"text": "long text"})
            assert not r.is_error and text(r) == "summary: short long text", text(r)

    anyio.run(main)
    assert [x.get("said") for x in upstream_log(log) if x["tool"] == "summarize_done"] == [
        "short long text"]
    assert '"model": "test-model"' in (tmp_path / "trace.jsonl").read_text()


def test_a_client_without_the_capability_is_not_waited_for(tmp_path: Path) -> None:
    """A client that declared no elicitation, sampling or roots capability: the upstream
    gets a JSON-RPC error at once (never the question's bound: a day here, so a wait
    would hang the test) saying the client does not support it and why, and the call's
    error says so too."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log), ask_timeout_s=86400)
    said = "not supported by the client: it declared no {} capability in its initialize"

    async def main() -> None:
        async with _stdio(manifest) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            with anyio.fail_after(120):  # a hang guard, not a measure
                r = await s.call_tool("approve", {"amount": 3})
                assert r.is_error and "which this client does not support or cannot " \
                    "receive" in text(r), text(r)
                assert "asked the client for input (elicitation" in text(r), text(r)
                assert "Elicitation " + said.format("elicitation") in text(r), text(r)
                r = await s.call_tool("summarize", {"text": "x"})
                assert r.is_error and "Sampling " + said.format("sampling") in text(r), text(r)
                r = await s.call_tool("where", {})
                assert r.is_error and "List roots " + said.format("roots") in text(r), text(r)
                assert "asked the client for its roots (roots/list" in text(r), text(r)

    anyio.run(main)
    assert [x.get("error") for x in upstream_log(log) if x["tool"] == "approve_done"] == [
        "Elicitation " + said.format("elicitation")]
    assert [x.get("error") for x in upstream_log(log) if x["tool"] == "where_done"] == [
        "List roots " + said.format("roots")]
    trace = (tmp_path / "trace.jsonl").read_text()
    assert trace.count("the upstream is answered at once") == 3


@contextlib.contextmanager
def _http_gateway(folder: Path, log: Path, lean: bool = True, **extra: Any
                  ) -> Iterator[str]:
    """The upstream over streamable HTTP and ``icore mcp --http`` in front of it."""
    p_up, p_gw = free_port(), free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(p_up)],
                 extra_env={"UPSTREAM_LOG": str(log)}) as up:
        wait_port(p_up, up)
        manifest = _manifest(folder, {"url": f"http://127.0.0.1:{p_up}/mcp",
                                      "timeout_s": 10}, **extra)
        with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                      f"127.0.0.1:{p_gw}"],
                     extra_env={"ICORE_MCP_LEAN": "1" if lean else "0"}) as gw:
            wait_port(p_gw, gw)
            yield f"http://127.0.0.1:{p_gw}/mcp"


def _concurrently(url: str, *agents: Any) -> None:
    """Run each ``agent(url)`` at once (one task each) until all are done."""
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(agent, url)
    anyio.run(main)


@contextlib.asynccontextmanager
async def _http(url: str, name: str, **callbacks: Any) -> AsyncIterator[Any]:
    from mcp.client import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation
    async with streamable_http_client(url) as (r, w), ClientSession(
            r, w, client_info=Implementation(name=name, version="1"), **callbacks) as s:
        await s.initialize()
        yield s


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk-path"])
def test_http_each_session_gets_its_own_question(tmp_path: Path, lean: bool) -> None:
    """Two HTTP sessions call the same upstream tool at once (both questions in flight
    together): each question goes to the session whose call raised it (its own amount),
    each answer to its own call - over the lean path and the SDK's client alike."""
    import mcp_types as types
    log = tmp_path / "up.log"
    got: dict[str, list[str]] = {"alice": [], "bob": []}
    both = {"alice": anyio.Event(), "bob": anyio.Event()}

    def elicit(me: str, other: str, action: str) -> Any:
        async def cb(context: Any, params: Any) -> Any:
            got[me].append(params.message)
            both[me].set()
            with anyio.fail_after(20):  # both questions are out before either answers
                await both[other].wait()
            return types.ElicitResult(action=action, content={"approve": True}
                                      if action == "accept" else None)
        return cb

    results: dict[str, str] = {}

    async def one(url: str, me: str, other: str, amount: int, action: str) -> None:
        async with _http(url, me, elicitation_callback=elicit(me, other, action)) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            r = await s.call_tool("approve", {"amount": amount})
            assert not r.is_error, text(r)
            results[me] = text(r)

    with _http_gateway(tmp_path, log, lean=lean) as url:
        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, url, "alice", "bob", 1, "accept")
                tg.start_soon(one, url, "bob", "alice", 2, "decline")
        anyio.run(main)
    assert got == {"alice": ["Pay 1?"], "bob": ["Pay 2?"]}
    assert results == {"alice": "approval: accept approve=True", "bob": "approval: decline"}
    trace = tmp_path / "trace.jsonl"
    answers = {a["args"]["amount"]: (a["decision"], a["agent"].split("#")[0]) for a in (
        json.loads(x) for x in trace.read_text().splitlines() if '"answered_by"' in x)}
    assert answers == {1: ("approve", "alice"), 2: ("reject", "bob")}
    assert sorted(h or "" for h in _humans(trace)) == ["approved", "rejected"]


def test_a_session_closing_mid_question_ends_the_upstream_call(tmp_path: Path) -> None:
    """The asked session goes away before answering: the question fails at once (not
    after the question's bound), the upstream's call ends with that error, and the
    gateway serves the next session."""
    log = tmp_path / "up.log"
    asked = anyio.Event()

    async def never(context: Any, params: Any) -> Any:
        asked.set()
        await anyio.sleep_forever()

    async def gone(url: str) -> None:
        async with _http(url, "alice", elicitation_callback=never) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            await s.call_tool("approve", {"amount": 7})

    with _http_gateway(tmp_path, log) as url:
        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(gone, url)
                with anyio.fail_after(30):
                    await asked.wait()
                tg.cancel_scope.cancel()  # the client closes its session, unanswered
            with anyio.fail_after(60):  # the upstream's call ends (its log says so)
                while not any(x["tool"] == "approve_done" for x in upstream_log(log)):
                    await anyio.sleep(0.1)
            async with http_client(url, "bob") as s:
                r = await s.call_tool("echo", {"text": "still here"})
                assert not r.is_error and text(r) == "still here", text(r)
        anyio.run(main)
    done = [x for x in upstream_log(log) if x["tool"] == "approve_done"]
    assert len(done) == 1 and "abandoned" in done[0].get("error", ""), done
    assert "no answer from the client to elicitation during approve: the client's request " \
        "was abandoned" in (tmp_path / "trace.jsonl").read_text()
