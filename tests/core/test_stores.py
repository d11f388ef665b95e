"""Both store backends pass the conformance suite; SQLite-specific durability checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.errors import StoreError
from icore.memory import MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.memory.conformance import OWNERSHIP, StoreConformance
from icore.records import Record


class TestMemoryStore(StoreConformance):
    """In-memory reference store."""

    def make_store(self, ownership: OwnershipMap, agent: str | None, tmp_path: Path) -> Store:
        return MemoryStore(ownership, agent)


class TestSQLiteStore(StoreConformance):
    """Durable SQLite store on a real file."""

    def make_store(self, ownership: OwnershipMap, agent: str | None, tmp_path: Path) -> Store:
        return SQLiteStore(tmp_path / f"{agent or 'central'}.sqlite", ownership, agent)


class TestSQLiteExclusiveStore(StoreConformance):
    """SQLite in exclusive mode (the owner service): heads served from memory (issue 17)."""

    def make_store(self, ownership: OwnershipMap, agent: str | None, tmp_path: Path) -> Store:
        return SQLiteStore(tmp_path / f"{agent or 'central'}.sqlite", ownership, agent,
                           exclusive=True)


def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    """Records, heads, sequences, installed heads and incompleteness persist."""
    path = tmp_path / "alice.sqlite"
    s = SQLiteStore(path, OWNERSHIP, "alice")
    r1 = Record.create(key="req/a", owner="alice", seq=1, content={"i": 1})
    recs = [r1, Record.create(key="req/a", owner="alice", seq=2, content={"i": 2},
                              parents=[r1.id])]
    for r in recs:
        s.commit(r, writer="alice")
    b = Record.create(key="req/b", owner="bob", seq=7, content="b")
    s.install(b)
    s.close()
    s2 = SQLiteStore(path, OWNERSHIP, "alice")
    head = s2.head("req/a")
    assert head is not None and head.record_id == recs[1].id
    assert s2.owner_seq("alice") == 2
    assert s2.get(recs[0].id) == recs[0]
    inst = s2.installed_head("req/b")
    assert inst is not None and inst.record_id == b.id
    assert s2.record_count() == 3
    s2.close()


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    """The store file is in WAL mode."""
    s = SQLiteStore(tmp_path / "a.sqlite", OWNERSHIP, "alice")
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()


def test_sqlite_refuses_other_agents_file(tmp_path: Path) -> None:
    """Opening alice's file as bob's store is refused."""
    SQLiteStore(tmp_path / "a.sqlite", OWNERSHIP, "alice").close()
    with pytest.raises(StoreError, match="another agent"):
        SQLiteStore(tmp_path / "a.sqlite", OWNERSHIP, "bob")


def test_sqlite_refuses_foreign_file(tmp_path: Path) -> None:
    """A non-SQLite file gives a StoreError naming the path."""
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as ei:
        SQLiteStore(p, OWNERSHIP, "alice")
    assert ei.value.fields["path"] == str(p)


def test_sqlite_unusable_folder_is_a_store_error(tmp_path: Path) -> None:
    """A parent path that is a file gives a StoreError naming the path, not an OSError."""
    (tmp_path / "f").write_text("")
    with pytest.raises(StoreError, match="cannot open store") as ei:
        SQLiteStore(tmp_path / "f" / "a.sqlite", OWNERSHIP, "alice")
    assert ei.value.fields["path"] == str(tmp_path / "f" / "a.sqlite")


def test_ownership_patterns() -> None:
    """Exact keys win over patterns; the longest pattern wins among patterns."""
    om = OwnershipMap.from_mapping({"req/a": "x", "req/*": "y", "req/long/*": "z"})
    assert om.owner_of("req/a") == "x"
    assert om.owner_of("req/b") == "y"
    assert om.owner_of("req/long/1") == "z"
    assert om.owner_of("plan/1") is None
    assert om.group_by_owner(["req/a", "req/b", "req/c"]) == {"x": ["req/a"],
                                                              "y": ["req/b", "req/c"]}
