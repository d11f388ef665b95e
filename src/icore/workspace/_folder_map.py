"""The ownership maps a :meth:`Workspace.sqlite` folder has been opened with (#28).

A folder of owner files (``<owner>.db``) is shared by every process that opens it, but the
ownership map (semantic key -> owner) lived only in each process: a process naming
another owner for the same facts (``{"campaign/*": "mkt"}`` next to ``{"campaign/*":
"marketing"}``) read nothing, wrote its own ``mkt.db``, and a plan made from
``marketing.db`` stayed "fresh" while the fact had moved on elsewhere.

The folder now records every distinct map it is opened with, in ``ownership.sqlite``
beside the owner files (no owner file can have that name: theirs end in ``.db``). The
record only grows: one row per distinct map, inserted inside one ``BEGIN IMMEDIATE``
transaction that first reads every row (so two processes opening at once are
serialized by SQLite's write lock, and the later one sees the earlier one's map). Rows
are never changed or deleted by icore.

Two maps conflict on a key when both route it, to different owners (exact key first,
then the longest pattern: :class:`~icore.memory.OwnershipMap`). An open is refused when
the new map names another owner for a pattern or key a recorded map names, or when a
sample key of either map's patterns (and their exact keys) is routed differently; the
map is then not recorded and no owner file is created. A folder made before the record
gets one at its first open, after a look at the heads its owner files hold: a fact held
in ``x.db`` that the map gives another owner is refused. Conflicts no sample shows
(patterns that overlap only on keys the samples miss) are refused at the first use of
such a key in this process (:meth:`FolderOwnership.check`). A map that only adds
patterns or keys routed consistently is recorded and opens.

An entry is re-assigned (``campaign/*`` from ``mkt`` to ``sales``) by
:func:`~icore.workspace.reassign_owner` (``icore owners reassign``): a new row of the
``retired`` table, applied in order to every recorded map that names the entry with the
old owner (the maps' rows stay as they were). Every process holding a workspace of the
folder keeps a shared ``flock`` on ``ownership.lock`` (taken before the record is read),
so a re-assignment, which needs it exclusively, is refused while any process has the
folder open, and an open waits while a re-assignment runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import sqlite3
from pathlib import Path

from icore._flock import close_lock, open_lock
from icore.errors import StoreError
from icore.memory import OwnershipMap
from icore.workspace._errors import WorkspaceError
from icore.workspace._keys import _tokens

RECORD_NAME = "ownership.sqlite"
"""File name of a folder's ownership record (owner files end in ``.db``: no clash)."""

LOCK_NAME = "ownership.lock"
"""The folder's lock file: shared by every open workspace, exclusive for a re-assignment."""

_SCHEMA = ("CREATE TABLE IF NOT EXISTS maps (id TEXT PRIMARY KEY, entries TEXT NOT NULL)"
           " WITHOUT ROWID")
RETIRED_SCHEMA = ("CREATE TABLE IF NOT EXISTS retired (n INTEGER PRIMARY KEY, "
                  "pattern TEXT NOT NULL, old_owner TEXT NOT NULL, new_owner TEXT NOT NULL, "
                  "moved TEXT NOT NULL)")
"""One row per re-assignment, in order: ``pattern`` moved from ``old_owner`` to
``new_owner``; ``moved``: JSON ``{key: [old head id, new record id]}``."""
_MAX_CHECKED = 65_536
"""Keys remembered as checked per process; past it the set starts again (a re-check)."""


