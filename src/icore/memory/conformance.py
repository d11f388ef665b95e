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

import threading
from pathlib import Path

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
from icore.memory._base import Store
from icore.memory._chains import check_chains
from icore.memory._conformance_writers import (
    HOT_OWNER,
    HOT_OWNERSHIP,
    ConcurrentWriters,
    StoreWriter,
    Writer,
)
from icore.memory._ownership import OwnershipMap
from icore.records import Record, derive, frontier

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

    def test_lookup_refuses_an_id_that_is_not_a_str(self, tmp_path: Path) -> None:
        """``lookup`` of an id that is not a str is a typed error.

        A list, dict, bytes or None is refused with ``OwnershipError``, not taken as a
        miss or a raw ``TypeError``; a str id (present or not) is answered.
        """
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r = _rec()
        s.commit(r, writer="alice")
        for bad in ([r.id], {"id": r.id}, r.id.encode(), None):
            _raises(OwnershipError, s.lookup, bad)
        assert s.lookup(r.id) == r and s.lookup("0" * 64) is None

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
        """Every call after close raises StoreClosed; the gate's lookup finds nothing."""
        s = self.make_store(OWNERSHIP, "alice", tmp_path)
        r = _rec()
        s.commit(r, writer="alice")
        assert s.lookup(r.id) == r
        s.close()
        s.close()
        _raises(StoreClosed, s.commit, _rec(), writer="alice")
        _raises(StoreClosed, s.head, "req/a")
        assert s.lookup(r.id) is None

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


__all__ = [
    "HOT_OWNER",
    "HOT_OWNERSHIP",
    "OWNERSHIP",
    "ConcurrentWriters",
    "StoreConformance",
    "StoreWriter",
    "Writer",
    "check_chains",
]
