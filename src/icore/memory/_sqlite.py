"""Durable SQLite store: one file per agent, WAL journal (planfence App. A).

Every commit is one ``BEGIN IMMEDIATE`` transaction that re-reads the head and the owner
sequence, checks the owner rules and writes the record, the head and the sequence
together: concurrent writers (threads of one process, behind a per-store lock, and other
processes on the same file, behind SQLite's write lock) never both win, and a crash (even
``kill -9``) leaves either all of it or none of it.
With the default ``synchronous=NORMAL`` in WAL mode an acknowledged commit survives a
process crash; pass ``synchronous="FULL"`` to also survive power loss.

``exclusive=True`` (the owner service, ``icore serve``): this process is the file's only
user, enforced by an exclusive ``flock`` on ``<file>.lock`` that every other
:class:`SQLiteStore` of the file (which takes a shared one) conflicts with. Heads and owner
sequences are then also kept in an in-memory table, loaded at open and updated only after
a write transaction commits, so head queries are answered without touching SQLite or
waiting for a writer's fsync (issue 17); SQLite stays the durable copy.

A store notices when its file is deleted or replaced under it (#29): SQLite keeps reading
and writing the file it opened, even once it is unlinked, so an owner that deleted and
re-made its folder would leave this store serving the old heads, and commits landing in a
file nobody will open again. :class:`~icore.memory._store_file.FileGuard` keeps the
identity (device, inode) of the database file as opened and compares it with the file at
the path after every read a decision rests on (heads, owner sequences, head keys,
installed heads), and after every write transaction's ``COMMIT`` also those of ``-wal``,
``-shm`` and ``.lock``. A mismatch or a missing file raises
:class:`~icore.errors.OwnerUnavailable` naming the path, and every later call does too
(the store is lost: close it and open the path again). The check comes after the read,
so what was read came from the file that was current then. On Linux an inotify watch of
the path's folders lets the check skip its ``stat`` while no event is queued.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from icore._files import path_problem
from icore._flock import close_lock, open_lock
from icore._frozen import positional
from icore.errors import StoreError
from icore.memory._base import HeadEntry, Store
from icore.memory._ownership import OwnershipMap
from icore.memory._store_file import FileGuard, refuse_foreign_file, refuse_truncated
from icore.records import Record, RecordId, decode_record, encode_record

# records_key (an index on records(key, seq)) was never read, and it cost each commit a
# b-tree insert and about one more WAL page per record (issue 27): files that have it
# lose it at open.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    has_content INTEGER NOT NULL,
    complete INTEGER NOT NULL,
    body BLOB NOT NULL
) WITHOUT ROWID;
DROP INDEX IF EXISTS records_key;
CREATE TABLE IF NOT EXISTS heads (key TEXT PRIMARY KEY, id TEXT NOT NULL, seq INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS installed (key TEXT PRIMARY KEY, id TEXT NOT NULL,
    seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owner_seq (owner TEXT PRIMARY KEY, seq INTEGER NOT NULL,
    id TEXT NOT NULL) WITHOUT ROWID;
"""
_FORMAT = "icore-store-1"

_INSERT = ("INSERT INTO records VALUES (?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
           "has_content=excluded.has_content, body=excluded.body "
           "WHERE records.has_content=0 AND excluded.has_content=1")
_head = positional(HeadEntry)  # every field, no per-field setattr (issue 27)

