"""Refuse a database file that is not an icore store before anything writes to it (#29).

:class:`~icore.memory.SQLiteStore` switches its file to WAL, adds its tables and takes a
``<file>.lock`` beside it. Done to a user's own database (say the gateway's
``store.path`` is the app's folder, next to ``hotels.db``), that changes a file icore does
not own. :func:`refuse_foreign_file` looks at the file read-only first: a missing or empty
file, or an SQLite file holding only icore's tables (``meta`` with a ``format`` row, or
a store cut short before its first row), is an icore store; anything else is refused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from icore.errors import StoreError

_HEADER = b"SQLite format 3\x00"
_TABLES = frozenset({"meta", "records", "heads", "installed", "owner_seq"})


def refuse_foreign_file(path: Path) -> None:
    """Raise unless ``path`` is missing, empty or an icore store; never writes to it.

    Args:
        path: the store's database file.

    Raises:
        StoreError: the file is not an SQLite database, or holds a table icore does not
            make, or its ``meta`` table has rows but no ``format`` row; names the path.
            An unreadable file is left to the open that follows.
    """
    try:
        with path.open("rb") as f:
            head = f.read(len(_HEADER))
    except OSError:
        return  # missing, a folder or unreadable: the open reports it
    if not head:
        return
    if head != _HEADER:
        raise StoreError("not an icore store: the file is not an SQLite database; give "
                         "a file or folder of icore's own", path=str(path))
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    except (sqlite3.Error, ValueError, OSError):
        return
    try:
        tables = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" in tables and not {"name", "value"} <= {
                r[1] for r in db.execute("PRAGMA table_info(meta)")}:
            tables = (tables - {"meta"}) | {"meta (of another shape)"}
        has_format = "meta" in tables and db.execute(
            "SELECT 1 FROM meta WHERE name='format'").fetchone() is not None
        meta_rows = "meta" in tables and db.execute("SELECT 1 FROM meta").fetchone() is not None
    except sqlite3.Error:
        return  # corrupt or locked: the open reports it
    finally:
        db.close()
    foreign = sorted(tables - _TABLES)
    if has_format and not foreign:
        return
    if not has_format and not meta_rows and not foreign:
        return  # no tables, or a store cut short before its first row
    raise StoreError(
        "not an icore store: the file holds " + (
            f"tables icore does not make ({', '.join(foreign[:5])})" if foreign
            else "a meta table with no icore format row")
        + "; icore leaves it unchanged: give a file or folder of icore's own",
        path=str(path))
