"""Reliability: fail closed on an agent crash, clean stop on Ctrl-C, load on one team."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icore.live import RunManifest, run_live
from icore.report import write_live_report


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie would still answer; check its state
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split()[2] == "Z"
    except OSError:
        return True


def test_killed_owner_blocks_dependent_actions(manifest: RunManifest, run_dir: Path) -> None:
    """Killing the requirement's owner mid-run blocks the actions that depend on it."""
    m = manifest.with_(seeds=[0, 1], concurrency=1,
                       crash={"agent": "reviser-1", "at": "after_revision"})
    res = run_live(m, run_dir, policy="planfence", reporter=write_live_report)
    t0, t1 = res.tasks
    assert not t0.executed and t0.blocked and t0.block_reason == "owner_unavailable"
    assert not t1.executed and "reviser-1" in t1.error
    assert res.invalid_actions == 0 and res.succeeded == 0
    (crash,) = res.crashes
    assert crash["agent"] == "reviser-1" and crash["injected"] is True
    # clear report, every process stopped, no acknowledged record lost (the killed
    # owner's SQLite memory included)
    html = res.report.read_text(encoding="utf-8") if res.report else ""
    assert "Agent crash" in html and "reviser-1" in html
    assert res.processes_left == () and all(_gone(p) for p in res.pids.values())
    assert res.records_lost == () and res.records_checked >= 5


def test_killed_executor_is_reported(manifest: RunManifest, run_dir: Path) -> None:
    """A crash of the acting agent ends its workflows with a crash error, nothing lost."""
    m = manifest.with_(seeds=[0, 1], concurrency=1,
                       crash={"agent": "executor-1", "at": "after_revision"})
    res = run_live(m, run_dir, policy="planfence")
    assert res.invalid_actions == 0 and res.succeeded == 0
    assert all("executor-1" in t.error for t in res.tasks)
    assert [c["agent"] for c in res.crashes] == ["executor-1"]
    assert res.processes_left == () and res.records_lost == ()


def test_load_twenty_concurrent_workflows(manifest: RunManifest, run_dir: Path) -> None:
    """20 concurrent workflows on one team: zero invalid actions, all replan and finish."""
    m = manifest.with_(repeat=20, concurrency=20)
    res = run_live(m, run_dir, policy="planfence")
    assert len(res.tasks) == 20
    assert res.invalid_actions == 0 and res.succeeded == 20 and res.successful_replans == 20
    assert res.icore["rejected"] == 0 and res.records_lost == ()
    assert not res.crashes and res.processes_left == ()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def _foreground_sigint() -> None:
    # start the run as a terminal starts a foreground command: SIGINT neither ignored
    # nor blocked (a disposition or mask left by another test in this worker would be
    # inherited across exec and Ctrl-C would never reach the run)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    """SIGINT to ``icore run`` stops every agent process and still writes the report."""
    out = tmp_path / "run"
    console = tmp_path / "console.txt"
    with open(console, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "icore", "run", "--out", str(out), "--repeat", "400",
             "--concurrency", "1"], stdout=fh, stderr=subprocess.STDOUT,
            preexec_fn=_foreground_sigint)
    try:
        deadline = time.monotonic() + 60
        icore_log = out / "icore.sqlite"
        while time.monotonic() < deadline and not (out / "logs").is_dir():
            time.sleep(0.2)
        # wait until workflows are under way (the iCORE log is being written)
        while time.monotonic() < deadline and (
                not icore_log.exists() or icore_log.stat().st_size < 4096):
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert rc == 130, console.read_text(encoding="utf-8")
    data = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert data["interrupted"] is True and data["processes_left"] == 0
    assert data["records_lost"] == 0
    assert all(_gone(p) for p in data["pids"].values())
    assert (out / "report.html").is_file()


def test_unexpected_exit_is_detected(manifest: RunManifest, run_dir: Path) -> None:
    """An agent dying on its own (not injected) is recorded; pending steps fail at once."""
    import asyncio

    from icore.live import AgentCrashed, LiveTeam

    async def go() -> tuple[list[dict[str, object]], bool, list[str]]:
        team = LiveTeam(manifest, run_dir, policy="planfence",
                        backend=manifest.backend.resolved())
        try:
            await team.start()
            assert await team.request("auditor-1", "ping") == {"agent": "auditor-1",
                                                               "role": "auditor"}
            os.kill(team.agents["auditor-1"].proc.pid, signal.SIGKILL)
            raised = False
            try:
                await team.request("auditor-1", "ping", timeout_s=20)
            except AgentCrashed:
                raised = True
            await asyncio.sleep(0.2)
            return list(team.crashes), raised, team.alive()
        finally:
            await team.stop()
            assert team.alive() == []

    crashes, raised, alive = asyncio.run(go())
    assert raised and "auditor-1" not in alive
    assert [(c["agent"], c["injected"]) for c in crashes] == [("auditor-1", False)]
