"""A client's unreadable answer to an upstream's question fails it at once (#29).

Real parts: ``icore mcp`` (over stdio, launched as a subprocess with raw pipes or by the
SDK's client; over ``--http`` in a subprocess) in front of a real upstream
(tests/mcp/upstream_asks.py, over stdio or streamable HTTP) whose ``approve`` tool asks
the client's human (``ctx.elicit``) and logs what it got. The client answers with no
valid JSON-RPC response (a raw client: the SDK's client never sends one) or with a
result of the wrong shape (the SDK's client, its callback returning one). The
manifest's ``ask_timeout_s`` is a day: a question left waiting hangs the test (its
``fail_after`` / deadline guard) instead of passing. The call's end is recorded as one
that may have run (the upstream was running it when it asked): ``icore audit`` counts
it ``outcome unknown``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from .conftest import audited_actions, env, text, upstream_log
from .test_gateway_asks import BUDGET, _http_gateway, _manifest, _stdio, _stdio_upstream

DAY = 86400
GUARD_S = 60.0
"""A hang guard (a question left waiting for its day), not a measure."""

MALFORMED = [
    ({"result": "yes"}, "result: Input should be a valid dictionary"),
    ({"error": {"message": "no code"}}, "error.code: Field required"),
    ({"error": {"code": "E1", "message": "no"}}, "error.code: Input should be a valid integer"),
    ({"result": {"action": "maybe"}},  # valid JSON-RPC, no ElicitResult
     "elicitation/create does not fit ElicitResult: action: Input should be 'accept'"),
]
"""A client's answers that are no valid JSON-RPC response, and what names the problem."""


class _Raw:
    """A raw JSON-RPC client on ``icore mcp``'s stdio pipes (it can send anything)."""

    def __init__(self, manifest: Path, folder: Path) -> None:
        self.err = open(folder / "gateway.err", "w")
        self.p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=env(), text=True)
        self.buf = ""

    def send(self, msg: dict[str, Any]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def recv(self, deadline: float) -> dict[str, Any]:
        assert self.p.stdout is not None
        fd = self.p.stdout.fileno()
        while "\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "no message from the gateway in time (a question left waiting)"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536).decode()
                assert chunk, "the gateway closed its stdout"
                self.buf += chunk
        line, self.buf = self.buf.split("\n", 1)
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        try:
            self.p.wait(timeout=20)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait(timeout=5)
            assert self.p.stdout is not None
            self.p.stdout.close()
            self.err.close()


def _handshake(raw: _Raw, deadline: float) -> None:
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "raw", "version": "1"},
        "capabilities": {"elicitation": {}}}})
    assert "result" in raw.recv(deadline)
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "icore_get_fact", "arguments": {"key": BUDGET}}})
    assert not raw.recv(deadline)["result"]["isError"]


def _check_recorded(folder: Path, log: Path, named: str, said: str) -> None:
    """The call's error, the trace and the audit say what happened, truthfully."""
    _check_all_recorded(folder, log, [named], [said])


def _check_all_recorded(folder: Path, log: Path, names: list[str], said: list[str]) -> None:
    """:func:`_check_recorded` for calls made one after another in one gateway's run:
    call ``i`` failed naming ``names[i]``; each assertion names its case."""
    done = [x for x in upstream_log(log) if x["tool"] == "approve_done"]
    assert len(done) == len(names), done
    trace = folder / "trace.jsonl"
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    failed = [x["ask"]["error"] for x in lines if "error" in x.get("ask", {})]
    assert len(failed) == len(names), failed
    assert not any("answered_by" in x for x in lines)  # no human's decision recorded
    out = [x for x in lines if x.get("kind") == "tool_output" and x.get("tool") == "approve"]
    assert len(out) == len(names), out
    for named, s, d, f, o in zip(names, said, done, failed, out, strict=True):
        assert "may have run" in s and named in s, (named, s)
        assert named in d["error"], (named, d)  # the upstream got the error
        assert named in f, (named, f)
        assert o["may_have_run"] is True, (named, o)
    counts = audited_actions(trace)
    assert (counts["outcome unknown"], counts["failed after authorization"]) == \
        (len(names), 0), counts


