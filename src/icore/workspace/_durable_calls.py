"""A protected call's first attempt, kept on disk across a restart (#30).

A process killed while a protected call's body ran (``kill -9`` inside ``pay``) left no
trace of it: a new process resuming the saved conversation (the model's same tool call,
replayed) had no reads, read again and ran ``pay`` a second time. When the workspace is
on disk (:meth:`~icore.workspace.Workspace.sqlite`) and the call has an identity that
survives a restart (``call_id=`` of :meth:`~icore.workspace.Agent.execute`; the
integrations pass the model's tool-call id; CrewAI the model call's digest and the call's
index in its message), its first attempt is
kept in ``<folder>/icore-attempts.sqlite`` (table ``calls``, one row per call):

* before the gate, :meth:`AttemptsFile.look` finds an earlier attempt of the same call;
* right before the body runs (after the gate and any approval), :meth:`AttemptsFile.claim`
  checks and writes the row ``started`` in one ``BEGIN IMMEDIATE`` transaction (SQLite
  orders two processes), owned by this process's *holder*; a process is alive while it
  holds an ``flock`` on ``icore-attempts.d/<holder>.lock`` (the kernel drops it however
  the process ends);
* after the body, :meth:`AttemptsFile.settle` writes ``ran`` (its result as text),
  ``unknown`` (it raised, not ``NoEffect``: it may have acted) or deletes the row
  (``NoEffect``: nothing ran, a retry may run).

What a later attempt of the same call finds (:class:`Found`): a ``started`` row of a live
holder (another process, or another thread here, runs it now): refused
:data:`CALL_RUNNING`; a ``started`` row of a dead holder (the process died mid-call) or
an ``unknown`` one: refused :data:`EARLIER_UNKNOWN`, the model told the
unknown-outcome text (the row becomes ``told`` and keeps refusing the same call: a saved
conversation resumed again replays the same tool call, which must not run then either,
QA qa-new18a S1; the model's new decision after its check is a new tool call, with a new
id); a ``ran`` row: refused :data:`ALREADY_RAN` with the result. Finished rows (``ran``,
``told``) older than :data:`KEEP_S` or beyond the newest :data:`KEEP_ROWS`, and unfinished
ones older than :data:`KEEP_S`, are pruned (when the file is opened and every
:data:`_PRUNE_EVERY` claims). A failing file (not a database, unwritable, locked) is a
:class:`~icore.errors.StoreError` naming it, whichever integration called (nothing runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icore._flock import close_lock, locked_elsewhere, open_lock
from icore.errors import StoreError
from icore.workspace._call import Call, _Rejected
from icore.workspace._errors import WorkspaceError
from icore.workspace._unknown import (
    check_first,
    error_text,
    leaves_effect_open,
    unknown_outcome_text,
)

FILE_NAME = "icore-attempts.sqlite"
"""The attempts file in a ``Workspace.sqlite`` folder."""
LOCKS = "icore-attempts.d"
"""The folder of the holders' lock files beside it."""
KEEP_S = 7 * 24 * 3600.0
"""Seconds a finished (or never finished) call is kept (7 days)."""
KEEP_ROWS = 10_000
"""Most finished calls kept (the oldest pruned first)."""
STARTED, RAN, UNKNOWN, TOLD = "started", "ran", "unknown", "told"
"""Row states: the body runs (or its process died), it returned, it raised leaving its
effect open, the model was told its outcome is unknown."""
EARLIER_UNKNOWN = "earlier_outcome_unknown"
"""Call reason: the same call's earlier attempt started and never finished (its process
stopped), or raised after its body started: its outcome is unknown; not run again."""
CALL_RUNNING = "call_running"
"""Call reason: the same call runs now in another process (or thread); not run twice."""
ALREADY_RAN = "already_ran"
"""Call reason: the same call already ran (before a restart); not run again."""
STOPPED = "the process stopped mid-call (killed or crashed) before the tool returned"
"""The error of an attempt found ``started`` by a dead holder."""
_PRUNE_EVERY = 256
_MAX_TEXT = 2000
_HOLDER = re.compile(r"[0-9]{1,10}-[0-9a-f]{12}")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, tool TEXT NOT NULL, "
           "how TEXT NOT NULL, holder TEXT, value TEXT, at REAL NOT NULL)",
           "CREATE INDEX IF NOT EXISTS calls_at ON calls (how, at)")


