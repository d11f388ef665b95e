"""Refuse a database file that is not an icore store before anything writes to it (#29).

:class:`~icore.memory.SQLiteStore` switches its file to WAL, adds its tables and takes a
``<file>.lock`` beside it. Done to a user's own database (say the gateway's
``store.path`` is the app's folder, next to ``hotels.db``), that changes a file icore does
not own. :func:`refuse_foreign_file` looks at the file read-only first: a missing or empty
file, or an SQLite file holding only icore's tables (``meta`` with a ``format`` row, or
a store cut short before its first row), is an icore store; anything else is refused.

:class:`FileGuard` notices when the file is deleted or replaced while a store has it
open (#29).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import sqlite3
import sys
import threading
from pathlib import Path

from icore.errors import OwnerUnavailable, StoreError

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


WATCH = True
"""Let a :class:`FileGuard` skip its ``stat`` while inotify reports no change (Linux)."""

# inotify(7): entry changes in a watched folder, and the folder itself moved or removed
_IN_DIR = 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_IN_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000


def _watch(db_path: str) -> tuple[list[int], select.epoll] | None:
    """An inotify descriptor on every folder the path runs through, or None.

    Watched: each ancestor of the path as given and as resolved (a symlink swapped, a
    folder moved aside or re-made, a file renamed over or unlinked all change an entry
    of one of them, or move or remove the folder itself), plus ``/proc/self/mountinfo``
    (a mount over a folder changes no entry). Any event, and a queue overflow, only
    makes the next check ``stat``; None (no inotify, a watch refused: limits,
    permissions): every check does.
    """
    if not WATCH or not sys.platform.startswith("linux"):
        return None
    fds: list[int] = []
    ep: select.epoll | None = None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fds.append(libc.inotify_init1(_IN_NONBLOCK_CLOEXEC))
        if fds[0] < 0:
            fds.pop()
            return None
        given = Path(os.path.abspath(db_path)).parents
        real = Path(os.path.realpath(db_path)).parents
        for folder in dict.fromkeys([*given, *real]):
            if libc.inotify_add_watch(fds[0], os.fsencode(folder), _IN_DIR) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch", str(folder))
        fds.append(os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC))
        ep = select.epoll()
        ep.register(fds[0], select.EPOLLIN)
        ep.register(fds[1], select.EPOLLPRI | select.EPOLLERR)
    except (OSError, AttributeError):  # no inotify, limits, permissions: stat each time
        if ep is not None:
            ep.close()
        for fd in fds:
            os.close(fd)
        return None
    return fds, ep


_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
_WAL_HEADER_BYTES = 32


def refuse_truncated(path: Path) -> None:
    """Refuse an empty store file whose ``-wal`` or ``-journal`` holds data; never writes.

    An empty file (``touch``-ed, or made by an open cut short before its first write)
    is a new store. But icore writes a store's first page (the WAL switch) before
    anything reaches its ``-wal``, so an empty database beside a ``-wal`` with frames
    was cut to nothing after data was written (a crash, a copy of the file without its
    data, ``: > store.db``): opening it as a new store would make SQLite discard the
    ``-wal`` and every committed record in it. The same for a ``-journal`` whose header
    says the database had pages before its transaction. Missing or empty siblings, a
    ``-wal`` of only its header, a journal with no such header: a new store.

    Raises:
        StoreError: naming ``path``, the sibling and its size, and the fix.
    """
    try:
        if path.stat().st_size != 0:
            return
    except OSError:
        return  # missing (a new store) or unreadable: the open reports it
    wal = path.with_name(path.name + "-wal")
    journal = path.with_name(path.name + "-journal")
    found: tuple[Path, int] | None = None
    with contextlib.suppress(OSError):
        if (size := wal.stat().st_size) > _WAL_HEADER_BYTES:
            found = (wal, size)
    if found is None:
        with contextlib.suppress(OSError), journal.open("rb") as f:
            head = f.read(20)
            if head[:8] == _JOURNAL_MAGIC and int.from_bytes(head[16:20], "big") > 0:
                found = (journal, journal.stat().st_size)
    if found is not None:
        side, size = found
        raise StoreError(
            "the store file is empty but its " + side.name.rsplit("-", 1)[1] + " holds "
            "data: the file was cut to nothing after records were written; opening it "
            "as a new store would discard them", path=str(path), sibling=str(side),
            sibling_bytes=size,
            fix=f"restore {path.name} from a backup (or copy it together with its "
            f"{side.name}); only if that data is not wanted, move {side.name} aside")


class FileGuard:
    """The identity of a store's database file and its companions, as opened (#29).

    SQLite keeps reading and writing the file it opened after its path is unlinked or
    renamed, so a store whose folder was deleted and re-made would serve the old heads.
    The guard keeps (``st_dev``, ``st_ino``) of the database file, ``-wal``, ``-shm``
    and ``.lock``; :meth:`check` compares the database file at the path (one ``stat``),
    :meth:`check_all` every file. Once a check fails the guard stays lost: every later
    check raises, with no ``stat``. On Linux an inotify watch of the folders on the path
    (:data:`WATCH`) lets :meth:`check` skip the ``stat`` while no event is queued (one
    ``epoll_wait`` with no wait): events are queued by the system call that changes an
    entry, before it returns, so a change that happened before a read was asked for is
    seen by the check after that read.

    Args:
        db_path: the database file, already open in WAL mode (so ``-wal`` and ``-shm``
            exist and stay the same files while the connection is open: SQLite removes
            them only when the last connection closes).
        lock_fd: the open descriptor of ``<db_path>.lock`` that the store locked.
        owner: the store's agent, for the error.

    Raises:
        OSError: the database file cannot be stat'ed (the caller reports it).
    """

    def __init__(self, db_path: str, lock_fd: int, owner: str | None) -> None:
        self.db_path = db_path
        self.owner = owner
        self.lost: tuple[str, str] | None = None
        """(file, ``deleted`` or ``replaced``) once a check failed."""
        self._lock = threading.Lock()
        self.busy = False
        """A check is between draining the events and its ``stat``."""
        watch = _watch(db_path)  # before the identities: a change after it is queued
        self._fds: list[int] = [] if watch is None else watch[0]
        self._inotify = self._fds[0] if self._fds else -1
        self._ep: select.epoll | None = None if watch is None else watch[1]
        self.quiet = None if self._ep is None else self._ep.poll
        """``epoll.poll`` of the watch (None: no watch): empty while nothing changed."""
        st = os.stat(db_path)
        self._ident = (st.st_dev, st.st_ino)
        lock = os.fstat(lock_fd)
        self._others = [(db_path + ".lock", (lock.st_dev, lock.st_ino))]
        for suffix in ("-wal", "-shm"):
            try:
                st = os.stat(db_path + suffix)
            except FileNotFoundError:
                continue
            self._others.append((db_path + suffix, (st.st_dev, st.st_ino)))

    def error(self) -> OwnerUnavailable:
        """The error of a lost guard (a new one each time: no traceback piles up)."""
        assert self.lost is not None
        path, what = self.lost
        return OwnerUnavailable(
            f"the store's file {path} was {what} while the store was open: its reads "
            "and writes go to a file nobody else sees; close the store and open the path "
            "again", owner=self.owner, path=path, store=self.db_path, reason=what)

    def _lose(self, path: str, what: str) -> OwnerUnavailable:
        if self.lost is None:
            self.lost = (path, what)
        return self.error()

    def check(self) -> None:
        """Raise unless the database file at the path is still the one opened.

        One ``stat`` of the path (about 0.8 us of CPU, most of it building the result),
        or, with a watch and no event queued, one ``epoll_wait`` that does not wait.

        Raises:
            OwnerUnavailable: the file was deleted or replaced (fields ``path``,
                ``reason``), now or at an earlier check.
        """
        # quiet first, then busy, then lost: a change drained by a concurrent check
        # keeps that check busy until its stat found it (or not)
        if (self.quiet is not None and not self.quiet(0, 1) and not self.busy
                and self.lost is None):
            return  # nothing on the path changed since the last stat
        with self._lock:
            self.busy = True
            try:
                if self.lost is not None:
                    raise self.error()
                if self._inotify >= 0:
                    self._drain()  # first: an event after this is seen by the next check
                self._same(self.db_path, self._ident)
            finally:
                self.busy = False

    def _same(self, path: str, ident: tuple[int, int]) -> None:
        """Raise (and lose the guard) unless ``path`` is the file ``ident`` names."""
        try:
            st = os.stat(path)
        except OSError:
            raise self._lose(path, "deleted") from None
        if (st.st_dev, st.st_ino) != ident:
            raise self._lose(path, "replaced")

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._inotify, 65536):
                pass

    def close(self) -> None:
        """Release the inotify watch (the store is closing)."""
        if self._ep is not None:
            self._ep.close()
            for fd in self._fds:
                os.close(fd)
            self._ep = self.quiet = None
            self._fds, self._inotify = [], -1

    def check_all(self) -> None:
        """:meth:`check`, then the same for ``-wal``, ``-shm`` and ``.lock``.

        Raises:
            OwnerUnavailable: as :meth:`check`, naming the file that changed.
        """
        if self.lost is not None:
            raise self.error()
        for path, ident in [(self.db_path, self._ident), *self._others]:
            self._same(path, ident)
