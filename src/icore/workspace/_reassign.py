"""Re-assigning a pattern of a :meth:`Workspace.sqlite` folder to another owner (#28).

A folder records every ownership map it is opened with (``ownership.sqlite``) and
refuses a map naming another owner for a recorded entry, so a team that legitimately
moves ``campaign/*`` from ``mkt`` to ``sales`` had no way on. :func:`reassign_owner`
(``icore owners reassign FOLDER PATTERN --to OWNER``) does it safely:

1. It takes the folder's ``ownership.lock`` exclusively, without waiting: refused while
   any workspace (of this process or another) has the folder open, and every open waits
   until it is done. Each owner file's own ``<owner>.db.lock`` is probed too (a store
   opened directly, or by an icore from before the folder lock, holds it).
2. In one ``BEGIN IMMEDIATE`` transaction on the record it reads the maps (with the
   earlier re-assignments applied), finds the entry's present owner, and refuses a
   re-assignment that leaves two recorded maps routing a sample key differently (an
   exact key of the old owner under the pattern: re-assign it too).
3. The facts move: each head of the old owner's file whose key the maps now route to
   the new owner is written to the new owner's file as its version of the key, with
   the same content and type (a first version, or superseding the new owner's own
   head). The old owner's file is not changed: every record it holds, the old heads
   included, stays there (nothing committed is lost), and the new version names the
   old head in the record (``moved``), not as a parent (its lineage stays within one
   owner's file). A fact already moved (same content and type) is skipped, so a
   re-assignment cut short by a crash is finished by running it again.
4. The re-assignment is recorded as a new row of the record's ``retired`` table
   (pattern, old owner, new owner, moved keys); the maps' rows are never changed.

Afterwards a process opening the folder with the old owner for the entry is refused
(the fix names the new owner); the new map opens and reads the moved facts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from icore._flock import close_lock, open_lock
from icore.memory import OwnershipMap, SQLiteStore
from icore.records import RecordId, canonical_json
from icore.workspace._errors import WorkspaceError
from icore.workspace._folder_map import (
    RECORD_NAME,
    compare_maps,
    lock_folder,
    recorded_maps,
)
from icore.workspace._keys import OWNER_NAME
from icore.workspace._remote_writes import new_version


@dataclasses.dataclass(frozen=True)
class Reassignment:
    """What :func:`reassign_owner` did.

    Attributes:
        folder: the folder.
        patterns: the re-assigned entries (patterns or exact keys), in order.
        old_owners: entry -> its owner before.
        new_owner: their owner now.
        moved: key -> (the old owner's head id, the new owner's record id), per fact
            moved (a fact found moved already is listed with the new owner's head).
    """

    folder: str
    patterns: tuple[str, ...]
    old_owners: dict[str, str]
    new_owner: str
    moved: dict[str, tuple[RecordId, RecordId]]


def ownership_record(directory: str | os.PathLike[str]) -> dict[str, object]:
    """A folder's ownership record, read-only: its maps and re-assignments.

    Returns:
        ``{"folder", "maps": [the recorded maps as opened], "effective": [the maps
        with every re-assignment applied], "reassigned": [{"pattern", "old_owner",
        "new_owner", "moved": {key: [old head id, new record id]}}, in order]}``.

    Raises:
        WorkspaceError: the folder has no record, or it cannot be read (``error``).
    """
    folder, _ = _check_args(directory, "x", "x")
    try:
        db = sqlite3.connect(f"{(folder / RECORD_NAME).resolve().as_uri()}?mode=ro",
                             uri=True, timeout=30.0)
        try:
            maps = [json.loads(e) for (e,) in db.execute("SELECT entries FROM maps")]
            has = db.execute("SELECT 1 FROM sqlite_master WHERE name='retired'").fetchone()
            rows = [] if not has else [
                {"pattern": p, "old_owner": o, "new_owner": n, "moved": json.loads(m)}
                for p, o, n, m in db.execute("SELECT pattern, old_owner, new_owner, moved "
                                             "FROM retired ORDER BY n")]
        finally:
            db.close()
    except (sqlite3.Error, ValueError) as exc:
        raise WorkspaceError("cannot read the folder's ownership record", folder=str(
            folder), record=str(folder / RECORD_NAME), error=str(exc)) from exc
    effective = [dict(m) for m in maps]
    for r in rows:
        for m in effective:
            if m.get(r["pattern"]) == r["old_owner"]:
                m[r["pattern"]] = r["new_owner"]
    unique = [m for i, m in enumerate(effective) if m not in effective[:i]]
    return {"folder": str(folder), "maps": maps, "effective": unique,
            "reassigned": rows}


def _probe_owner_locks(folder: Path) -> None:
    """Refuse when any owner file of ``folder`` is open (its ``.lock`` held)."""
    for db in sorted(folder.glob("*.db")):
        lock = db.with_name(db.name + ".lock")
        fd = open_lock(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkspaceError(
                "an owner file of the folder is open in a store (this process or "
                "another): its owners cannot be re-assigned under it",
                folder=str(folder), file=str(db),
                fix="close every store of the folder (stop the processes using it), "
                "then re-assign") from None
        finally:
            close_lock(fd)


def _check_args(directory: object, pattern: object, to: object
                ) -> tuple[Path, list[str]]:
    if not isinstance(directory, str | os.PathLike) or not str(directory):
        raise WorkspaceError("reassign_owner needs the folder of a Workspace.sqlite (a str "
                             "or a path)", argument="directory", got=repr(directory)[:80])
    folder = Path(directory)
    if not (folder / RECORD_NAME).is_file():
        raise WorkspaceError("the folder has no ownership record: it was never opened "
                             "by Workspace.sqlite", folder=str(folder),
                             record=str(folder / RECORD_NAME))
    entries = [pattern] if isinstance(pattern, str) else pattern
    if not isinstance(entries, list | tuple) or not entries or not all(
            isinstance(p, str) and p for p in entries):
        raise WorkspaceError("pattern is the entry to re-assign, a non-empty str (a glob "
                             "pattern such as 'campaign/*' or an exact key), or a list "
                             "of them", argument="pattern", got=repr(pattern)[:80])
    if not isinstance(to, str) or not OWNER_NAME.match(to):
        raise WorkspaceError("to is the new owner: 1-63 characters of [A-Za-z0-9._-], not "
                             "starting with '.' or '-'", argument="to", got=repr(to)[:80])
    return folder, list(dict.fromkeys(entries))


def reassign_owner(directory: str | os.PathLike[str], pattern: str | Sequence[str], *,
                   to: str) -> Reassignment:
    """Re-assign ``pattern`` of a :meth:`Workspace.sqlite` folder to the owner ``to``.

    Args:
        directory: the folder (holding ``ownership.sqlite``).
        pattern: an entry of the recorded maps (``"campaign/*"``, or an exact key), or
            several re-assigned together (a pattern and an exact key under it that
            another recorded map names: one at a time would split that key).
        to: the new owner (an owner name).

    Returns:
        The :class:`Reassignment` (its ``moved`` facts).

    Raises:
        WorkspaceError: a bad argument (``argument``); the folder has no record; a
            workspace or store has the folder open (``lock`` or ``file``); no recorded
            map names an entry, or every entry is ``to``'s already; the re-assignment would
            leave two recorded maps naming different owners for a key (``key``,
            ``owner``, ``other_owner``: re-assign that entry too); the record cannot be
            read or written (``error``). Nothing is changed then.
        StoreError: an owner file cannot be opened or written (a fact already written
            to the new owner's file stays; running again finishes the move).
    """
    folder, entries = _check_args(directory, pattern, to)
    lock = lock_folder(folder, exclusive=True)
    try:
        _probe_owner_locks(folder)
        db = sqlite3.connect(str(folder / RECORD_NAME), timeout=30.0, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN IMMEDIATE")
            try:
                done = _reassign(db, folder, entries, to)
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, ValueError) as exc:
            if isinstance(exc, WorkspaceError):
                raise
            raise WorkspaceError("cannot read or write the folder's ownership record",
                                 folder=str(folder), record=str(folder / RECORD_NAME),
                                 error=str(exc)) from exc
        finally:
            db.close()
    finally:
        close_lock(lock)
    return done


def _reassign(db: sqlite3.Connection, folder: Path, entries: list[str], to: str
              ) -> Reassignment:
    maps = recorded_maps(db, folder / RECORD_NAME)
    olds: dict[str, str] = {}
    for p in entries:
        named = sorted({m[p] for m in maps if p in m} - {to})
        if not any(p in m for m in maps):
            raise WorkspaceError("no recorded map of the folder names this entry",
                                 folder=str(folder), pattern=p,
                                 entries=sorted({e for m in maps for e in m})[:20])
        if named:
            olds[p] = named[0]  # one owner per entry (a second one was refused)
    if not olds:
        raise WorkspaceError("the entry is this owner's already", folder=str(folder),
                             pattern=entries[0] if len(entries) == 1 else entries, owner=to)
    after = [{**m, **{p: to for p in olds if p in m}} for m in maps]
    for i, a in enumerate(after):
        for b in after[i + 1:]:
            compare_maps(a, b, folder)
    routes = [OwnershipMap.from_mapping(m) for m in after]
    moved: dict[str, tuple[RecordId, RecordId]] = {}
    for old in sorted(set(olds.values())):
        these = _move(folder, old, to, routes)
        moved.update(these)
        for p in (p for p, o in olds.items() if o == old):
            db.execute("INSERT INTO retired (pattern, old_owner, new_owner, moved) "
                       "VALUES (?, ?, ?, ?)", (p, old, to, json.dumps(
                           {k: list(v) for k, v in sorted(these.items())
                            if OwnershipMap.from_mapping(
                                {p: to}).owner_of(k) is not None})))
    return Reassignment(str(folder), tuple(olds), olds, to, moved)


def _move(folder: Path, old: str, to: str, routes: list[OwnershipMap]
          ) -> dict[str, tuple[RecordId, RecordId]]:
    """Write the old owner's heads the maps now route to ``to`` into ``to``'s file."""
    path = folder / f"{old}.db"
    if not path.exists():
        return {}
    src = SQLiteStore(path, OwnershipMap(), old)
    try:
        heads = {k: src.head(k) for k in src.head_keys()
                 if any(r.owner_of(k) == to for r in routes)}
        recs = {k: src.get(h.record_id) for k, h in heads.items() if h is not None}
    finally:
        src.close()
    if not recs:
        return {}
    out: dict[str, tuple[RecordId, RecordId]] = {}
    dst = SQLiteStore(folder / f"{to}.db", OwnershipMap({k: to for k in recs}), to)
    try:
        for key, rec in sorted(recs.items()):
            if rec is None or not rec.has_content:
                continue
            cur = dst.head(key)
            have = None if cur is None else dst.get(cur.record_id)
            if have is not None and have.type == rec.type and \
                    canonical_json(have.content) == canonical_json(rec.content):
                out[key] = (rec.id, have.id)  # moved already (a re-run)
                continue
            new = new_version(key, to, dst.next_seq(to), rec.content, inputs=[],
                              type=rec.type, expected=None if cur is None else cur.record_id)
            dst.commit(new, writer=to,
                       expected_head=None if cur is None else cur.record_id)
            out[key] = (rec.id, new.id)
    finally:
        dst.close()
    return out
