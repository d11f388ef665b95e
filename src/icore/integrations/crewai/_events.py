"""Recorded CrewAI runs through its event bus (icore Sec. 3).

:class:`CrewRecorder` subscribes to ``crewai_event_bus``: crew kickoff (the task), task
starts (an instruction to the task's agent), LLM call completions (agent turns), tool
usage finished / error (tool calls with arguments and output; a ``ToolFailure`` or an
error counts as an error), a delegation tool's start (a hierarchical crew's manager, or an
agent with ``allow_delegation=True``, handing work to a coworker: a handoff to that
coworker) and crew completion (the final answer). A standalone
``Agent.kickoff()`` (no crew around it) records its messages as the task and its
output as the final answer (the ``lite_agent_execution`` events; inside a crew's run
they are the crew's work, not a run of their own). CrewAI runs sync
handlers in a thread pool, so events are buffered and written into the recorder by
:meth:`CrewRecorder.flush`, each at its event's timestamp (so they interleave with what
fenced tools recorded meanwhile); :func:`recording`
subscribes for a ``with`` block and flushes at its end.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from crewai.events import crewai_event_bus
from crewai.events.types.agent_events import (
    LiteAgentExecutionCompletedEvent,
    LiteAgentExecutionStartedEvent,
)
from crewai.events.types.crew_events import CrewKickoffCompletedEvent, CrewKickoffStartedEvent
from crewai.events.types.llm_events import LLMCallCompletedEvent
from crewai.events.types.task_events import TaskStartedEvent
from crewai.events.types.tool_usage_events import (
    ToolUsageErrorEvent,
    ToolUsageFinishedEvent,
    ToolUsageStartedEvent,
)

from icore.fence import INVALID_ARGUMENTS
from icore.integrations import RunRecorder
from icore.integrations._recorder_arg import check_recorder
from icore.integrations._recorder_lines import asked_as
from icore.integrations._trace_data import bounded_args
from icore.integrations.crewai._call_ids import model_calls
from icore.integrations.crewai._human_input import hear_human_input
from icore.integrations.crewai._turns import _stack, model_said

_TASK_SCOPE = "task_started"
_INTERNAL = "CrewAI's own model call (no agent: context-window summarizing, planning)"


def _at(event: Any) -> float | None:
    ts = getattr(event, "timestamp", None)
    return ts.timestamp() if ts is not None else None


DELEGATION_TOOLS = frozenset({"delegate_work_to_coworker", "ask_question_to_coworker"})
"""CrewAI's delegation tools (a hierarchical crew's manager, ``allow_delegation=True``),
by their normalised names: a call of one hands the work to the ``coworker``."""


_ARG_ERRORS = ("Arguments validation failed:", "Failed to parse arguments as JSON")
"""How CrewAI's own argument checks word the ``ValueError`` they raise (its structured
tool's ``_parse_args``; ``BaseTool._validate_kwargs`` says "Tool '<name>' arguments
validation failed:")."""


def _refused_arguments(error: Any) -> bool:
    """Whether ``error`` is CrewAI refusing a call's arguments (before the tool ran)."""
    if not isinstance(error, ValueError):
        return False
    text = str(error)
    return text.startswith(_ARG_ERRORS) or (
        text.startswith("Tool '") and "' arguments validation failed:" in text[:300])


def _tool_key(name: Any) -> str:
    """A tool's name as CrewAI normalises it.

    ``Delegate work to coworker`` -> ``delegate_work_to_coworker``.
    """
    return "_".join(str(name or "").lower().split())


def _role(event: Any, default: str = "agent") -> str:
    role = getattr(event, "agent_role", None)
    if role:
        return str(role)
    agent = getattr(event, "from_agent", None) or getattr(event, "agent", None)
    return str(getattr(agent, "role", None) or default)


