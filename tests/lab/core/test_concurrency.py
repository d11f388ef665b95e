"""Concurrent writers (issue 12): threads over MemoryStore and SQLiteStore, several
processes on one SQLite file; the stateful conformance machine and a bounded stress run.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from icore.errors import CommitConflict, HeadConflict
from icore.memory import (
    FROM_PARENTS,
    CommitResult,
    ExpectedHead,
    MemoryStore,
    SQLiteStore,
    Store,
)
from icore.memory.conformance import (
    HOT_OWNERSHIP,
    ConcurrentWriters,
    StoreWriter,
    Writer,
    check_chains,
)
from icore.records import Record, encode_record
from icore_lab.bench.micro._contention import OWNER, OWNERSHIP, contended_commits

WRITER_PROC = Path(__file__).with_name("_writer_proc.py")
STATEFUL = settings(max_examples=15, stateful_step_count=12, deadline=None)


class MemoryThreads(ConcurrentWriters):
    """Threads sharing one MemoryStore."""

    durable = False

    def start(self) -> list[Writer]:
        self.store = MemoryStore(HOT_OWNERSHIP, "w")
        return [StoreWriter(self.store) for _ in range(self.WRITERS)]

    def stop(self) -> None:
        self.store.close()

    def reader(self) -> Store:
        return self.store


class SQLiteThreads(ConcurrentWriters):
    """Threads on one SQLite file: two share one store object (its lock), the others
    have their own connection (the file's write transaction)."""

    def start(self) -> list[Writer]:
        db = self.scratch() / "w.sqlite"
        self.stores = [SQLiteStore(db, HOT_OWNERSHIP, "w") for _ in range(self.WRITERS - 1)]
        return [StoreWriter(self.stores[i % len(self.stores)]) for i in range(self.WRITERS)]

    def stop(self) -> None:
        for s in self.stores:
            s.close()

    def reader(self) -> Store:
        return self.stores[0]

class ProcWriter:
    """A writer process (``_writer_proc.py``) with its own SQLiteStore on the file."""

    def __init__(self, db: Path) -> None:
        self.p = subprocess.Popen([sys.executable, str(WRITER_PROC), str(db)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._read() == "ready"

    def _read(self) -> str:
        assert self.p.stdout is not None
        return self.p.stdout.readline().strip()

    def _send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def arm(self, record: Record, expected_head: ExpectedHead) -> None:
        exp = "parents" if expected_head is FROM_PARENTS else expected_head
        self._send(json.dumps({"arm": base64.b64encode(encode_record(record)).decode(),
                               "expected": exp}))
        assert self._read() == "armed"

    def fire(self) -> str:
        self._send("go")
        out = json.loads(self._read())
        if "conflict" in out:
            return "conflict"
        return "created" if out["created"] else "exists"

    def close(self) -> None:
        try:
            self._send("quit")
            self.p.communicate(timeout=10)  # closes the pipes
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.communicate(timeout=10)


class SQLiteProcesses(ConcurrentWriters):
    """Writer processes on one SQLite file; the reader is this process's own store."""

    def start(self) -> list[Writer]:
        db = self.scratch() / "w.sqlite"
        self.store = SQLiteStore(db, HOT_OWNERSHIP, "w")
        self.procs = [ProcWriter(db) for _ in range(self.WRITERS)]
        return list(self.procs)

    def stop(self) -> None:
        for p in self.procs:
            p.close()
        self.store.close()

    def reader(self) -> Store:
        return self.store

TestMemoryThreads = MemoryThreads.TestCase
TestMemoryThreads.settings = STATEFUL
TestSQLiteThreads = SQLiteThreads.TestCase
TestSQLiteThreads.settings = STATEFUL
TestSQLiteProcesses = SQLiteProcesses.TestCase
TestSQLiteProcesses.settings = settings(max_examples=4, stateful_step_count=8,
                                        deadline=None)


@pytest.mark.parametrize("backend", ["memory-threads", "sqlite-threads"])
def test_eight_threads_append_without_duplicates(backend: str) -> None:
    """8 threads appending to one store: no sequence acknowledged twice, one chain per
    key (main acknowledged 73-85 duplicates)."""
    fig = contended_commits(backend, writers=8, keys=2, acks_per_writer=60)
    acked = [rid for w in fig.logs for rid in w.acked]
    assert fig.commits == 8 * 60 and len(set(acked)) == len(acked)


def _store(kind: str, tmp: Path) -> Store:
    if kind == "memory":
        return MemoryStore(HOT_OWNERSHIP, "w")
    return SQLiteStore(tmp / "w.sqlite", HOT_OWNERSHIP, "w")


def _both(fns: list[Callable[[], object]]) -> list[object]:
    out: list[object] = [None] * len(fns)

    def go(i: int) -> None:
        try:
            out[i] = fns[i]()
        except CommitConflict as exc:
            out[i] = exc

    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_create_if_absent_with_a_slow_step(kind: str, tmp_path: Path) -> None:
    """Two creators each see no head, take 20 ms, then create: exactly one is
    acknowledged (main: both, in 58 of 60 trials)."""
    s = _store(kind, tmp_path)
    for trial in range(5):
        key = f"hot/c{trial}"

        def create(i: int, key: str = key) -> object:
            seen = s.head(key)
            time.sleep(0.02)
            rec = Record.create(key=key, owner="w", seq=s.next_seq("w") + i, content=i)
            return s.commit(rec, writer="w",
                            expected_head=None if seen is None else seen.record_id)

        out = _both([lambda: create(0), lambda: create(1)])
        assert sum(isinstance(o, CommitResult) for o in out) == 1, out
        assert all(isinstance(o, (CommitResult, HeadConflict, CommitConflict)) for o in out)
    s.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_next_two_versions_from_one_head(kind: str, tmp_path: Path) -> None:
    """Versions n+1 and n+2 written concurrently from head n: one is accepted and the
    head is it (main: both accepted in 270 of 300, the head on the lower sequence)."""
    s = _store(kind, tmp_path)
    head = Record.create(key="hot/x", owner="w", seq=1, content=0)
    s.commit(head, writer="w")
    for _ in range(30):
        n = head.seq
        a, b = (Record.create(key="hot/x", owner="w", seq=n + d, content=d, parents=[head.id])
                for d in (1, 2))
        out = _both([lambda a=a: s.commit(a, writer="w"), lambda b=b: s.commit(b, writer="w")])
        won = [r for r, o in zip((a, b), out, strict=True) if isinstance(o, CommitResult)]
        assert len(won) == 1, out
        h = s.head("hot/x")
        assert h is not None and h.record_id == won[0].id and s.owner_seq("w") == won[0].seq
        head = won[0]
    s.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_multiprocess_stress_ten_thousand_commits(tmp_path: Path) -> None:
    """Bounded stress run: 8 processes on one SQLite file, 10,000 acknowledged contended
    commits on 4 hot keys; every acknowledged version is on its key's one chain, no
    sequence is acknowledged twice, and the owner sequence ends at the largest one."""
    db = tmp_path / "hot.sqlite"
    fig = contended_commits("sqlite-processes", writers=8, keys=4, acks_per_writer=1250,
                            path=db, timeout_s=240)
    acked = [rid for w in fig.logs for rid in w.acked]
    assert fig.commits == len(acked) == 10_000
    with SQLiteStore(db, OWNERSHIP, OWNER) as s:
        assert check_chains(s, acked) == []
        seqs = [r.seq for r in s.fetch(acked)]
        assert len(set(seqs)) == len(seqs) == 10_000
        assert s.owner_seq(OWNER) == max(seqs)
        assert s.record_count() == 10_000  # nothing refused was written