@dataclass(frozen=True, slots=True)
class Found:
    """An earlier attempt of a call, as a later one finds it.

    Attributes:
        how: :data:`CALL_RUNNING`, :data:`EARLIER_UNKNOWN` or :data:`ALREADY_RAN` (the
            refused call's reason).
        value: the earlier error (:data:`EARLIER_UNKNOWN`) or result text
            (:data:`ALREADY_RAN`); None while running.
    """

    how: str
    value: str | None = None


def call_key(agent: str, action: str, call_id: str, args: Mapping[str, Any]) -> str:
    """A call's row key: sha256 hex of the agent, tool, call id and canonical arguments."""
    text = json.dumps([agent, action, call_id, dict(args)], sort_keys=True, default=repr,
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _text(value: Any) -> str:
    try:
        out = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                              default=str)
    except (TypeError, ValueError):
        out = repr(value)
    return out[:_MAX_TEXT]


class AttemptsFile:
    """The ``calls`` table of one folder's attempts file (thread-safe; see module).

    Args:
        folder: the ``Workspace.sqlite`` folder (the file and lock folder are created).
        keep_s: seconds a finished or unfinished call is kept (> 0).
        keep_rows: most finished calls kept (>= 1).

    Every method that touches the file raises :class:`~icore.errors.StoreError` (fields
    ``path`` and ``fix``) when it fails - not a database, unwritable, locked past 30 s -
    never a bare ``sqlite3.Error`` (QA qa-new18a #4): the call it guards does not run.

    Raises:
        ValueError: ``keep_s`` <= 0 or ``keep_rows`` < 1.
        StoreError: the files cannot be created or opened.
    """

    def __init__(self, folder: Path, *, keep_s: float = KEEP_S,
                 keep_rows: int = KEEP_ROWS) -> None:
        if not keep_s > 0 or keep_rows < 1:
            raise ValueError(f"keep_s must be > 0 and keep_rows >= 1, got {keep_s}, "
                             f"{keep_rows}")
        self.folder, self.keep_s, self.keep_rows = Path(folder), keep_s, keep_rows
        self._lock = threading.Lock()
        self._pid = -1
        self._fd = -1
        self._db: sqlite3.Connection | None = None
        self._claims = 0
        self.holder = ""
        with self._lock, self._failing("cannot open"):
            self._open()

    @contextlib.contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """A failure of the file inside the block, as a :class:`StoreError`."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{what} the fenced calls' attempts file: {exc}",
                             path=str(self.folder / FILE_NAME),
                             fix="move the file away (it keeps only the attempts of calls "
                             "in flight and finished ones for a while; its pending approval "
                             "requests are lost too, those calls are asked again) or make "
                             "it and its folder writable; no tool body ran") from exc

    def _open(self) -> None:
        """Under the lock: this process's holder, lock file and connection.

        Opened again after a fork: a child never uses its parent's holder or connection.
        """
        locks = self.folder / LOCKS
        locks.mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()
        self.holder = f"{self._pid}-{secrets.token_hex(6)}"
        self._fd = open_lock(locks / f"{self.holder}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        db = sqlite3.connect(str(self.folder / FILE_NAME), timeout=30.0,
                             isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode = WAL")  # a commit survives kill -9 (the threat)
        db.execute("PRAGMA synchronous = NORMAL")
        for stmt in _SCHEMA:
            db.execute(stmt)
        self._db = db
        self._prune(db)
        for path in locks.glob("*.lock"):  # lock files of processes gone
            if path.stem != self.holder and _HOLDER.fullmatch(path.stem):
                self._alive(path.stem)

    def _conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid() or self._db is None:
            self._open()
        assert self._db is not None
        return self._db

    def close(self) -> None:
        """Close the connection and release this process's holder lock (idempotent)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    (self.folder / LOCKS / f"{self.holder}.lock").unlink()
                close_lock(self._fd)
                self._fd = -1

    def _alive(self, holder: str | None) -> bool:
        """Whether ``holder`` still holds its lock (a dead holder's lock file is removed)."""
        if holder == self.holder:
            return True
        if holder is None or not _HOLDER.fullmatch(holder):
            return False
        path = self.folder / LOCKS / f"{holder}.lock"
        held = locked_elsewhere(path, exclusive=True)
        if held or (held is None and path.exists()):  # unreadable: fail closed, alive
            return True
        with contextlib.suppress(OSError):
            path.unlink()
        return False

    def _take(self, key: str, tool: str | None) -> Found | None:
        """Find ``key``'s earlier attempt; with ``tool``, claim the call when none stands."""
        with self._lock, self._failing("cannot use"):
            db = self._conn()
            if tool is None:  # a look: no write lock unless an earlier attempt stands
                row = db.execute("SELECT how FROM calls WHERE key = ?", (key,)).fetchone()
                if row is None:
                    return None
            db.execute("BEGIN IMMEDIATE")
            try:
                found = self._found(db, key)
                if found is None and tool is not None:
                    db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, NULL, ?)",
                               (key, tool, STARTED, self.holder, time.time()))
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # none open when COMMIT failed
                    db.execute("ROLLBACK")
                raise
            if found is None and tool is not None:
                self._claims += 1
                if self._claims % _PRUNE_EVERY == 0:
                    self._prune(db)
            return found

    def _found(self, db: sqlite3.Connection, key: str) -> Found | None:
        row = db.execute("SELECT how, holder, value FROM calls WHERE key = ?",
                         (key,)).fetchone()
        if row is None:
            return None
        how, holder, value = row
        if how == TOLD:  # the same call replayed (a saved state resumed again): never run
            return Found(EARLIER_UNKNOWN, value or STOPPED)
        if how == RAN:
            return Found(ALREADY_RAN, value)
        if how == STARTED and self._alive(holder):
            return Found(CALL_RUNNING)
        error = STOPPED if how == STARTED else (value or "an error")
        db.execute("UPDATE calls SET how = ?, holder = NULL, value = ?, at = ? WHERE key = ?",
                   (TOLD, error, time.time(), key))
        return Found(EARLIER_UNKNOWN, error)

    def look(self, key: str) -> Found | None:
        """The earlier attempt of the call ``key`` (before its gate), else None.

        A dead or failed attempt found here is told (its row becomes ``told``, which
        refuses the same call again: only a new call id runs).

        Raises:
            StoreError: the file failed (the call must not run).
        """
        return self._take(key, None)

    def claim(self, key: str, tool: str) -> Found | None:
        """Claim the call ``key`` right before its body runs: None when claimed.

        Otherwise the earlier attempt found (nothing is claimed: the body must not run).

        Raises:
            StoreError: the file failed (the body must not run).
        """
        return self._take(key, tool)

    def settle(self, key: str, how: str | None, value: Any = None) -> None:
        """How this process's claimed attempt of ``key`` ended (``how`` None: delete it).

        ``how``: :data:`RAN` (``value``: the result) or :data:`UNKNOWN` (``value``: the
        error text). A row another holder owns now is left alone.

        Raises:
            ValueError: ``how`` is not :data:`RAN`, :data:`UNKNOWN` or None.
        """
        if how not in (RAN, UNKNOWN, None):
            raise ValueError(f"how must be ran, unknown or None, got {how!r}")
        with self._lock, self._failing("cannot write the outcome to"):
            db = self._conn()
            if how is None:
                db.execute("DELETE FROM calls WHERE key = ? AND holder = ?",
                           (key, self.holder))
                return
            db.execute("UPDATE calls SET how = ?, value = ?, holder = NULL, at = ? "
                       "WHERE key = ? AND holder = ?",
                       (how, _text(value), time.time(), key, self.holder))

    def prune(self) -> None:
        """Drop calls past :attr:`keep_s` and finished ones beyond :attr:`keep_rows`."""
        with self._lock, self._failing("cannot prune"):
            self._prune(self._conn())

    def _prune(self, db: sqlite3.Connection) -> None:
        old = time.time() - self.keep_s
        live = [h for (h,) in db.execute(
            "SELECT DISTINCT holder FROM calls WHERE how = ? AND at < ?", (STARTED, old))
            if self._alive(h)]
        db.execute("DELETE FROM calls WHERE at < ? AND (holder IS NULL OR holder NOT IN "
                   f"({','.join('?' * len(live))}))", (old, *live))
        db.execute("DELETE FROM calls WHERE how IN (?, ?) AND key NOT IN (SELECT key FROM "
                   "calls WHERE how IN (?, ?) ORDER BY at DESC LIMIT ?)",
                   (RAN, TOLD, RAN, TOLD, self.keep_rows))

    def rows(self) -> dict[str, tuple[str, str | None]]:
        """Key -> ``(how, value)`` of every call held (for tests and diagnostics)."""
        with self._lock, self._failing("cannot read"):
            return {k: (h, v) for k, h, v in self._conn().execute(
                "SELECT key, how, value FROM calls")}


