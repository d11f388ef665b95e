"""CPU of ``icore audit --json`` on a FenceGuard trace of many protected calls (#29).

Writes a RunRecorder trace of ``--calls`` fenced calls on one key revised before each
call (every third call stale: a refusal, then its replan), the shape of the audit
scaling figures (docs/audit-real-runs.md, "1,200 fenced calls"), then audits it in a
child process per round: ``icore audit TRACE --no-report --json OUT`` (and with
``--report`` the HTML report too), and prints the child's user and system CPU seconds
(``resource.getrusage(RUSAGE_CHILDREN)``) and peak RSS. With several ``--src`` folders
(e.g. main's ``src`` and a branch's) the rounds alternate A B A B on the same trace,
written once by ``--gen-src`` (default the first ``--src``), so a reader change is
measured on the very same file.

    python bench/bench_audit_json.py --calls 1200 --rounds 3 \\
        --src /work/main/src --src src
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

_GEN = """
import sys
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace
n, path = int(sys.argv[1]), sys.argv[2]
rec = RunRecorder("big", question="ship")
ws = Workspace({"order/*": "sales"})
agent = ws.agent("shipper")
guard = FenceGuard(agent=agent, depends_on={"order/1"}, recorder=rec)
rec.task("ship")
for i in range(n):
    ws.put("order/1", {"city": f"c{i}"})
    agent.read("order/1")
    if i % 3 == 0:
        ws.put("order/1", {"city": f"d{i}"})
    guard.run("ship", lambda city: city, {"city": f"c{i}"})
rec.finish("shipper", "done")
rec.write(path, overwrite=True)
"""


def _env(src: str) -> dict[str, str]:
    """The child's environment: icore from ``src``, its bytecode cached (a warm-up run
    compiles it once, so no round measures the compiler)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(Path(src).resolve()), "COLUMNS": "200"}


def _child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(user s, system s, peak RSS MB) of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
            after.ru_maxrss / 1024)


def main() -> None:
    """Parse the options, write the trace, run the rounds, print one line per run."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src", action="append", default=None,
                    help="a src folder to import icore from (repeat to alternate)")
    ap.add_argument("--gen-src", default=None, help="the src that writes the trace")
    ap.add_argument("--report", action="store_true", help="write the HTML report too")
    a = ap.parse_args()
    srcs = a.src or ["src"]
    with tempfile.TemporaryDirectory(prefix="bench-audit-json-") as tmp:
        trace = Path(tmp) / "big.jsonl"
        subprocess.run([sys.executable, "-c", _GEN, str(a.calls), str(trace)],
                       env=_env(a.gen_src or srcs[0]), check=True, timeout=3600)
        print(f"trace: {a.calls} calls, {trace.stat().st_size / 1e6:.1f} MB")
        for src in srcs:  # warm-up: compile and cache the bytecode, not measured
            _child([sys.executable, "-m", "icore", "--version"], _env(src))
        for rnd in range(a.rounds):
            for src in srcs:
                out = Path(tmp) / "out.json"
                cmd = [sys.executable, "-m", "icore", "audit", str(trace), "--json",
                       str(out)]
                cmd += ["--out", str(Path(tmp) / "rep")] if a.report else ["--no-report"]
                user, system, rss = _child(cmd, _env(src))
                acts = json.loads(out.read_text())["runs"][0]["actions"]["total"]
                print(f"round {rnd} src {src}: user {user:.2f} s, sys {system:.2f} s, "
                      f"peak RSS (max so far) {rss:.0f} MB, {acts} actions")


if __name__ == "__main__":
    main()
