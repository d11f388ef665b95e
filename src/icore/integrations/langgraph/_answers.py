"""The human's answer to an ``approval=True`` question, recorded by the call that reads it.

A fenced tool with ``approval=True`` pauses at LangGraph's ``interrupt`` (icore's
question: the :class:`~icore.workspace.ApprovalRequest` payload); ``Command(resume=...)``
hands the human's answer back to the call when its step re-runs (planfence App. A.3). The
:class:`~icore.integrations.langgraph.RecordingHandler` that recorded the pause writes the
answer when the resume starts, but a web service builds a new handler for each request,
so the handler that sees the resume often never saw the pause (QA qa-new17c #1: no
"a human approved ..." line, the audit counted no human approval; an answer naming
another request was not recorded ``unmatched`` either). The call itself knows the
request and reads the answer, so :class:`CallAnswers` writes it there, once: unless the
resume's handler already wrote it (:class:`HeardAnswers`, same handler for pause and
resume), and never again for an answer LangGraph replays on a later resume (the answers
before the pending question were recorded when they were given).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.types import interrupt

from icore.integrations import RunRecorder
from icore.integrations._trace_data import plain_data
from icore.integrations.langgraph._pending import Resumed
from icore.integrations.langgraph._reviewed import UNMATCHED, human_decisions
from icore.workspace import APPROVAL_FIELD

_PAST = {"approve": "approved", "reject": "rejected"}
_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")
"""LangGraph's interrupt ids (the keys of a ``Command(resume={id: answer})``)."""
"""A yes or no to a call, as the Agents SDK recording says it."""


def answer_text(tool: str | None, args: str | None, said: str) -> str:
    """The thought recording a human's decision ``said`` on ``tool(args)`` (args: JSON)."""
    what = f"{tool}({args})" if tool else "the question asked"
    if said == "answered":
        return f"a human answered {what}"
    if said == UNMATCHED:
        return (f"a human's answer to {what} names another approval request: neither "
                "approved nor rejected, the call is asked again")
    if said in _PAST:
        return f"a human {_PAST[said]} {what}"
    return f"a human answered {said} for {what}"


class HeardAnswers:
    """The ``approval=True`` answers a handler recorded in the resume it is seeing.

    A :class:`~icore.integrations.langgraph.RecordingHandler` that recorded the pause
    writes the human's answers when the resume starts (:meth:`heard`); the fenced call
    reading each answer then :meth:`claims <claim>` it and writes nothing (one line per
    answer). Thread-safe.
    """

    def __init__(self) -> None:
        self._ids: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.resume: Any = None
        """The ``Command(resume=...)`` value of the resume being seen (None: none)."""

    def heard(self, request_ids: list[str], resume: Any = None) -> None:
        """A resume starts: these requests' answers were recorded (the earlier forgotten).

        ``resume``: the resume's value, for a call to record before its gate decides
        (:meth:`CallAnswers.early`).
        """
        with self._lock:
            self._ids = Counter(request_ids)
            self.resume = resume

    def claim(self, request_id: str) -> bool:
        """Whether an answer to ``request_id`` was recorded in this resume (taken once)."""
        with self._lock:
            if self._ids[request_id] <= 0:
                return False
            self._ids[request_id] -= 1
            return True


def approval_id(payload: Any) -> str | None:
    """The request id of icore's ``approval=True`` question ``payload`` (None: another)."""
    asked = payload.get(APPROVAL_FIELD) if isinstance(payload, Mapping) else None
    rid = asked.get("id") if isinstance(asked, Mapping) else None
    return rid if isinstance(rid, str) else None


