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
