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
writers and the owner process - also per thread (the owner's event loop and its
group-commit worker, from ``/proc/<pid>/task/*/schedstat``, with context switches) - and
the median of the group's two thread hops (the loop waking the worker to the worker
taking the group; the worker's transaction end to the loop's settle callback). With
``--dir /dev/shm`` the fsync costs nothing, which shows the CPU-bound cycle. With
pipelined groups the steps overlap and their pairing is approximate; the rate, sizes and
CPU are exact.

Experiment switches (#27 round 19): ``--pragma X`` runs ``PRAGMA X`` on the owner's store
after it opens (repeatable, e.g. ``wal_autocheckpoint=0``), ``--page-size N`` sets the new
store file's page size, ``--inline`` runs each group's transaction on the owner's event
loop instead of its worker thread (what the two hops cost; head queries would wait for
the fsync).

Usage::

    PYTHONPATH=src python bench/bench_commit_phases.py [--n 4000] [--dir /dev/shm]
        [--writers 8] [--split-at 6]

``--owner-prefix`` runs the owner child under a command, e.g. ``--owner-prefix "valgrind
--tool=callgrind --callgrind-out-file=owner.%p"``: two runs with different ``--n`` give
the owner process's instructions per commit (the difference of the totals divided by the
difference of the commits; with ``--separate-threads=yes``, per thread). A prefix may print
lines of its own before the owner's (a profiler's banner): they are skipped.
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


def _threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """Per thread of ``pid``: (name, CPU ns from ``schedstat``, context switches).

    Linux ``/proc``; empty elsewhere. A thread gone between two readings drops out.
    """
    out: dict[int, tuple[str, int, int]] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return out
    for tid in tids:
        base = Path(f"/proc/{pid}/task/{tid}")
        try:
            name = (base / "comm").read_text().strip()
            ns = int((base / "schedstat").read_text().split()[0])
            status = (base / "status").read_text().splitlines()
        except (OSError, ValueError, IndexError):
            continue
        cs = sum(int(line.split()[1]) for line in status if "ctxt_switches:" in line)
        out[tid] = (name, ns, cs)
    return out


def _thread_report(before: dict[int, tuple[str, int, int]],
                   after: dict[int, tuple[str, int, int]], done: int) -> str:
    """CPU µs and context switches per commit of each thread between two readings."""
    parts = []
    for tid, (name, ns, cs) in sorted(after.items()):
        _n, ns0, cs0 = before.get(tid, (name, 0, 0))
        if ns - ns0 > 0:
            parts.append(f"{name}[{tid}] {(ns - ns0) / done / 1e3:.1f} µs "
                         f"{(cs - cs0) / done:.2f} cs")
    return "; ".join(parts)


def _owner(certs: Path, data: Path, split_at: int | None,  # pragma: no cover - the child
           pragmas: list[str], page_size: int | None, inline: bool) -> None:
    """Serve the owner with stamps around its group commit; print them on SIGTERM."""
    from icore.memory import OwnershipMap, SQLiteStore, _sqlite
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

    # the two thread hops of a group, measured directly (not paired by index): the loop's
    # wake-up call to the worker taking the group, the worker's hand-back to the loop
    # running the settle callback
    kick, take, settle = (server_mod.GroupCommitter._kick, server_mod.GroupCommitter._take,
                          server_mod.GroupCommitter._settle)
    hop_last = {"kick": 0.0}
    hops: dict[str, list[float]] = {"loop -> worker (kick to take)": [],
                                    "worker -> loop (tx end to settle)": []}

    def kick_(self: Any, ctx: Any) -> None:
        hop_last["kick"] = now()
        kick(self, ctx)

    def take_(self: Any) -> Any:
        if hop_last["kick"]:
            hops["loop -> worker (kick to take)"].append(now() - hop_last["kick"])
            hop_last["kick"] = 0.0
        return take(self)

    def settle_(self: Any, group: Any, replies: Any, exc: Any) -> None:
        if marks["tx1"]:
            hops["worker -> loop (tx end to settle)"].append(now() - marks["tx1"][-1])
        settle(self, group, replies, exc)

    server_mod.GroupCommitter._kick = kick_  # type: ignore[method-assign]
    server_mod.GroupCommitter._take = take_  # type: ignore[method-assign]
    server_mod.GroupCommitter._settle = settle_  # type: ignore[method-assign]
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
        if page_size is not None:
            _sqlite.PAGE_SIZE = page_size  # read when the store creates its file
        store = SQLiteStore(data / "owner.sqlite", om, "owner", synchronous="FULL",
                            exclusive=True)
        for pragma in pragmas:  # an experiment's SQLite settings (--pragma)
            store._db.execute(f"PRAGMA {pragma}")
        store._db = _Db(store._db)  # type: ignore[assignment]
        server = OwnerServer(store, agent="owner", ssl_context=server_context(certs, "owner"))
        if split_at is not None:
            server._group.split_at = split_at
        if inline:  # an experiment: transactions on the event loop, no worker thread
            server._group.in_thread = False
        # the port and this process's id: under a prefix that does not exec the owner
        # (``/usr/bin/time``) the prefix's pid is not the owner's, for signals and CPU
        print(await server.start(), os.getpid(), flush=True)
        stop, reset = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, reset.set)
        await reset.wait()
        for v in (*marks.values(), *hops.values()):
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
                **{f"hop {name}": statistics.median(v) * 1e6 if v else 0.0
                   for name, v in hops.items()},
            }}), flush=True)
        await server.close()
        store.close()

    run_async(main())


async def _drive(port: int, certs: Path, pid: int, n: int, timeout_s: float,
                 writers: int) -> tuple[float, float, float, float, str]:
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
    th0, me0 = _threads(pid), _threads(os.getpid())
    t0, c0, s0 = time.perf_counter(), time.process_time(), _proc_cpu_s(pid)
    await asyncio.gather(*(writer(i, n // writers, last[i]) for i in range(writers)))
    wall = time.perf_counter() - t0
    done = n // writers * writers
    out = (done / wall, (time.process_time() - c0) / done * 1e6,
           (_proc_cpu_s(pid) - s0) / done * 1e6, statistics.median(lat) * 1e6,
           f"owner threads: {_thread_report(th0, _threads(pid), done)}\n"
           f"  writer threads: {_thread_report(me0, _threads(os.getpid()), done)}")
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
    ap.add_argument("--pragma", action="append", default=[],
                    help="an SQLite pragma the owner's store runs after opening, e.g. "
                         "wal_autocheckpoint=0 (repeatable; an experiment)")
    ap.add_argument("--page-size", type=int, default=None,
                    help="page size of the owner's new store file (default: the store's)")
    ap.add_argument("--inline", action="store_true",
                    help="run the group's transaction on the owner's event loop instead of "
                         "its worker thread (an experiment: head queries wait for the fsync)")
    ap.add_argument("--owner", nargs=2, help=argparse.SUPPRESS)  # the child's own role
    ns = ap.parse_args()
    if ns.owner:
        _owner(Path(ns.owner[0]), Path(ns.owner[1]), ns.split_at, ns.pragma, ns.page_size,
               ns.inline)
        return
    with tempfile.TemporaryDirectory(prefix="icore-phases-", dir=ns.dir) as d:
        certs = Path(d) / "certs"
        init_team_certs(certs, ["owner"], team="phases")
        proc = subprocess.Popen([*shlex.split(ns.owner_prefix), sys.executable, __file__,
                                 "--owner", str(certs), d,
                                 *(() if ns.split_at is None else
                                   ("--split-at", str(ns.split_at))),
                                 *(a for p in ns.pragma for a in ("--pragma", p)),
                                 *(() if ns.page_size is None else
                                   ("--page-size", str(ns.page_size))),
                                 *(("--inline",) if ns.inline else ())],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        pid = proc.pid
        try:
            line = proc.stdout.readline()
            while line and not line.replace(" ", "").strip().isdigit():  # a prefix's banner
                line = proc.stdout.readline()
            port, pid = map(int, line.split())
            rate, client_us, owner_us, p50_us, threads = run_async(
                _drive(port, certs, pid, ns.n,
                       60.0 if ns.owner_prefix else 2.0, ns.writers))
        finally:
            os.kill(pid, signal.SIGTERM)
        line = proc.stdout.readline()
        while line and not line.startswith("{"):  # a prefix's own output
            line = proc.stdout.readline()
        report = json.loads(line)
        proc.wait()
    print(f"{rate:,.0f} commits/s, p50 {p50_us:,.0f} µs; CPU per commit: writers "
          f"{client_us:.1f} µs, owner "
          f"{owner_us:.1f} µs; {report['groups_per_s']:,.0f} groups (fsyncs)/s, mean group "
          f"{report['mean_group']:.2f} {report['sizes']}, {report['split']} split")
    print(f"  {threads}")
    for name, us in report["us_per_group"].items():
        print(f"  {name:48s} {us:8.0f} µs")


if __name__ == "__main__":
    main()
