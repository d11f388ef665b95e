"""Group commit (``Store.commit_many``) and the exclusive SQLite head table (issue 17)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.errors import HeadConflict, IcoreError, OwnershipError, SequenceError, StoreError
from icore.memory import CommitOp, CommitResult, MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import Record, derive

OM = OwnershipMap({}, {"req/*": "alice", "b/*": "bob"})
Factory = Callable[[Path], Store]

STORES: dict[str, Factory] = {
    "memory": lambda p: MemoryStore(OM, "alice"),
    "sqlite": lambda p: SQLiteStore(p / "a.sqlite", OM, "alice"),
    "sqlite-exclusive": lambda p: SQLiteStore(p / "a.sqlite", OM, "alice", exclusive=True),
    "sqlite-exclusive-full": lambda p: SQLiteStore(p / "a.sqlite", OM, "alice",
                                                   synchronous="FULL", exclusive=True),
}


@pytest.fixture(params=sorted(STORES))
def make(request: pytest.FixtureRequest) -> Factory:
    return STORES[request.param]


def _v1(key: str, seq: int) -> Record:
    return Record.create(key=key, owner="alice", seq=seq, content={"n": seq})


def test_group_applies_every_rule_in_order(make: Factory, tmp_path: Path) -> None:
    """A group is checked as if its ops were committed one after another: an op may
    build on an earlier one, a stale base or a backward sequence is refused alone."""
    s = make(tmp_path)
    a1 = _v1("req/a", 1)
    a2 = derive(key="req/a", owner="alice", seq=2, content={"n": 2}, inputs=[a1])
    stale = derive(key="req/a", owner="alice", seq=3, content={"n": 3}, inputs=[a1])
    back = _v1("req/b", 1)
    foreign = Record.create(key="b/x", owner="bob", seq=1, content={})
    c = _v1("req/c", 4)
    res = s.commit_many([CommitOp(a1, "alice"), CommitOp(a2, "alice"),
                         CommitOp(stale, "alice"), CommitOp(back, "alice"),
                         CommitOp(foreign, "bob"), CommitOp(c, "alice")])
    assert isinstance(res[0], CommitResult) and res[0].created
    assert isinstance(res[1], CommitResult) and res[1].created
    assert isinstance(res[2], HeadConflict)
    assert res[2].fields["current"] == a2.id
    assert isinstance(res[3], SequenceError)
    assert isinstance(res[4], OwnershipError)
    assert isinstance(res[5], CommitResult)
    h = s.head("req/a")
    assert h is not None and h.record_id == a2.id
    assert s.head("req/b") is None
    assert s.owner_seq("alice") == 4


def test_group_survives_reopen(tmp_path: Path) -> None:
    """Every acknowledged op of a group is durable; the in-memory table reloads."""
    s = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    recs = [_v1(f"req/{i}", i + 1) for i in range(20)]
    assert all(isinstance(r, CommitResult) for r in s.commit_many(
        [CommitOp(r, "alice") for r in recs]))
    s.close()
    s2 = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    assert [s2.head(r.key).record_id for r in recs] == [r.id for r in recs]  # type: ignore[union-attr]
    assert s2.owner_seq("alice") == 20


def test_failed_group_write_leaves_nothing(tmp_path: Path) -> None:
    """A group whose transaction fails to commit writes nothing, and the in-memory heads
    of an exclusive store do not show it (they follow only what is durable)."""
    s = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    s.commit(_v1("req/a", 1), writer="alice")
    s._db.execute("CREATE TRIGGER boom BEFORE INSERT ON heads WHEN NEW.key = 'req/bad' "
                  "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(StoreError, match="disk full"):  # typed since sweep round 9
        s.commit_many([CommitOp(_v1("req/b", 2), "alice"), CommitOp(_v1("req/bad", 3), "alice")])
    assert s.head("req/b") is None and s.head("req/bad") is None
    assert s.owner_seq("alice") == 1
    s.close()
    s2 = SQLiteStore(tmp_path / "a.sqlite", OM, "alice")
    assert s2.head("req/b") is None and s2.owner_seq("alice") == 1


def test_exclusive_store_refuses_a_second_user(tmp_path: Path) -> None:
    """The in-memory head table is safe only with one user: the file lock enforces it."""
    p = tmp_path / "a.sqlite"
    shared = SQLiteStore(p, OM, "alice")
    with pytest.raises(StoreError, match="in use by another process"):
        SQLiteStore(p, OM, "alice", exclusive=True)
    shared2 = SQLiteStore(p, OM, "alice")  # shared users coexist
    shared.close()
    shared2.close()
    ex = SQLiteStore(p, OM, "alice", exclusive=True)
    with pytest.raises(StoreError, match="opened it exclusively"):
        SQLiteStore(p, OM, "alice")
    ex.close()
    SQLiteStore(p, OM, "alice").close()


def test_refused_open_releases_the_lock(tmp_path: Path) -> None:
    p = tmp_path / "a.sqlite"
    SQLiteStore(p, OM, "alice").close()
    with pytest.raises(StoreError, match="another agent"):
        SQLiteStore(p, OM, "bob", exclusive=True)
    SQLiteStore(p, OM, "alice", exclusive=True).close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["req/a", "req/b", "req/c"]),
                          st.integers(0, 6), st.booleans()), min_size=1, max_size=12),
       st.integers(1, 5))
def test_group_equals_one_by_one(tmp_path_factory: pytest.TempPathFactory,
                                 plan: list[tuple[str, int, bool]], group: int) -> None:
    """Property: committing ops in groups gives the same results and the same heads as
    committing them one at a time, in memory and in exclusive SQLite."""
    d = tmp_path_factory.mktemp("g")
    ref = MemoryStore(OM, "alice")
    grp = SQLiteStore(d / "a.sqlite", OM, "alice", exclusive=True)
    last: dict[str, Record] = {}
    ops: list[CommitOp] = []
    for key, seq, cite in plan:
        parent = last.get(key)
        rec = (derive(key=key, owner="alice", seq=seq, content={"s": seq}, inputs=[parent])
               if cite and parent is not None and seq > 0 else
               Record.create(key=key, owner="alice", seq=max(seq, 1), content={"s": seq}))
        last[key] = rec
        ops.append(CommitOp(rec, "alice"))

    def outcome(r: CommitResult | IcoreError) -> str:
        return "ok" if isinstance(r, CommitResult) else type(r).__name__

    one: list[str] = []
    for op in ops:
        try:
            one.append(outcome(ref.commit(op.record, writer=op.writer)))
        except IcoreError as exc:
            one.append(outcome(exc))
    many: list[str] = []
    for i in range(0, len(ops), group):
        many += [outcome(r) for r in grp.commit_many(ops[i:i + group])]
    assert many == one
    for key in ("req/a", "req/b", "req/c"):
        a, b = ref.head(key), grp.head(key)
        assert (a and a.record_id) == (b and b.record_id)
    grp.close()


def test_failed_flush_rolls_back_and_the_store_goes_on(tmp_path: Path) -> None:
    """An exclusive store writes heads and owner sequences once per transaction, just
    before COMMIT (issue 27): a failure there rolls the whole group back, and the next
    group commits normally."""
    s = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    s._db.execute("CREATE TRIGGER boom BEFORE INSERT ON owner_seq WHEN NEW.seq = 3 "
                  "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(StoreError, match="disk full"):  # typed since sweep round 9
        s.commit_many([CommitOp(_v1("req/a", 2), "alice"), CommitOp(_v1("req/b", 3), "alice")])
    assert not s._db.in_transaction
    assert s.head("req/a") is None and s.owner_seq("alice") == 0
    a4 = _v1("req/a", 4)
    res = s.commit_many([CommitOp(a4, "alice"), CommitOp(_v1("req/c", 5), "alice")])
    assert all(isinstance(r, CommitResult) for r in res)
    s.close()
    s2 = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    h = s2.head("req/a")
    assert h is not None and h.record_id == a4.id
    assert s2.head("req/b") is None and s2.owner_seq("alice") == 5
    assert s2._db.execute("SELECT count(*) FROM owner_seq").fetchone()[0] == 1


def test_a_new_store_has_small_pages_and_an_existing_file_keeps_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: a new file gets ``PAGE_SIZE`` (1 KiB) pages, fewer WAL bytes to fsync per
    commit; a file created with other pages keeps them and its records when reopened."""
    import icore.memory._sqlite as sqlite_mod

    s = SQLiteStore(tmp_path / "new.sqlite", OM, "alice", synchronous="FULL", exclusive=True)
    s.commit(_v1("req/a", 1), writer="alice")
    assert s._db.execute("PRAGMA page_size").fetchone()[0] == sqlite_mod.PAGE_SIZE == 1024
    s.close()
    monkeypatch.setattr(sqlite_mod, "PAGE_SIZE", 4096)
    old = SQLiteStore(tmp_path / "old.sqlite", OM, "alice")
    old.commit(_v1("req/a", 1), writer="alice")
    old.close()
    monkeypatch.setattr(sqlite_mod, "PAGE_SIZE", 1024)
    again = SQLiteStore(tmp_path / "old.sqlite", OM, "alice")
    assert again._db.execute("PRAGMA page_size").fetchone()[0] == 4096
    again.commit(_v1("req/b", 2), writer="alice")
    assert again.head("req/a") is not None and again.head("req/b") is not None
    again.close()
    empty = tmp_path / "empty.sqlite"
    empty.touch()  # an empty file is a new store
    e = SQLiteStore(empty, OM, "alice")
    assert e._db.execute("PRAGMA page_size").fetchone()[0] == 1024
    e.close()