def _map_text(entries: dict[str, str]) -> str:
    return json.dumps(entries, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def samples(pattern: str) -> list[str]:
    """Up to two keys ``pattern`` matches (an exact key is its own sample).

    ``*`` is taken as nothing and as ``0``, ``?`` as ``0``, a class as one of its
    characters; a key the pattern does not match (an unusual class) is dropped.
    """
    out: list[str] = []
    for star in ("", "0"):
        key = []
        for tok in _tokens(pattern):
            if tok == "*":
                key.append(star)
            elif tok == "?":
                key.append("0")
            elif len(tok) > 1:  # a class: one character it takes
                key.append(next((ch for ch in "0a_A-.x" + tok
                                 if fnmatch.fnmatchcase(ch, tok)), ""))
            else:
                key.append(tok)
        got = "".join(key)
        if fnmatch.fnmatchcase(got, pattern) and got not in out:
            out.append(got)
    return out


def _recorded(entries: object, record: Path) -> dict[str, str]:
    """One recorded map (a row's JSON object of pattern or key -> owner).

    Raises:
        WorkspaceError: the row is no such object (another program's row, a damaged
            file): the maps recorded cannot be compared, so the open is refused (fields
            ``record``, ``error``).
    """
    why = ""
    try:
        got = json.loads(entries) if isinstance(entries, str | bytes) else None
    except (ValueError, RecursionError) as exc:
        got, why = None, str(exc)[:200]
    if isinstance(got, dict) and all(isinstance(k, str) and isinstance(v, str)
                                     for k, v in got.items()):
        return got
    raise WorkspaceError("a row of the folder's ownership record is no map of pattern or "
                         "key -> owner: the maps recorded cannot be compared (fail closed)",
                         record=str(record), error=why or f"got {repr(entries)[:80]}",
                         fix="restore the record, or move it away when every process of "
                         "the folder uses one ownership map")


def recorded_maps(db: sqlite3.Connection, record: Path) -> list[dict[str, str]]:
    """The recorded maps with every re-assignment applied in order (in a transaction).

    Raises:
        WorkspaceError: a row is no map of pattern or key -> owner (:func:`_recorded`).
        sqlite3.Error: the record cannot be read (the caller names it).
    """
    db.execute(_SCHEMA)
    db.execute(RETIRED_SCHEMA)
    maps = [_recorded(e, record) for (e,) in db.execute("SELECT entries FROM maps")]
    for pattern, old, new in db.execute(
            "SELECT pattern, old_owner, new_owner FROM retired ORDER BY n"):
        for m in maps:
            if m.get(pattern) == old:
                m[pattern] = new
    out: list[dict[str, str]] = []
    for m in maps:  # two maps may become one
        if m not in out:
            out.append(m)
    return out


def lock_folder(folder: Path, *, exclusive: bool) -> int:
    """Take the folder's ``ownership.lock``: shared (waits) or exclusive (never waits).

    Returns:
        The lock descriptor (:func:`icore._flock.close_lock` releases it; a forked
        child never keeps it).

    Raises:
        WorkspaceError: ``exclusive`` and another workspace (this process or another)
            has the folder open (fields ``folder``, ``lock``, ``fix``).
        OSError: the lock file cannot be made.
    """
    path = folder / LOCK_NAME
    fd = open_lock(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH)
    except OSError as exc:
        close_lock(fd)
        if isinstance(exc, BlockingIOError):
            raise WorkspaceError(
                "the folder is open in a workspace (this process or another): its "
                "owners cannot be re-assigned under it", folder=str(folder),
                lock=str(path), fix="close every Workspace.sqlite of the folder (stop the "
                "processes using it), then re-assign") from None
        raise
    return fd


def compare_maps(mine: dict[str, str], other: dict[str, str], folder: Path) -> None:
    """Refuse two maps naming different owners for an entry or a sample key.

    Raises:
        WorkspaceError: as :class:`FolderOwnership` (``mine`` is ``owner``).
    """
    for name, owner in sorted(mine.items()):
        theirs = other.get(name)
        if theirs is not None and theirs != owner:
            what = "pattern" if any(c in name for c in "*?[") else "key"
            raise _refusal(what, name, owner, theirs, folder)
    a_map, b_map = OwnershipMap.from_mapping(mine), OwnershipMap.from_mapping(other)
    for name in sorted({*mine, *other}):
        for key in samples(name):
            a, b = a_map.owner_of(key), b_map.owner_of(key)
            if a is not None and b is not None and a != b:
                raise _refusal("key", key, a, b, folder)


def _refusal(what: str, name: str, mine: str, theirs: str, folder: Path, *,
             seen: str = "as recorded") -> WorkspaceError:
    return WorkspaceError(
        "two ownership maps name different owners for one fact of this folder: this "
        "process would read and write another owner's file than the other one does",
        **{what: name}, owner=mine, other_owner=theirs, folder=str(folder),
        record=str(folder / RECORD_NAME),
        fix=f"give every process of the folder the same owner for {name!r} "
        f"({theirs!r}, {seen}); to change its owner, close the folder everywhere and "
        f"run `icore owners reassign {folder} '<entry>' --to {mine}` for its entry "
        "(docs/workspace.md \"Re-assigning an owner\")")


def refuse_a_file(folder: Path) -> None:
    """Refuse ``folder`` when it, or the nearest existing folder above it, is a file.

    Raises:
        WorkspaceError: that path is a file (or a dangling link), not a folder (field
            ``directory``): the owners' SQLite files need a folder.
    """
    for at in (folder, *folder.parents):  # the nearest existing one: a folder
        if at.exists() or at.is_symlink():
            if not at.is_dir():
                raise WorkspaceError(f"{str(at)!r} is a file, not a folder: the owners' "
                                     "SQLite files need a folder", directory=str(folder),
                                     fix="name a folder (it is created if missing)")
            return


class FolderOwnership:
    """A folder's recorded ownership maps, checked against this process's map.

    Args:
        folder: the :meth:`Workspace.sqlite` folder (created when missing).
        ownership: this process's map.

    Raises:
        WorkspaceError: a recorded map names another owner for one of this map's keys or
            patterns, or routes a sample key of either map to another owner (fields
            ``pattern`` or ``key``, ``owner``, ``other_owner``, ``folder``, ``record``,
            ``fix``); the record cannot be read or written (``folder``, ``record``,
            ``error``).
        StoreError: the folder cannot be made or the record file opened (as an owner's
            store would fail there: a NUL in the path, a file in the way).
    """

    def __init__(self, folder: Path, ownership: OwnershipMap) -> None:
        self.folder = folder
        self.ownership = ownership
        mine = ownership.to_dict()
        text = _map_text(mine)
        try:  # as an owner's store would fail on this folder (a NUL, a file in the way)
            self.folder.mkdir(parents=True, exist_ok=True)
            self._lock: int | None = lock_folder(folder, exclusive=False)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot open store: {exc}", path=repr(
                str(folder / LOCK_NAME))[1:-1]) from exc
        try:
            others = [m for m in self._record(text, mine) if m != mine]
        except BaseException:
            self.close()
            raise
        self.others = [OwnershipMap.from_mapping(m) for m in others]
        self._checked: set[str] = set()

    def close(self) -> None:
        """Release the folder's shared lock (the workspace closes it). Idempotent."""
        if self._lock is not None:
            close_lock(self._lock)
            self._lock = None

    def _record(self, text: str, mine: dict[str, str]) -> list[dict[str, str]]:
        """Check ``mine`` against the recorded maps and record it, in one transaction."""
        path = self.folder / RECORD_NAME
        try:  # as an owner's store would fail on this folder (a NUL, a file in the way)
            self.folder.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        except (OSError, ValueError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open store: {exc}", path=repr(str(path))[1:-1]
                             ) from exc
        try:
            db.execute("PRAGMA synchronous=FULL")
            db.execute(_SCHEMA)
            db.execute(RETIRED_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = recorded_maps(db, path)
                for other in rows:
                    compare_maps(mine, other, self.folder)
                if not rows:  # a folder from before the record: what do its files hold?
                    self._compare_files()
                digest = hashlib.sha256(text.encode()).hexdigest()
                db.execute("INSERT OR IGNORE INTO maps VALUES (?, ?)", (digest, text))
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
            return rows
        except (sqlite3.Error, ValueError) as exc:
            if isinstance(exc, WorkspaceError):
                raise
            raise WorkspaceError("cannot read or write the folder's ownership record",
                                 folder=str(self.folder), record=str(
                                     self.folder / RECORD_NAME), error=str(exc)) from exc
        finally:
            db.close()

    def _compare_files(self) -> None:
        """Refuse a key an owner file of the folder holds that this map gives another owner.

        Run once, when a folder made before the record is first opened: its maps are
        unknown, but the facts each ``<owner>.db`` holds a head of say who wrote them.
        """
        for path in sorted(self.folder.glob("*.db")):
            try:  # an empty file holds no head (its store's open judges its -wal)
                if path.stat().st_size == 0:
                    continue
                ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                     timeout=10.0)
            except (sqlite3.Error, ValueError, OSError):
                continue
            try:
                keys = [k for (k,) in ro.execute("SELECT key FROM heads")]
            except sqlite3.Error:
                continue  # not a store (its own open refuses it), or no heads yet
            finally:
                ro.close()
            for key in keys:
                mine = self.ownership.owner_of(key) if isinstance(key, str) else None
                if mine is not None and mine != path.stem:
                    raise _refusal("key", key, mine, path.stem, self.folder,
                                   seen=f"whose file {path.name} holds it")

    def check(self, key: str, owner: str) -> None:
        """Refuse ``key`` when a recorded map routes it to another owner than ``owner``.

        Raises:
            WorkspaceError: fields ``key``, ``owner``, ``other_owner``, ``folder``,
                ``record``, ``fix``.
        """
        if key in self._checked:
            return
        for om in self.others:
            theirs = om.owner_of(key)
            if theirs is not None and theirs != owner:
                raise _refusal("key", key, owner, theirs, self.folder)
        if len(self._checked) >= _MAX_CHECKED:
            self._checked.clear()
        self._checked.add(key)
