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

    def heard(self, request_ids: list[str]) -> None:
        """A resume starts: these requests' answers were recorded (the earlier forgotten)."""
        with self._lock:
            self._ids = Counter(request_ids)

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

    def write(self, payload: Any, answer: Any) -> None:
        """Record ``answer`` to question ``payload``, unless the handler already did."""
        rid = approval_id(payload)
        if self.rec is None or rid is None or (self.heard is not None
                                               and self.heard.claim(rid)):
            return
        for tool, args, said in human_decisions([(None, plain_data(payload))], answer):
            text = answer_text(tool, json.dumps(plain_data(args), sort_keys=True,
                                                default=str), said)
            extra: dict[str, Any] = {}
            if self.resumed is not None:
                p = self.resumed.pending
                text += (f" (resumed approval for call {p.call_id} asked in run "
                         f"{p.run or '(not recorded)'}; answered after a restart)")
                extra["resumed"] = {"run": p.run, "tool_call_id": p.call_id, "request": rid}
            self.rec.add(self.who, "thought", text, answered_by="human", decision=said,
                         tool=tool, args=args, **extra)


def handler_answers(config: Any) -> HeardAnswers | None:
    """The :class:`HeardAnswers` of a recording handler among the run's callbacks."""
    cbs = config.get("callbacks") if isinstance(config, Mapping) else None
    handlers = getattr(cbs, "handlers", cbs)
    for h in handlers if isinstance(handlers, list | tuple) else ():
        got = getattr(h, "heard_answers", None)
        if isinstance(got, HeardAnswers):
            return got
    return None


__all__ = ["CallAnswers", "HeardAnswers", "answer_text", "approval_id", "handler_answers"]
