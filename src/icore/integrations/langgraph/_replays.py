"""What a fenced LangGraph call remembers across re-runs of its graph step (#28).

LangGraph runs a task's node again in the same step, with the same tool-call ids:
``Command(resume=...)`` re-runs the whole ``ToolNode`` (QA qa-new11 S2: a call that ran
before another call of the message paused ran again), a node's ``RetryPolicy`` retries
a node that raised, and ``invoke(None, config)`` after a crash runs the step again from
its checkpoint. None of these is a new model decision, so a protected call of such a
re-run is never decided or run twice, in agent mode and in fence mode (``fence=``)
alike: :class:`StepMemory` (a :class:`~icore.integrations._call_ledger.CallLedger`, the
ledger the Agents SDK and CrewAI integrations use too) keeps each call per thread,
tool-call id, graph step (:class:`~._branches.Step`: a resume keeps it) and bound
arguments, and answers a re-run with the earlier outcome:

- it ran: the same result (a fence-mode ``Command`` included);
- it was refused (stale, not read, a human's no, the tool's own ``NoEffect``): the
  same refusal;
- the tool raised after it started (a timeout, a cancellation, any error but
  ``NoEffect``, LangChain's ``ToolException`` included: its effect may have happened):
  refused :data:`~icore.integrations._rerun.RETRY_UNKNOWN`, the earlier error named,
  the rule CrewAI applies to its own retries;
- it started and never finished (the process or the node died mid-call): refused as
  outcome unknown too.

A call that raised before its tool started (a setup error, a broken replanner, a pause)
is forgotten: the re-run decides it afresh. The memory is per process (the newest
:data:`MAX_STEPS` calls per fenced tool); where the app keeps SQLite state (a
``Workspace.sqlite`` agent, a :class:`~._checkpoint.RecordCheckpointSaver` over a
:class:`~icore.memory.SQLiteStore`) a call whose body started is kept on disk too
(:mod:`~._attempts_db`, QA qa-new14 S1): a new process resuming the step finds it
(:data:`STOPPED` when it died mid-call). With nothing durable, a call after a restart is
gated as new.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

from langchain_core.tools import ToolException
from langgraph.errors import GraphBubbleUp

from icore.errors import ActionBlocked
from icore.integrations._approvals import canon
from icore.integrations._call_ledger import RAN, REFUSED, STARTED, UNKNOWN, CallLedger, Earlier
from icore.integrations._failed import leaves_open
from icore.integrations._rerun import retry_message
from icore.integrations._tool_failed import describe, message_of
from icore.integrations.langgraph._attempts_db import stopped_message
from icore.integrations.langgraph._branches import step_of

MAX_STEPS = 4096
"""Calls remembered per fenced tool (the oldest forgotten first)."""
RUNNING_WAIT_S = 300.0
"""Seconds a re-run waits for the same call's attempt still running in this process
(:meth:`StepMemory.running`); after it the call is refused as outcome unknown."""
STOPPED = "the process stopped mid-call (killed or crashed) before the tool returned"
"""The :data:`UNKNOWN` value of a call found started on disk by a new process."""


class EarlierUnknown(ToolException):
    """A re-run call refused: its earlier attempt of the step started and never finished.

    Its body raised (or the process stopped) after the gate authorized it: its outcome is
    unknown, so it is not run twice (QA qa-new12b S2).
    """


class EarlierStopped(EarlierUnknown):
    """A re-run call refused: a process that stopped mid-call (killed, crashed) started it.

    Found on disk (:mod:`~._attempts_db`) by a new process resuming the step (QA qa-new14
    S1): its outcome is unknown, so it is not run twice.
    """


def step_key(thread_call: tuple[Any, str | None], config: Any, args: Any
             ) -> Hashable | None:
    """A call's identity across re-runs of its step (None outside a graph step).

    ``thread_call``: ``(thread_id, tool-call id)``; ``args``: the call's bound
    (normalised) arguments, kept as canonical JSON. None without a tool-call id.
    """
    step = step_of(config)
    if step is None or thread_call[1] is None:
        return None
    return (thread_call, step, canon(dict(args)))


class StepMemory(CallLedger):
    """The first attempts of one fenced tool's calls, by :func:`step_key` (thread-safe).

    A :class:`~icore.integrations._call_ledger.CallLedger` of :data:`MAX_STEPS` calls
    (:meth:`begin` marks a call's first attempt started, or gives the earlier one;
    :meth:`settle` records how it ended), plus an event per attempt still running in this
    process (:meth:`running`).

    Args:
        tool: the tool's name (in the refusals the model reads).
        keep: most calls remembered (the oldest forgotten first).

    Raises:
        ValueError: ``keep`` < 1.
    """

    def __init__(self, tool: str, keep: int = MAX_STEPS) -> None:
        super().__init__(keep)
        self.tool = tool
        self._running: dict[Hashable, threading.Event] = {}  # set once a STARTED settles

    def _started(self, key: Hashable) -> None:
        self._running[key] = threading.Event()

    def _ended(self, key: Hashable) -> None:
        if (ev := self._running.pop(key, None)) is not None:
            ev.set()

    def running(self, step: Hashable | None) -> threading.Event | None:
        """The event set when this call's attempt still running in this process settles.

        LangGraph may return a pause while a sibling task of the paused one is still
        running (``ToolNode`` under ``ainvoke``): a resume that comes before that attempt
        ends waits for it (:data:`RUNNING_WAIT_S`) and answers with its outcome, rather
        than refusing a call that is simply not finished yet. None: nothing running.
        """
        if step is None:
            return None
        with self._lock:
            return self._running.get(step)

    def answer(self, prior: Earlier) -> Any:
        """What a re-run of the call returns: the earlier result.

        Raises:
            ToolException: the earlier attempt was refused (the same refusal), raised
                after its tool started (:data:`~icore.integrations._rerun.RETRY_UNKNOWN`,
                naming its error) or never finished: refused, never run twice.
        """
        if prior.how == RAN:
            return prior.value
        if prior.how == REFUSED:
            raise ToolException(prior.value)
        if prior.how == UNKNOWN and prior.value == STOPPED:
            raise EarlierStopped(stopped_message(self.tool))
        if prior.how == UNKNOWN:
            raise EarlierUnknown(retry_message(self.tool, prior.value))
        raise EarlierUnknown(
            f"PlanFence refused {self.tool}: this call already started in an earlier "
            "attempt of this graph step (before the resume) and its outcome is unknown; "
            "it is not run twice. Check whether it took effect, then call it again if "
            "needed")

    def raised(self, step: Hashable | None, exc: BaseException, started: bool) -> None:
        """Record a call that raised: refused, outcome unknown, or forgotten.

        Before the tool started: a ``ToolException`` is the gate's refusal (kept); a pause
        (``GraphInterrupt``), ``ActionBlocked`` or anything else is forgotten (nothing
        ran: the re-run decides afresh). Once the tool started, any exception leaves its
        effect open (:data:`~icore.integrations._call_ledger.UNKNOWN`, QA qa-new12b S2)
        but :class:`~icore.integrations.NoEffect`, a refusal kept as such.
        """
        if isinstance(exc, GraphBubbleUp | ActionBlocked) or (
                not started and not isinstance(exc, ToolException)):
            self.settle(step, None)
        elif not started or not leaves_open(exc):
            self.settle(step, REFUSED, message_of(exc))
        else:
            self.settle(step, UNKNOWN, describe(exc)[:300])


__all__ = ["MAX_STEPS", "RAN", "REFUSED", "RUNNING_WAIT_S", "STARTED", "STOPPED", "UNKNOWN",
           "EarlierStopped", "EarlierUnknown", "StepMemory", "step_key"]
