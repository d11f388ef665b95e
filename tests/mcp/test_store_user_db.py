"""The SQLite store never changes a database that is not an icore store (#29, QA qa-new8 S2).

``store: {backend: sqlite, path: .}`` next to an app's own ``<owner>.db`` used to add
icore's tables to it and switch it to WAL; a user ``meta`` table of another shape gave a
cryptic error after the WAL switch, with a ``.lock`` file left. Real SQLite files and a
real ``icore mcp`` subprocess.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from icore.errors import StoreError
from icore.memory import OwnershipMap, SQLiteStore

from .conftest import env, stdio_upstream, write_manifest


def _user_db(path: Path, schema: str, wal: bool = False) -> str:
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema)
    db.commit()
    db.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


_SCHEMAS = {
    "app": "CREATE TABLE bookings(id TEXT); INSERT INTO bookings VALUES ('B1');",
    "other-meta": "CREATE TABLE meta(k TEXT, v TEXT); INSERT INTO meta VALUES ('a', 'b');",
    "empty-table": "CREATE TABLE notes(x TEXT);",
}


@pytest.mark.parametrize("wal", [False, True], ids=["rollback", "wal"])
@pytest.mark.parametrize("schema", sorted(_SCHEMAS))
def test_foreign_database_is_refused_unchanged(tmp_path: Path, schema: str, wal: bool) -> None:
    path = tmp_path / "hotels.db"
    before = _user_db(path, _SCHEMAS[schema], wal)
    with pytest.raises(StoreError, match="not an icore store") as err:
        SQLiteStore(path, OwnershipMap({"k": "hotels"}), "hotels")
    assert err.value.fields["path"] == str(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not path.with_name("hotels.db.lock").exists()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == ("wal" if wal else "delete")
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master")} <= {"bookings", "meta",
                                                                           "notes"}
    db.close()


def test_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    path.write_text('{"bookings": []}', encoding="utf-8")
    with pytest.raises(StoreError, match="not an SQLite database"):
        SQLiteStore(path, OwnershipMap({"k": "a"}), "a")
    assert path.read_text(encoding="utf-8") == '{"bookings": []}'
    assert not (tmp_path / "a.db.lock").exists()


def test_own_and_cut_short_stores_open(tmp_path: Path) -> None:
    """icore's own store reopens; an empty file and one with icore's tables but no rows
    yet (a store cut short before its first row) are taken as icore stores."""
    own = tmp_path / "own.db"
    SQLiteStore(own, OwnershipMap({"k": "a"}), "a").close()
    SQLiteStore(own, OwnershipMap({"k": "a"}), "a").close()
    empty = tmp_path / "empty.db"
    empty.touch()
    SQLiteStore(empty, OwnershipMap({"k": "a"}), "a").close()
    short = tmp_path / "short.db"
    _user_db(short, "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
                    "CREATE TABLE heads (key TEXT PRIMARY KEY, id TEXT NOT NULL, seq INT);", True)
    SQLiteStore(short, OwnershipMap({"k": "a"}), "a").close()


def test_gateway_refuses_an_apps_database_naming_store_path(tmp_path: Path) -> None:
    """The upstream ``trip`` owns ``memo://``: ``store.path`` holding the app's
    ``trip.db`` is refused at start (exit 2), naming the file and ``store.path``."""
    app = tmp_path / "app"
    app.mkdir()
    before = _user_db(app / "trip.db", _SCHEMAS["app"])
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              store={"backend": "sqlite", "path": str(app)})
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env(),
                         timeout=120, check=False)
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr
    assert "store.path" in got.stderr and str(app / "trip.db") in got.stderr, got.stderr
    assert "not an icore store" in got.stderr and "gateway.yaml" in got.stderr
    assert hashlib.sha256((app / "trip.db").read_bytes()).hexdigest() == before
    assert not {"trip.db.lock", "trip.db-wal", "trip.db-shm"} & {p.name for p in app.iterdir()}
