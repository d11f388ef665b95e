"""``bench/bench_commit_phases.py --owner-prefix`` with a prefix that forks (issue 27).

The bench signals the owner (start of the measured part, stop) and reads its CPU from
``/proc``: under a prefix that runs the owner as its child instead of exec-ing it, those
must reach the owner's own process, not the prefix's. Before the fix the first signal
killed the prefix and the bench waited for the owner's report forever.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_commit_phases.py"

# a prefix that forks: runs the rest of its argv as a child and exits with its status
_FORKING = f"{sys.executable} -c " + shlex.quote(
    "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))")


def test_forking_owner_prefix_reports(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(BENCH.parents[1] / "src"), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(
        [sys.executable, str(BENCH), "--n", "40", "--writers", "2", "--dir", str(tmp_path),
         "--owner-prefix", _FORKING],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:  # the old behaviour: kill the bench and its owner
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("the bench hung under a forking --owner-prefix") from None
    assert proc.returncode == 0, err
    first = out.splitlines()[0]
    assert "commits/s" in first and "mean group" in first, out


# a prefix that prints a banner line of its own before running the owner (as py-spy does)
_BANNER = f"{sys.executable} -c " + shlex.quote(
    "import subprocess, sys; print('prefix> recording', flush=True); "
    "sys.exit(subprocess.call(sys.argv[1:]))")


def test_banner_prefix_and_experiment_switches(tmp_path: Path) -> None:
    """A prefix's own output before the owner's port line is skipped; the experiment
    switches reach the owner (no worker thread with ``--inline``), and the report has a
    line of CPU per thread and the two thread hops (#27 round 19)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(BENCH.parents[1] / "src"), os.environ.get("PYTHONPATH")) if p)}
    args = [sys.executable, str(BENCH), "--n", "40", "--writers", "2", "--dir",
            str(tmp_path), "--owner-prefix", _BANNER]
    runs = {}
    for name, extra in (("worker", ["--pragma", "wal_autocheckpoint=0", "--page-size",
                                     "4096"]),
                        ("inline", ["--inline"])):
        proc = subprocess.Popen(args + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"the bench hung ({name})") from None
        assert proc.returncode == 0, err
        runs[name] = out.splitlines()
    for name, lines in runs.items():
        assert "commits/s" in lines[0], lines
        threads = next(x for x in lines if "owner threads:" in x)
        # the main thread (the event loop) always runs; the worker only without --inline
        # (both are named after the interpreter; libuv's own threads are not)
        assert threads.count("python[") == (1 if name == "inline" else 2), (name, threads)
        assert any("hop worker -> loop" in x for x in lines), lines
