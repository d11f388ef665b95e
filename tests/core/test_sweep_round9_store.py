"""A SQLite store that cannot write or read a damaged page fails typed (#29, sweep round 9).

A write past the file size limit (``RLIMIT_FSIZE``, what a full disk does to SQLite)
raised ``sqlite3.OperationalError: cannot rollback - no transaction is active`` (SQLite
had already rolled back; the store's ROLLBACK replaced the disk error), and a damaged
page past the schema escaped the open or a read as ``sqlite3.DatabaseError``. Real
SQLite files in child processes with the limit set; nothing is mocked.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icore.errors import StoreError
from icore.workspace import Workspace

FACTS = {"k/*": "o"}

# Writes 60 facts, then (with the limit) tries a 300 KB one and small ones; prints what
# each step gave.
CHILD = textwrap.dedent("""
    import json, resource, sys
    folder, limit = sys.argv[1], int(sys.argv[2])
    from icore.workspace import Workspace
    from icore.errors import IcoreError
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    ws = Workspace.sqlite({"k/*": "o"}, folder)
    got = {}
    for name, f in [("big", lambda: ws.put("k/big", {"pad": "y" * 300_000})),
                    ("small", lambda: ws.put("k/new", {"n": 1})),
                    ("update", lambda: ws.update("k/3", lambda v: {**v, "u": 1}))]:
        try:
            f()
            got[name] = "ok"
        except IcoreError as e:
            got[name] = f"{type(e).__name__}: {e}"
    print(json.dumps(got))
""")


def _seed(folder: Path) -> None:
    with Workspace.sqlite(FACTS, folder) as ws:
        for i in range(60):
            ws.put(f"k/{i}", {"v": i, "pad": "p" * 300})


def _child(folder: Path, limit: int) -> dict[str, str]:
    r = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(limit)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-2000:]
    out: dict[str, str] = json.loads(r.stdout.splitlines()[-1])
    return out


@pytest.mark.timeout(120)
def test_a_write_past_the_file_size_limit_is_a_store_error_and_loses_nothing(
        tmp_path: Path) -> None:
    folder = tmp_path / "facts"
    _seed(folder)
    limit = (folder / "o.db").stat().st_size + 120_000  # room for small writes only
    got = _child(folder, limit)
    assert got["big"].startswith("StoreError: cannot write the store: "), got
    assert "nothing of this write was committed" in got["big"]
    assert str(folder / "o.db") in got["big"]
    assert got["small"] == "ok" and got["update"] == "ok", got  # the store lives on
    with Workspace.sqlite(FACTS, folder) as ws:  # every committed fact is still there
        assert [ws.value(f"k/{i}")["v"] for i in range(60)] == list(range(60))
        assert ws.value("k/new") == {"n": 1}
        assert ws.value("k/3") == {"v": 3, "pad": "p" * 300, "u": 1}
        assert ws.value("k/big", default=None) is None


def _smash_root_page(db: Path, table: str) -> None:
    """Overwrite the root page of ``table`` (past the schema page) with garbage."""
    with sqlite3.connect(db) as c:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name=?",
                         (table,)).fetchone()[0]
        size = c.execute("PRAGMA page_size").fetchone()[0]
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert root > 1
    with db.open("r+b") as f:
        f.seek((root - 1) * size)
        f.write(bytes((i * 37 + 11) % 256 for i in range(size)))


@pytest.mark.timeout(60)
def test_a_damaged_page_read_at_open_is_a_store_error(tmp_path: Path) -> None:
    folder = tmp_path / "facts"
    _seed(folder)
    _smash_root_page(folder / "o.db", "records")
    with pytest.raises(StoreError, match="cannot open store") as e:
        Workspace.sqlite(FACTS, folder)
    assert str(folder / "o.db") in str(e.value)


@pytest.mark.timeout(60)
def test_a_damaged_page_read_later_is_a_store_error_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "facts"
    _seed(folder)
    _smash_root_page(folder / "o.db", "heads")
    with Workspace.sqlite(FACTS, folder) as ws:  # the open reads no head
        with pytest.raises(StoreError, match="cannot read the store") as e:
            ws.value("k/7")
        assert str(folder / "o.db") in str(e.value)
