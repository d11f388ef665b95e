"""Gate and store microbenchmarks (issue: library core): decisions/s and commits/s.

Measures the in-process gate (planfence Alg. 1 over :class:`~icore.memory.LocalOwners`)
for dependency counts d and lineage depths, on the in-memory and SQLite stores, the
single-writer commit throughput (next to the figure before the atomic owner rules of
issue 12) and contended commits/s with 8 writers. Figures are printed; nothing here
asserts a time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from icore.fence import PointCounter, validate
from icore.memory import LocalOwners, MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import Record, derive
from icore_lab.bench._checks import check_positive_seconds
from icore_lab.bench.micro._contention import ContentionFigure, contended_commits


@dataclass(frozen=True)
class GateFigure:
    """One benchmark cell.

    Attributes:
        store: ``memory`` or ``sqlite``.
        d: |D(a)|.
        depth: parent hops from the plan root to each dependency.
        decisions_per_s: authorized gate decisions per second.
        us_per_decision: mean microseconds per decision.
    """

    store: str
    d: int
    depth: int
    decisions_per_s: float
    us_per_decision: float


def _setup(kind: str, d: int, depth: int, folder: Path) -> tuple[Store, LocalOwners,
                                                                 OwnershipMap, str, set[str]]:
    keys = [f"req/{i}" for i in range(d)]
    om = OwnershipMap({k: f"owner{i % 4}" for i, k in enumerate(keys)},
                      {"mid/*": "planner", "plan/*": "planner"})

    def mk(agent: str) -> Store:
        if kind == "memory":
            return MemoryStore(om, agent)
        return SQLiteStore(folder / f"{agent}.sqlite", om, agent)

    owners = {f"owner{i}": mk(f"owner{i}") for i in range(min(d, 4))}
    ex = mk("planner")
    tops = []
    for k in keys:
        o = om.require_owner(k)
        r = Record.create(key=k, owner=o, seq=owners[o].next_seq(), content={"k": k})
        owners[o].commit(r, writer=o)
        ex.install(r)
        prev = r
        for lvl in range(depth - 1):
            prev = derive(key=f"mid/{k}/{lvl}", owner="planner", seq=ex.next_seq(),
                          content=lvl, inputs=[prev], type="derived")
            ex.commit(prev, writer="planner")
        tops.append(prev)
    plan = derive(key="plan/p", owner="planner", seq=ex.next_seq(), content="p", inputs=tops)
    ex.commit(plan, writer="planner")
    return ex, LocalOwners(dict(owners)), om, plan.id, set(keys)


def gate_throughput(kind: str, d: int, depth: int, *, seconds: float = 1.0) -> GateFigure:
    """Measure authorized decisions/s for one (store, d, depth) cell.

    Raises:
        BadOption: ``seconds`` is not a finite number > 0 (NaN or infinity would make
            the measuring loop run forever).
    """
    check_positive_seconds("seconds", seconds)
    with tempfile.TemporaryDirectory() as tmp:
        ex, owners, om, root, deps = _setup(kind, d, depth, Path(tmp))
        points = PointCounter()
        lookup = ex.lookup

        def once() -> None:
            dec = validate(roots=(root,), deps=deps, lookup=lookup, ownership=om,
                           owners=owners, points=points)
            if not dec.authorized:
                raise RuntimeError(f"benchmark gate not authorized: {dec.reason}")

        n = _run_for(once, seconds)
        ex.close()
        for s in owners.stores.values():
            s.close()
    rate = n[0] / n[1]
    return GateFigure(kind, d, depth, rate, 1e6 / rate)


def _run_for(fn: Callable[[], None], seconds: float) -> tuple[int, float]:
    for _ in range(200):
        fn()
    count, t0 = 0, time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(100):
            fn()
        count += 100
        now = time.perf_counter()
        if now >= deadline:
            return count, now - t0


BEFORE_COMMITS_PER_S: dict[str, tuple[float, float]] = {
    "memory": (26_300.0, 94_700.0),
    "sqlite": (3_380.0, 15_800.0),
    "sqlite-full": (156.0, 5_800.0),
}
"""Single-writer (commits/s wall, commits per CPU-second) on the code before issue 12
(commit b43cb0e: no lock, no base check, checks outside the transaction), same workload
(:func:`single_writer_commits`), measured 2026-12-01 on the shared 2-core dev machine
(load ~14): medians of 6 (wall) and 10 (CPU) runs, alternating with the new code."""


@dataclass(frozen=True)
class CommitRate:
    """Single-writer throughput.

    Attributes:
        per_s: commits per wall-clock second.
        per_cpu_s: commits per CPU-second of this process (robust on a shared machine).
    """

    per_s: float
    per_cpu_s: float


def _commit_rates(kind: str, n: int, synchronous: str) -> tuple[float, float]:
    om = OwnershipMap({}, {"req/*": "a"})
    last: dict[str, str] = {}
    recs = []
    for i in range(n):
        k = f"req/{i % 64}"
        p = last.get(k)
        r = Record.create(key=k, owner="a", seq=i + 1, content={"i": i},
                          parents=() if p is None else (p,))
        last[k] = r.id
        recs.append(r)
    with tempfile.TemporaryDirectory() as tmp:
        s: Store = (SQLiteStore(Path(tmp) / "a.sqlite", om, "a", synchronous=synchronous)
                    if kind == "sqlite" else MemoryStore(om, "a"))
        t0, c0 = time.perf_counter(), time.process_time()
        for r in recs:
            s.commit(r, writer="a")
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        s.close()
    return n / dt, n / max(dc, 1e-9)


def single_writer_commits(kind: str, *, n: int = 5000, synchronous: str = "NORMAL",
                          repeat: int = 3) -> CommitRate:
    """Measure one writer revising 64 keys, each commit its own transaction.

    Each version cites the key's previous one (the compare-and-set base). Medians of
    ``repeat`` runs (the machine is shared).

    Args:
        kind: ``memory`` or ``sqlite`` (WAL).
        n: number of commits per run.
        synchronous: SQLite ``synchronous`` pragma.
        repeat: runs (>= 1).
    """
    runs = [_commit_rates(kind, n, synchronous) for _ in range(max(1, repeat))]
    return CommitRate(statistics.median(r[0] for r in runs),
                      statistics.median(r[1] for r in runs))


@dataclass(frozen=True)
class CoreBench:
    """Everything ``icore bench core`` prints.

    Attributes:
        gates: gate cells.
        commits: single-writer commits/s: ``memory``, ``sqlite`` (NORMAL), ``sqlite-full``.
        contended: 8 writers on hot keys: threads on memory and SQLite, processes on one
            SQLite file.
    """

    gates: list[GateFigure]
    commits: dict[str, CommitRate]
    contended: list[ContentionFigure]


def run_core_bench(seconds: float = 1.0, *, writers: int = 8) -> CoreBench:
    """Run every gate cell, the single-writer commit test and the contended commit test.

    Gate cells: d in {1, 8}, depth in {1, 8}, both stores; the contended test runs
    ``writers`` writers.

    Args:
        seconds: measuring time per gate cell.
        writers: concurrent writers of the contended test.

    Raises:
        BadOption: ``seconds`` is not a finite number > 0 (checked before any cell runs).
    """
    check_positive_seconds("seconds", seconds)
    figs = [gate_throughput(kind, d, depth, seconds=seconds)
            for kind in ("memory", "sqlite") for d in (1, 8) for depth in (1, 8)]
    commits = {"memory": single_writer_commits("memory", n=20000),
               "sqlite": single_writer_commits("sqlite"),
               "sqlite-full": single_writer_commits("sqlite", n=2000, synchronous="FULL")}
    contended = [contended_commits(b, writers=writers, acks_per_writer=250)
                 for b in ("memory-threads", "sqlite-threads", "sqlite-processes")]
    return CoreBench(figs, commits, contended)