def refusal_detail(action: str, found: Found) -> str:
    """What the model reads of a call refused because of its earlier attempt."""
    if found.how == EARLIER_UNKNOWN and found.value in (None, STOPPED):
        return (f"this same tool call (same model call, same arguments) started in an earlier "
                f"run of the app and never finished ({STOPPED}); it may have run, so its "
                f"outcome is unknown: {check_first(action)}")
    if found.how == EARLIER_UNKNOWN:
        return (f"this same tool call (same model call, same arguments) was tried before: "
                f"{unknown_outcome_text(action, found.value or 'an error')}")
    if found.how == CALL_RUNNING:
        return ("this same call is running now (in another process of the app, or another "
                "thread); it is not run twice: wait for its result, do not call it again")
    return (f"this same tool call (same model call, same arguments) already ran, in this run "
            f"or one before a restart; it is not run again. Its result: {found.value}")


@dataclass
class Claim:
    """One protected call's durable attempt: its file, its key, its tool.

    The trampoline calls :meth:`take` right before the body, then :meth:`returned` or
    :meth:`raised`.
    """

    file: AttemptsFile
    key: str
    action: str
    found: Found | None = None
    """The earlier attempt that refused this call (set by :meth:`refused` / :meth:`take`)."""

    def refused(self, args: Mapping[str, Any]) -> Call | None:
        """Before the gate: the refused :class:`Call` when an earlier attempt stands.

        Raises:
            StoreError: the attempts file failed (fail closed: nothing runs).
        """
        found = self.found = self.file.look(self.key)
        if found is None:
            return None
        return Call(self.action, False, reason=found.how, args=dict(args),
                    detail=refusal_detail(self.action, found))

    def take(self) -> None:
        """Claim the call right before its body runs.

        Raises:
            _Rejected: an earlier attempt stands (its reason and detail); nothing runs.
            StoreError: the attempts file failed (nothing runs).
        """
        found = self.found = self.file.claim(self.key, self.action)
        if found is not None:
            raise _Rejected(refusal_detail(self.action, found), found.how)

    def returned(self, value: Any) -> None:
        """The body returned ``value``: ran, or (an integration's failure value) failed."""
        if getattr(value, "may_have_run", None) is True:
            self.file.settle(self.key, UNKNOWN, getattr(value, "error", None) or "an error")
        elif getattr(value, "may_have_run", None) is False and hasattr(value, "error"):
            self.file.settle(self.key, None)  # NoEffect, or the body never ran
        else:
            self.file.settle(self.key, RAN, value)

    def raised(self, exc: BaseException) -> None:
        """The body raised ``exc``: its effect is open (unknown) unless ``NoEffect``."""
        if leaves_effect_open(exc):
            self.file.settle(self.key, UNKNOWN, error_text(exc))
        else:
            self.file.settle(self.key, None)


