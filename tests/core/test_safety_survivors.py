"""Tests that kill the hand mutations of issue 30 that survived in memory/ and fence/."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from icore.fence import (
    GateContext,
    GateRun,
    HeadQueries,
    Outcome,
    Policy,
    Reason,
    TeamContext,
    ThreadedOwners,
    make_check,
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
    v = make_check(Policy.MAJORITY_REPLICA, ctx, TeamContext(install=ex,
                                                                 replicas=replicas))
    quorum = v.context.owners
    assert quorum.remote == list(replicas[:read])
    total = n + 1  # the remote views and the executor's own
    assert len(quorum.remote) + 1 == total // 2 + 1
    full = make_check(Policy.ALL_REPLICA, ctx, TeamContext(install=ex, replicas=replicas))
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
