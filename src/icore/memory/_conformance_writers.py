"""The concurrent-writers conformance machine (issue 12; part of :mod:`icore.memory.conformance`).

A hypothesis state machine racing writers of one backend on one owner's keys; every
acknowledged commit must survive and the chains must stay linear
(:func:`icore.memory.conformance.check_chains`). Import it from
``icore.memory.conformance``.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Protocol

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from icore.errors import CommitConflict
from icore.memory._base import FROM_PARENTS, ExpectedHead, Store
from icore.memory._chains import check_chains
from icore.memory._ownership import OwnershipMap
from icore.records import Record


# -- concurrent writers: the stateful conformance machine (issue 12) --------------------
class Writer(Protocol):
    """One concurrent writer of a backend under test (a thread, a process, a client).

    ``arm`` prepares one commit without sending it; ``fire`` runs it and returns
    ``"created"``, ``"exists"`` (an idempotent re-commit) or ``"conflict"`` (a
    :class:`~icore.errors.CommitConflict`, or its wire form).
    """

    def arm(self, record: Record, expected_head: ExpectedHead) -> None:
        """Prepare the commit of ``record`` against ``expected_head``; send nothing yet.

        The machine arms every writer first, then fires them together behind a barrier,
        so the commits race for real.
        """
        ...

    def fire(self) -> str:
        """Send the armed commit; return ``"created"``, ``"exists"`` or ``"conflict"``.

        A :class:`~icore.errors.CommitConflict` (or its wire form) is ``"conflict"``; any
        other error propagates and fails the machine.
        """
        ...


HOT_OWNER = "w"
"""The owner every concurrent writer writes as."""

HOT_OWNERSHIP = OwnershipMap({}, {"hot/*": HOT_OWNER})
"""Ownership map of the concurrent-writers machine."""

_HOT_KEYS = ("hot/0", "hot/1")


class ConcurrentWriters(RuleBasedStateMachine):
    """Stateful conformance of concurrent writers (planfence App. A owner rules).

    Rules race several writers - each a thread, process or client of a real service, as
    the subclass builds them - committing the next version of a key from the same base
    (citing it, or naming it as the expected head), from a stale base, as a creation, or
    with one owner sequence on two keys; another rule restarts the backend. Invariant:
    for each key the acknowledged versions form one chain (sequences strictly increase,
    each cites or names the previous head), the head is the last acknowledged version,
    the owner sequence never goes back, and every acknowledged write is readable after a
    restart. Subclass, implement :meth:`start`, :meth:`stop` and :meth:`reader`, and
    collect ``MyMachine.TestCase``.
    """

    WRITERS = 3

    def start(self) -> list[Writer]:
        """Open the backend (again after :meth:`stop`); return ``WRITERS`` writers."""
        raise NotImplementedError

    def stop(self) -> None:
        """Close every writer and the backend (durable state stays)."""
        raise NotImplementedError

    def reader(self) -> Store:
        """A store to read the backend's committed state from (after :meth:`start`)."""
        raise NotImplementedError

    durable = True
    """False for backends that lose everything on a restart (the restart rule is off)."""

    @initialize()
    def _init(self) -> None:
        self.acked: list[Record] = []
        self.replaced: dict[str, str | None] = {}
        self.writers = self.start()
        self.n = 0

    def _head(self, key: str) -> Record | None:
        return next((r for r in reversed(self.acked) if r.key == key), None)

    def _fire_all(self, jobs: list[tuple[Record, ExpectedHead]]) -> list[str]:
        for w, (rec, exp) in zip(self.writers, jobs, strict=False):
            w.arm(rec, exp)
        out: list[str] = ["?"] * len(jobs)
        barrier = threading.Barrier(len(jobs))

        def go(i: int) -> None:
            barrier.wait()
            out[i] = self.writers[i].fire()

        ts = [threading.Thread(target=go, args=(i,)) for i in range(len(jobs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        return out

    def _next_seq(self) -> int:
        return 1 + max((r.seq for r in self.acked), default=0)

    @rule(key=st.sampled_from(_HOT_KEYS),
          modes=st.lists(st.sampled_from(["parents", "expected", "stale", "create"]),
                         min_size=2, max_size=3),
          same_seq=st.booleans())
    def race_one_key(self, key: str, modes: list[str], same_seq: bool) -> None:
        """Writers race on one key from the same observed head."""
        modes = modes[: self.WRITERS]
        head = self._head(key)
        older = [r for r in self.acked if r.key == key][:-1]
        seq0 = self._next_seq()
        jobs: list[tuple[Record, ExpectedHead]] = []
        base_ok: list[bool] = []
        for i, mode in enumerate(modes):
            self.n += 1
            parents: list[str] = []
            exp: ExpectedHead = FROM_PARENTS
            ok = True
            if mode == "parents" and head is not None:
                parents = [head.id]
            elif mode == "expected":
                exp = None if head is None else head.id
            elif mode == "stale":
                if older:
                    parents, ok = [older[-1].id], False
                elif head is not None:
                    parents = [head.id]
            elif mode == "create":
                exp, ok = None, head is None
            rec = Record.create(key=key, owner=HOT_OWNER, seq=seq0 if same_seq else seq0 + i,
                                content={"n": self.n}, parents=parents, type="counter")
            jobs.append((rec, exp))
            base_ok.append(ok)
        out = self._fire_all(jobs)
        won = [i for i, o in enumerate(out) if o == "created"]
        assert all(o in ("created", "conflict") for o in out), out
        assert len(won) <= 1, f"several writers acknowledged from one base: {out}"
        assert all(base_ok[i] for i in won), f"a stale base was acknowledged: {modes} {out}"
        if any(base_ok):
            assert len(won) == 1, f"no writer with the current base won: {modes} {out}"
        if won:
            rec, exp = jobs[won[0]]
            self.acked.append(rec)
            if exp is not FROM_PARENTS:
                self.replaced[rec.id] = exp

    @rule()
    def race_two_keys_one_seq(self) -> None:
        """Two keys, one owner sequence: exactly one of the two commits is acknowledged."""
        seq = self._next_seq()
        jobs: list[tuple[Record, ExpectedHead]] = []
        for key in _HOT_KEYS:
            self.n += 1
            head = self._head(key)
            jobs.append((Record.create(key=key, owner=HOT_OWNER, seq=seq,
                                       content={"n": self.n}, type="counter",
                                       parents=[] if head is None else [head.id]),
                         FROM_PARENTS))
        out = self._fire_all(jobs)
        won = [i for i, o in enumerate(out) if o == "created"]
        assert len(won) == 1, out
        self.acked.append(jobs[won[0]][0])

    @precondition(lambda self: self.durable)
    @rule()
    def restart(self) -> None:
        """Close the backend and open it again."""
        self.stop()
        self.writers = self.start()

    @invariant()
    def one_chain(self) -> None:
        """Acknowledged versions form one chain per key and are all readable."""
        if not hasattr(self, "acked"):
            return
        r = self.reader()
        problems = check_chains(r, [x.id for x in self.acked], self.replaced)
        assert not problems, problems
        for key in _HOT_KEYS:
            last = self._head(key)
            head = r.head(key)
            assert (head.record_id if head else None) == (last.id if last else None)
        assert r.owner_seq(HOT_OWNER) == max((x.seq for x in self.acked), default=0)

    def scratch(self) -> Path:
        """A folder for the backend's files, kept across restarts, removed at teardown."""
        if not hasattr(self, "_tmp"):
            self._tmp = tempfile.TemporaryDirectory()
        return Path(self._tmp.name)

    def teardown(self) -> None:
        """Stop the writers and the backend if they run, then remove :meth:`scratch`."""
        if hasattr(self, "writers"):
            self.stop()
        if hasattr(self, "_tmp"):
            self._tmp.cleanup()


class StoreWriter:
    """A :class:`Writer` committing to a store object from the calling thread."""

    def __init__(self, store: Store) -> None:
        """Make a writer committing to ``store``, with no job armed."""
        self.store = store
        self._job: tuple[Record, ExpectedHead] | None = None

    def arm(self, record: Record, expected_head: ExpectedHead) -> None:
        """Keep ``record`` and ``expected_head`` for the next :meth:`fire`."""
        self._job = (record, expected_head)

    def fire(self) -> str:
        """Commit the armed record as ``HOT_OWNER``; the outcome as :meth:`Writer.fire`."""
        assert self._job is not None
        rec, exp = self._job
        try:
            res = self.store.commit(rec, writer=HOT_OWNER, expected_head=exp)
        except CommitConflict:
            return "conflict"
        return "created" if res.created else "exists"
