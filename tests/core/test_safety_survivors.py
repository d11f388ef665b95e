"""Tests that kill the hand mutations of issue 30 that survived in memory/ and fence/."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from icore.fence import (
    GateContext,
    GateDecision,
    GateRun,
    HeadQueries,
    Outcome,
    Policy,
    Reason,
    TeamContext,
    ThreadedOwners,
    make_validator,
)
from icore.memory import HeadEntry, HeadReply, LocalOwners, MemoryStore, OwnershipMap, SQLiteStore
from icore.records import Record, derive

OM = OwnershipMap.from_mapping({"req/a": "alice", "req/b": "bob", "plan/*": "executor"})


@pytest.mark.parametrize("sync", ["NORMAL", "FULL"])
def test_the_sqlite_store_syncs_as_asked(tmp_path: Path, sync: str) -> None:
    """memory/_sqlite.py: WAL plus the ``synchronous`` pragma asked for (never OFF)."""
    store = SQLiteStore(tmp_path / "s.sqlite", OM, "alice", synchronous=sync)
    try:
        # the pragma is per connection: read the store's own (1 = NORMAL, 2 = FULL)
        level = store._db.execute("PRAGMA synchronous").fetchone()[0]
        assert level == {"NORMAL": 1, "FULL": 2}[sync]
        mode = sqlite3.connect(tmp_path / "s.sqlite").execute("PRAGMA journal_mode")
        assert mode.fetchone()[0] == "wal"
    finally:
        store.close()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore(tmp_path / "t.sqlite", OM, "alice", synchronous="OFF")


def _run() -> tuple[GateRun, HeadQueries, dict[str, Record]]:
    a = Record.create(key="req/a", owner="alice", seq=1, content={})
    b = Record.create(key="req/b", owner="bob", seq=1, content={})
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[a, b])
    recs = {r.id: r for r in (a, b, plan)}
    run = GateRun(action="book", roots=(plan.id,), deps=frozenset({"req/a", "req/b"}),
                  lookup=recs.get, ownership=OM)
    step = run.start()
    assert isinstance(step, HeadQueries)
    return run, step, {r.key: r for r in (a, b)}


def _reply(owner: str, rec: Record) -> HeadReply:
    return HeadReply(owner, {rec.key: HeadEntry(rec.key, rec.id, rec.seq)})


def test_a_missing_owner_reply_blocks() -> None:
    """fence/_gate.py on_heads: an owner that sent nothing blocks (never skipped)."""
    run, step, recs = _run()
    assert set(step.per_owner) == {"alice", "bob"}
    d = run.on_heads({"alice": _reply("alice", recs["req/a"])})
    assert d.outcome is Outcome.BLOCKED and d.reason is Reason.OWNER_UNAVAILABLE
    assert "bob" in d.detail
    run2, _, _ = _run()
    ok = run2.on_heads({o: _reply(o, recs[k]) for o, k in (("alice", "req/a"),
                                                           ("bob", "req/b"))})
    assert ok.outcome is Outcome.AUTHORIZED


@pytest.mark.parametrize(("n", "read"), [(1, 1), (2, 1), (3, 2), (5, 3)])
def test_the_majority_reads_floor_n_half_plus_one(n: int, read: int) -> None:
    """fence/_policies.py: with the executor's own replica, floor(N/2) + 1 of N views."""
    ex = MemoryStore(OM, "executor")
    ctx = GateContext(lookup=ex.lookup, ownership=OM, owners=ThreadedOwners(LocalOwners({})),
                      policy=Policy.MAJORITY_REPLICA.value)
    replicas = tuple(f"r{i}" for i in range(n))
    v = make_validator(Policy.MAJORITY_REPLICA, ctx, TeamContext(install=ex,
                                                                 replicas=replicas))
    quorum = v.context.owners
    assert quorum.remote == list(replicas[:read])
    total = n + 1  # the remote views and the executor's own
    assert len(quorum.remote) + 1 == total // 2 + 1
    full = make_validator(Policy.ALL_REPLICA, ctx, TeamContext(install=ex, replicas=replicas))
    assert full.context.owners.remote == list(replicas)


