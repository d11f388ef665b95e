"""A fenced LangGraph call's first attempt, kept on disk across a restart (#28).

:class:`~._replays.StepMemory` holds a call's first attempt per process: a process killed
mid-call (``kill -9`` while the tool's body ran) and a new one resuming the thread with
``graph.invoke(None, config)`` re-runs the same tool call (the same ``tool_call_id`` of
the checkpointed message) as new (QA qa-new14 S1: refused ``not_read``, the model read
again and called again: the effect twice). When the app already keeps durable state in
SQLite, the attempt is kept there too: :class:`AttemptsFile` is a table ``attempts`` in
``icore-attempts.sqlite`` in the folder of the fenced tool's ``Workspace.sqlite`` (agent
mode) or of the :class:`~icore.memory.SQLiteStore` under the graph's
:class:`~._checkpoint.RecordCheckpointSaver`. Its row is written (committed) as
:data:`~icore.integrations._call_ledger.STARTED` before the tool's body runs and updated
to how it ended after; a re-run finding ``started`` (the process died mid-call) or
``unknown`` is refused ``earlier_outcome_unknown``, a ``ran`` one gets the recorded
answer. Nothing durable configured (an in-memory workspace and checkpointer): nothing is
written, the per-process memory alone answers. Rows older than :data:`KEEP_S` and
finished ones beyond :data:`KEEP_ROWS` are pruned (when the file is opened and every 256
calls, #30). In agent mode on a ``Workspace.sqlite`` folder the call is also claimed in
the workspace's ``calls`` table of the same file (``Agent.execute``'s ``call_id``), which
orders two processes resuming one thread: the second is refused ``call_running``.

A file that cannot serve (not a database, a folder in its place, another program's
``attempts`` table, read-only, locked past 30 s) is a :class:`~icore.errors.StoreError`
naming it, raised before the tool's body runs (fail closed: nothing ran). A row that
cannot be read back (a value that is no JSON, or no text) is taken for an attempt whose
outcome is unknown (refused, never run again). A failed write of how an attempt ended
(after the body ran) is logged naming the file: the row stays ``started``, so a resumed
step is refused outcome unknown, never run twice (#29, round 10).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from icore.errors import StoreError
from icore.integrations._call_ledger import RAN, REFUSED, STARTED, UNKNOWN, Earlier
from icore.integrations._rerun import RETRY_UNKNOWN, check_first
from icore.integrations.langgraph._branches import Step
from icore.memory import SQLiteStore

FILE_NAME = "icore-attempts.sqlite"
"""The file of :class:`AttemptsFile` in the app's SQLite folder."""
_OPAQUE = "opaque"  # a result that is not JSON: kept as its text
log = logging.getLogger("icore.integrations")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS attempts (key TEXT PRIMARY KEY, tool TEXT NOT NULL, "
           "thread TEXT, tool_call_id TEXT, how TEXT NOT NULL, kind TEXT, value TEXT, "
           "at REAL)")
KEEP_S = 7 * 24 * 3600.0
"""Seconds a step's call is kept (7 days; the workspace's ``calls`` table keeps as long)."""
KEEP_ROWS = 10_000
"""Most finished calls kept (the oldest pruned first)."""
_PRUNE_EVERY = 256


