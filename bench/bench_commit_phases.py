"""Where a durable commit's time goes in the owner service's group cycle (#27 item 2).

The commit part of ``icore bench peers``: 8 writers of one owner on one connection, each
committing its key's next version as soon as the previous one is acknowledged, against an
owner service (:class:`icore.net.OwnerServer`, SQLite ``synchronous=FULL``, mutual TLS)
in a child process of this script. The owner is instrumented from outside its code
(wrapped methods, nothing changed): per group commit it stamps

* ``arrive``: the first commit of the group reaches the group committer,
* ``tx start`` / ``COMMIT start`` / ``COMMIT end`` / ``tx end``: the worker thread runs the
  owner rules and inserts, then ``COMMIT`` (the fsync), then hands the replies back,
* ``sent``: the acknowledgements leave in one TLS record,

and prints the median of each step per group, the next group's ``arrive`` after ``sent``
(the writers' turn: read the acks, build and send the next records), the group sizes and
how many groups the committer split off (its pipelining, ``--split-at``), groups (=
fsyncs) per second, a writer's median commit latency, and the CPU per commit of the
writers and the owner process. With ``--dir /dev/shm`` the fsync costs nothing, which
shows the CPU-bound cycle. With pipelined groups the steps overlap and their pairing is
approximate; the rate, sizes and CPU are exact.

Usage::

    PYTHONPATH=src python bench/bench_commit_phases.py [--n 4000] [--dir /dev/shm]
        [--writers 8] [--split-at 6]

``--owner-prefix`` runs the owner child under a command, e.g. ``--owner-prefix "valgrind
--tool=callgrind --callgrind-out-file=owner.%p"``: two runs with different ``--n`` give
the owner process's instructions per commit (the difference of the totals divided by the
difference of the commits).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from icore._extras import run_async
from icore.net import OwnerClient, client_context, init_team_certs
from icore.records import Record, derive
from icore_lab.bench.micro._net import _proc_cpu_s

WRITERS = 8
STEPS = ("arrive", "tx0", "c0", "c1", "tx1", "sent")


def _owner(certs: Path, data: Path, split_at: int | None  # pragma: no cover - the child
           ) -> None:
    """Serve the owner with stamps around its group commit; print them on SIGTERM."""
    from icore.memory import OwnershipMap, SQLiteStore
    from icore.net import OwnerHandler, OwnerServer, server_context
    from icore.net._tcp import server as server_mod
    from icore.net._tcp import serving

    marks: dict[str, list[float]] = {s: [] for s in STEPS}
    sizes: list[int] = []
    now = time.perf_counter
    submit = server_mod.GroupCommitter.submit
    handle = OwnerHandler.handle_commits
    send = serving.OwnerConnection._send

    def submit_(self: Any, *a: Any, **k: Any) -> Any:
        if not self._queue:
            marks["arrive"].append(now())
        return submit(self, *a, **k)

    def handle_(self: Any, items: Any, verified: bool = False) -> Any:
        marks["tx0"].append(now())
        try:
            return handle(self, items, verified=verified)
        finally:
            marks["tx1"].append(now())
            sizes.append(len(items))

    def send_(self: Any, frames: list[bytes]) -> None:
        send(self, frames)
        marks["sent"].append(now())

    server_mod.GroupCommitter.submit = submit_  # type: ignore[method-assign]
    OwnerHandler.handle_commits = handle_  # type: ignore[method-assign]
    serving.OwnerConnection._send = send_  # type: ignore[method-assign]

    class _Db:  # stamps COMMIT, passes everything else through
        def __init__(self, db: Any) -> None:
            self.db = db

        def execute(self, sql: str, *a: Any) -> Any:
            if sql != "COMMIT":
                return self.db.execute(sql, *a)
            marks["c0"].append(now())
            try:
                return self.db.execute(sql, *a)
            finally:
                marks["c1"].append(now())

        def __getattr__(self, name: str) -> Any:
            return getattr(self.db, name)

    async def main() -> None:
        om = OwnershipMap.from_mapping({"w/*": "owner"})
        store = SQLiteStore(data / "owner.sqlite", om, "owner", synchronous="FULL",
                            exclusive=True)
        store._db = _Db(store._db)  # type: ignore[assignment]
        server = OwnerServer(store, agent="owner", ssl_context=server_context(certs, "owner"))
        if split_at is not None:
            server._group.split_at = split_at
        # the port and this process's id: under a prefix that does not exec the owner
        # (``/usr/bin/time``) the prefix's pid is not the owner's, for signals and CPU
        print(await server.start(), os.getpid(), flush=True)
        stop, reset = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, reset.set)
        await reset.wait()
        for v in marks.values():
            v.clear()
        sizes.clear()
        server._group.split_groups = 0
        t0 = now()
        await stop.wait()
        wall = now() - t0
        k = min(len(v) for v in marks.values()) - 1
        m = {s: v[-k:] for s, v in marks.items()}

        def step(a: str, b: str, shift: int = 0) -> float:
            return statistics.median((m[b][i + shift] - m[a][i]) * 1e6
                                     for i in range(k - shift))

        print(json.dumps({
            "groups": len(sizes), "commits": sum(sizes),
            "split": server._group.split_groups,
            "mean_group": sum(sizes) / max(len(sizes), 1),
            "sizes": {n: sizes.count(n) for n in sorted(set(sizes))},
            "groups_per_s": len(sizes) / wall,
            "us_per_group": {
                "arrive -> tx start (decode, verify, thread hop)": step("arrive", "tx0"),
                "tx start -> COMMIT (owner rules, inserts)": step("tx0", "c0"),
                "COMMIT (fsync)": step("c0", "c1"),
                "COMMIT end -> tx end": step("c1", "tx1"),
                "tx end -> acks sent (thread hop, encode, TLS)": step("tx1", "sent"),
                "acks sent -> next arrive (writers)": step("sent", "arrive", 1),
            }}), flush=True)
        await server.close()
        store.close()

    run_async(main())


async def _drive(port: int, certs: Path, pid: int, n: int, timeout_s: float,
                 writers: int) -> tuple[float, float, float, float]:
    client = OwnerClient({"owner": ("127.0.0.1", port)}, identity="owner",
                         ssl_context=client_context(certs, "owner"))
    await client.ping("owner", timeout_s=timeout_s)
    seq = 0
    lat: list[float] = []

    async def writer(i: int, count: int, prev: Record | None) -> Record | None:
        nonlocal seq
        for _ in range(count):
            seq += 1
            rec = (Record.create(key=f"w/{i}", owner="owner", seq=seq, content={"n": seq})
                   if prev is None else
                   derive(key=f"w/{i}", owner="owner", seq=seq, content={"n": seq},
                          inputs=[prev]))
            t = time.perf_counter()
            await client.commit("owner", rec, timeout_s=timeout_s)
            lat.append(time.perf_counter() - t)
            prev = rec
        return prev

    last = await asyncio.gather(*(writer(i, 50, None) for i in range(writers)))  # warm
    os.kill(pid, signal.SIGUSR1)
    await asyncio.sleep(0.1)
    lat.clear()
    t0, c0, s0 = time.perf_counter(), time.process_time(), _proc_cpu_s(pid)
    await asyncio.gather(*(writer(i, n // writers, last[i]) for i in range(writers)))
    wall = time.perf_counter() - t0
    done = n // writers * writers
    out = (done / wall, (time.process_time() - c0) / done * 1e6,
           (_proc_cpu_s(pid) - s0) / done * 1e6, statistics.median(lat) * 1e6)
    await client.close()
    return out


def main() -> None:
    """Parse the options, start the owner child, drive it, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=4000, help="measured commits")
    ap.add_argument("--dir", default=None, help="folder for the owner's SQLite file")
    ap.add_argument("--owner-prefix", default="",
                    help="command the owner child runs under (see the docstring)")
    ap.add_argument("--writers", type=int, default=WRITERS, help="closed-loop writers")
    ap.add_argument("--split-at", type=int, default=None,
                    help="the group committer's split_at (default: its own)")
    ap.add_argument("--owner", nargs=2, help=argparse.SUPPRESS)  # the child's own role
    ns = ap.parse_args()
    if ns.owner:
        _owner(Path(ns.owner[0]), Path(ns.owner[1]), ns.split_at)
        return
    with tempfile.TemporaryDirectory(prefix="icore-phases-", dir=ns.dir) as d:
        certs = Path(d) / "certs"
        init_team_certs(certs, ["owner"], team="phases")
        proc = subprocess.Popen([*shlex.split(ns.owner_prefix), sys.executable, __file__,
                                 "--owner", str(certs), d,
                                 *(() if ns.split_at is None else
                                   ("--split-at", str(ns.split_at)))],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        pid = proc.pid
        try:
            port, pid = map(int, proc.stdout.readline().split())
            rate, client_us, owner_us, p50_us = run_async(
                _drive(port, certs, pid, ns.n,
                       60.0 if ns.owner_prefix else 2.0, ns.writers))
        finally:
            os.kill(pid, signal.SIGTERM)
        report = json.loads(proc.stdout.readline())
        proc.wait()
    print(f"{rate:,.0f} commits/s, p50 {p50_us:,.0f} µs; CPU per commit: writers "
          f"{client_us:.1f} µs, owner "
          f"{owner_us:.1f} µs; {report['groups_per_s']:,.0f} groups (fsyncs)/s, mean group "
          f"{report['mean_group']:.2f} {report['sizes']}, {report['split']} split")
    for name, us in report["us_per_group"].items():
        print(f"  {name:48s} {us:8.0f} µs")


if __name__ == "__main__":
    main()