# ------------------------------------------------------------------ records (make mutation)
def test_a_deeper_version_on_a_derivation_path_is_history_not_a_conflict() -> None:
    """records/_lineage.py frontier: req v2 derives from a note that derives from req v1;
    the plan's boundary is v2, and v1 below it is its history (the path's bounded keys
    grow with each boundary met)."""
    from icore.records import frontier

    r1 = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    note = derive(key="note/a", owner="alice", seq=2, content={}, inputs=[r1])
    r2 = derive(key="req/a", owner="alice", seq=3, content={"v": 2}, inputs=[note])
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[r2])
    recs = {r.id: r for r in (r1, note, r2, plan)}
    fr = frontier([plan.id], ["req/a"], recs.get)
    assert fr.versions == {"req/a": r2.id}
    fr2 = frontier([plan.id], ["req/a", "note/a"], recs.get)
    assert fr2.versions == {"req/a": r2.id, "note/a": note.id}


def test_a_record_citing_itself_is_a_cycle() -> None:
    """records/_record.py check_envelope: a parent equal to the record's own id."""
    from icore.errors import MalformedRecord

    r = Record.create(key="req/a", owner="alice", seq=1, content={})
    forged = Record(r.key, r.owner, r.seq, (r.id,), r.type, r.content, r.content_address,
                    r.size, r.schema, r.id)
    with pytest.raises(MalformedRecord, match="cycle"):
        forged.check_envelope()


@pytest.mark.parametrize("size", [True, False, "2", 2.0, -1, 4 * 1024 * 1024 + 1])
def test_a_record_size_must_be_an_int_in_range(size: object) -> None:
    """records/_record.py check_envelope: bool is not a size (nor a str, float or out of
    range)."""
    from icore.errors import MalformedRecord

    r = Record.create(key="req/a", owner="alice", seq=1, content={})
    forged = Record(r.key, r.owner, r.seq, r.parents, r.type, r.content, r.content_address,
                    size, r.schema, r.id)  # type: ignore[arg-type]
    with pytest.raises(MalformedRecord) as ei:
        forged.check_envelope()
    assert ei.value.fields["field"] == "size"


def test_content_of_the_same_size_but_another_hash_does_not_verify() -> None:
    """records/_record.py verify: the content address is checked even when the size
    matches."""
    from icore.errors import RecordIdMismatch

    r = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    with pytest.raises(RecordIdMismatch, match="content"):
        r.without_content().with_content({"v": 2})
    forged = Record(r.key, r.owner, r.seq, r.parents, r.type, {"v": 2}, r.content_address,
                    r.size, r.schema, r.id)
    with pytest.raises(RecordIdMismatch):
        forged.verify()


# ------------------------------------------------------------------ fence/memory (make mutation)
def test_a_fetched_head_of_another_key_blocks() -> None:
    """fence/_gate.py _verify_fresh: the owner reports, as req/a's head, the id of its own
    req/c record; the fetched record is not a version of req/a."""
    om = OwnershipMap.from_mapping({"req/a": "alice", "req/c": "alice", "plan/*": "executor"})
    a = Record.create(key="req/a", owner="alice", seq=1, content={})
    c = Record.create(key="req/c", owner="alice", seq=2, content={})
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[a])
    recs = {r.id: r for r in (a, plan)}
    run = GateRun(action="book", roots=(plan.id,), deps=frozenset({"req/a"}),
                  lookup=recs.get, ownership=om)
    assert isinstance(run.start(), HeadQueries)
    step = run.on_heads({"alice": HeadReply("alice", {"req/a": HeadEntry("req/a", c.id, 2)})})
    d = run.on_records({"alice": [c]})
    assert step is not None and d.outcome is Outcome.BLOCKED
    assert d.reason is Reason.FETCH_FAILED


