"""Pending human approvals kept in the app's SQLite folder across a restart (QA qa-new16 S3).

A protected call put to a human derives from the versions its agent read; those reads
live in the process's memory. While the human decides, the process may stop, and the one
that resumes the run (LangGraph ``Command(resume=...)``, an Agents SDK ``RunState``
loaded with ``from_json``) holds none. :class:`PendingFile` keeps, per call, the requests
put to the human (action, normalised arguments, the ``key -> record id`` versions the
plan cited; :class:`~icore.workspace.ApprovalRequest`) and the run that asked, in table
``pending_approvals`` of ``icore-attempts.sqlite`` in the ``Workspace.sqlite`` folder,
committed before the run pauses. A row is read back only when every request rebuilds to
its own id (:class:`PendingUnreadable` otherwise: the caller refuses the call, never
runs it blind). Rows older than 7 days are pruned when the file is opened.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icore.errors import StoreError
from icore.workspace import ApprovalRequest

FILE_NAME = "icore-attempts.sqlite"
"""The file beside the owners' files (the workspace's durable calls share it)."""
KEEP_S = 7 * 24 * 3600.0
"""Seconds a pending approval is kept (7 days, as the attempts)."""

_SCHEMA = ("CREATE TABLE IF NOT EXISTS pending_approvals (key TEXT PRIMARY KEY, tool TEXT "
           "NOT NULL, thread TEXT, tool_call_id TEXT, run TEXT, asked TEXT NOT NULL, "
           "at REAL)")


class PendingUnreadable(Exception):
    """A kept pending approval cannot be read back or restored (the call is refused)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending approval as kept: who asked, and the requests put to the human in order.

    Attributes:
        run: the run id of the recorder of the process that asked (None: none recorded).
        call_id: the tool-call id.
        asked: the requests, in the order they were put to the human.
    """

    run: str | None
    call_id: str | None
    asked: tuple[ApprovalRequest, ...]


def _as_json(req: ApprovalRequest) -> dict[str, Any]:
    return {"id": req.id, "action": req.action, "args": dict(req.args),
            "basis": [[k, rid] for k, rid in req.basis], "scope": req.scope}


def _request(obj: Any) -> ApprovalRequest:
    """The request a kept object names, rebuilt (its id must match: else unreadable)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("basis"), list):
        raise PendingUnreadable("a request is no object with a basis")
    basis = {}
    for pair in obj["basis"]:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, str) for x in pair)):
            raise PendingUnreadable("a basis entry is no [key, record id]")
        basis[pair[0]] = pair[1]
    args, action, scope = obj.get("args"), obj.get("action"), obj.get("scope", "")
    if not isinstance(args, dict) or not isinstance(action, str):
        raise PendingUnreadable("a request has no action or arguments")
    if not isinstance(scope, str):  # the pending request's place (thread, call): part of id
        raise PendingUnreadable("a request's scope is no str")
    try:
        req = ApprovalRequest.of(action, args, basis, scope=scope)
    except Exception as exc:
        raise PendingUnreadable(f"a request cannot be rebuilt: {exc}") from None
    if req.id != obj.get("id"):
        raise PendingUnreadable("a request's id does not match its action, arguments and "
                                "versions")
    return req


class PendingFile:
    """Table ``pending_approvals`` of one ``icore-attempts.sqlite`` (thread-safe).

    Args:
        path: the SQLite file (created with its table when missing).

    Raises:
        StoreError: the file cannot be opened or its table created (field ``path``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 30000")
            self._db.execute(_SCHEMA)
            self._db.execute("DELETE FROM pending_approvals WHERE at < ?",
                             (time.time() - KEEP_S,))
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise self._failed("cannot use", exc) from None

    def _failed(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{what} the pending approvals in the attempts file: {exc}",
                          path=str(self.path), fix="move the file away or make it "
                          "writable; no tool body ran")

    def keep(self, key: str, tool: str, thread: Any, call_id: str | None,
             run: str | None, asked: list[ApprovalRequest]) -> None:
        """Commit the requests put to the human for the call ``key`` (before the pause).

        Raises:
            StoreError: the row cannot be written (field ``path``).
        """
        text = json.dumps([_as_json(r) for r in asked if r.id])
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO pending_approvals VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?)",
                                 (key, tool, None if thread is None else str(thread),
                                  call_id, run, text, time.time()))
        except sqlite3.Error as exc:
            raise self._failed("cannot write", exc) from None

    def get(self, key: str) -> Pending | None:
        """The pending approval kept for ``key`` (None: none).

        Raises:
            PendingUnreadable: the row cannot be read back (not JSON, a request whose id
                does not match its content, no request at all).
            StoreError: the file cannot be read (field ``path``).
        """
        try:
            with self._lock:
                row = self._db.execute("SELECT run, tool_call_id, asked FROM "
                                       "pending_approvals WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise self._failed("cannot read", exc) from None
        if row is None:
            return None
        run, call_id, text = row
        try:
            items = json.loads(text) if isinstance(text, str) else None
        except (ValueError, RecursionError):
            items = None
        if not isinstance(items, list) or not items:
            raise PendingUnreadable(f"its row in {self.path.name} is no list of requests")
        return Pending(run if isinstance(run, str) else None,
                       call_id if isinstance(call_id, str) else None,
                       tuple(_request(o) for o in items))

    def drop(self, key: str) -> None:
        """Forget ``key``'s pending approval (the call was decided); errors are ignored."""
        try:
            with self._lock:
                self._db.execute("DELETE FROM pending_approvals WHERE key = ?", (key,))
        except sqlite3.Error:
            pass  # a row left behind: the next resume finds the call decided (attempts)


_FILES: dict[Path, PendingFile] = {}
_files_lock = threading.Lock()


def pending_in(attempts_path: Path) -> PendingFile:
    """The one :class:`PendingFile` beside an attempts file in this process."""
    path = attempts_path.parent / FILE_NAME
    with _files_lock:
        got = _FILES.get(path)
        if got is None:
            got = _FILES[path] = PendingFile(path)
        return got


def folder_pending(agent: Any) -> PendingFile | None:
    """The :class:`PendingFile` of a workspace agent's ``Workspace.sqlite`` folder.

    None for an in-memory workspace (nothing durable: the question is gone with the
    process).

    Raises:
        StoreError: the file cannot be opened (field ``path``).
    """
    record = getattr(getattr(agent, "workspace", None), "folder_record", None)
    return None if record is None else pending_in(Path(record.folder) / FILE_NAME)


__all__ = ["FILE_NAME", "KEEP_S", "Pending", "PendingFile", "PendingUnreadable",
           "folder_pending", "pending_in"]