LOCK_TIMEOUT_S = 10.0
"""How long a commit waits for another process's write transaction on the file, in s."""
PAGE_SIZE = 1024
"""Page size of a new store file, in bytes (issue 27): a commit writes the B-tree leaf of
its record's random id, so smaller pages put fewer bytes in the WAL to fsync (a group of
8 commits: 10.9 KB instead of 42.4 KB at SQLite's default 4096). Existing files keep
theirs."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SQLiteStore(Store):
    """A durable store in one SQLite file (WAL). See :class:`Store` for the API.

    Args:
        path: database file (created with its parent folder when missing).
        ownership: the team's ownership map.
        agent: the agent this store is authoritative for (None: central store).
        synchronous: SQLite ``synchronous`` pragma, ``"NORMAL"`` or ``"FULL"``.
        exclusive: this process is the file's only user (see the module docstring): heads
            are served from memory. Other processes may share a non-exclusive file.

    Raises:
        StoreError: the file is not an icore store, belongs to another agent, or is open
            in another store in a way that conflicts with ``exclusive``.
    """

    blocking_writes: ClassVar[bool] = True
    """Commits wait for disk I/O (the owner service runs them off its event loop)."""
    last_commit_s: float = 0.0
    """Wall time of the last write transaction's ``COMMIT`` (its fsync), in s (issue 27:
    the owner's group committer pipelines groups when the disk dominates)."""

    _write_reports_held: ClassVar[bool] = True

    def __init__(self, path: str | os.PathLike[str], ownership: OwnershipMap,
                 agent: str | None = None, *, synchronous: str = "NORMAL",
                 exclusive: bool = False) -> None:
        super().__init__(ownership, agent)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        if (bad := path_problem(path)) is not None:  # None, a number, a NUL, a surrogate
            raise StoreError(f"cannot open store: the path {bad}", path=repr(path)[:200])
        self.path = Path(path)
        refuse_foreign_file(self.path)  # before the lock file, the WAL switch, the tables
        refuse_truncated(self.path)  # an empty file whose -wal holds data: not a new one
        self.exclusive = exclusive
        self._lock = threading.RLock()
        self._depth = 0
        self._after_commit: list[Record] = []
        self._tx_thread: int | None = None
        self._heads: dict[str, HeadEntry] = {}
        self._seqs: dict[str, tuple[int, RecordId]] = {}
        self._staged_heads: dict[str, HeadEntry] = {}
        self._staged_seqs: dict[str, tuple[int, RecordId]] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lockfile = self._take_file_lock()
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise StoreError(f"cannot open store: {exc}", path=repr(str(self.path))[1:-1]
                             ) from exc
        try:
            self._open(agent, synchronous)
        except BaseException:
            close_lock(self._lockfile)
            if hasattr(self, "_db"):
                self._db.close()
            if hasattr(self, "_guard"):
                self._guard.close()
            raise

    def _open(self, agent: str | None, synchronous: str) -> None:
        try:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._db = sqlite3.connect(str(self.path), isolation_level=None,
                                       check_same_thread=False, timeout=LOCK_TIMEOUT_S)
            if new:  # before the first write; an existing file keeps its page size
                self._db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone() \
                    and self._db.execute("SELECT 1 FROM meta").fetchone() \
                    and not self._db.execute("SELECT 1 FROM meta WHERE name='format'").fetchone():
                # another icore file (e.g. a state log): refuse before writing to it
                self._db.close()
                raise StoreError("not an icore store", path=str(self.path))
            self._db.executescript(_SCHEMA)
            self._guard = FileGuard(str(self.path), self._lockfile, agent)  # WAL is open
            row = self._db.execute("SELECT value FROM meta WHERE name='format'").fetchone()
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(f"cannot open store: {exc}", path=str(self.path)) from exc
        try:
            self._load(row, agent)
        except sqlite3.DatabaseError as exc:  # a damaged page past the schema (round 9)
            raise StoreError(f"cannot open store: {exc}", path=str(self.path)) from exc

    def _load(self, row: tuple[str] | None, agent: str | None) -> None:
        """The rest of :meth:`_open`: the format mark, the incomplete ids, the heads."""
        if row is None:
            with self._tx():
                self._db.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
                self._db.execute("INSERT INTO meta VALUES ('agent', ?)", (agent or "",))
        else:
            if row[0] != _FORMAT:
                raise StoreError("not an icore store", path=str(self.path), format=row[0])
            a = self._db.execute("SELECT value FROM meta WHERE name='agent'").fetchone()
            if a is not None and a[0] != (agent or ""):
                raise StoreError("store file belongs to another agent", path=str(self.path),
                                 file_agent=a[0], agent=agent)
        self._incomplete: set[RecordId] = {
            r[0] for r in self._db.execute("SELECT id FROM records WHERE complete=0")
        }
        self._cache: dict[RecordId, Record] = {}
        if self.exclusive:
            self._heads = {k: HeadEntry(k, i, q) for k, i, q in
                           self._db.execute("SELECT key, id, seq FROM heads")}
            self._seqs = {o: (q, i) for o, q, i in
                          self._db.execute("SELECT owner, seq, id FROM owner_seq")}

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        """One row of a read (or None); a damaged file is a :class:`StoreError`.

        Inside this thread's write transaction the SQLite error is raised as it is: the
        transaction's end turns it into a :class:`StoreError` for the whole group (a
        group commit takes a typed error for one op's refusal and goes on, on a
        transaction SQLite may have rolled back already).
        """
        try:
            return self._db.execute(sql, args).fetchone()
        except sqlite3.DatabaseError as exc:  # sweep round 9: a corrupt page or text
            if self._depth and self._in_my_tx():
                raise
            raise StoreError(f"cannot read the store: {exc}", path=str(self.path)) from exc

    def _all(self, sql: str) -> list[Any]:
        """Every row of a read; a damaged file is a :class:`StoreError`."""
        try:
            return self._db.execute(sql).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read the store: {exc}", path=str(self.path)) from exc

    def _take_file_lock(self) -> int:
        """Shared (or, exclusive mode, exclusive) advisory lock on ``<file>.lock``."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = open_lock(lock_path, os.O_RDWR | os.O_CREAT, 0o600)  # a fork drops it (#29)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
                        | fcntl.LOCK_NB)
        except OSError as exc:
            close_lock(fd)
            raise StoreError("store file is in use by another process"
                             + (" (exclusive mode needs it alone)" if self.exclusive else
                                " that opened it exclusively (an owner service)"),
                             path=str(self.path)) from exc
        return fd

    def _begin_immediate(self) -> None:
        """Take the file's write lock, for at most ``LOCK_TIMEOUT_S`` seconds.

        It retries with short jittered sleeps while another process holds the lock
        (SQLite's own busy handler backs off to 100 ms sleeps, which starves contended
        writers).
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise StoreError(f"cannot start a transaction: {exc}",
                                 path=str(self.path)) from exc
        self._db.execute("PRAGMA busy_timeout=0")
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            pause = 0.0001
            while True:
                time.sleep(pause * (0.5 + random.random()))
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise StoreError(f"cannot start a transaction: {exc}",
                                         path=str(self.path)) from exc
                    if time.monotonic() > deadline:
                        raise StoreError("the store file stayed locked by another writer",
                                         path=str(self.path),
                                         timeout_s=LOCK_TIMEOUT_S) from exc
                pause = min(pause * 2, 0.002)
        finally:
            self._db.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")

    def _flush_staged(self) -> None:
        """Write the transaction's staged heads and owner sequences (exclusive mode).

        Inside the transaction they are read from the staged tables, so each key's and
        each owner's row is written once per transaction, just before ``COMMIT``, not once
        per commit (issue 27): a group of 8 commits of one owner writes 1 sequence row.
        """
        if self._staged_heads:
            self._db.executemany("INSERT OR REPLACE INTO heads VALUES (?,?,?)",
                                 [(h.key, h.record_id, h.seq)
                                  for h in self._staged_heads.values()])
        if self._staged_seqs:
            self._db.executemany("INSERT OR REPLACE INTO owner_seq VALUES (?,?,?)",
                                 [(o, q, i) for o, (q, i) in self._staged_seqs.items()])

    def _tx(self) -> _Tx | _Nested:
        if self._depth and self._tx_thread == threading.get_ident():
            return _NESTED
        return _Tx(self)

    def _critical(self) -> _Tx | _Nested:
        return self._tx()

    def heads(self, keys: Iterable[str], *, known: dict[str, RecordId] | None = None,
              inline_max_bytes: int = 0) -> dict[str, HeadEntry]:
        """:meth:`Store.heads`, then one check that the file is still the one opened.

        Raises:
            OwnerUnavailable: the store's file was deleted or replaced while open (#29,
                module docstring): nothing read is served; :meth:`head`,
                :meth:`~Store.head_keys`, :meth:`~Store.installed_head`,
                :meth:`~Store.owner_seq` and every write raise it too.
        """
        got = Store.heads(self, keys, known=known, inline_max_bytes=inline_max_bytes)
        g = self._guard  # after the reads: they came from the file current now
        if g.quiet is None or g.quiet(0, 1) or g.busy or g.lost is not None:
            g.check()  # the owner's hot path: FileGuard.check's test, inlined
        return got

    def head(self, key: str) -> HeadEntry | None:
        """:meth:`Store.head`, then the check of :meth:`heads` (raises as it does)."""
        got = super().head(key)
        self._guard.check()
        return got

    def _get_raw(self, rid: RecordId) -> Record | None:
        rec = self._cache.get(rid)
        if rec is not None:
            return rec
        with self._lock:
            try:
                row = self._one("SELECT body, complete FROM records WHERE id=?", (rid,))
            except UnicodeEncodeError:  # a lone surrogate: no record can have that id
                return None
        if row is None:
            return None
        rec = decode_record(row[0])
        if not row[1]:
            # another process may have committed it as lineage incomplete
            self._incomplete.add(rid)
        if len(self._cache) > 65536:
            self._cache.clear()
        self._cache[rid] = rec
        return rec

    def _in_my_tx(self) -> bool:
        return self._tx_thread == threading.get_ident()

    def _head_raw(self, key: str) -> HeadEntry | None:
        if self.exclusive:
            # the writer inside its transaction sees its own staged heads; everyone else
            # sees the committed (durable) table, without waiting for the writer
            if self._tx_thread is not None and self._in_my_tx():
                staged = self._staged_heads.get(key)
                if staged is not None:
                    return staged
            return self._heads.get(key)
        with self._lock:
            try:
                row = self._one("SELECT id, seq FROM heads WHERE key=?", (key,))
            except UnicodeEncodeError:  # a lone surrogate: no key stored has one
                return None
        return None if row is None else HeadEntry(key, row[0], row[1])

    def _owner_seq(self, owner: str) -> tuple[int, RecordId | None]:
        if self.exclusive:
            if self._tx_thread is not None and self._in_my_tx():
                staged = self._staged_seqs.get(owner)
                if staged is not None:
                    return staged
            got = self._seqs.get(owner)
            if not self._in_my_tx():
                self._guard.check()
            return (0, None) if got is None else got
        with self._lock:
            try:
                row = self._one("SELECT seq, id FROM owner_seq WHERE owner=?", (owner,))
            except UnicodeEncodeError:  # a lone surrogate: no owner stored has one
                return (0, None)
            if not self._in_my_tx():  # a commit checks after its COMMIT
                self._guard.check()
        return (0, None) if row is None else (row[0], row[1])

    def _insert(self, rec: Record, complete: bool, encoded: bytes | None = None) -> bool:
        """Insert ``rec``, or attach its content to a held envelope.

        Returns:
            False when nothing changed: ``rec`` was already held with its content.
        """
        return self._db.execute(
            _INSERT,
            (rec.id, rec.key, rec.owner, rec.seq, int(rec.has_content), int(complete),
             encode_record(rec) if encoded is None else encoded),
        ).rowcount != 0

    def _write_commit(self, rec: Record, complete: bool, encoded: bytes | None = None
                      ) -> bool:
        if not self._depth:  # called outside a transaction: open one
            with self._tx():
                return self._write_commit(rec, complete, encoded)
        # inside Store._commit's transaction (issue 27: no nested level per record)
        if not self._insert(rec, complete, encoded):
            return False  # held with its content: an idempotent replay (Store._commit)
        if self.exclusive:  # written once per transaction (_flush_staged)
            self._staged_heads[rec.key] = _head(rec.key, rec.id, rec.seq, None)
            self._staged_seqs[rec.owner] = (rec.seq, rec.id)
        else:
            self._db.execute("INSERT OR REPLACE INTO heads VALUES (?,?,?)",
                             (rec.key, rec.id, rec.seq))
            self._db.execute("INSERT OR REPLACE INTO owner_seq VALUES (?,?,?)",
                             (rec.owner, rec.seq, rec.id))
        # the verified record with content, cached once the transaction commits: the
        # next version's parent check reads it
        self._after_commit.append(rec)
        if not complete:
            self._incomplete.add(rec.id)
        return True

    def _write_install(self, rec: Record, complete: bool, move_installed: bool) -> None:
        with self._tx():
            self._insert(rec, complete)
            if move_installed:
                self._db.execute("INSERT OR REPLACE INTO installed VALUES (?,?,?)",
                                 (rec.key, rec.id, rec.seq))
        self._cache.pop(rec.id, None)
        if not complete:
            self._incomplete.add(rec.id)

    def _installed_raw(self, key: str) -> HeadEntry | None:
        with self._lock:
            try:
                row = self._one("SELECT id, seq FROM installed WHERE key=?", (key,))
            except UnicodeEncodeError:  # a lone surrogate: no key stored has one
                return None
            if not self._in_my_tx():  # installed_head; an install checks after COMMIT
                self._guard.check()
        return None if row is None else HeadEntry(key, row[0], row[1])

    def _incomplete_ids(self) -> set[RecordId]:
        return self._incomplete

    def _mark_complete(self, rid: RecordId) -> None:
        with self._tx():
            self._db.execute("UPDATE records SET complete=1 WHERE id=?", (rid,))
        self._incomplete.discard(rid)

    def _has_content(self, rid: RecordId) -> bool:
        with self._lock:
            row = self._one("SELECT has_content FROM records WHERE id=?", (rid,))
        return bool(row and row[0])

    def _store_content(self, rec: Record) -> None:
        with self._tx():
            self._insert(rec, rec.id not in self._incomplete)
        self._cache.pop(rec.id, None)

    def _head_keys(self) -> list[str]:
        if self.exclusive:
            keys = sorted(self._heads)
        else:
            with self._lock:
                keys = [r[0] for r in self._all("SELECT key FROM heads ORDER BY key")]
        self._guard.check()
        return keys

    def _close(self) -> None:
        with self._lock:
            self._db.close()
            close_lock(self._lockfile)
            self._guard.close()

    def record_count(self) -> int:
        """Return the number of records held (own and cached)."""
        with self._lock:
            return int(self._one("SELECT count(*) FROM records", ())[0])