def test_a_reply_listing_entries_must_agree_with_its_map() -> None:
    """fence/_gate.py _duplicate_entry: the entries as received are the map's entries."""
    run, _, recs = _run()
    ea = HeadEntry("req/a", recs["req/a"].id, 1)
    eb = HeadEntry("req/b", recs["req/b"].id, 1)
    ok = run.on_heads({"alice": HeadReply.from_entries("alice", [ea]),
                       "bob": HeadReply.from_entries("bob", [eb])})
    assert ok.outcome is Outcome.AUTHORIZED
    run2, _, _ = _run()
    twin = HeadEntry("req/a", recs["req/a"].id, 1)  # equal, but not the map's entry
    bad = run2.on_heads({"alice": HeadReply("alice", {"req/a": ea}, (twin,)),
                         "bob": HeadReply.from_entries("bob", [eb])})
    assert bad.outcome is Outcome.BLOCKED and bad.reason is Reason.CONFLICTING_REPLY


def test_an_equivocating_record_never_moves_the_installed_head() -> None:
    """memory/_base.py _install: another record with the same owner sequence, installed
    (again), does not replace the installed head."""
    ex = MemoryStore(OM, "executor")
    first = Record.create(key="req/a", owner="alice", seq=5, content={"v": 1})
    twin = Record.create(key="req/a", owner="alice", seq=5, content={"v": 2})
    assert ex.install(first) is True
    assert ex.install(twin) is False
    assert ex.install(twin) is False  # already held: still no move
    assert ex.install(first) is False
    assert ex.installed_head("req/a").record_id == first.id


# ------------------------------------------------------------ full mutation run (issue 30)
@pytest.mark.parametrize("variant", ["envelope", "other owner"])
def test_an_inlined_head_record_must_be_the_owners_full_record(variant: str) -> None:
    """fence/_gate.py _verify_fresh: a head entry that inlines its record (a moved head)
    is accepted only with the content and written by the key's owner."""
    a = Record.create(key="req/a", owner="alice", seq=1, content={})
    b = Record.create(key="req/b", owner="bob", seq=1, content={})
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[a, b])
    recs = {r.id: r for r in (a, b, plan)}
    if variant == "envelope":
        moved = Record.create(key="req/a", owner="alice", seq=2, content={"v": 2})
        inlined = moved.without_content()
    else:
        moved = Record.create(key="req/a", owner="mallory", seq=2, content={"v": 2})
        inlined = moved

    def decide(record: Record) -> tuple[Outcome, Reason | None]:
        run = GateRun(action="book", roots=(plan.id,), deps=frozenset({"req/a", "req/b"}),
                      lookup=recs.get, ownership=OM)
        assert isinstance(run.start(), HeadQueries)
        d = run.on_heads({
            "alice": HeadReply("alice", {"req/a": HeadEntry("req/a", moved.id, 2, record)}),
            "bob": _reply("bob", b)})
        return d.outcome, d.reason

    assert decide(inlined) == (Outcome.BLOCKED, Reason.MALFORMED_HEAD)
    good = Record.create(key="req/a", owner="alice", seq=2, content={"v": 2})
    recs_ok = {**recs}
    run = GateRun(action="book", roots=(plan.id,), deps=frozenset({"req/a", "req/b"}),
                  lookup=recs_ok.get, ownership=OM)
    assert isinstance(run.start(), HeadQueries)
    d = run.on_heads({"alice": HeadReply("alice", {"req/a": HeadEntry("req/a", good.id, 2,
                                                                      good)}),
                      "bob": _reply("bob", b)})
    assert d.reason is not Reason.MALFORMED_HEAD  # the owner's full record is accepted


