"""Calls that may have run say so, and their failure reaches the trace at once (#25).

Real processes: ``icore mcp`` in front of tests/mcp/upstream_server.py over stdio, driven
by the SDK's client or line by line. A stdio upstream whose request timed out is
relaunched; a sibling call in flight on the old process fails with it and must say it
may have run (it reached the upstream), in its answer and in the trace, never as a clean
refusal. A protected call that failed after authorization is written failed to the
append-only trace when it fails, so a gateway stopped at once (a second signal) keeps it.
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

from icore.adapters import (
    FAILED_AFTER_AUTHORIZATION,
    MAY_HAVE_RUN_MARK,
    OUTCOME_UNKNOWN,
    load_jsonl,
    trace_lineages,
)

from .conftest import env, stdio_gateway, stdio_upstream, text, upstream_log, write_manifest
from .test_gateway_stop import _Raw, stop_twice_mid_call


def _until(log: Path, tool: str, n: int = 1, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(r["tool"] == tool for r in upstream_log(log)) < n:
        assert time.monotonic() < deadline, f"{tool} never reached the upstream"
        time.sleep(0.02)


@pytest.mark.timeout(120)
def test_sibling_of_a_timed_out_call_says_it_may_have_run(tmp_path: Path) -> None:
    """``slow 30`` times out (5 s) and the upstream is relaunched while a sibling
    ``slow 4.5``, started 0.6 s after it reached the upstream, is still running there:
    both answers say the call may have run (text and ``_meta``), the trace marks both
    ``may_have_run`` and the audit counts both failed after authorization."""
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 5.0)},
                              tools={"slow": {"depends_on": ["fact://plan/goal"]}})
    out: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("fact://plan/goal")
            async with anyio.create_task_group() as tg:
                async def call(name: str, seconds: float) -> None:
                    out[name] = await s.call_tool("slow", {"seconds": seconds})

                tg.start_soon(call, "hung", 30)
                await anyio.to_thread.run_sync(_until, log, "slow")
                await anyio.sleep(0.6)
                tg.start_soon(call, "sibling", 4.5)
            await s.read_resource("fact://plan/goal")  # the check: their reads were spent
            r = await s.call_tool("slow", {"seconds": 0})  # the relaunched upstream
            assert not r.is_error, text(r)

    anyio.run(main)
    rows = upstream_log(log)
    assert [r["args"]["seconds"] for r in rows] == [30, 4.5, 0]
    assert rows[0]["pid"] == rows[1]["pid"] != rows[2]["pid"]  # the sibling reached it
    for name in ("hung", "sibling"):
        r = out[name]
        assert r.is_error and "may have run" in text(r), text(r)
        assert r.meta == {"icore/upstream": {"upstream": "trip", "may_have_run": True}}
    assert "relaunched the upstream's process while this request was in flight" in text(
        out["sibling"]) and "timed out" in text(out["sibling"])
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    failed = [x for x in lines if x.get("kind") == "tool_output" and x.get("tool") == "slow"
              and x.get("exitcode") == 1]
    assert len(failed) == 2 and all(x["may_have_run"] is True for x in failed)
    assert all("may have run" in x["content"] for x in failed)
    trace = load_jsonl(tmp_path / "trace.jsonl")
    lv = trace_lineages(trace.planfence)
    # the failures are structured on their decisions, whose digests (written again over
    # them) check out (#29)
    assert trace.planfence is not None and not trace.warnings
    assert [d.may_have_run for d in trace.planfence.decisions if d.error] == [True, True]
    # sent and not answered: they may have run, so outcome unknown, never failed (#29)
    assert sorted(x.counted for x in lv) == sorted([OUTCOME_UNKNOWN, OUTCOME_UNKNOWN, "valid"])
    assert [x.error.startswith(MAY_HAVE_RUN_MARK) for x in lv if x.error] == [True, True]


def _manifest(folder: Path) -> Path:
    return write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 20.0)},
                          tools={"slow": {"depends_on": ["memo://price"]},
                                 "crash": {"depends_on": ["memo://price"]}})


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_failed_call_reaches_the_trace_when_stopped_by_a_second_signal(
        tmp_path: Path, sig: signal.Signals) -> None:
    """``crash`` is authorized and its upstream dies mid-call; then, with ``slow`` in
    flight, two signals stop the gateway at once (no rewrite of the trace). The audit of
    the trace left on disk keeps ``crash``'s error (it used to count it valid: the
    failure was written only at a normal stop); its upstream died mid-call, so it may
    have run: counted outcome unknown, never failed (#29)."""
    path = tmp_path / "trace.jsonl"
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(_manifest(tmp_path), stderr=fh)
        try:
            gw.start()
            got = gw.send("tools/call", {"name": "crash", "arguments": {}})
            assert got["result"]["isError"] is True, got
            gw.send("resources/read", {"uri": "memo://price"})  # crash spent the read
            stop_twice_mid_call(gw, sig, tmp_path / "up.log", err)
        finally:
            gw.stop()
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert not any(x.get("kind") == "termination" for x in lines)  # stopped at once
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(tmp_path / "audit.json")], capture_output=True, text=True,
                         env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    run = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"][FAILED_AFTER_AUTHORIZATION] == 0, run["actions"]
    # crash (may have run) and the slow call cut off in flight (no result recorded, QA
    # qa-crew S4): both authorized, outcome unknown
    assert run["actions"]["outcome unknown"] == 2 and run["actions"]["total"] == 2, \
        run["actions"]
    (crash,) = [lv for lv in run["lineage"] if lv.get("error")]
    assert crash["action"].endswith("/1") and "may have run" in crash["error"], crash
    assert "may have run" in got["result"]["content"][0]["text"], got