def _write_failed(store: SQLiteStore, exc: sqlite3.Error) -> StoreError:
    """The error of a write transaction SQLite could not complete.

    A full disk, the file size limit (``RLIMIT_FSIZE``), an I/O error: nothing of it was
    committed (sweep round 9).
    """
    return StoreError(f"cannot write the store: {exc}; nothing of this write was "
                      "committed", path=str(store.path),
                      fix="free disk space (or raise the file size limit) and retry")


class _Tx:
    """Re-entrant write transaction.

    The outermost level runs ``BEGIN IMMEDIATE`` (the file's write lock, so reads
    inside see the latest committed state of every process) and ``COMMIT`` /
    ``ROLLBACK``; inner levels only hold the thread lock.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        store = self.store
        store._lock.acquire()
        if store._depth == 0:
            try:
                if store._guard.lost is not None:  # write nothing into a lost file
                    raise store._guard.error()
                store._begin_immediate()
            except BaseException:
                store._lock.release()
                raise
            store._tx_thread = threading.get_ident()
        store._depth += 1

    def __exit__(self, et: object, ev: object, tb: object) -> None:
        store = self.store
        store._depth -= 1
        try:
            if store._depth == 0:
                store._tx_thread = None
                done, store._after_commit = store._after_commit, []
                try:
                    if et is None:
                        store._flush_staged()
                        t0 = time.perf_counter()
                        store._db.execute("COMMIT")
                        store.last_commit_s = time.perf_counter() - t0
                        store._guard.check_all()  # it landed in the path's files
                    elif store._db.in_transaction:  # SQLite already rolled back on a
                        store._db.execute("ROLLBACK")  # full disk or an I/O error
                except BaseException as exc:
                    store._staged_heads.clear()
                    store._staged_seqs.clear()
                    if store._db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            store._db.execute("ROLLBACK")  # nothing of it is written
                    if et is None and isinstance(exc, sqlite3.Error):
                        raise _write_failed(store, exc) from exc
                    if et is None:
                        raise
                    # the ROLLBACK of a failed body failed too: report the body's error
                # the caches and the in-memory table follow only what is durable
                if et is None:
                    for rec in done:
                        store._cache[rec.id] = rec
                    store._heads.update(store._staged_heads)
                    store._seqs.update(store._staged_seqs)
                store._staged_heads.clear()
                store._staged_seqs.clear()
                if isinstance(ev, sqlite3.Error):  # the transaction's own write failed
                    raise _write_failed(store, ev) from ev
        finally:
            store._lock.release()


class _Nested:
    """An inner level of the calling thread's own transaction: nothing to do.

    The thread already holds the lock and the transaction; only the outermost level
    commits or rolls back, and an exception still reaches it (issue 27: a group
    commit enters its transaction twice per record).
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: object, ev: object, tb: object) -> None:
        return None


_NESTED = _Nested()