def test_a_held_record_installed_again_never_moves_the_installed_head_back() -> None:
    """memory/_base.py _install: re-installing a held record moves the installed head only
    forward, and installing a store's own committed record reports a move (no head before)."""
    ex = MemoryStore(OM, "executor")
    a1 = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    a2 = Record.create(key="req/a", owner="alice", seq=2, content={"v": 2})
    assert ex.install(a1) is True
    assert ex.install(a2) is True
    assert ex.install(a1) is False
    assert ex.install(a1.without_content()) is False
    assert ex.installed_head("req/a") == HeadEntry("req/a", a2.id, 2)
    plan = Record.create(key="plan/1", owner="executor", seq=1, content={})
    ex.commit(plan, writer="executor")
    assert ex.install(plan) is True
    assert ex.install(plan) is False  # again: nothing moves
    assert ex.installed_head("plan/1") == HeadEntry("plan/1", plan.id, 1)


def test_a_long_chain_installed_child_first_completes_at_once() -> None:
    """memory/_base.py _recheck_incomplete: installing the root of a chain installed
    deepest-first completes the whole chain (a fixpoint, not one pass)."""
    om = OwnershipMap.from_mapping({"n/*": "alice", "plan/*": "executor"})
    chain = [Record.create(key="n/0", owner="alice", seq=1, content={})]
    for i in range(1, 12):
        chain.append(derive(key=f"n/{i}", owner="alice", seq=i + 1, content={},
                            inputs=[chain[-1]]))
    ex = MemoryStore(om, "executor")
    for rec in reversed(chain[1:]):
        ex.install(rec)
    assert ex.lookup(chain[-1].id) is None
    ex.install(chain[0])
    assert ex.lookup(chain[-1].id) == chain[-1]
    assert all(ex.lookup(r.id) == r for r in chain)


def test_an_installed_record_completed_by_an_own_commit_is_visible() -> None:
    """memory/_base.py lookup: a record held as incomplete becomes visible once the
    store's own commit supplies its missing input (completeness is rechecked on lookup)."""
    ex = MemoryStore(OM, "executor")
    plan = Record.create(key="plan/1", owner="executor", seq=1, content={})
    note = derive(key="req/a", owner="alice", seq=1, content={}, inputs=[plan])
    ex.install(note)
    assert ex.lookup(note.id) is None
    ex.commit(plan, writer="executor")
    assert ex.lookup(note.id) == note


@pytest.mark.parametrize("seq", [True, 0, -1, "1", 1.0])
def test_a_head_entry_needs_an_int_sequence_of_at_least_one(seq: object) -> None:
    """fence/_gate.py _check_entry: a bool, a non-int or a sequence below 1 is malformed."""
    run, _, recs = _run()
    a = recs["req/a"]
    d = run.on_heads({"alice": HeadReply("alice", {"req/a": HeadEntry("req/a", a.id, seq)}),
                      "bob": _reply("bob", recs["req/b"])})
    assert d.outcome is Outcome.BLOCKED and d.reason is Reason.MALFORMED_HEAD
    ok, _, _ = _run()
    assert ok.on_heads({"alice": _reply("alice", a),
                        "bob": _reply("bob", recs["req/b"])}).outcome is Outcome.AUTHORIZED


@pytest.mark.parametrize("inlined", ["req/a", "req/b"])
def test_every_moved_head_not_inlined_is_fetched_and_checked(inlined: str) -> None:
    """fence/_gate.py on_records: an inlined moved head does not end the check of the
    other moved heads; one the owner does not return blocks."""
    run, _, recs = _run()
    moved = {k: Record.create(key=k, owner=r.owner, seq=2, content={"v": 2})
             for k, r in recs.items()}
    replies = {}
    for key, rec in moved.items():
        inline = rec if key == inlined else None
        replies[rec.owner] = HeadReply(rec.owner, {key: HeadEntry(key, rec.id, 2, inline)})
    step = run.on_heads(replies)
    assert not isinstance(step, GateDecision)
    other = next(k for k in moved if k != inlined)
    d = run.on_records({moved[other].owner: []})
    assert d.outcome is Outcome.BLOCKED and d.reason is Reason.FETCH_FAILED
    assert other in d.detail