class CallAnswers:
    """Writes the human's answer one fenced ``approval=True`` call reads (see the module).

    Args:
        rec: where the call's lines go (None: nothing recorded).
        who: the agent the call's lines name.
        heard: the run's handler's :class:`HeardAnswers` (None: no handler).
        resumed: the pending approval another process kept, when the call was restored
            from it (the line then names the run and call that asked, ``resumed``).
        start: how many questions were put to the human for this call before this
            invocation (the last one is the question the resume answers).
    """

    def __init__(self, rec: RunRecorder | None, who: str, heard: HeardAnswers | None,
                 resumed: Resumed | None, start: int) -> None:
        self.rec, self.who, self.heard, self.resumed = rec, who, heard, resumed
        self.start = start
        self._told: set[int] = set()
        self._lock = threading.Lock()

    def asker(self) -> Callable[[Any], Any]:
        """LangGraph's ``interrupt`` for one :meth:`~icore.workspace.ApprovalBook.resolve`.

        The answer to the question pending at the pause (index ``start - 1``) is written
        once; the answers replayed before it were recorded when they were given.
        """
        index = [0]

        def ask(payload: Any) -> Any:
            i = index[0]
            index[0] += 1
            got = interrupt(payload)
            with self._lock:
                new = i == self.start - 1 and i not in self._told
                self._told.add(i)
            if new:
                self.write(payload, got)
            return got

        return ask

    def early(self, asked: Any) -> None:
        """Record the human's answer before the gate decides, when it names this call.

        The gate refuses a stale call before its approval is read, so an answer read only
        then was never recorded (approved while the fact changed, refused ``stale``: no
        "a human approved" line under a handler that did not see the pause, QA
        qa-new18a #3). When this invocation resumes a question of this call (``asked``:
        its requests in order, the last one pending) and the resume's value (the run's
        handler's :attr:`HeardAnswers.resume`; or a mapping of one interrupt id to it)
        is an answer naming that request's id (``req.approve()`` / ``req.reject()``), it
        is written now, once, as :meth:`write`. Any other answer (a bare ``True``: with
        several questions pending, LangGraph pairs it) is written when the call reads it,
        or by :meth:`unread` when the gate refuses the call first.
        """
        got, i = self._answer(), self.start - 1
        named = got.get(APPROVAL_FIELD) if isinstance(got, Mapping) else None
        if i < 0 or len(asked) <= i or named != asked[i].id:
            return
        with self._lock:
            if i in self._told:
                return
            self._told.add(i)
        self.write(asked[i].payload(), got)

    def unread(self, asked: Any) -> None:
        """The gate refused the call before it read the pending answer: write it now.

        ``asked``: the call's requests in order (the last one pending). The resume's
        value is taken as this call's answer (the call's question was pending; the
        human answered). Once, as :meth:`write`, naming the ``task`` of the refusal just
        recorded for it (the audit links the answer to that action exactly).
        """
        got, i = self._answer(), self.start - 1
        if got is None or i < 0 or len(asked) <= i or self.rec is None:
            return
        with self._lock:
            if i in self._told:
                return
            self._told.add(i)
        req = asked[i]
        task = next((e["task"] for e in reversed(list(self.rec.events))
                     if e.get("kind") == "tool_output" and e.get("tool") == req.action
                     and e.get("blocked") is True and isinstance(e.get("task"), str)
                     and e.get("args") == dict(req.args)), None)
        self.write(req.payload(), got, task)

    def _answer(self) -> Any:
        """The resume's value (one interrupt id's answer taken out), None: no resume."""
        got = self.heard.resume if self.heard is not None else None
        if isinstance(got, Mapping) and len(got) == 1 and all(
                isinstance(k, str) and _INTERRUPT_ID.fullmatch(k) for k in got):
            got = next(iter(got.values()))
        return got

    def write(self, payload: Any, answer: Any, task: str | None = None) -> None:
        """Record ``answer`` to question ``payload``, unless the handler already did.

        ``task``: the action the answer is linked to (a call refused before it read it).
        """
        rid = approval_id(payload)
        if self.rec is None or rid is None or (self.heard is not None
                                               and self.heard.claim(rid)):
            return
        for tool, args, said in human_decisions([(None, plain_data(payload))], answer):
            text = answer_text(tool, json.dumps(plain_data(args), sort_keys=True,
                                                default=str), said)
            extra: dict[str, Any] = {"task": task} if task else {}
            if self.resumed is not None:
                p = self.resumed.pending
                text += (f" (resumed approval for call {p.call_id} asked in run "
                         f"{p.run or '(not recorded)'}; answered after a restart)")
                extra["resumed"] = {"run": p.run, "tool_call_id": p.call_id, "request": rid}
            self.rec.add(self.who, "thought", text, answered_by="human", decision=said,
                         tool=tool, args=args, **extra)


def refused_unread(approve: Any, gated: Any) -> None:
    """After the gate: a refused call that never read its pending answer records it.

    ``approve``: what :meth:`~._fenced_node._Fenced.approver` returned (its ``unread``
    attribute: :meth:`CallAnswers.unread` for the call's requests; None: nothing).
    """
    unread = getattr(approve, "unread", None)
    if callable(unread) and not getattr(gated, "executed", True):
        unread()


def handler_answers(config: Any) -> HeardAnswers | None:
    """The :class:`HeardAnswers` of a recording handler among the run's callbacks."""
    cbs = config.get("callbacks") if isinstance(config, Mapping) else None
    handlers = getattr(cbs, "handlers", cbs)
    for h in handlers if isinstance(handlers, list | tuple) else ():
        got = getattr(h, "heard_answers", None)
        if isinstance(got, HeardAnswers):
            return got
    return None


__all__ = ["CallAnswers", "HeardAnswers", "answer_text", "approval_id", "handler_answers",
           "refused_unread"]