def durable_key(step: Hashable | None) -> str | None:
    """A :func:`~._replays.step_key` as stable text (sha256 hex; None: not durable).

    Thread, checkpoint map (graph namespace -> checkpoint id), task namespace units,
    tool-call id and canonical arguments: what the step memory compares, and equal in a
    new process resuming the same checkpoint.
    """
    if not isinstance(step, tuple) or len(step) != 3 or not isinstance(step[1], Step):
        return None
    (thread, call_id), where, args = step
    text = json.dumps([repr(thread), [list(p) for p in where.cmap], list(where.units),
                       call_id, args], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def stopped_message(tool: str) -> str:
    """What the model reads for a call whose earlier attempt died mid-call."""
    return (f"PlanFence refused {tool} ({RETRY_UNKNOWN}): this call started in an earlier "
            "run of this graph step and never finished (the process stopped mid-call); it "
            "may have run, so its outcome is unknown and it is not run again from this "
            f"message. Nothing ran now: {check_first(tool)}")


class AttemptsFile:
    """The ``attempts`` table of one SQLite file (thread-safe; one connection).

    Args:
        path: the SQLite file (created with its table when missing).

    Raises:
        StoreError: the file cannot be opened or its table created or used (not a
            database, a folder, another program's ``attempts`` table; field ``path``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False,
                                       isolation_level=None)
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise self._failed("cannot open", exc) from None
        try:
            self._db.execute("PRAGMA busy_timeout = 30000")
            # a commit survives the process (kill -9), the threat here; no fsync per call
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute(_SCHEMA)
            self._db.execute("SELECT key, tool, thread, tool_call_id, how, kind, value "
                             "FROM attempts LIMIT 0")  # another program's table: refused
            with contextlib.suppress(sqlite3.OperationalError):  # a file from before #30
                self._db.execute("ALTER TABLE attempts ADD COLUMN at REAL")
            self._db.execute("UPDATE attempts SET at = ? WHERE at IS NULL", (time.time(),))
            self._starts = 0
            self.prune()
        except sqlite3.Error as exc:
            self._db.close()
            raise self._failed("cannot use", exc) from None

    def _failed(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{what} the fenced calls' attempts file: {exc}",
                          path=str(self.path), fix="move the file away (it keeps only the "
                          "attempts of calls in flight) or make it writable; no tool "
                          "body ran")

    def prune(self, now: float | None = None) -> None:
        """Drop calls older than :data:`KEEP_S` and finished ones beyond :data:`KEEP_ROWS`.

        ``now``: seconds since the epoch (default: the wall clock). A call of a step not
        resumed for 7 days is forgotten: its re-run is gated as new.

        Raises:
            sqlite3.Error: the file cannot be written (at open: a ``StoreError``).
        """
        old = (time.time() if now is None else now) - KEEP_S
        with self._lock:
            self._db.execute("DELETE FROM attempts WHERE at < ?", (old,))
            self._db.execute(
                "DELETE FROM attempts WHERE how != ? AND key NOT IN (SELECT key FROM "
                "attempts WHERE how != ? ORDER BY at DESC LIMIT ?)",
                (STARTED, STARTED, KEEP_ROWS))

    def close(self) -> None:
        """Close the connection (the files :func:`attempts_in` hands out stay open)."""
        with self._lock:
            self._db.close()

    def get(self, key: str) -> Earlier | None:
        """The attempt recorded under ``key`` (None: none).

        A row that cannot be read back is an attempt whose outcome is unknown.

        Raises:
            StoreError: the file cannot be read (field ``path``).
        """
        try:
            with self._lock:
                row = self._db.execute("SELECT how, kind, value FROM attempts WHERE key = ?",
                                       (key,)).fetchone()
        except sqlite3.Error as exc:
            raise self._failed("cannot read", exc) from None
        if row is None:
            return None
        how, kind, value = row
        damaged = Earlier(UNKNOWN, f"its row in {self.path.name} cannot be read back")
        if how in (RAN, REFUSED):
            if value is None:
                return Earlier(how, None)
            if not isinstance(value, str):
                return damaged
            if kind == _OPAQUE:
                return Earlier(how, value)
            try:
                return Earlier(how, json.loads(value))
            except (ValueError, RecursionError):
                return damaged
        if not isinstance(value, str | None):
            return damaged
        return Earlier(UNKNOWN if how == UNKNOWN else STARTED, value)

    def start(self, key: str, tool: str, thread: Any, call_id: str | None) -> None:
        """Commit ``key`` as :data:`STARTED` (before the body runs; a kill leaves it).

        Raises:
            StoreError: the row cannot be written (the body must not run; field ``path``).
        """
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)",
                    (key, tool, None if thread is None else str(thread), call_id, STARTED,
                     time.time()))
                self._starts += 1
        except sqlite3.Error as exc:
            raise self._failed("cannot write", exc) from None
        if self._starts % _PRUNE_EVERY == 0:
            with contextlib.suppress(sqlite3.Error):  # pruning is housekeeping
                self.prune()

    def settle(self, key: str, earlier: Earlier | None) -> None:
        """Record how ``key``'s attempt ended (None: forget it; nothing of it ran).

        A failed write is logged (the row stays ``started``: a resumed step is refused
        outcome unknown); this process's step memory still answers.
        """
        kind, value = None, None if earlier is None else earlier.value
        if earlier is not None and earlier.how in (RAN, REFUSED):
            try:
                value = json.dumps(value)
            except (TypeError, ValueError, RecursionError):
                kind, value = _OPAQUE, str(value)
        elif value is not None:
            value = str(value)
        try:
            with self._lock:
                if earlier is None:
                    self._db.execute("DELETE FROM attempts WHERE key = ?", (key,))
                else:
                    self._db.execute("UPDATE attempts SET how = ?, kind = ?, value = ?, "
                                     "at = ? WHERE key = ?",
                                     (earlier.how, kind, value, time.time(), key))
        except sqlite3.Error as exc:
            log.error("how a fenced call ended was not written to %s (%s): a resumed step "
                      "refuses it as outcome unknown", self.path, exc)


_FILES: dict[Path, AttemptsFile] = {}
_files_lock = threading.Lock()


def folder_of(agent: Any, config: Any) -> Path | None:
    """The app's SQLite folder for a call (None: nothing durable configured).

    The fenced tool's agent's ``Workspace.sqlite`` folder, else the folder of the
    :class:`~icore.memory.SQLiteStore` under the graph's checkpointer (a
    :class:`~._checkpoint.RecordCheckpointSaver`).
    """
    record = getattr(getattr(agent, "workspace", None), "folder_record", None)
    if record is not None:
        return Path(record.folder)
    conf = (config or {}).get("configurable") or {} if isinstance(config, dict) else {}
    store = getattr(conf.get("__pregel_checkpointer"), "store", None)
    if isinstance(store, SQLiteStore) and str(store.path) != ":memory:":
        return store.path.parent
    return None


def attempts_in(folder: Path | None) -> AttemptsFile | None:
    """The one :class:`AttemptsFile` of ``folder`` in this process (None: ``folder`` None)."""
    if folder is None:
        return None
    path = folder / FILE_NAME
    with _files_lock:
        got = _FILES.get(path)
        if got is None:
            got = _FILES[path] = AttemptsFile(path)
        return got


__all__ = ["FILE_NAME", "KEEP_ROWS", "KEEP_S", "AttemptsFile", "attempts_in", "durable_key",
           "folder_of", "stopped_message"]