def test_an_own_envelope_then_committed_with_content_is_a_new_commit() -> None:
    """memory/_base.py commit: the idempotent replay needs the held record's content; an
    envelope of the store's own record installed first does not make the commit a replay."""
    ex = MemoryStore(OM, "executor")
    plan = Record.create(key="plan/1", owner="executor", seq=1, content={"p": 1})
    ex.install(plan.without_content())
    res = ex.commit(plan, writer="executor")
    assert res.created is True and res.lineage_complete is True
    assert ex.head("plan/1") == HeadEntry("plan/1", plan.id, 1)
    assert ex.get(plan.id) is not None and ex.get(plan.id).has_content
    again = ex.commit(plan, writer="executor")
    assert again.created is False and again.lineage_complete is True


def test_an_own_record_installed_after_its_commit_stays_complete() -> None:
    """memory/_base.py _install: re-installing a held complete record keeps it complete
    (a replayed commit still reports lineage_complete)."""
    ex = MemoryStore(OM, "executor")
    plan = Record.create(key="plan/1", owner="executor", seq=1, content={})
    ex.commit(plan, writer="executor")
    assert ex.install(plan) is True
    assert ex.commit(plan, writer="executor").lineage_complete is True


def test_the_sequence_bound_is_exclusive_and_the_size_bound_inclusive() -> None:
    """records/_record.py check_envelope: seq < 2**63; 0 <= size <= 4 MiB."""
    from icore.errors import MalformedRecord
    from icore.records import MAX_CONTENT_BYTES

    r = Record.create(key="req/a", owner="alice", seq=1, content={})

    def env(seq: int, size: int) -> Record:
        return Record(r.key, r.owner, seq, r.parents, r.type, None, r.content_address,
                      size, r.schema, r.id)

    env(2**63 - 1, MAX_CONTENT_BYTES).check_envelope()
    env(1, 0).check_envelope()
    with pytest.raises(MalformedRecord) as ei:
        env(2**63, 0).check_envelope()
    assert ei.value.fields["field"] == "seq"


@pytest.mark.parametrize(("field", "at_most"), [("key", 512), ("owner", 512), ("type", 128),
                                                 ("parents", 256)])
def test_the_envelope_length_bounds_are_inclusive(field: str, at_most: int) -> None:
    """records/_record.py check_envelope: key and owner of at most 512 chars, type of at
    most 128, at most 256 parents (MAX_PARENTS); one more is malformed, naming the field."""
    from dataclasses import replace

    from icore.errors import MalformedRecord
    from icore.records import MAX_PARENTS

    assert MAX_PARENTS == 256
    r = Record.create(key="req/a", owner="alice", seq=1, content={})

    def value(n: int) -> object:
        if field == "parents":
            return tuple(f"{i:064x}" for i in range(1, n + 1))
        return "k" * n

    replace(r, **{field: value(at_most)}).check_envelope()
    with pytest.raises(MalformedRecord) as ei:
        replace(r, **{field: value(at_most + 1)}).check_envelope()
    assert ei.value.fields["field"] == field


@pytest.mark.parametrize("order", ["boundary first", "shared first"])
def test_a_record_reached_again_with_fewer_bounded_keys_is_walked_again(order: str) -> None:
    """records/_lineage.py frontier: x is reached below req/a v2 (req/a bounded) and
    directly from the plan (nothing bounded); below x, req/a v1 is a second version of
    req/a on the direct path, whichever path is walked first (the keys bounded on a
    re-expanded record are the intersection over its paths, not the union)."""
    from icore.errors import FrontierConflict
    from icore.records import frontier

    a1 = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    b1 = Record.create(key="req/b", owner="bob", seq=1, content={})
    x = derive(key="note/x", owner="alice", seq=2, content={}, inputs=[a1, b1])
    a2 = derive(key="req/a", owner="alice", seq=3, content={"v": 2}, inputs=[x])
    inputs = [a2, x] if order == "boundary first" else [x, a2]
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=inputs)
    recs = {r.id: r for r in (a1, b1, x, a2, plan)}
    with pytest.raises(FrontierConflict):
        frontier([plan.id], ["req/a", "req/b"], recs.get)
    ok = derive(key="plan/2", owner="executor", seq=2, content={}, inputs=[a2])
    recs[ok.id] = ok
    assert frontier([ok.id], ["req/a", "req/b"], recs.get).versions == {
        "req/a": a2.id, "req/b": b1.id}


