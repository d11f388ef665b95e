"""Conformance suite every store backend passes (style habit 11).

It checks the owner rules of planfence App. A as :meth:`icore.memory.Store.commit` states
them: writer = owner, increasing owner sequence, compare-and-set on the base (a stale or
missing base is a retryable :class:`~icore.errors.HeadConflict`, create-if-absent
included), atomicity under concurrent writers (threads racing on one store: exactly one
wins), and that a lineage-incomplete record is never visible to the gate.

Subclass :class:`StoreConformance` in a test module and implement ``make_store``;
pytest collects the ``test_*`` methods. Backends: memory, SQLite, and (``icore.net``)
a remote owner reached over a transport.

Example::

    class TestSQLite(StoreConformance):
        def make_store(self, ownership, agent, tmp_path):
            return SQLiteStore(tmp_path / f"{agent}.sqlite", ownership, agent)
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable, Mapping
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

from icore.errors import (
    CommitConflict,
    HeadConflict,
    MalformedRecord,
    MissingParent,
    OwnershipError,
    RecordIdMismatch,
    SequenceConflict,
    SequenceError,
    StoreClosed,
)
from icore.memory._base import FROM_PARENTS, ExpectedHead, Store
from icore.memory._ownership import OwnershipMap
from icore.records import Record, RecordId, derive, frontier

_PARENTS = object()
"""Marker for :meth:`StoreConformance._race`: commit with the default base."""

OWNERSHIP = OwnershipMap({"req/a": "alice", "req/b": "bob"}, {"plan/*": "alice"})


def _rec(key: str = "req/a", owner: str = "alice", seq: int = 1, v: int = 0,
         parents: tuple[str, ...] = ()) -> Record:
    return Record.create(key=key, owner=owner, seq=seq, content={"v": v}, parents=parents,
                         type="requirement")


def _raises(exc: type[BaseException], fn: object, *a: object, **kw: object) -> BaseException:
    try:
        fn(*a, **kw)  # type: ignore[operator]
    except exc as e:
        return e
    raise AssertionError(f"expected {exc.__name__}")


def check_chains(store: Store, acked: Iterable[RecordId],
                 replaced: Mapping[RecordId, RecordId | None] | None = None) -> list[str]:
    """Check the one-chain invariant of concurrent writers (planfence App. A).

    For each key, the acknowledged versions must form one chain: walking back from the
    key's head through each version's predecessor - the head it replaced: its parent
    that is a version of the same key, or the expected head it was committed with -
    visits every acknowledged version of the key exactly once, with owner sequences
    strictly decreasing, and every acknowledged version is readable.

    Args:
        store: the store (e.g. reopened after a restart).
        acked: ids of every version the store acknowledged as created.
        replaced: for versions committed with an explicit ``expected_head``: id -> that
            head (None for a creation).

    Returns:
        Problems found (empty when the invariant holds).
    """
    problems: list[str] = []
    by_key: dict[str, set[RecordId]] = {}
    for rid in acked:
        rec = store.get(rid)
        if rec is None:
            problems.append(f"acknowledged {rid[:12]} is not readable")
            continue
        by_key.setdefault(rec.key, set()).add(rid)
    for key, ids in sorted(by_key.items()):
        head = store.head(key)
        chain: list[Record] = []
        cur: RecordId | None = None if head is None else head.record_id
        while cur is not None:
            rec = store.get(cur)
            if rec is None:
                problems.append(f"{key}: chain record {cur[:12]} is not readable")
                break
            if chain and rec.seq >= chain[-1].seq:
                problems.append(f"{key}: sequence does not increase along the chain "
                                f"({rec.seq} then {chain[-1].seq})")
            chain.append(rec)
            if replaced is not None and rec.id in replaced:
                cur = replaced[rec.id]
                continue
            if rec.supersedes is not None:
                cur = rec.supersedes
                continue
            same = [p for p in rec.parents if (q := store.get(p)) is not None and q.key == key]
            if len(same) > 1:
                problems.append(f"{key}: {rec.id[:12]} cites {len(same)} versions of its key")
            cur = same[0] if same else None
        on_chain = {r.id for r in chain}
        if ids - on_chain:
            problems.append(f"{key}: {len(ids - on_chain)} acknowledged versions are not on "
                            "the key's chain (a lost update)")
        if len(on_chain) != len(chain):
            problems.append(f"{key}: the chain repeats a version")
    return problems


class StoreConformance:
    """The store contract (planfence App. A owner rules, design.md 3.1)."""

    def make_store(self, ownership: OwnershipMap, agent: str | None, tmp_path: Path) -> Store:
        """Return a new empty store for ``agent`` (None: a central store)."""
        raise NotImplementedError

    def test_commit_moves_head(self, tmp_path: Path) -> None:
        """A commit by the owner with a larger sequence becomes the head."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r1 = _rec(seq=1)
        r2 = _rec(seq=2, v=1, parents=(r1.id,))
        assert s.commit(r1, writer="alice").created
        assert s.head("req/a") is not None and s.head("req/a").record_id == r1.id  # type: ignore[union-attr]
        s.commit(r2, writer="alice")
        head = s.head("req/a")
        assert head is not None and head.record_id == r2.id and head.seq == 2
        assert s.get(r1.id) == r1 and s.get(r2.id) == r2
        assert s.owner_seq("alice") == 2 and s.next_seq() == 3

    def test_writer_must_be_owner(self, tmp_path: Path) -> None:
        """Only o(x) may write x; a record naming another owner is refused."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        e = _raises(OwnershipError, s.commit, _rec(), writer="mallory")
        assert isinstance(e, OwnershipError) and e.fields["writer"] == "mallory"
        _raises(OwnershipError, s.commit, _rec(owner="bob"), writer="bob")
        _raises(OwnershipError, s.commit, _rec(key="req/unknown"), writer="alice")
        assert s.head("req/a") is None

    def test_store_hosts_only_its_agent(self, tmp_path: Path) -> None:
        """An agent's store refuses commits for another owner's keys."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        _raises(OwnershipError, s.commit, _rec(key="req/b", owner="bob"), writer="bob")

    def test_central_store_accepts_every_owner(self, tmp_path: Path) -> None:
        """A central store serializes commits from all owners (centralized lineage)."""
        s = self.make_store(OWNERSHIP, None, tmp_path)
        s.commit(_rec(), writer="alice")
        s.commit(_rec(key="req/b", owner="bob"), writer="bob")
        assert sorted(s.head_keys()) == ["req/a", "req/b"]

    def test_sequence_must_increase(self, tmp_path: Path) -> None:
        """A smaller sequence is refused and changes nothing."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r5 = _rec(seq=5)
        s.commit(r5, writer="alice")
        e = _raises(SequenceError, s.commit, _rec(seq=3, v=9, parents=(r5.id,)),
                    writer="alice")
        assert isinstance(e, SequenceError) and e.retryable
        head = s.head("req/a")
        assert head is not None and head.seq == 5

    def test_sequence_is_per_owner_across_keys(self, tmp_path: Path) -> None:
        """The owner sequence is one counter over all of the owner's keys."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        s.commit(_rec(seq=2), writer="alice")
        _raises(SequenceError, s.commit, _rec(key="plan/x", seq=1), writer="alice")
        s.commit(_rec(key="plan/x", seq=3), writer="alice")

    def test_duplicate_sequence_is_conflict(self, tmp_path: Path) -> None:
        """The same sequence with another id is a conflict; the first record stays."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        first = _rec(seq=1, v=1)
        s.commit(first, writer="alice")
        e = _raises(SequenceConflict, s.commit, _rec(seq=1, v=2, parents=(first.id,)),
                    writer="alice")
        assert isinstance(e, SequenceConflict) and e.fields["existing"] == first.id
        head = s.head("req/a")
        assert head is not None and head.record_id == first.id

    def test_identical_commit_is_idempotent(self, tmp_path: Path) -> None:
        """Re-committing the identical record (a retried write) is a no-op."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r = _rec(seq=1)
        s.commit(r, writer="alice")
        again = s.commit(r, writer="alice")
        assert not again.created
        s.commit(_rec(seq=2, v=1, parents=(r.id,)), writer="alice")
        assert not s.commit(r, writer="alice").created
        assert not s.commit(r, writer="alice", expected_head=None).created
        head = s.head("req/a")
        assert head is not None and head.seq == 2

    def test_tampered_record_rejected(self, tmp_path: Path) -> None:
        """A record whose id or content does not hash is refused."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r = _rec()
        forged = Record(r.key, r.owner, r.seq, r.parents, r.type, {"v": 666},
                        r.content_address, r.size, r.schema, r.id)
        _raises(RecordIdMismatch, s.commit, forged, writer="alice")
        bad_id = Record(r.key, r.owner, r.seq, r.parents, r.type, r.content,
                        r.content_address, r.size, r.schema, "0" * 64)
        _raises(RecordIdMismatch, s.commit, bad_id, writer="alice")
        assert s.get(r.id) is None and s.head("req/a") is None

    def test_envelope_only_commit_rejected(self, tmp_path: Path) -> None:
        """A commit must carry content."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        _raises(OwnershipError, s.commit, _rec().without_content(), writer="alice")

    def test_bad_input_loses_nothing(self, tmp_path: Path) -> None:
        """After a run of refused writes every committed record and head is intact."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        good = [_rec(seq=1, v=1)]
        for i in (2, 3):
            good.append(_rec(seq=i, v=i, parents=(good[-1].id,)))
        for r in good:
            s.commit(r, writer="alice")
        for bad in (lambda: s.commit(_rec(seq=2, v=7), writer="alice"),
                    lambda: s.commit(_rec(seq=4, v=7, parents=(good[0].id,)), writer="alice"),
                    lambda: s.commit(_rec(seq=4, v=7), writer="alice", expected_head=None),
                    lambda: s.commit(_rec(seq=9), writer="bob"),
                    lambda: Record.create(key="", owner="alice", seq=1, content=1)):
            try:
                bad()
            except (CommitConflict, OwnershipError, MalformedRecord):
                pass
        assert all(s.get(r.id) == r for r in good)
        head = s.head("req/a")
        assert head is not None and head.record_id == good[-1].id

    def test_unknown_parents_are_lineage_incomplete(self, tmp_path: Path) -> None:
        """A record with unknown parents is stored as incomplete and proves no lineage."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        ghost = _rec(key="req/b", owner="bob", seq=1)
        plan = derive(key="plan/p", owner="alice", seq=1, content={}, inputs=[ghost])
        res = s.commit(plan, writer="alice")
        assert res.created and not res.lineage_complete
        assert s.get(plan.id) == plan and not s.is_complete(plan.id)
        assert s.lookup(plan.id) is None  # never authorizes: the gate cannot see it
        _raises(MissingParent, frontier, [plan.id], {"req/b"}, s.lookup)
        s.install(ghost)
        assert s.is_complete(plan.id) and s.lookup(plan.id) == plan
        assert frontier([plan.id], {"req/b"}, s.lookup).versions == {"req/b": ghost.id}

    def test_install_replica_cache(self, tmp_path: Path) -> None:
        """Other owners' records go to the replica cache and move the installed head only."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        b1 = _rec(key="req/b", owner="bob", seq=1)
        b2 = _rec(key="req/b", owner="bob", seq=2, v=2)
        assert s.install(b2)
        assert not s.install(b1)  # older: installed head stays
        inst = s.installed_head("req/b")
        assert inst is not None and inst.record_id == b2.id
        assert s.head("req/b") is None
        _raises(OwnershipError, s.install, _rec(key="req/b", owner="mallory"))

    def test_envelope_then_content(self, tmp_path: Path) -> None:
        """An announced envelope can be completed with verified content later."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        b = _rec(key="req/b", owner="bob", seq=1)
        s.install(b.without_content())
        got = s.get(b.id)
        assert got is not None and not got.has_content
        s.install(b)
        got = s.get(b.id)
        assert got is not None and got.content == {"v": 0}

    def test_heads_inline_changed_small_records(self, tmp_path: Path) -> None:
        """A head reply inlines a changed record when asked and it is small."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r1 = _rec(seq=1)
        r2 = _rec(seq=2, v=1, parents=(r1.id,))
        s.commit(r1, writer="alice")
        s.commit(r2, writer="alice")
        plain = s.heads(["req/a", "req/zzz"])
        assert list(plain) == ["req/a"] and plain["req/a"].record is None
        inl = s.heads(["req/a"], known={"req/a": r1.id}, inline_max_bytes=1024)
        assert inl["req/a"].record == r2
        same = s.heads(["req/a"], known={"req/a": r2.id}, inline_max_bytes=1024)
        assert same["req/a"].record is None

    def test_closed_store_refuses(self, tmp_path: Path) -> None:
        """Every call after close raises StoreClosed; close is idempotent."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        s.close()
        s.close()
        _raises(StoreClosed, s.commit, _rec(), writer="alice")
        _raises(StoreClosed, s.head, "req/a")

    # -- compare-and-set on the base, atomicity (issue 12) ----------------------------
    def test_lost_update_refused(self, tmp_path: Path) -> None:
        """A version citing an older version (not the head) is refused; the head stays."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r1 = _rec(seq=1)
        r2 = _rec(seq=2, v=2, parents=(r1.id,))
        s.commit(r1, writer="alice")
        s.commit(r2, writer="alice")
        stale = _rec(seq=3, v=3, parents=(r1.id,))
        e = _raises(HeadConflict, s.commit, stale, writer="alice")
        assert isinstance(e, HeadConflict) and isinstance(e, CommitConflict) and e.retryable
        assert e.fields["key"] == "req/a" and e.fields["expected"] == r1.id
        assert e.fields["current"] == r2.id
        head = s.head("req/a")
        assert head is not None and head.record_id == r2.id and s.get(stale.id) is None
        assert s.owner_seq("alice") == 2

    def test_create_if_absent(self, tmp_path: Path) -> None:
        """Two creations of one key: the second is a conflict naming the first."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        a, b = _rec(seq=1, v=1), _rec(seq=2, v=2)
        s.commit(a, writer="alice")
        e = _raises(HeadConflict, s.commit, b, writer="alice")
        assert e.fields["expected"] is None and e.fields["current"] == a.id  # type: ignore[attr-defined]
        _raises(HeadConflict, s.commit, b, writer="alice", expected_head=None)
        assert s.get(b.id) is None

    def test_explicit_expected_head(self, tmp_path: Path) -> None:
        """A re-derived version may name the head it replaces instead of citing it.

        Only that exact head is accepted.
        """
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r1 = _rec(seq=1)
        s.commit(r1, writer="alice", expected_head=None)
        fresh = _rec(seq=2, v=2)  # no parent of its own key
        e = _raises(HeadConflict, s.commit, fresh, writer="alice", expected_head="0" * 64)
        assert e.fields["expected"] == "0" * 64 and e.fields["current"] == r1.id  # type: ignore[attr-defined]
        _raises(HeadConflict, s.commit, fresh, writer="alice", expected_head=None)
        assert s.commit(fresh, writer="alice", expected_head=r1.id).created
        head = s.head("req/a")
        assert head is not None and head.record_id == fresh.id
        _raises(HeadConflict, s.commit, _rec(key="plan/x", seq=3), writer="alice",
                expected_head=r1.id)
        _raises(MalformedRecord, s.commit, _rec(seq=4), writer="alice",
                expected_head="not-an-id")

    def _race(self, s: Store, records: list[Record], expected: list[object]) -> list[object]:
        barrier = threading.Barrier(len(records))
        out: list[object] = [None] * len(records)

        def go(i: int) -> None:
            barrier.wait()
            try:
                kw = {} if expected[i] is _PARENTS else {"expected_head": expected[i]}
                out[i] = s.commit(records[i], writer="alice", **kw)  # type: ignore[arg-type]
            except CommitConflict as exc:
                out[i] = exc

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(records))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return out

    def test_concurrent_same_base_one_winner(self, tmp_path: Path) -> None:
        """Threads commit the next version from one base: exactly one wins (20 rounds).

        The others get a retryable conflict; the head is the winner's.
        """
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        base = _rec(seq=1)
        s.commit(base, writer="alice")
        for rnd in range(20):
            seq = s.next_seq()
            recs = [_rec(seq=seq + (i % 2), v=100 * rnd + i, parents=(base.id,))
                    for i in range(4)]
            out = self._race(s, recs, [_PARENTS] * 4)
            won = [r for r, o in zip(recs, out, strict=True) if not isinstance(o, Exception)]
            assert len(won) == 1, out
            head = s.head("req/a")
            assert head is not None and head.record_id == won[0].id
            base = won[0]

    def test_concurrent_create_one_winner(self, tmp_path: Path) -> None:
        """Create-if-absent raced by threads: exactly one creator is acknowledged."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        for rnd in range(10):
            key = f"plan/c{rnd}"
            seq = s.next_seq()
            recs = [_rec(key=key, seq=seq + i, v=i) for i in range(3)]
            out = self._race(s, recs, [None] * 3)
            assert sum(not isinstance(o, Exception) for o in out) == 1, out



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
