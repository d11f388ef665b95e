"""A call whose client cancelled it or went away: answered at once, recorded as undelivered.

QA qa-new13c. Real parts: ``icore mcp`` (stdio, launched by the SDK's client; ``--http``
in a subprocess) in front of tests/mcp/upstream_server.py (over stdio and streamable
HTTP), raw HTTP POSTs and the SDK's own clients. The cancelled request is answered as
the SDK's server answers it (``-32800`` on its POST, before the call ends), the call
still runs to its end upstream, its result line says ``client_cancelled`` or
``client_gone`` with ``delivered: false``, and ``icore audit`` counts such a protected
call ``outcome unknown`` (the agent never saw the result), never ``valid``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    UPSTREAM,
    env,
    free_port,
    http_client,
    process,
    stdio_gateway,
    stdio_upstream,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)

PROTECTED_SLOW = {"slow": {"depends_on": ["memo://price"]}}


def _outputs(path: Path, tool: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]
    return [x for x in lines if x.get("kind") == "tool_output" and x.get("tool") == tool]


def _until(what: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _audit(path: Path, out: Path) -> dict[str, Any]:
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(out)], capture_output=True, text=True, env=env(),
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    run: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["runs"][0]
    return run


def _post(client: Any, url: str, sid: str | None, msg: dict[str, Any]) -> Any:
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return client.post(url, headers=headers, content=json.dumps(msg))


@pytest.mark.timeout(120)
def test_http_cancel_is_answered_at_once_and_the_call_recorded_undelivered(
        tmp_path: Path) -> None:
    """A raw client cancels ``slow 4`` once it reached the upstream: its POST is answered
    ``-32800`` while the call still runs (no result line yet); the call then ends
    upstream and its line says ``client_cancelled``, ``delivered: false``. Then the
    SDK's client cancels a call and closes its session at once: no exception (it used
    to raise an ExceptionGroup of ClosedResourceError), and the audit counts both
    protected calls outcome unknown."""
    import httpx2
    log, trace = tmp_path / "up.log", tmp_path / "trace.jsonl"
    p_up, p_gw = free_port(), free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(p_up)],
                 extra_env={"UPSTREAM_LOG": str(log)}) as up:
        wait_port(p_up, up)
        manifest = write_manifest(tmp_path, {"trip": {
            "url": f"http://127.0.0.1:{p_up}/mcp", "timeout_s": 30}}, tools=PROTECTED_SLOW)
        with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                      f"127.0.0.1:{p_gw}"]) as gw:
            wait_port(p_gw, gw)
            url = f"http://127.0.0.1:{p_gw}/mcp"

            async def raw() -> None:
                async with httpx2.AsyncClient(timeout=60) as c:
                    r = await _post(c, url, None, {
                        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "1"}}})
                    sid = r.headers["mcp-session-id"]
                    await _post(c, url, sid, {"jsonrpc": "2.0",
                                              "method": "notifications/initialized"})
                    await _post(c, url, sid, {"jsonrpc": "2.0", "id": 2, "method":
                                              "resources/read",
                                              "params": {"uri": "memo://price"}})
                    got: dict[str, Any] = {}

                    async def call() -> None:
                        got["r"] = await _post(c, url, sid, {
                            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "slow", "arguments": {"seconds": 4}}})
                        got["lines"] = len(_outputs(trace, "slow"))

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call)
                        while not any(x["tool"] == "slow" for x in upstream_log(log)):
                            await anyio.sleep(0.05)
                        await _post(c, url, sid, {
                            "jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 3, "reason": "user"}})
                    body = got["r"].json()
                    assert body["id"] == 3 and body["error"]["code"] == -32800, body
                    assert got["lines"] == 0  # answered while the call still ran
                    nan = await c.post(url, headers={  # a bare NaN: under its own id
                        "Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json", "Mcp-Session-Id": sid,
                        "MCP-Protocol-Version": "2025-06-18"},
                        content=b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", '
                        b'"params": {"name": "slow", "arguments": {"seconds": NaN}}}')
                    assert nan.status_code == 400 and nan.json()["id"] == 9, nan.text
                    assert nan.json()["error"]["code"] == -32700, nan.text

            anyio.run(raw)
            _until(lambda: _outputs(trace, "slow"))
            (line,) = _outputs(trace, "slow")
            assert line["client_cancelled"] is True and line["delivered"] is False, line
            assert line["content"] == "slept" and line["exitcode"] == 0, line

            async def sdk() -> None:  # the repro: cancel, then close the session
                async with http_client(url, "sdk") as s:
                    await s.read_resource("memo://price")
                    with anyio.move_on_after(1.0):
                        await s.call_tool("slow", {"seconds": 3})
                    await anyio.sleep(0.3)

            anyio.run(sdk)  # raised an ExceptionGroup (ClosedResourceError) before
            _until(lambda: len(_outputs(trace, "slow")) == 2)
            assert _outputs(trace, "slow")[1]["client_cancelled"] is True
            gw.send_signal(signal.SIGTERM)
            gw.wait(timeout=60)
    run = _audit(trace, tmp_path / "audit.json")
    assert run["actions"]["outcome unknown"] == 2 and run["actions"]["valid"] == 0, \
        run["actions"]
    assert all("RESULT NOT DELIVERED" in lv["error"] for lv in run["lineage"]), run
    assert not (tmp_path / ".trace.jsonl.lock").exists()  # removed at a clean stop


@pytest.mark.timeout(120)
def test_http_client_killed_mid_call_is_said_and_recorded_gone(tmp_path: Path) -> None:
    """A client process killed while its call runs: the gateway's stderr says an HTTP
    client went away mid-request (the docs' promise; nothing was said before), and
    the call's result line says ``client_gone``, ``delivered: false``."""
    log, trace, err = tmp_path / "up.log", tmp_path / "trace.jsonl", tmp_path / "gw.err"
    p_up, p_gw = free_port(), free_port()
    script = tmp_path / "dying.py"
    script.write_text(
        "import os, sys, anyio\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from tests.mcp.conftest import http_client\n"
        "async def main():\n"
        "    async with http_client(sys.argv[1], 'dying') as s:\n"
        "        async with anyio.create_task_group() as tg:\n"
        "            tg.start_soon(s.call_tool, 'slow', {'seconds': 3})\n"
        "            await anyio.sleep(1.0)\n"
        "            os._exit(0)\n"
        "anyio.run(main)\n", encoding="utf-8")
    with process([sys.executable, str(UPSTREAM), "--http", str(p_up)],
                 extra_env={"UPSTREAM_LOG": str(log)}) as up:
        wait_port(p_up, up)
        manifest = write_manifest(tmp_path, {"trip": {
            "url": f"http://127.0.0.1:{p_up}/mcp", "timeout_s": 30}})
        with open(err, "w", encoding="utf-8") as fh, process(
                [sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                 f"127.0.0.1:{p_gw}"], stderr=fh) as gw:
            wait_port(p_gw, gw)
            subprocess.run([sys.executable, str(script), f"http://127.0.0.1:{p_gw}/mcp"],
                           env=env(), timeout=60, check=True)
            _until(lambda: _outputs(trace, "slow"))
    (line,) = _outputs(trace, "slow")
    assert line["client_gone"] is True and line["delivered"] is False, line
    said = err.read_text(encoding="utf-8")
    assert "an HTTP client went away mid-request" in said and "slow" in said, said


@pytest.mark.timeout(120)
def test_stdio_cancel_records_the_call_undelivered(tmp_path: Path) -> None:
    """Over stdio the SDK's client cancels a protected call, then calls again: the next
    call is answered, the cancelled one runs to its end upstream and its line says
    ``client_cancelled``; the audit counts it outcome unknown, the next one valid."""
    log, trace = tmp_path / "up.log", tmp_path / "trace.jsonl"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, timeout_s=30)},
                              tools=PROTECTED_SLOW)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            with anyio.move_on_after(1.0):
                await s.call_tool("slow", {"seconds": 2})
            await s.read_resource("memo://price")
            r = await s.call_tool("slow", {"seconds": 0})
            assert not r.is_error and text(r) == "slept", text(r)

    anyio.run(main)
    by = {x["args"]["seconds"]: x for x in _outputs(trace, "slow")}
    first, second = by[2], by[0]  # the second may end first: the upstream runs both
    assert first["client_cancelled"] is True and first["delivered"] is False, first
    assert "client_cancelled" not in second and "delivered" not in second, second
    assert sum(x["tool"] == "slow" for x in upstream_log(log)) == 2
    run = _audit(trace, tmp_path / "audit.json")
    assert run["actions"]["outcome unknown"] == 1 and run["actions"]["valid"] == 1, \
        run["actions"]
    assert not (tmp_path / ".trace.jsonl.lock").exists()
    assert os.path.exists(trace)


