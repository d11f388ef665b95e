"""Tool calls of one model message that share a ``tool_call_id``: refused (QA qa-new12b S2).

A fenced call is known by its thread and its ``tool_call_id``: the human's approval,
the replay of a re-run step and the answer LangGraph hands back all go by it. Two calls
of one model message with the same id (a model or provider glitch) cannot be told apart:
the human was asked twice about the first call's arguments, and the second call was
answered with the first call's result although it never ran. So every fenced call whose
id another call of its model message also carries is refused before its gate
(:data:`DUPLICATE_CALL_ID`, nothing runs, nothing is asked), whatever the arguments: the
``ToolMessage`` answers would carry the same id, and the model could not tell which
answer is whose. Each refused call is recorded once (a blocked protected action; a
re-run of its step after a resume refuses it again without recording it twice). Pure
but for the recorder it is given.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from langchain_core.tools import ToolException

from icore.integrations import RunRecorder, refusal_head
from icore.integrations._approvals import canon
from icore.integrations._refusals import refused_call

DUPLICATE_CALL_ID = "duplicate_call_id"
"""The reason of a fenced call refused because another call of its model message has the
same ``tool_call_id``."""

_KEEP = 1024
"""Refused calls remembered (so a re-run step does not record them again)."""


def _state_messages(runtime: Any) -> Sequence[Any] | None:
    state = getattr(runtime, "state", None)
    msgs = state.get("messages") if isinstance(state, Mapping) else getattr(
        state, "messages", None)
    return msgs if isinstance(msgs, Sequence) else None


def shared_id(runtime: Any, call_id: str | None) -> int:
    """How many calls of ``call_id``'s model message carry ``call_id`` (0: not found).

    The message is the last one in the graph state's ``messages`` whose tool calls name
    the id (what ``ToolNode`` runs).
    """
    msgs = _state_messages(runtime)
    if call_id is None or msgs is None:
        return 0
    for m in reversed(msgs):
        ids = [c.get("id") for c in getattr(m, "tool_calls", None) or ()
               if isinstance(c, Mapping)]
        if call_id in ids:
            return ids.count(call_id)
    return 0


class DuplicateIds:
    """Refuses a fenced tool's calls whose ``tool_call_id`` is shared in their message.

    Thread-safe; remembers at most :data:`_KEEP` refused calls (the oldest forgotten).
    """

    def __init__(self, tool: str) -> None:
        self._tool = tool
        self._lock = threading.Lock()
        self._seen: OrderedDict[Hashable, Hashable] = OrderedDict()

    def check(self, runtime: Any, call_id: str | None, args: Mapping[str, Any],
              ident: Hashable, attempt: Hashable | None, rec: RunRecorder | None,
              agent: str | None) -> None:
        """Refuse the call when its id is shared; record it once per step.

        Args:
            runtime: the call's ``ToolRuntime`` (its state holds the model message).
            call_id: the call's ``tool_call_id``.
            args: the call's normalised arguments (recorded).
            ident: the call across re-runs of its step (thread, id, step, arguments).
            attempt: this run of the step (a resume is another); None: unknown.
            rec: where the refusal is recorded (None: not recorded).
            agent: who asked for the call (else the recorder's caller of the id).

        Raises:
            ToolException: the id is shared (``PlanFence blocked <tool>
                (duplicate_call_id): ...``, the model reads it; nothing ran).
        """
        n = shared_id(runtime, call_id)
        if n < 2:
            return
        text = (f"{refusal_head(self._tool, DUPLICATE_CALL_ID)}: {n} tool calls of one "
                f"model message share the id {call_id!r}; their answers could not be "
                f"told apart, so none of them runs. Nothing ran. Call again with one "
                f"distinct id per call")
        with self._lock:  # the calls of one attempt are recorded; a re-run's are not
            first = self._seen.setdefault(ident, attempt)
            record = attempt is None or first == attempt
            while len(self._seen) > _KEEP:
                self._seen.popitem(last=False)
        if record and rec is not None:
            who = rec.caller(self._tool, call_id) or agent or "agent"
            refused_call(rec, who, self._tool, dict(args), text, reason=DUPLICATE_CALL_ID,
                         detail=f"{n} calls of one model message share the tool_call_id "
                         f"{call_id!r} (arguments {canon(dict(args))[:300]}); none ran",
                         tool_call_id=call_id)
        raise ToolException(text)


__all__ = ["DUPLICATE_CALL_ID", "DuplicateIds", "shared_id"]
