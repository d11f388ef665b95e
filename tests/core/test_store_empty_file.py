"""An empty store file: a new store, unless its ``-wal`` / ``-journal`` holds data.

A ``touch``-ed file is a fine new store. A store whose database file was cut to nothing
after records were written (a crash, a copy without its data) while its ``-wal`` still
holds them used to open as a new store too, and SQLite then discarded the ``-wal``:
every committed record lost. Now a typed ``StoreError``, and the ``-wal`` is untouched.
Real SQLite files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.errors import StoreError
from icore.memory import OwnershipMap, SQLiteStore
from icore.records import Record
from icore.workspace import Workspace

OM = OwnershipMap.from_mapping({"req/*": "alice"})
_JOURNAL = bytes.fromhex("d9d505f920a163d7")


def _written(path: Path) -> bytes:
    """A store with two commits; the ``-wal`` bytes it had before it closed."""
    s = SQLiteStore(path, OM, "alice")
    for i in (1, 2):
        s.commit(Record.create(key=f"req/{i}", owner="alice", seq=i, content=i),
                 writer="alice")
    wal = path.with_name(path.name + "-wal").read_bytes()
    s.close()
    assert len(wal) > 32
    return wal


def test_an_empty_file_beside_a_wal_with_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alice.db"
    wal = _written(tmp_path / "alice.db")
    path.write_bytes(b"")  # cut to nothing
    side = path.with_name("alice.db-wal")
    side.write_bytes(wal)  # what was committed since the last checkpoint
    with pytest.raises(StoreError, match="empty but its wal holds data") as ei:
        SQLiteStore(path, OM, "alice")
    assert ei.value.fields["sibling"] == str(side)
    assert ei.value.fields["sibling_bytes"] == len(wal)
    assert "backup" in ei.value.fields["fix"]
    assert side.read_bytes() == wal and path.stat().st_size == 0  # nothing discarded
    with pytest.raises(StoreError, match="holds data"):  # the workspace too
        Workspace.sqlite({"req/*": "alice"}, tmp_path)
    assert side.read_bytes() == wal


def test_an_empty_file_beside_a_hot_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alice.db"
    path.write_bytes(b"")
    journal = path.with_name("alice.db-journal")  # the database had 3 pages before
    journal.write_bytes(_JOURNAL + (0).to_bytes(4, "big") + b"\x01\x02\x03\x04"
                        + (3).to_bytes(4, "big") + bytes(492))
    with pytest.raises(StoreError, match="empty but its journal holds data"):
        SQLiteStore(path, OM, "alice")
    assert journal.stat().st_size == 512


@pytest.mark.parametrize("siblings", [
    {},
    {"-wal": b""},
    {"-wal": b"\x37\x7f\x06\x82" + bytes(28)},  # a WAL header, no frame
    {"-journal": bytes(512)},  # a zeroed journal header (committed, persist mode)
    {"-journal": _JOURNAL + bytes(24)},  # the database had no page before
    {"-shm": bytes(32768)},
])
def test_an_empty_file_without_data_beside_it_is_a_new_store(
        tmp_path: Path, siblings: dict[str, bytes]) -> None:
    """``touch alice.db`` (with leftovers that hold no data): a new store that works."""
    path = tmp_path / "alice.db"
    path.touch()
    for suffix, data in siblings.items():
        path.with_name(path.name + suffix).write_bytes(data)
    s = SQLiteStore(path, OM, "alice")
    try:
        s.commit(Record.create(key="req/1", owner="alice", seq=1, content=1),
                 writer="alice")
        assert s.head("req/1") is not None
    finally:
        s.close()
