"""CPU per validation of icore's owner service and its client, as a focused sub-bench (#27).

The two CPU figures of ``icore bench peers`` (owner CPU per d=1 head query, client CPU
per gate validation), measured over a fixed number of operations instead of a fixed
time, so a loaded machine changes how long the run takes but not what is counted:

* **CPU time** (default): the owner (``icore serve`` in its own process, SQLite
  ``synchronous=NORMAL``, the event loop of :func:`icore._extras.event_loop_factory`)
  is read from ``/proc``; the client (this process, 8 executors, one connection each,
  on the same loop kind) from :func:`time.process_time`.
* **instructions** (``--callgrind DIR``): the owner runs under
  ``valgrind --tool=callgrind`` and the figure is its instruction count between two
  ``callgrind_control --dump`` requests bracketing the measured operations, divided by
  their number. Instruction counts repeat run to run whatever else the machine is
  doing. To count the client's instructions the same way instead, run the script
  itself under callgrind with ``--client`` (the owner then runs natively)::

      valgrind --tool=callgrind --callgrind-out-file=DIR/client.%p \\
          python bench/bench_wire_cpu.py --callgrind DIR --client

Usage::

    PYTHONPATH=src python bench/bench_wire_cpu.py [--n 4000] [--rounds 3] [--json F]
    PYTHONPATH=src python bench/bench_wire_cpu.py --callgrind /tmp/cg [--n 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import icore_lab.bench.micro._peers_icore as peers_icore
from icore._extras import run_async
from icore.net import TeamProcesses
from icore_lab.bench.micro._net import _proc_cpu_s
from icore_lab.bench.micro._peers_icore import IcoreSystem
from icore_lab.bench.micro._peers_systems import Conn

EXECUTORS = 8
OPS = (("query_heads d=1", False, 1), ("gate d=1", True, 1), ("gate d=8", True, 8))
"""(name, through the gate, d) of each measured operation."""


async def _run_ops(conns: list[Conn], d: int, n: int) -> None:
    per = n // len(conns)

    async def loop(c: Conn) -> None:
        for _ in range(per):
            await c.validate(d)

    await asyncio.gather(*(loop(c) for c in conns))


def _proc_user_sys_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process from ``/proc`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


async def _cpu_round(sys_: IcoreSystem, gate: bool, d: int, n: int
                     ) -> tuple[float, float, float, float, float, float]:
    sys_.gate = gate
    conns = [await sys_.connect(i) for i in range(EXECUTORS)]
    try:
        await _run_ops(conns, d, 40 * EXECUTORS)  # warm
        c0, s0 = time.process_time(), _proc_cpu_s(sys_.pid)
        u0, k0 = _proc_user_sys_s(sys_.pid)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        await _run_ops(conns, d, n)
        done = n // EXECUTORS * EXECUTORS
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        u1, k1 = _proc_user_sys_s(sys_.pid)
        return ((time.process_time() - c0) / done * 1e6,
                (_proc_cpu_s(sys_.pid) - s0) / done * 1e6,
                (u1 - u0) / done * 1e6, (k1 - k0) / done * 1e6,
                (r1.ru_utime - r0.ru_utime) / done * 1e6,
                (r1.ru_stime - r0.ru_stime) / done * 1e6)
    finally:
        for c in conns:
            await c.close()


def _dump(pid: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["callgrind_control", "--dump", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _dump_while(pids: list[int], ping: Callable[[], Awaitable[None]]) -> None:
    """Request a dump of every pid; keep the processes busy until each has answered."""
    procs = [_dump(p) for p in pids]
    while any(p.poll() is None for p in procs):
        await ping()
        await asyncio.sleep(0.005)


def _total_ir(path: Path) -> int:
    m = re.search(r"^(?:summary|totals): (\d+)", path.read_text(), re.M)
    if m is None:
        raise RuntimeError(f"no totals in {path}")
    return int(m.group(1))


async def _callgrind_round(sys_: IcoreSystem, gate: bool, d: int, n: int, out: Path,
                           tag: str, client: bool) -> dict[str, float]:
    sys_.gate = gate
    conns = [await sys_.connect(i) for i in range(EXECUTORS)]
    pids = [os.getpid()] if client else [sys_.pid]
    try:
        await _run_ops(conns, d, 40 * EXECUTORS)
        ping = conns[0].client.ping  # type: ignore[attr-defined]

        async def ping_owner() -> None:
            await ping("owner")

        before = {p: set(out.glob(f"*.{p}*")) for p in pids}
        await _dump_while(pids, ping_owner)
        await _run_ops(conns, d, n)
        mid = {p: set(out.glob(f"*.{p}*")) for p in pids}
        await _dump_while(pids, ping_owner)
        figs = {}
        for p in pids:
            new = sorted(set(out.glob(f"*.{p}*")) - mid[p], key=lambda x: x.stat().st_mtime)
            if not new or mid[p] == before[p]:
                raise RuntimeError(f"callgrind did not dump pid {p}")
            who = "owner" if p == sys_.pid else "client"
            figs[who] = _total_ir(new[-1]) / (n // EXECUTORS * EXECUTORS)
            print(f"  {tag}: {who} {figs[who]:,.0f} instructions per op ({new[-1].name})",
                  flush=True)
        return figs
    finally:
        for c in conns:
            await c.close()


async def _main(ns: argparse.Namespace) -> dict[str, object]:
    results: dict[str, object] = {"n": ns.n, "executors": EXECUTORS}
    with tempfile.TemporaryDirectory(prefix="icore-wire-cpu-") as d:
        sys_ = IcoreSystem(gate=False)
        try:
            await sys_.start(Path(d))  # a failed seed still stops the owner below
            if ns.callgrind is not None:
                out = Path(ns.callgrind)
                for name, gate, dd in OPS:
                    results[name] = await _callgrind_round(sys_, gate, dd, ns.n, out, name,
                                                           ns.client)
                return results
            for name, gate, dd in OPS:
                rounds = [await _cpu_round(sys_, gate, dd, ns.n) for _ in range(ns.rounds)]
                cl = statistics.median(r[0] for r in rounds)
                sv = statistics.median(r[1] for r in rounds)
                us = statistics.median(r[2] for r in rounds)
                ks = statistics.median(r[3] for r in rounds)
                cu = statistics.median(r[4] for r in rounds)
                ck = statistics.median(r[5] for r in rounds)
                results[name] = {"client_cpu_us": cl, "owner_cpu_us": sv,
                                 "owner_user_us": us, "owner_system_us": ks,
                                 "client_user_us": cu, "client_system_us": ck,
                                 "rounds": rounds}
                print(f"{name}: client {cl:.1f} µs (user {cu:.1f} + system {ck:.1f}), owner "
                      f"{sv:.1f} µs (user {us:.1f} + system {ks:.1f}) CPU per op "
                      f"(medians of {ns.rounds}; rounds "
                      + ", ".join(f"{r[0]:.0f}/{r[1]:.0f}" for r in rounds) + ")",
                      flush=True)
        finally:
            await sys_.stop()
    return results


def _wrap_owner(out: Path, prefix: str) -> None:
    """Start the owner as ``PREFIX ARGS`` (the launcher runs ``PYTHON -m icore.net._team``)."""
    wrapper = out / "owner-python.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {prefix} \"$@\"\n")
    wrapper.chmod(0o755)

    def launcher(manifest: Path, agents: list[str] | None = None) -> TeamProcesses:
        return TeamProcesses(manifest, agents, python=str(wrapper),
                             env={"PYTHONHASHSEED": "0"})

    peers_icore.TeamProcesses = launcher  # type: ignore[attr-defined,assignment,misc]


def _callgrind_owner(out: Path) -> None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed")
    _wrap_owner(out, f"{valgrind} --tool=callgrind -q --callgrind-out-file={out}/owner.%p "
                f"{sys.executable}")


def main() -> None:
    """Parse the options, run, print the figures (and write them as JSON when asked)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=4000, help="operations per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="CPU-time rounds (median)")
    ap.add_argument("--callgrind", type=Path, default=None,
                    help="count instructions with callgrind; dumps go to this folder")
    ap.add_argument("--client", action="store_true",
                    help="with --callgrind: count this process (run under callgrind) "
                    "instead of the owner, which then runs natively")
    ap.add_argument("--profile", type=Path, default=None,
                    help="write a cProfile of the owner to this file (CPU-time mode)")
    ap.add_argument("--json", type=Path, default=None)
    ns = ap.parse_args()
    if ns.profile is not None:
        _wrap_owner(ns.profile.resolve().parent,
                    f"{sys.executable} -m cProfile -o {ns.profile.resolve()}")
    if ns.callgrind is not None:
        ns.callgrind.mkdir(parents=True, exist_ok=True)
        if not ns.client:
            _callgrind_owner(ns.callgrind.resolve())
    res = run_async(_main(ns))
    if ns.json is not None:
        ns.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
