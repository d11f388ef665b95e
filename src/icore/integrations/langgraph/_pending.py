"""A human approval still pending when the process stops, kept for the one that resumes.

A fenced call with ``approval=True`` pauses at LangGraph's ``interrupt`` while the human
decides; with a checkpointer that persists, another process may resume the thread with
``Command(resume=...)`` (QA qa-new16 S3: the first process was killed while it waited).
The call's identity (thread, tool-call id), the requests put to the human (action,
normalised arguments and the ``key -> record id`` versions the plan cited: the reads the
model saw) and the run that asked are kept in table ``pending_approvals`` of
``icore-attempts.sqlite`` (the app's SQLite folder, :mod:`~._attempts_db`), written
(committed) before the pause reaches LangGraph. The resuming process, holding no reads
of its own, notes those exact versions as read again
(:func:`~icore.workspace.restore_reads`) and the questions as asked, so the resumed call
is decided exactly as an in-process resume: the human's answer at the same index, then
the gate against the owners' CURRENT heads (unchanged: runs once; a head moved: refused
stale with the fresh values, planfence Alg. 1). The answer is written to the resuming
run's trace naming the run and call it was asked in. A row that cannot be read back or
whose versions cannot be found refuses the call (fail closed, never run blind). The row
is dropped once the call is decided (ran, refused, rejected).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icore.errors import StoreError
from icore.integrations import RunRecorder
from icore.integrations._pending_file import (
    Pending,
    PendingFile,
    PendingUnreadable,
    pending_in,
)
from icore.workspace import NOT_READ, Agent, ApprovalRequest, WorkspaceError, restore_reads


@dataclass
class Resumed:
    """A call resumed from a pending approval another process kept (see the module).

    The human's answer is written to the resuming run's trace with ``resumed: {run,
    tool_call_id, request}`` (:class:`~._answers.CallAnswers`).
    """

    pending: Pending
    tool: str


class PendingCall:
    """One approval call's pending state on disk: kept at the pause, dropped when decided.

    Args:
        file: the folder's :class:`PendingFile`.
        key: the call's durable key (:func:`~._attempts_db.durable_key`).
        tool: the tool's name.
        thread: the LangGraph thread id.
        call_id: the tool-call id.
        rec: the run's recorder (None: not recorded).
        who: the agent the call's lines name.
        resumed: set when the call was restored from another process's pause.
    """

    def __init__(self, file: PendingFile, key: str, tool: str, thread: Any,
                 call_id: str | None, rec: RunRecorder | None, who: str,
                 resumed: Resumed | None = None) -> None:
        self.file, self.key, self.tool, self.thread = file, key, tool, thread
        self.call_id, self.rec, self.who, self.resumed = call_id, rec, who, resumed

    def paused(self, asked: list[ApprovalRequest]) -> None:
        """The call pauses for the human: commit the questions asked so far.

        Raises:
            StoreError: the row cannot be written (field ``path``).
        """
        run = self.rec.run_id if self.rec is not None else None
        if self.resumed is not None and self.resumed.pending.run is not None:
            run = self.resumed.pending.run  # asked again: still the run that asked first
        self.file.keep(self.key, self.tool, self.thread, self.call_id, run, asked)

    def done(self) -> None:
        """The call was decided (ran, refused, rejected): forget its pending state."""
        self.file.drop(self.key)


def open_pending(agent: Agent | None, approval: bool, book_key: Hashable, tool: str,
                 disk: tuple[Any, str] | None, call_id: str | None,
                 rec: RunRecorder | None, who: str,
                 turn: Hashable | None = None) -> PendingCall | None:
    """The pending state of an approval call (None: no approval, nothing durable).

    A call this process has not asked yet finds the pending approval another process
    kept (:func:`restore`).

    Raises:
        PendingUnreadable: the kept row cannot be used (refuse the call; its row is
            dropped: the model calls again and the human is asked again).
        StoreError: the file cannot be used.
    """
    if not approval or agent is None or disk is None:
        return None
    file = pending_in(Path(disk[0].path))
    thread = book_key[0] if isinstance(book_key, tuple) and book_key else None
    resumed = None
    if not agent.approvals.asked(book_key):
        try:
            resumed = restore(agent, book_key, tool, file, disk[1], turn)
        except PendingUnreadable:
            file.drop(disk[1])
            raise
        except StoreError:
            raise
        except Exception as exc:  # an owner that does not answer: fail closed
            file.drop(disk[1])
            raise PendingUnreadable(f"{type(exc).__name__}: {exc}") from None
    return PendingCall(file, disk[1], tool, thread, call_id, rec, who, resumed)


def lost_request(pend: PendingCall | None, gated: Any, resume: Any) -> None:
    """A resumed run's call refused ``not_read`` with no kept request: say where it was.

    The generic ``not_read`` text ("reads are kept in memory") does not tell an operator
    that the approval request kept on disk was not found (QA qa-new18a #10: the attempts
    file or its row deleted). ``resume``: the run's ``Command(resume=...)`` value (None:
    not a resume: nothing changes).

    Raises:
        ToolException: that call, with the message naming the file (nothing ran).
    """
    if (pend is None or pend.resumed is not None or resume is None
            or getattr(gated, "executed", True) or getattr(gated, "reason", "") != NOT_READ):
        return
    from langchain_core.tools import ToolException
    raise ToolException(
        f"PlanFence blocked {pend.tool} (not_read): no approval request is kept for this "
        f"call in {pend.file.path} (table pending_approvals; if the human was asked about "
        f"it before a restart, the file or its row was deleted, or was older than 7 "
        f"days), so an answer cannot be tied to the versions the call was decided from; "
        f"nothing ran. {gated.model_message}")


def unreadable_message(tool: str, why: str) -> str:
    """What the model reads for a call whose kept pending approval cannot be used."""
    return (f"PlanFence refused {tool} (not_read): the pending approval kept for this call "
            f"when the human was asked cannot be used after the restart ({why}); nothing "
            f"ran. Read the facts again and call {tool} again to ask the human again")


def restore(agent: Agent, book_key: Hashable, tool: str, file: PendingFile,
            key: str, turn: Hashable | None = None) -> Resumed | None:
    """Give a new process the pending approval of call ``key`` (None: none kept).

    The requests are noted in the agent's :class:`~icore.workspace.ApprovalBook` under
    ``book_key`` (the answers LangGraph hands back are attributed to them by index) and
    the latest request's versions are noted as the agent's reads (for ``turn``, the
    call's model turn, too: :func:`~icore.workspace.restore_reads`).

    Raises:
        PendingUnreadable: the row cannot be read back, or a version it cites cannot be
            found at its owner (the caller refuses the call).
        StoreError: the file cannot be read.
    """
    pending = file.get(key)
    if pending is None:
        return None
    try:
        got = restore_reads(agent, dict(pending.asked[-1].basis), turn=turn)
    except WorkspaceError as exc:
        raise PendingUnreadable(str(exc)) from None
    for req in pending.asked:  # shown again with the versions' values (QA qa-new18a #6)
        agent.approvals.note(book_key, with_values(req, got))
    return Resumed(pending, tool)


def with_values(req: ApprovalRequest, records: Mapping[str, Any]) -> ApprovalRequest:
    """``req`` carrying the values of the versions it cites (same id), when all are given.

    A request kept on disk holds record ids only; the records restored from their owners
    give the human the values the call was planned from again, as the first question did.
    """
    recs = [r for k, rid in req.basis if (r := records.get(k)) is not None and r.id == rid]
    if not recs or len(recs) != len(req.basis) or not all(r.has_content for r in recs):
        return req
    # the id (and anything else it binds) is kept: the record ids already bind the values
    return dataclasses.replace(req, values=tuple(sorted(((r.key, r.content) for r in recs),
                                                        key=lambda kv: kv[0])))


__all__ = ["PendingCall", "PendingUnreadable", "Resumed", "lost_request", "open_pending",
           "restore", "unreadable_message", "with_values"]
