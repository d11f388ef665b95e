"""How a stdio gateway stops: SIGTERM, stdin closed, killed mid-call (QA r7 D1, D2).

Real processes: ``icore mcp`` launched by a raw JSON-RPC client (signals sent by the
test) or by the SDK's own ``stdio_client`` (which closes stdin, then SIGTERMs the
gateway's process group 2 s later), in front of tests/mcp/upstream_server.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from icore.adapters import audit_trace, load_jsonl

from .conftest import env, stdio_gateway, stdio_upstream, upstream_log, write_manifest


def _manifest(folder: Path) -> Path:
    """The test manifest with ``slow`` protected (a call that stays in flight)."""
    return write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 20.0)},
                          tools={"slow": {"depends_on": ["memo://price"]}})


class _Raw:
    """``icore mcp MANIFEST`` spoken to line by line (JSON-RPC over its stdin/stdout)."""

    def __init__(self, manifest: Path, stderr: Any = subprocess.DEVNULL) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, text=True, env=env(),
                                  start_new_session=True)
        self.n = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             answer: bool = True) -> Any:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.n += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.n, "method": method,
                               "params": params or {}}
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline()) if answer else None

    def start(self) -> None:
        assert self.p.stdin is not None
        self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0",
                                       "method": "notifications/initialized"}) + "\n")
        self.p.stdin.flush()
        self.send("resources/read", {"uri": "memo://price"})

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)
        for f in (self.p.stdin, self.p.stdout):
            if f is not None:
                f.close()


def stop_twice_mid_call(gw: _Raw, sig: signal.Signals, log: Path, err: Path) -> None:
    """With ``slow 30`` in flight, ``sig`` twice: the gateway exits at once, 128 + sig."""
    gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, answer=False)
    _wait_for(log, '"slow"')
    gw.p.send_signal(sig)
    _wait_for(err, "waiting for 1 call(s)")
    gw.p.send_signal(sig)
    assert gw.p.wait(timeout=10) == 128 + sig  # not the 30 s call's end


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _reap(p: subprocess.Popen[Any]) -> None:
    """Kill ``p`` if it still runs, and wait for it."""
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def _wait_for(path: Path, what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and what in path.read_text(encoding="utf-8"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{what!r} not in {path} after {timeout_s} s")


@pytest.mark.parametrize("in_flight", [False, True])
def test_sigterm_is_a_normal_stop(tmp_path: Path, in_flight: bool) -> None:
    """SIGTERM ends the input as stdin EOF does: a call in flight runs to its end and is
    recorded, the trace ends with its ``termination`` line, the audit finds no defect."""
    gw = _Raw(_manifest(tmp_path))
    try:
        gw.start()
        if in_flight:
            gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 1.5}},
                    answer=False)
            _wait_for(tmp_path / "up.log", '"slow"')
        gw.p.send_signal(signal.SIGTERM)
        assert gw.p.wait(timeout=30) == 0
    finally:
        gw.stop()
    path = tmp_path / "trace.jsonl"
    lines = _lines(path)
    assert any(x.get("kind") == "termination" for x in lines)
    result = audit_trace(load_jsonl(path))
    assert result.terminated
    assert not any(d.defect == "terminal" for d in result.diagnoses), result.diagnoses
    if in_flight:
        out = [x for x in lines if x.get("tool") == "slow" and x.get("kind") == "tool_output"]
        assert out and out[-1]["content"] == "slept", out


def test_sdk_client_leaving_mid_call(tmp_path: Path) -> None:
    """The SDK's stdio_client leaving while a protected call is in flight (it SIGTERMs
    the gateway 2 s after closing stdin): the call still ends and the trace is closed."""
    manifest = _manifest(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            with anyio.move_on_after(0.5):
                await s.call_tool("slow", {"seconds": 2.5})
    anyio.run(main)
    path = tmp_path / "trace.jsonl"
    _wait_for(path, '"termination"')
    assert [x["tool"] for x in upstream_log(tmp_path / "up.log")] == ["slow"]
    result = audit_trace(load_jsonl(path))
    assert result.terminated
    assert not any(d.defect == "terminal" for d in result.diagnoses), result.diagnoses


def test_killed_mid_call_keeps_the_authorized_call(tmp_path: Path) -> None:
    """QA r7 D2: the plan and gate decision of a forwarded call are on disk before the
    upstream answers; a gateway killed (SIGKILL) while the upstream runs the call leaves
    a trace whose audit counts that protected action (authorized, no result)."""
    gw = _Raw(_manifest(tmp_path))
    path = tmp_path / "trace.jsonl"
    try:
        gw.start()
        gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, answer=False)
        _wait_for(tmp_path / "up.log", '"slow"')  # the upstream is running it
        lines = _lines(path)
        gw.p.kill()
        gw.p.wait(timeout=10)
    finally:
        gw.stop()
    plans = [x for x in lines if x.get("kind") == "plan" and "slow" in x.get("content", "")]
    gates = [x for x in lines if x.get("gate", {}).get("tool") == "slow"]
    decisions = [x["planfence"]["decision"] for x in lines
                 if "decision" in x.get("planfence", {})]
    assert len(plans) == 1 and [g["gate"]["outcome"] for g in gates] == ["authorized"]
    assert [(d["action"], d["outcome"]) for d in decisions] == [("slow", "authorized")]
    records = {x["planfence"]["record"]["id"] for x in lines
               if "record" in x.get("planfence", {})}
    assert set(decisions[0]["roots"]) <= records  # the action record it cites is there
    assert not any(x.get("kind") == "tool_output" and x.get("tool") == "slow" for x in lines)
    result = audit_trace(load_jsonl(path))
    assert not result.terminated  # killed: no terminal marker, and the audit says so
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(tmp_path / "audit.json")], capture_output=True, text=True,
                         env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    run = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))["runs"][0]
    # valid lineage, but no result recorded: its outcome is unknown (QA qa-crew S4)
    assert run["actions"]["total"] == 1 and run["actions"]["outcome unknown"] == 1, \
        run["actions"]
    assert [(x["status"], x.get("outcome")) for x in run["lineage"]] == [("valid", "unknown")]


def test_forwarded_call_written_once(tmp_path: Path) -> None:
    """A call that ends normally: its plan and decision lines once, its result after."""
    manifest = _manifest(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            r = await s.call_tool("slow", {"seconds": 0.1})
            assert not r.is_error
    anyio.run(main)
    path = tmp_path / "trace.jsonl"
    _wait_for(path, '"termination"')
    lines = _lines(path)
    kinds = [x.get("kind") for x in lines if x.get("tool") == "slow" or "slow" in str(
        x.get("gate", {}).get("tool", "")) or (x.get("kind") == "plan")]
    assert kinds == ["plan", "thought", "tool_output"], kinds
    decisions = [x for x in lines if "decision" in x.get("planfence", {})]
    assert len(decisions) == 1
    result = audit_trace(load_jsonl(path))
    assert result.terminated and not result.diagnoses, result.diagnoses


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_first_signal_says_it_waits_and_delivers_the_result(tmp_path: Path,
                                                            sig: signal.Signals) -> None:
    """QA qa-mcp S3: a first Ctrl-C (or SIGTERM) with a call in flight says so on stderr,
    the call's result still reaches the client on stdout, then the gateway exits 0."""
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(_manifest(tmp_path), stderr=fh)
        try:
            gw.start()
            gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 2}}, answer=False)
            _wait_for(tmp_path / "up.log", '"slow"')
            gw.p.send_signal(sig)
            assert gw.p.stdout is not None
            answer = json.loads(gw.p.stdout.readline())  # the result, after the signal
            assert answer["id"] == gw.n and answer["result"]["content"][0]["text"] == "slept"
            assert gw.p.wait(timeout=30) == 0
        finally:
            gw.stop()
    said = err.read_text(encoding="utf-8")
    assert "waiting for 1 call(s) in flight (new tool calls are refused); Ctrl-C again " \
        "to stop now" in said, said
    assert "Traceback" not in said, said


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_second_signal_stops_at_once(tmp_path: Path, sig: signal.Signals) -> None:
    """A second signal stops the stdio gateway at once: no traceback, exit 128 + signal."""
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(_manifest(tmp_path), stderr=fh)
        try:
            gw.start()
            stop_twice_mid_call(gw, sig, tmp_path / "up.log", err)
        finally:
            gw.stop()
    said = err.read_text(encoding="utf-8")
    assert "again: stopping now" in said and "Traceback" not in said, said