def test_the_walk_stops_once_every_dependency_has_a_boundary() -> None:
    """records/_lineage.py frontier: below the boundaries of all of D(a) nothing is walked,
    so inputs of a boundary that this replica does not hold do not matter."""
    from icore.errors import MissingParent
    from icore.records import frontier

    src = Record.create(key="note/src", owner="bob", seq=1, content={})
    b = derive(key="req/b", owner="bob", seq=2, content={}, inputs=[src])
    a = derive(key="req/a", owner="alice", seq=1, content={}, inputs=[b])
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[a])
    recs = {r.id: r for r in (a, b, plan)}  # src is not held
    fr = frontier([plan.id], ["req/a", "req/b"], recs.get)
    assert fr.versions == {"req/a": a.id, "req/b": b.id}
    assert fr.visited == 3
    with pytest.raises(MissingParent):  # a declared key below a still needs src
        frontier([plan.id], ["req/a", "req/b", "note/src"], recs.get)


def test_a_shared_ancestor_seen_again_does_not_end_the_walk() -> None:
    """records/_lineage.py frontier: a record reached again with nothing new bounded is
    skipped, and the walk goes on with the other inputs (req/b after the diamond)."""
    from icore.records import frontier

    a = Record.create(key="req/a", owner="alice", seq=1, content={})
    b = Record.create(key="req/b", owner="bob", seq=1, content={})
    s = derive(key="note/s", owner="alice", seq=2, content={}, inputs=[a])
    m1 = derive(key="note/m1", owner="alice", seq=3, content={}, inputs=[s])
    m2 = derive(key="note/m2", owner="alice", seq=4, content={}, inputs=[s])
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[m1, m2, b])
    recs = {r.id: r for r in (a, b, s, m1, m2, plan)}
    fr = frontier([plan.id], ["req/a", "req/b"], recs.get)
    assert fr.versions == {"req/a": a.id, "req/b": b.id}
    assert fr.visited == 6


def test_the_lineage_bounds_allow_exactly_max_records() -> None:
    """records/_lineage.py frontier and ancestors: max_records records may be visited;
    one more raises LineageTooLarge."""
    from icore.errors import LineageTooLarge
    from icore.records import ancestors, frontier

    chain = [Record.create(key="req/a", owner="alice", seq=1, content={})]
    for i in range(1, 5):
        chain.append(derive(key=f"note/{i}", owner="alice", seq=i + 1, content={},
                            inputs=[chain[-1]]))
    plan = derive(key="plan/1", owner="executor", seq=1, content={}, inputs=[chain[-1]])
    recs = {r.id: r for r in (*chain, plan)}
    assert frontier([plan.id], ["req/a"], recs.get, max_records=6).visited == 6
    with pytest.raises(LineageTooLarge):
        frontier([plan.id], ["req/a"], recs.get, max_records=5)
    assert len(ancestors(plan.id, recs.get, max_records=6)) == 6
    with pytest.raises(LineageTooLarge):
        ancestors(plan.id, recs.get, max_records=5)


@pytest.mark.parametrize(("index", "value", "field"), [
    (1, 7, "key/owner/type"), (2, 7, "key/owner/type"), (5, 7, "key/owner/type"),
    (0, "1", "schema/seq/size"), (3, "1", "schema/seq/size"), (7, "1", "schema/seq/size")])
def test_each_wire_field_type_is_checked_on_its_own(index: int, value: object,
                                                    field: str) -> None:
    """records/_codec.py record_from_wire: any one of key, owner, type of the wrong type
    (or any one of schema, seq, size) is a CodecError naming that group."""
    from icore.errors import CodecError
    from icore.records import record_from_wire, record_to_wire

    r = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    wire = record_to_wire(r)
    assert record_from_wire(list(wire)) == r
    wire[index] = value
    with pytest.raises(CodecError) as ei:
        record_from_wire(wire)
    assert ei.value.fields["field"] == field