def claimer(workspace: Any, agent: str) -> Callable[[str, Any, Mapping[str, Any]],
                                                     Claim | None]:
    """``(action, call_id, args) -> Claim | None`` for one agent of ``workspace``.

    A :class:`Claim` when the workspace is on disk (its ``folder_record``:
    :meth:`~icore.workspace.Workspace.sqlite`) and ``call_id`` is given; else None.
    """
    def claim(action: str, call_id: Any, args: Mapping[str, Any]) -> Claim | None:
        if call_id is None:
            return None
        if not isinstance(call_id, str) or not call_id or len(call_id) > 1000:
            raise WorkspaceError("call_id names the call across a restart: a non-empty str "
                                 "(at most 1000 characters), e.g. the model's tool-call id",
                                 action=action, got=repr(call_id)[:80])
        record = getattr(workspace, "folder_record", None)
        if record is None:
            return None
        return Claim(attempts_in(Path(record.folder)),
                     call_key(agent, action, call_id, args), action)

    return claim


_FILES: dict[Path, AttemptsFile] = {}
_FILES_LOCK = threading.Lock()


def attempts_in(folder: Path) -> AttemptsFile:
    """The one :class:`AttemptsFile` of ``folder`` in this process (opened on first use).

    Raises:
        StoreError: the files cannot be created or opened (fields ``path``, ``fix``).
    """
    path = Path(folder).resolve()
    with _FILES_LOCK:
        got = _FILES.get(path)
        if got is None:
            got = _FILES[path] = AttemptsFile(path)
        return got


__all__ = ["ALREADY_RAN", "CALL_RUNNING", "EARLIER_UNKNOWN", "FILE_NAME", "KEEP_ROWS",
           "KEEP_S", "LOCKS", "AttemptsFile", "Claim", "Found", "attempts_in", "call_key",
           "claimer", "refusal_detail"]