def test_http_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    """QA qa-mcp S2: ``icore mcp --http``, Ctrl-C twice during a call: no starlette
    lifespan traceback, exit 130."""
    from .conftest import free_port, http_client, wait_port
    manifest = _manifest(tmp_path)
    port = free_port()
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                              f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=fh,
                             env=env(), start_new_session=True)
        try:
            wait_port(port, p)

            async def main() -> None:
                async with http_client(f"http://127.0.0.1:{port}/mcp") as c:
                    await c.read_resource("memo://price")
                    with anyio.move_on_after(3):
                        await c.call_tool("slow", {"seconds": 30})

            try:
                anyio.run(main)  # the call is in flight when the client leaves
            except BaseExceptionGroup as eg:
                # the SDK client's own teardown may meet the reply it no longer reads
                # (BrokenResourceError): the client side, not what is tested here
                if eg.split(anyio.BrokenResourceError)[1] is not None:
                    raise
            _wait_for(tmp_path / "up.log", '"slow"')
            p.send_signal(signal.SIGINT)
            _wait_for(err, "SIGINT")
            p.send_signal(signal.SIGINT)
            assert p.wait(timeout=10) == 130
        finally:
            _reap(p)
    said = err.read_text(encoding="utf-8")
    assert "again: stopping now" in said and "Traceback" not in said, said


def test_ctrl_c_during_start_up_says_so_and_exits_130(tmp_path: Path) -> None:
    """QA qa-mcp7 S3 (#25): a Ctrl-C while the gateway still connects its upstreams (before
    its own signal handler) exited 0 with nothing said; now one stderr line, exit 130."""
    started = tmp_path / "started"
    slow = {"command": sys.executable, "timeout_s": 60,  # an upstream slow to answer
            "args": ["-c", f"import pathlib, time; pathlib.Path({str(started)!r})"
                     ".write_text('1'); time.sleep(60)"]}
    manifest = write_manifest(tmp_path, {"trip": slow}, tools={})
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=fh,
                             env=env(), start_new_session=True)
        try:
            _wait_for(started, "1")
            p.send_signal(signal.SIGINT)
            assert p.wait(timeout=30) == 130
        finally:
            _reap(p)
            assert p.stdin is not None
            p.stdin.close()
    said = err.read_text(encoding="utf-8")
    assert "icore mcp: SIGINT: stopping now" in said and "Traceback" not in said, said
    notes = [x.get("content", "") for x in _lines(manifest.parent / "trace.jsonl")]
    assert any("interrupted while starting" in n for n in notes), notes
    assert not any("CancelledError" in n for n in notes), notes