class CrewRecorder:
    """Buffers CrewAI events and writes them into ``recorder`` in emission order.

    Args:
        recorder: where the run goes.
    """

    def __init__(self, recorder: RunRecorder) -> None:
        check_recorder(recorder, where="CrewRecorder")
        self.recorder = recorder
        self._buf: list[tuple[int, int, Callable[[], object], str]] = []
        self._n = 0
        self._lock = threading.Lock()
        self._handlers: list[tuple[type[Any], Callable[..., None]]] = []
        self._roles: dict[str, str] = {}
        self._task_agents: dict[str, str] = {}
        """``task_started`` event id -> the role of the task's agent (read at flush)."""

    def _push(self, event: Any, fn: Callable[[], object], tag: str = "") -> None:
        """Buffer ``fn`` (it writes one event).

        ``tag`` marks a run's start / end (``crew+``, ``crew-``, ``agent+``, ``agent-``:
        see :meth:`flush`).
        """
        with self._lock:
            self._n += 1
            seq = getattr(event, "emission_sequence", None)
            self._buf.append((seq if isinstance(seq, int) else 1 << 62, self._n, fn, tag))

    def _delegated(self, source: Any, event: ToolUsageStartedEvent) -> None:
        """A delegation tool starts: a handoff from the delegating agent to the coworker.

        The coworker named in the call (CrewAI matches it to an agent's role without
        regard to case or quotes; the crew's own spelling of the role is kept), so the
        coworker's turns and tool calls that follow are its own, after the handoff.
        """
        if _tool_key(event.tool_name) not in DELEGATION_TOOLS:
            return
        args = event.tool_args if isinstance(event.tool_args, dict) else {}
        named = str(args.get("coworker") or "").strip().strip("\"'")
        if not named:
            return
        with self._lock:
            to = self._roles.get(named.casefold(), named)
        who = _role(event)
        what = str(args.get("task") or args.get("question") or "")
        verb = "asks" if _tool_key(event.tool_name).startswith("ask") else "delegates to"
        self._push(event, lambda: self.recorder.handoff(
            who, to, f"{who} {verb} {to}: {what}" if what else "", at=_at(event)))

    def _kickoff(self, source: Any, event: CrewKickoffStartedEvent) -> None:
        with self._lock:  # the crew's roles, as delegation calls name them
            for a in getattr(source, "agents", None) or ():
                role = getattr(a, "role", None)
                if isinstance(role, str) and role:
                    self._roles[role.strip().casefold()] = role
        inputs = event.inputs or {}
        self._push(event, lambda: self.recorder.task(inputs or "kickoff", agent="user",
                                                         at=_at(event)), "crew+")

    def _agent_kickoff(self, source: Any, event: LiteAgentExecutionStartedEvent) -> None:
        msgs = event.messages
        text = msgs if isinstance(msgs, str) else "\n".join(
            str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in msgs)
        self._push(event, lambda: self.recorder.task(text or "kickoff", agent="user",
                                                     at=_at(event)), "agent+")

    def _agent_done(self, source: Any, event: LiteAgentExecutionCompletedEvent) -> None:
        who = str((event.agent_info or {}).get("role") or "agent")
        self._push(event, lambda: self.recorder.finish(who, event.output, at=_at(event)),
                   "agent-")

    def _task(self, source: Any, event: TaskStartedEvent) -> None:
        task = event.task
        agent = str(getattr(getattr(task, "agent", None), "role", None) or "agent")
        with self._lock:
            self._task_agents[event.event_id] = agent
        text = str(getattr(task, "description", "") or event.context or "")
        self._push(event, lambda: self.recorder.handoff("crew", agent, text, at=_at(event)))

    def _llm(self, source: Any, event: LLMCallCompletedEvent) -> None:
        """A model call: an agent's turn; CrewAI's own calls are no agent's turn.

        A call with no agent (CrewAI summarizing a conversation that outgrew the context
        window, a crew's planning step) is recorded as a ``thought`` of the agent in
        whose task it ran (the innermost task on CrewAI's event stack, read in the
        emitter's context), else of ``crew``: never a turn of a phantom agent that the
        audit would judge (QA qa-crew S3: 57 hard flags of an agent "agent").
        """
        if getattr(event, "agent_role", None) or getattr(event, "from_agent", None):
            who = _role(event)
            calls = model_calls(event.response, model_said())  # in the emitter's context
            self._push(event, lambda: self._turn(who, event, calls))
            return
        tasks = [eid for eid, kind in reversed(_stack()) if kind == _TASK_SCOPE]

        def internal() -> None:
            with self._lock:
                who = next((self._task_agents[t] for t in tasks if t in self._task_agents),
                           "crew")
            self.recorder.add(who, "thought", f"{_INTERNAL}: {event.response}",
                              at=_at(event), crewai_internal=True)

        self._push(event, internal)

    def _turn(self, who: str, event: Any, calls: list[dict[str, Any]]) -> None:
        """A model turn naming its tool calls (ids: :mod:`._call_ids`).

        A fenced call's arguments as its tool reads them, noted while the turn was
        buffered (:func:`asked_normal`), are put on its tool call (``args_normal``).
        """
        rec = self.recorder
        rec.turn(who, event.response, at=_at(event), **({"tool_calls": calls} if calls else {}))
        with _NORMALS_LOCK:
            mine = _NORMALS.get(rec)
            norms = [(c["id"], mine.pop(c["id"])) for c in calls
                     if mine and c.get("id") in mine]
        for cid, norm in norms:
            asked_as(rec, cid, norm)

    def _tool(self, source: Any, event: ToolUsageFinishedEvent) -> None:
        if event.tool_name in self.recorder.fenced_tools:
            return  # the guard recorded it
        who = _role(event)
        args = event.tool_args if isinstance(event.tool_args, dict) else {
            "input": event.tool_args}
        failed = event.failure is not None
        out = event.failure.message if event.failure is not None else event.output
        self._push(event, lambda: self.recorder.tool_call(who, event.tool_name, args, out,
                                                          error=failed, at=_at(event)))

    def _tool_error(self, source: Any, event: ToolUsageErrorEvent) -> None:
        """A tool call failed; a fenced one only when CrewAI refused its arguments.

        A fenced call that reached its gate is recorded by the guard. One whose
        arguments CrewAI's own schema validation refused never reached it: recorded here
        as a failed call (``reason: invalid_arguments``) with the arguments given
        (bounded), so the trace shows every call the model made (QA qa-crew S4).
        """
        refused = _refused_arguments(event.error)
        if event.tool_name in self.recorder.fenced_tools and not refused:
            return
        who = _role(event)
        raw = event.tool_args if isinstance(event.tool_args, dict) else {
            "input": event.tool_args}
        args = bounded_args(raw) if refused else raw
        more = {"reason": INVALID_ARGUMENTS} if refused else {}
        self._push(event, lambda: self.recorder.tool_call(who, event.tool_name, args,
                                                          str(event.error), error=True,
                                                          at=_at(event), **more))

    def _done(self, source: Any, event: CrewKickoffCompletedEvent) -> None:
        out = getattr(event.output, "raw", event.output)
        self._push(event, lambda: self.recorder.finish("crew", out, at=_at(event)), "crew-")

    def subscribe(self) -> None:
        """Register the handlers on ``crewai_event_bus``."""
        pairs: list[tuple[type[Any], Callable[..., None]]] = [
            (CrewKickoffStartedEvent, self._kickoff), (TaskStartedEvent, self._task),
            (LLMCallCompletedEvent, self._llm), (ToolUsageFinishedEvent, self._tool),
            (ToolUsageStartedEvent, self._delegated),
            (ToolUsageErrorEvent, self._tool_error), (CrewKickoffCompletedEvent, self._done),
            (LiteAgentExecutionStartedEvent, self._agent_kickoff),
            (LiteAgentExecutionCompletedEvent, self._agent_done)]
        for etype, fn in pairs:
            mine = self._routed(fn)
            crewai_event_bus.on(etype)(mine)
            self._handlers.append((etype, mine))

    def _routed(self, fn: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        """``fn`` for the events of this recorder's runs only.

        The bus is process-wide and runs handlers in the emitter's context (a copy): an
        event emitted inside another :func:`recording` block (a concurrent run) belongs
        to that block's recorder and is skipped here, never mixed in.
        """
        def handler(source: Any, event: Any) -> None:
            owner = ACTIVE_RECORDER.get()
            if owner is None or owner is self.recorder:
                fn(source, event)

        return handler

    def unsubscribe(self) -> None:
        """Remove the handlers."""
        for etype, fn in self._handlers:
            crewai_event_bus.off(etype, fn)
        self._handlers.clear()

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for pending handlers; write the buffered events in emission order.

        An ``Agent.kickoff()``'s task and final answer are written only for the
        outermost run: not inside a crew's kickoff, nor inside another agent's kickoff
        (an agent used by a tool, a Flow step), whose task and end they are not.
        """
        crewai_event_bus.flush(timeout=timeout_s)
        with self._lock:
            buf, self._buf = sorted(self._buf, key=lambda t: (t[0], t[1])), []
        depth = 0
        for _, _, fn, tag in buf:
            if tag in ("crew-", "agent-"):
                depth = max(depth - 1, 0)
            if not tag.startswith("agent") or depth == 0:
                fn()
            if tag in ("crew+", "agent+"):
                depth += 1


_NORMALS: weakref.WeakKeyDictionary[RunRecorder, dict[str, Callable[..., Any]]] = \
    weakref.WeakKeyDictionary()
_NORMALS_LOCK = threading.Lock()
_MAX_NORMALS = 4096


def asked_normal(recorder: RunRecorder, link: str,
                 normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Note how a fenced call's tool reads the model's arguments of its tool call ``link``.

    The model turn is written when the recording is flushed (after the call's own gate
    lines): the turn's tool call then gets ``args_normal`` when the tool's normal form
    differs from what the model sent
    (:func:`~icore.integrations._recorder_lines.asked_as`). At most
    :data:`_MAX_NORMALS` pending per recorder (the oldest dropped).
    """
    with _NORMALS_LOCK:
        mine = _NORMALS.setdefault(recorder, {})
        mine[link] = normalize
        while len(mine) > _MAX_NORMALS:
            mine.pop(next(iter(mine)))


ACTIVE_RECORDER: contextvars.ContextVar[RunRecorder | None] = contextvars.ContextVar(
    "icore_crewai_recorder", default=None)
"""The recorder of the :func:`recording` block this code runs in: a fenced tool built
without ``recorder=`` records its gate decisions and calls there."""


@contextmanager
def recording(recorder: RunRecorder) -> Iterator[CrewRecorder]:
    """Record every CrewAI run inside the block; flushed into ``recorder`` at its end.

    Fenced tools built without ``recorder=`` record into ``recorder`` inside the block.
    A task's human feedback (``Task(human_input=True)``) is recorded as an
    ``instruction`` of agent ``human`` to the task's agent: the human-input provider in
    force (the application's, else CrewAI's default) is wrapped for the block, never
    replaced, and put back at its end (:mod:`icore.integrations.crewai._human_input`).
    """
    cr = CrewRecorder(recorder)
    cr.subscribe()
    token = ACTIVE_RECORDER.set(recorder)
    try:
        with hear_human_input(recorder, ACTIVE_RECORDER.get):
            yield cr
    finally:
        ACTIVE_RECORDER.reset(token)
        cr.flush()
        cr.unsubscribe()