def test_upstream_stderr_lines_name_their_upstream(tmp_path: Path) -> None:
    """A real process's stderr, a line cut across writes included, reaches the log with
    every line prefixed ``upstream <name>: `` (a stray print of a stdio upstream used to
    appear bare among the gateway's lines)."""
    from icore.mcp._upstream_stdio import relay_stderr
    out = tmp_path / "err.txt"
    code = ("import sys, time\nsys.stderr.write('HELLO this is not json\\npart');"
            "sys.stderr.flush(); time.sleep(0.2)\nsys.stderr.write(' one\\n\\nlast')")

    async def main() -> None:
        async with await anyio.open_process([sys.executable, "-c", code],
                                            stderr=subprocess.PIPE) as p:
            with open(out, "w", encoding="utf-8") as fh:
                await relay_stderr(p.stderr, fh, "helpdesk")

    anyio.run(main)
    assert out.read_text(encoding="utf-8").split("\n") == [
        "upstream helpdesk: HELLO this is not json", "upstream helpdesk: part one",
        "upstream helpdesk: ", "upstream helpdesk: last"]


@pytest.mark.parametrize(("body", "rid"), [
    (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"x": NaN}}', 7),
    (b'{"jsonrpc": "2.0", "id": "a", "method": "ping", "params": [Infinity]}', "a"),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', None),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', None), (b'{"id": 3', None)])