def test_stdio_malformed_answer_fails_the_question_at_once(tmp_path: Path) -> None:
    """Over stdio, a response to the gateway's ``elicitation/create`` that is no valid
    JSON-RPC response is not dropped: the question fails at once (a day's
    ``ask_timeout_s``), the upstream gets a JSON-RPC error naming the problem, and the
    protected call's end is recorded as outcome unknown. Each answer of ``MALFORMED``
    in turn, one call each (its own amount), in one gateway's session: the session goes
    on after each."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log), ask_timeout_s=DAY)
    raw = _Raw(manifest, tmp_path)
    results: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + GUARD_S
        _handshake(raw, deadline)
        for i, (answer, named) in enumerate(MALFORMED):
            call_id = 3 + i
            if i:  # the earlier call's outcome is unknown: it spent the read (h35gw)
                raw.send({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                          "params": {"name": "icore_get_fact", "arguments": {"key": BUDGET}}})
                while (r := raw.recv(deadline)).get("id") != 100 + i:
                    pass
                assert not r["result"]["isError"], (named, r)
            raw.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
                "name": "approve", "arguments": {"amount": 5 + i}}})
            asked = raw.recv(deadline)
            assert asked.get("method") == "elicitation/create", (named, asked)
            raw.send({"jsonrpc": "2.0", "id": asked["id"], **answer})
            got = raw.recv(deadline)
            while got.get("id") != call_id:  # a notification first
                got = raw.recv(deadline)
            results.append(got)
    finally:
        raw.close()
    names = [named for _, named in MALFORMED]
    for named, got in zip(names, results, strict=True):
        assert got["result"]["isError"], (named, got)
        assert got["result"]["_meta"]["icore/upstream"]["may_have_run"] is True, (named, got)
    _check_all_recorded(tmp_path, log, names, [text(got["result"]) for got in results])
    err = (tmp_path / "gateway.err").read_text()
    for named in names:
        if "does not fit" not in named:  # no JSON-RPC response: one warning line on stderr
            assert named in err, (named, err)


def test_stdio_sdk_client_refusing_its_own_answer(tmp_path: Path) -> None:
    """The SDK's client whose callback returns no ``ElicitResult`` sends its own error
    instead (it validates what it sends): the question fails at once with it, and the
    call is recorded as outcome unknown (it was "refused", as if the upstream had not
    run the call it was running)."""
    import mcp_types as types
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log), ask_timeout_s=DAY)

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult.model_construct(action="maybe")

    async def main() -> Any:
        with anyio.fail_after(GUARD_S):
            async with _stdio(manifest, elicitation_callback=elicit) as s:
                await s.call_tool("icore_get_fact", {"key": BUDGET})
                return await s.call_tool("approve", {"amount": 5})

    r = anyio.run(main)
    assert r.is_error
    _check_recorded(tmp_path, log, "Client callback returned an invalid result", text(r))


async def _http_malformed(url: str, answer: dict[str, Any], amount: int = 5
                         ) -> tuple[int, str, Any]:
    """A raw HTTP client with its GET stream open: answers the question with ``answer``.

    Returns the answer POST's status and body, and the call's result.
    """
    import httpx2
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=GUARD_S) as c:
        r = await c.post(url, headers=h, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "clientInfo": {"name": "raw", "version": "1"},
                "capabilities": {"elicitation": {}}}})
        h = {**h, "mcp-session-id": r.headers["mcp-session-id"],
             "mcp-protocol-version": r.json()["result"]["protocolVersion"]}
        await c.post(url, headers=h, json={"jsonrpc": "2.0",
                                           "method": "notifications/initialized"})
        await c.post(url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": "icore_get_fact",
                                                      "arguments": {"key": BUDGET}}})
        posted: list[tuple[int, str]] = []
        result: list[Any] = []
        async with c.stream("GET", url, headers={**h, "Accept": "text/event-stream"}) as sse:
            async def call() -> None:
                r = await c.post(url, headers=h, json={
                    "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "approve", "arguments": {"amount": amount}}})
                result.append(r.json()["result"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                async for line in sse.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    msg = json.loads(line[5:])
                    if msg.get("method") == "elicitation/create":
                        r = await c.post(url, headers=h, json={
                            "jsonrpc": "2.0", "id": msg["id"], **answer})
                        posted.append((r.status_code, r.text))
                        break
        return posted[0][0], posted[0][1], result[0]


def test_http_malformed_answer_fails_the_question_at_once(tmp_path: Path) -> None:
    """Over ``--http`` (an HTTP upstream), a POSTed response that is no valid JSON-RPC
    response gets HTTP 400 naming the problem, and the question it answers fails at once
    (it waited for ``ask_timeout_s``, the body dropped): same record as over stdio. The
    first two answers of ``MALFORMED``, each from its own client session, one gateway."""
    log = tmp_path / "up.log"
    cases = MALFORMED[:2]
    with _http_gateway(tmp_path, log, ask_timeout_s=DAY) as url:
        async def main() -> list[tuple[int, str, Any]]:
            got = []
            for i, (answer, _) in enumerate(cases):
                with anyio.fail_after(GUARD_S):
                    got.append(await _http_malformed(url, answer, amount=5 + i))
            return got
        ends = anyio.run(main)
    for (_, named), (status, body, result) in zip(cases, ends, strict=True):
        assert status == 400 and named in body, (named, status, body)
        assert "the request it answers failed" in body, (named, body)
        assert result["isError"], (named, result)
        assert result["_meta"]["icore/upstream"]["may_have_run"] is True, (named, result)
    _check_all_recorded(tmp_path, log, [named for _, named in cases],
                        [text(result) for _, _, result in ends])


def test_stdio_one_session_two_calls_in_flight_is_asked(tmp_path: Path) -> None:
    """One stdio client with two calls in flight at a stdio upstream (``nap`` and the
    protected ``approve``): the upstream's question (its line carries no link to the
    call) goes to that one session (QA qa-new13c: it was refused "several client
    sessions", the SDK 2.x making a session object per request), answered, and both
    calls end well."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log), ask_timeout_s=DAY)
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        import mcp_types as types
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def main() -> list[str]:
        said: list[str] = []
        with anyio.fail_after(GUARD_S):
            async with _stdio(manifest, elicitation_callback=elicit) as s:
                await s.call_tool("icore_get_fact", {"key": BUDGET})
                async with anyio.create_task_group() as tg:
                    async def slow() -> None:
                        said.append(text(await s.call_tool("nap", {"seconds": 2})))
                    tg.start_soon(slow)
                    await anyio.sleep(0.5)
                    said.append(text(await s.call_tool("approve", {"amount": 7})))
        return said

    said = anyio.run(main)
    assert asked == ["Pay 7?"]
    assert sorted(said) == ["approval: accept approve=True", "slept 2"], said
