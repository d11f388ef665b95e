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
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import sqlite3
from pathlib import Path

from icore.errors import StoreError
from icore.memory import OwnershipMap
from icore.workspace._errors import WorkspaceError
from icore.workspace._keys import _tokens

RECORD_NAME = "ownership.sqlite"
"""File name of a folder's ownership record (owner files end in ``.db``: no clash)."""

_SCHEMA = ("CREATE TABLE IF NOT EXISTS maps (id TEXT PRIMARY KEY, entries TEXT NOT NULL)"
           " WITHOUT ROWID")
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


def _refusal(what: str, name: str, mine: str, theirs: str, folder: Path, *,
             seen: str = "as recorded") -> WorkspaceError:
    return WorkspaceError(
        "two ownership maps name different owners for one fact of this folder: this "
        "process would read and write another owner's file than the other one does",
        **{what: name}, owner=mine, other_owner=theirs, folder=str(folder),
        record=str(folder / RECORD_NAME),
        fix=f"give every process of the folder the same owner for {name!r} "
        f"({theirs!r}, {seen}); an owner is changed by migrating its facts to a new "
        "folder")


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
        others = [m for m in self._record(text, mine) if m != mine]
        self.others = [OwnershipMap.from_mapping(m) for m in others]
        self._checked: set[str] = set()

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
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = [_recorded(e, path) for (e,) in db.execute("SELECT entries FROM maps")]
                for other in rows:
                    self._compare(mine, other)
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

    def _compare(self, mine: dict[str, str], other: dict[str, str]) -> None:
        for name, owner in sorted(mine.items()):
            theirs = other.get(name)
            if theirs is not None and theirs != owner:
                what = "pattern" if any(c in name for c in "*?[") else "key"
                raise _refusal(what, name, owner, theirs, self.folder)
        om = OwnershipMap.from_mapping(other)
        for name in sorted({*mine, *other}):
            for key in samples(name):
                a, b = self.ownership.owner_of(key), om.owner_of(key)
                if a is not None and b is not None and a != b:
                    raise _refusal("key", key, a, b, self.folder)

    def _compare_files(self) -> None:
        """Refuse a key an owner file of the folder holds that this map gives another owner.

        Run once, when a folder made before the record is first opened: its maps are
        unknown, but the facts each ``<owner>.db`` holds a head of say who wrote them.
        """
        for path in sorted(self.folder.glob("*.db")):
            try:
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