def test_a_refused_http_message_keeps_its_id_when_readable(body: bytes, rid: Any) -> None:
    from icore.mcp._http_shape import readable_id, shape_problem
    assert shape_problem(body) is not None
    assert readable_id(body) == rid


@pytest.mark.timeout(120)
def test_stdio_stop_after_a_cancel_waits_for_the_call_then_exits(tmp_path: Path) -> None:
    """Line by line: ``slow 2`` is cancelled once it reached the upstream, then SIGTERM:
    the gateway says it waits for the call in flight (by design: its result is
    recorded), exits 0 once it ended (a cancelled request is never answered, so the
    stop does not wait for its answer), and its result line says ``client_cancelled``."""
    from .test_gateway_stop import _Raw, _wait_for
    log, err, trace = tmp_path / "up.log", tmp_path / "err.txt", tmp_path / "trace.jsonl"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, timeout_s=30)},
                              tools=PROTECTED_SLOW)
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(manifest, stderr=fh)
        try:
            gw.start()
            gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 2}},
                    answer=False)
            _until(lambda: any(x["tool"] == "slow" for x in upstream_log(log)))
            assert gw.p.stdin is not None
            gw.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/"
                                         "cancelled", "params": {"requestId": gw.n}}) + "\n")
            gw.p.stdin.flush()
            gw.p.send_signal(signal.SIGTERM)
            _wait_for(err, "waiting for 1 call(s) in flight")
            assert gw.p.wait(timeout=60) == 0
            assert gw.p.stdout is not None and gw.p.stdout.read() == ""  # no answer
        finally:
            gw.stop()
    (line,) = _outputs(trace, "slow")
    assert line["client_cancelled"] is True and line["delivered"] is False, line