def test_a_default_sqlite_store_shares_its_file_and_sees_other_writers(tmp_path: Path) -> None:
    """memory/_sqlite.py __init__/_open: by default a store is not exclusive: two stores
    open the same file, and a head committed through one is read by the other (heads
    are read from the file, not from a memory copy made at open)."""
    om = OwnershipMap.from_mapping({"req/*": "alice"})
    one = SQLiteStore(tmp_path / "s.sqlite", om, "alice")
    two = SQLiteStore(tmp_path / "s.sqlite", om, "alice")
    assert not one.exclusive
    r = Record.create(key="req/a", owner="alice", seq=1, content={})
    one.commit(r, writer="alice")
    assert two.head("req/a") == HeadEntry("req/a", r.id, 1)
    one.close()
    two.close()
    solo = SQLiteStore(tmp_path / "x.sqlite", om, "alice", exclusive=True)
    solo.commit(r, writer="alice")
    solo.close()
    again = SQLiteStore(tmp_path / "x.sqlite", om, "alice", exclusive=True)
    assert again.head("req/a") == HeadEntry("req/a", r.id, 1)  # loaded at open
    again.close()


def test_a_store_in_a_new_directory_creates_it(tmp_path: Path) -> None:
    """memory/_sqlite.py __init__: missing parent directories are created."""
    store = SQLiteStore(tmp_path / "a" / "b" / "s.sqlite", OM, "alice")
    assert (tmp_path / "a" / "b" / "s.sqlite").exists()
    store.close()


def test_a_store_that_cannot_be_opened_raises_a_store_error(tmp_path: Path) -> None:
    """memory/_sqlite.py __init__: a file SQLite cannot open (here a directory) is a
    StoreError naming the path, and the lock is released (the store opens once fixed)."""
    from icore.errors import StoreError

    path = tmp_path / "s.sqlite"
    path.mkdir()
    with pytest.raises(StoreError) as ei:
        SQLiteStore(path, OM, "alice")
    assert ei.value.fields["path"] == str(path)
    path.rmdir()
    SQLiteStore(path, OM, "alice").close()


def test_the_quorum_read_keeps_only_asked_keys_and_the_first_of_equal_sequences() -> None:
    """fence/_access.py QuorumHeads.query_heads: a replica view answering for keys not
    asked adds nothing; of two views at one owner sequence the first read (the
    executor's own replica) is kept; a higher sequence wins."""
    import asyncio

    from icore.fence import QuorumHeads

    a1 = Record.create(key="req/a", owner="alice", seq=1, content={"v": 1})
    twin = Record.create(key="req/a", owner="alice", seq=1, content={"v": "twin"})
    b3 = Record.create(key="req/b", owner="bob", seq=3, content={})
    local = MemoryStore(OM, "executor")
    local.install(a1)

    class Views:
        """Replica views: r1 reports the twin of req/a and an unasked req/b."""

        def __init__(self, a: Record) -> None:
            self.a = a

        async def query_heads(self, owner, keys, *, known=None, timeout_s=None):
            return HeadReply(owner, {"req/a": HeadEntry("req/a", self.a.id, self.a.seq),
                                     "req/b": HeadEntry("req/b", b3.id, 3)})

        async def fetch(self, owner, ids, *, timeout_s=None):
            return []

    got = asyncio.run(QuorumHeads(Views(twin), local, ["r1"]).query_heads("alice", ["req/a"]))
    assert set(got.heads) == {"req/a"}
    assert got.heads["req/a"].record_id == a1.id
    a2 = Record.create(key="req/a", owner="alice", seq=2, content={"v": 2})
    got2 = asyncio.run(QuorumHeads(Views(a2), local, ["r1"]).query_heads("alice", ["req/a"]))
    assert got2.heads["req/a"].record_id == a2.id
