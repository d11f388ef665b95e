"""Contended commits: several writers racing on the same keys of one store (issue 12).

Each writer loops: read the head of one of a few hot keys, create the next version citing
it (the owner's next sequence), commit; a lost race is a retryable
:class:`~icore.errors.CommitConflict` and the writer simply tries again. Writers are
threads on one store object or processes each opening the same SQLite file. The
acknowledged versions are returned so callers can check that every key's acknowledged
versions form one chain (:func:`icore.memory.conformance.check_chains`). Figures are
printed by ``icore bench core``; nothing here asserts a time.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from icore.errors import CommitConflict
from icore.memory import MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import Record, RecordId

OWNER = "w"
"""The one owner every writer writes as (contention on its keys and its sequence)."""

OWNERSHIP = OwnershipMap({}, {"hot/*": OWNER})
"""Ownership map of the contention workload."""

MAX_ATTEMPTS_PER_ACK = 200
"""Bound on attempts per wanted acknowledgement (keeps a starved writer's loop finite)."""


@dataclass(frozen=True)
class WriterLog:
    """What one writer did.

    Attributes:
        writer: writer index.
        acked: ids of the versions the store acknowledged as created, in order.
        attempts: commits tried.
        conflicts: retryable conflicts met (lost races).
        started: ``time.perf_counter()`` at the start (system-wide monotonic on Linux,
            so comparable across processes), in s.
        ended: ``time.perf_counter()`` at the end, in s.
    """

    writer: int
    acked: tuple[RecordId, ...]
    attempts: int
    conflicts: int
    started: float
    ended: float


@dataclass(frozen=True)
class ContentionFigure:
    """One contended run.

    Attributes:
        backend: ``memory-threads``, ``sqlite-threads`` or ``sqlite-processes``.
        writers: number of concurrent writers.
        keys: number of hot keys.
        commits: acknowledged commits in total.
        conflicts: retryable conflicts in total.
        seconds: wall time from the first writer's start to the last one's end, in s.
        logs: per-writer logs.
    """

    backend: str
    writers: int
    keys: int
    commits: int
    conflicts: int
    seconds: float
    logs: tuple[WriterLog, ...] = field(repr=False, default=())

    @property
    def commits_per_s(self) -> float:
        """Acknowledged commits per second."""
        return self.commits / self.seconds if self.seconds > 0 else 0.0


def _write_loop(store: Store, writer: int, keys: int, acks: int) -> WriterLog:
    rng = random.Random(writer)
    acked: list[RecordId] = []
    attempts = conflicts = 0
    t0 = time.perf_counter()
    while len(acked) < acks and attempts < acks * MAX_ATTEMPTS_PER_ACK:
        key = f"hot/{rng.randrange(keys)}"
        head = store.head(key)
        rec = Record.create(key=key, owner=OWNER, seq=store.next_seq(OWNER),
                            content={"w": writer, "n": attempts}, type="counter",
                            parents=[] if head is None else [head.record_id])
        attempts += 1
        try:
            if store.commit(rec, writer=OWNER).created:
                acked.append(rec.id)
        except CommitConflict:
            conflicts += 1
    return WriterLog(writer, tuple(acked), attempts, conflicts, t0, time.perf_counter())


def _process_main(argv: list[str]) -> None:
    """Writer process: ``python -m icore_lab.bench.micro._contention PATH WRITER KEYS ACKS``.

    Waits for a line on stdin (the start signal), prints its :class:`WriterLog` as JSON.
    """
    path, writer, keys, acks = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    store = SQLiteStore(path, OWNERSHIP, OWNER)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        log = _write_loop(store, writer, keys, acks)
    finally:
        store.close()
    print(json.dumps(dataclasses.asdict(log)), flush=True)


def _run_threads(make: Callable[[], Store], writers: int, keys: int, acks: int
                 ) -> list[WriterLog]:
    store = make()
    logs: list[WriterLog] = []
    barrier = threading.Barrier(writers + 1)
    lock = threading.Lock()

    def go(i: int) -> None:
        barrier.wait()
        log = _write_loop(store, i, keys, acks)
        with lock:
            logs.append(log)

    threads = [threading.Thread(target=go, args=(i,), daemon=True) for i in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    for t in threads:
        t.join()
    store.close()
    return logs


def _run_processes(path: Path, writers: int, keys: int, acks: int, timeout_s: float
                   ) -> list[WriterLog]:
    SQLiteStore(path, OWNERSHIP, OWNER).close()  # create the file and schema once
    cmd = [sys.executable, "-m", "icore_lab.bench.micro._contention", str(path)]
    procs = [subprocess.Popen([*cmd, str(i), str(keys), str(acks)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for i in range(writers)]
    logs: list[WriterLog] = []
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a contended writer process failed to start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise RuntimeError(f"a contended writer exited with {p.returncode}")
            d = json.loads(out.strip().splitlines()[-1])
            d["acked"] = tuple(d["acked"])
            logs.append(WriterLog(**d))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    return logs


def contended_commits(backend: str = "sqlite-processes", *, writers: int = 8, keys: int = 4,
                      acks_per_writer: int = 250, path: Path | None = None,
                      timeout_s: float = 600.0) -> ContentionFigure:
    """Run ``writers`` concurrent writers until each has ``acks_per_writer`` acknowledged commits.

    A writer also stops when it hits the attempt bound.

    Args:
        backend: ``memory-threads``, ``sqlite-threads`` or ``sqlite-processes``.
        writers: concurrent writers (threads or processes).
        keys: hot keys shared by all writers.
        acks_per_writer: acknowledged commits each writer aims for.
        path: the SQLite file (default: a temporary one, removed afterwards).
        timeout_s: bound on each writer process, in s.

    Returns:
        The :class:`ContentionFigure` (with per-writer logs).

    Raises:
        ValueError: an unknown backend or a count < 1.
        subprocess.TimeoutExpired: a writer process did not finish within ``timeout_s``.
        RuntimeError: a writer process failed.
    """
    if backend not in ("memory-threads", "sqlite-threads", "sqlite-processes"):
        raise ValueError(f"unknown contention backend {backend!r}")
    if min(writers, keys, acks_per_writer) < 1:
        raise ValueError("writers, keys and acks_per_writer must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        db = path or Path(tmp) / "hot.sqlite"
        if backend == "memory-threads":
            logs = _run_threads(lambda: MemoryStore(OWNERSHIP, OWNER), writers, keys,
                                acks_per_writer)
        elif backend == "sqlite-threads":
            logs = _run_threads(lambda: SQLiteStore(db, OWNERSHIP, OWNER), writers, keys,
                                acks_per_writer)
        else:
            logs = _run_processes(db, writers, keys, acks_per_writer, timeout_s)
    logs.sort(key=lambda w: w.writer)
    dt = max(w.ended for w in logs) - min(w.started for w in logs)
    return ContentionFigure(backend, writers, keys, sum(len(w.acked) for w in logs),
                            sum(w.conflicts for w in logs), dt, tuple(logs))


if __name__ == "__main__":
    _process_main(sys.argv[1:])
