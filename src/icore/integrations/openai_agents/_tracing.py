"""Recorded Agents SDK runs (icore Sec. 3).

A tracing processor writes a :class:`~icore.integrations.RunRecorder`.

:class:`RecordingProcessor` implements the SDK's ``TracingProcessor``: agent spans give
the speaking agent (the innermost agent span not ended: after an agent used as a tool,
its caller again), generation / response spans the model's turns (text and tool calls;
the Responses format, or the Chat Completions models' messages and streamed dumps)
and the run's task (the newest user message of the trace's first model input - a later
run of a chat gets the whole history -, once per trace: a run resumed after a human
approval continues the same trace), function spans the tool calls with input and output
(errors as errors; an MCP tool's result that is the ``icore mcp`` gateway's refusal -
``PlanFence blocked <tool> (<reason>)``, an ``isError`` result the SDK traces without an
error - as the calling agent's blocked call, a stale one's next call as its replan; a
call the SDK answered without running its tool - a human's rejection through the SDK's
approval - as the calling agent's refused call), handoff spans the handoffs, guardrail
spans a thought.

The end of a run: when a top-level run finishes (its task span ends; without task
spans, its trace ends, or - for a run resumed from a ``RunState``, whose trace already
ended - its agent span ends) and its last model turn is text without tool calls, that
text is the final answer. A run stopped for a human approval (``result.interruptions``)
records a pause instead (a ``thought`` with ``pause: true`` naming the calls waiting; a
fenced tool tells the processor which calls it put to the human, a plain tool's waiting
call ends its function span without output); the human's decision is recorded when the
run resumes (``answered_by: "human"``, ``decision``), and its end is recorded when it
is resumed and finishes. One end per recorder: a later run recorded into the same
recorder removes the earlier end (its answer stays the agent's output line).
:func:`recording` installs the processor for a ``with`` block.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agents.tracing import (
    AgentSpanData,
    FunctionSpanData,
    GenerationSpanData,
    GuardrailSpanData,
    HandoffSpanData,
    ResponseSpanData,
    Span,
    TaskSpanData,
    Trace,
    TracingProcessor,
    get_current_trace,
    get_trace_provider,
)
from agents.tracing.traces import NoOpTrace

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations._json_args import read_json
from icore.integrations._recorder_arg import check_recorder
from icore.integrations._refusals import record_tool_result, refused_call
from icore.integrations._run_end import RunEnd
from icore.integrations.openai_agents._guardrails import Tripwires, stopped_text
from icore.integrations.openai_agents._install import claim, claimant, install, uninstall
from icore.integrations.openai_agents._mcp_errors import mcp_failed, watch_mcp_errors
from icore.integrations.openai_agents._span_items import items as span_items
from icore.integrations.openai_agents._span_items import renote, turn_output, unseen_note
from icore.integrations.openai_agents._span_items import text as item_text
from icore.workspace import REJECTED

_NONE_TEXT = ("None", "", None)
"""What the model reads for a tool that returned None (never the SDK's rejection)."""


@dataclass
class _TraceState:
    """What the processor knows of one trace (one run and its resumptions)."""

    agent: str = "agent"
    open_agents: list[tuple[str, str]] = field(default_factory=list)
    """Agent spans not ended yet, (span id, agent name), innermost last: an agent used as
    a tool runs inside its caller's span, which speaks again once it ends."""
    at: float = 0.0
    """When the processor first saw the trace (its task is recorded at that time)."""
    tasked: bool = False
    final: tuple[str, str] | None = None
    depth: int = 0
    tasks: bool = False
    ended: bool = False
    turns: bool = False
    """A model span of the trace carried the model's input or output."""
    noted: bool = False
    model: bool = False
    """A model span of the trace was seen (filled or not)."""
    answered: bool = False
    """A call a human approved ran in it (a resumed run: without a model span, its
    model was not called, e.g. it paused again; no ``unseen_model`` note, QA qa-new18a
    #5)."""


def _trim(entries: OrderedDict[Any, Any], most: int) -> None:
    """Forget the oldest of ``entries`` beyond ``most`` (the caller holds the lock)."""
    while len(entries) > most:
        entries.popitem(last=False)


class RecordingProcessor(TracingProcessor):
    """An Agents SDK tracing processor recording every run into ``recorder``.

    Args:
        recorder: where the run goes.

    Raises:
        IntegrationError: ``recorder`` is not a RunRecorder (at construction).
    """

    MAX_TRACES = 1024
    """Traces remembered (a resumed run continues one of them)."""
    ICORE_RECORDING = True
    """Marks icore's processors (an exclusive block keeps the other blocks' ones)."""

    def __init__(self, recorder: RunRecorder) -> None:
        check_recorder(recorder, where="RecordingProcessor")
        self.recorder = recorder
        self.active = True
        """Set False to stop recording (the processor stays registered, inert)."""
        self._traces: OrderedDict[str, _TraceState] = OrderedDict()
        self._end = RunEnd(recorder, echoed=True)  # the answer is also a model turn
        self._trips = Tripwires()  # a guardrail's tripwire: the run ends with no answer
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, tuple[str, str, Any]] = OrderedDict()
        """Tool calls of model turns no tool answered yet: call id -> (agent, tool, args)."""
        self._asking: OrderedDict[str, tuple[str, str, Any]] = OrderedDict()
        """Calls put to the human, not answered yet: call id -> (agent, tool, args)."""
        self._held: OrderedDict[str, tuple[str, str, Any]] = OrderedDict()
        """Plain tools' calls whose function span ended without output (the SDK's
        pending approval, or a tool that returned None): call id -> (agent, tool, args)."""
        self._paused: OrderedDict[str, tuple[str, str, Any]] = OrderedDict()
        """Calls a run paused on (put to the human), oldest first: call id -> (agent,
        tool, args)."""
        self._handed: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Handoffs made: (from agent, the SDK's transfer message the model reads). The
        handoff's call has no function span; its output is not a call the SDK refused."""

    def _state(self, trace_id: str) -> _TraceState:
        """The trace's state (the caller holds the lock)."""
        st = self._traces.get(trace_id)
        if st is None:
            st = self._traces[trace_id] = _TraceState(at=time.time())
            _trim(self._traces, self.MAX_TRACES)
        return st

    def _who(self, span: Span[Any]) -> str:
        with self._lock:
            return self._state(span.trace_id).agent

    def _finish(self, trace_id: str) -> None:
        """The run ended: its last model turn, if text without tool calls, is the answer."""
        tripped = self._trips.take(trace_id)
        with self._lock:
            st = self._state(trace_id)
            final, st.final = st.final, None
            waiting = dict(self._asking) if final is None and tripped is None else {}
            self._asking.clear()
        if tripped is not None:  # Runner.run raised: the user got no answer
            text = stopped_text(tripped, final[1] if final is not None else None)
            self.recorder.add(tripped["agent"], "thought", f"the run stopped: {text}",
                              error=text, guardrail=tripped)
            return
        if final is not None:
            self._end.end(*final)
            return
        self._unseen(trace_id)  # before a pause: a paused trace ends with its pause
        if waiting:  # stopped for a human approval: a pause, not an end
            with self._lock:
                self._paused.update(waiting)
                _trim(self._paused, self.MAX_TRACES)
            waiting_calls = list(waiting.values())
            what = "; ".join(f"{t} {json.dumps(a, default=str)}"
                             for _, t, a in waiting_calls)
            self.recorder.add(waiting_calls[0][0], "thought",
                              f"paused: waiting for a human to approve {what}", pause=True,
                              approvals=[{"tool": t, "args": a} for _, t, a in waiting_calls])

    def _unseen(self, trace_id: str) -> None:
        """A run ended whose model put nothing in its spans: say so in the trace (once).

        The processor sees a run only through the SDK's spans; a model that fills no
        generation or response span (``agents.testing.ScriptedModel``, with or without
        ``emit_traces``) leaves no task, turns or answer to record (QA qa-fw7 S3). The
        line is written where the run ended (before its pause, if it paused: a paused
        trace ends with its pause) and says what the trace lacks when it is written
        (:func:`unseen_note`): a task or an end the app recorded itself is not called
        missing (QA qa-new9 S2, S4).
        """
        with self._lock:
            st = self._state(trace_id)
            if st.turns or st.noted or (st.answered and not st.model):
                return
            st.noted, who = True, st.agent
        line = self.recorder.add(who, "thought", unseen_note(self.recorder.events),
                                 unseen_model=True)
        self.recorder.before_output(lambda: renote(self.recorder, line))

    def _mine(self, trace_id: str) -> bool:
        """Whether an event of ``trace_id`` belongs to this processor's runs.

        Runs are routed by their own identity, never by which processor is installed:
        inside a :func:`recording` block, the block's processor (the context variable
        the run's task inherited); outside any block (an event delivered without the
        run's context), the processor whose block started the trace, else any.
        """
        if not self.active:
            return False
        owner = ACTIVE_PROCESSOR.get()
        if owner is not None:
            return owner is self
        claimed = claimant(trace_id)
        return claimed is None or claimed is self

    def on_trace_start(self, trace: Trace) -> None:
        """A run starts (a resumed run continues its trace without a new start)."""
        if ACTIVE_PROCESSOR.get() is self:
            claim(trace.trace_id, self)
        if self._mine(trace.trace_id):
            self._end.another_run()

    def on_trace_end(self, trace: Trace) -> None:
        """The trace's first run ends (its answer, when its task span did not record it)."""
        if not self._mine(trace.trace_id):
            return
        with self._lock:
            self._state(trace.trace_id).ended = True
        self._finish(trace.trace_id)

    def on_span_start(self, span: Span[Any]) -> None:
        """An agent span names the agent that speaks next; a task span starts a run."""
        if not self._mine(span.trace_id):
            return
        data = span.span_data
        if isinstance(data, AgentSpanData):
            with self._lock:
                st = self._state(span.trace_id)
                st.agent = data.name
                st.open_agents.append((span.span_id, data.name))
        elif isinstance(data, GuardrailSpanData):  # the answer's, once the agent answered
            with self._lock:
                answered = self._state(span.trace_id).final is not None
            self._trips.started(span.span_id, answered)
        elif isinstance(data, TaskSpanData):
            with self._lock:
                st = self._state(span.trace_id)
                st.tasks = True
                st.depth += 1
                top = st.depth == 1
            if top:
                self._end.another_run()

    def _ended_span(self, span: Span[Any]) -> None:
        """A task span (or, in a resumed run without task spans, an agent span) ended."""
        data = span.span_data
        with self._lock:
            st = self._state(span.trace_id)
            if isinstance(data, TaskSpanData):
                st.depth = max(0, st.depth - 1)
                done = st.depth == 0
            else:
                done = st.ended and not st.tasks
        if done:
            self._finish(span.trace_id)

    def invoked(self, call_id: Any, approved: bool = False) -> None:
        """A fenced tool ran the call ``call_id`` (``approved``: as a human approved it)."""
        trace = get_current_trace()
        with self._lock:
            if approved and trace is not None:
                self._state(trace.trace_id).answered = True
            self._pending.pop(str(call_id), None)
            self._asking.pop(str(call_id), None)
            self._paused.pop(str(call_id), None)

    def paused_calls(self) -> frozenset[str]:
        """The call ids a run of this block paused on, not answered yet."""
        with self._lock:
            return frozenset(self._paused)

    def asking(self, call_id: Any, tool: str, args: Any) -> None:
        """The call ``call_id`` is put to the human (a fenced tool's ``needs_approval``).

        A run that ends while such a call waits is recorded as paused, not ended.
        """
        trace = get_current_trace()
        with self._lock:
            who = self._pending.get(str(call_id), (None,))[0]
            if who is None:  # no model span named the call: the agent whose span is open
                st = self._traces.get(trace.trace_id) if trace is not None else None
                who = st.agent if st is not None else "agent"
            self._asking[str(call_id)] = (who, tool, args)
            _trim(self._asking, self.MAX_TRACES)

    def rejected(self, tool: str, decided: Callable[[str], Any],
                 message: Callable[[str], str]) -> None:
        """Record the calls of ``tool`` the run paused on that the human rejected.

        A fenced tool asks it when the SDK lists its tools for a model call (a resumed
        run's next turn): ``decided(call_id)`` is the SDK's decision (False: rejected),
        ``message(call_id)`` the text the SDK answers the call with. Only for a trace
        whose model fills no span (``agents.testing.ScriptedModel``): otherwise the next
        model input names the SDK's answer (:meth:`_answered`) exactly. Each rejection is
        recorded once, as there: the human's decision, then the refused call (QA
        qa-new9 S2).
        """
        trace = get_current_trace()
        if trace is None or not self._mine(trace.trace_id):
            return
        found: list[tuple[str, tuple[str, str, Any]]] = []
        with self._lock:
            st = self._traces.get(trace.trace_id)
            if st is None or st.turns:
                return
            for cid, entry in list(self._paused.items()):
                if entry[1] == tool and decided(cid) is False:
                    found.append((cid, entry))
                    del self._paused[cid]
                    self._pending.pop(cid, None)
                    self._held.pop(cid, None)
        for cid, (who, name, args) in found:
            self._decision(who, name, args, "reject")
            refused_call(self.recorder, who, name, args if isinstance(args, dict) else None,
                         message(cid), reason=REJECTED, policy="approval",
                         answered_by="sdk", decision="reject")

    def _hold(self, name: str, args: Any) -> bool:
        """A plain tool's call ended without output: held as put to the human.

        The SDK ends a call waiting for its ``needs_approval`` human with no output; a
        run that stops there is paused (:meth:`_finish`). Whether it was a pending
        approval or a tool returning None is told when the call is answered: it runs
        again after the pause (approved), or the SDK answers it without running
        (rejected), or its output reaches the model without a pause (a None result).
        """
        with self._lock:
            for cid, (who, n, a) in self._pending.items():
                if n == name and a == args and cid not in self._held:
                    self._held[cid] = (who, n, a)
                    self._asking[cid] = (who, n, a)
                    _trim(self._held, self.MAX_TRACES)
                    _trim(self._asking, self.MAX_TRACES)
                    return True
        return False

    def _approved(self, name: str, args: Any) -> tuple[str, str, Any] | None:
        """A call the run paused on ran: the held entry (taken), else None."""
        with self._lock:
            for cid, (who, n, a) in self._held.items():
                if n == name and a == args and cid in self._paused:
                    del self._held[cid]
                    self._paused.pop(cid, None)
                    return who, n, a
        return None

    def _ran(self, name: str, args: Any) -> None:
        """A plain tool's function span ended: the oldest such waiting call was answered."""
        with self._lock:
            for cid, (_, n, a) in self._pending.items():
                if n == name and a == args:
                    del self._pending[cid]
                    return

    def _answered(self, inputs: Any) -> None:
        """Calls the SDK answered without running their tool, as their agent's refusals.

        A model call's input carries the outputs of the previous turn's calls; one whose
        tool never ran (the human rejected it through the SDK's approval, on a resumed
        run, where the SDK opens no span for it) is recorded as the calling agent's
        refused call: ``blocked``, ``answered_by="sdk"``, the SDK's message as output. A
        handoff's call has no function span either: its output, the SDK's transfer
        message to the agent a handoff span named, is recorded as the call's run.
        """
        items = span_items(inputs) if not isinstance(inputs, str) else []
        found: list[tuple[tuple[str, str, Any], Any, bool]] = []
        ran: list[tuple[tuple[str, str, Any], Any, bool]] = []
        handed: list[tuple[tuple[str, str, Any], Any]] = []
        with self._lock:
            for it in items:
                cid = str(it.get("call_id"))
                if it.get("type") == "function_call_output":
                    was_asked = self._asking.pop(cid, None) is not None or cid in self._paused
                    held = self._held.pop(cid, None) is not None
                    paused = cid in self._paused
                    self._paused.pop(cid, None)
                    if cid in self._pending:
                        out = it.get("output")
                        if (self._pending[cid][0], str(out)) in self._handed:
                            handed.append((self._pending.pop(cid), out))  # a handoff
                            continue
                        entry = (self._pending.pop(cid), out, was_asked)
                        # held and answered without a pause, or with the text of None
                        # (the SDK's answer of a tool that returned None): it ran
                        (ran if held and (not paused or out in _NONE_TEXT) else
                         found).append(entry)
        for (who, name, args), out, asked in found:
            if asked:  # the run paused on it: the human's "no" (the SDK runs nothing)
                self._decision(who, name, args, "reject")
            given = args if isinstance(args, dict) else None
            if asked and name in self.recorder.fenced_tools:  # a protected action, blocked
                refused_call(self.recorder, who, name, given, out, reason=REJECTED,
                             policy="approval", answered_by="sdk", decision="reject")
                continue
            self.recorder.tool_call(who, name, given, out, error=True, blocked=True,
                                    answered_by="sdk", decision="reject" if asked else None)
        for (who, name, args), out in handed:  # the handoff's call: it ran
            self.recorder.tool_call(who, name, args if isinstance(args, dict) else None, out)
        for (who, name, args), out, _ in ran:  # a plain tool that returned nothing
            self.recorder.tool_call(who, name, args if isinstance(args, dict) else None, out)

    def _decision(self, who: str, name: str, args: Any, said: str) -> None:
        """Record a human's answer to an approval the run paused on."""
        self.recorder.add(who, "thought", f"a human answered {said} for {name} "
                          f"{json.dumps(args, default=str)}", answered_by="human",
                          decision=said, tool=name, args=args)

    def _turn(self, span: Span[Any], inputs: Any, output: Any) -> None:
        who = self._who(span)
        with self._lock:
            st = self._state(span.trace_id)
            first, st.tasked, at, st.model = not st.tasked, True, st.at, True
            st.turns = st.turns or bool(inputs or output)
        if first:
            # a later run of a chat gets the history: its task is the newest user message
            task = inputs if isinstance(inputs, str) else next(
                (item_text(m) for m in reversed(span_items(inputs)) if m.get("role") == "user"), "")
            if task:  # before what a resumed run's tools recorded ahead of its model
                self.recorder.task(task, at=at, traced=True)
        self._answered(inputs)
        calls, text = turn_output(span_items(output))
        with self._lock:
            for c in calls:
                self._pending[c.get("id", "None")] = (who, str(c["name"]), c["args"])
                _trim(self._pending, self.MAX_TRACES)
        with self._lock:
            self._state(span.trace_id).final = (who, text) if text and not calls else None
        if text or calls:
            self.recorder.turn(who, text or f"calls {[c['name'] for c in calls]}",
                               tool_calls=calls or None)

    def on_span_end(self, span: Span[Any]) -> None:
        """Map a finished span to recorder events."""
        if not self._mine(span.trace_id):
            return
        data = span.span_data
        if isinstance(data, GenerationSpanData):
            self._turn(span, data.input, data.output)
        elif isinstance(data, ResponseSpanData) and data.response is not None:
            self._turn(span, data.input, data.response.output)
        elif isinstance(data, FunctionSpanData):
            if data.name in self.recorder.fenced_tools:
                return  # recorded by the fenced tool (a pending approval's span: no call)
            args, why = read_json(data.input) if data.input else (None, None)
            if why is not None:
                args = {"input": data.input}
            err = span.error
            if data.output is None and err is None and self._hold(data.name, args):
                return  # put to the human (or a None result): told apart when answered
            approved = self._approved(data.name, args)
            if approved is not None:  # it ran after the run paused on it: the human's yes
                self._decision(approved[0], data.name, args, "approve")
            self._ran(data.name, args)
            call_args = args if isinstance(args, dict) else {"input": args}
            if data.mcp_data is not None and err is None:  # the gateway's refusal: isError
                # (the SDK sets no span error for it; its text names the refusal); any
                # other isError result (an upstream tool that raised) failed
                record_tool_result(self.recorder, self._who(span), data.name, call_args,
                                   data.output, error=mcp_failed(span.span_id))
                return
            self.recorder.tool_call(self._who(span), data.name, call_args,
                                    err["message"] if err else data.output,
                                    error=err is not None)
        elif isinstance(data, HandoffSpanData) and data.to_agent:
            who = data.from_agent or self._who(span)
            with self._lock:  # its call's output is the SDK's transfer message, not a refusal
                self._handed[(who, json.dumps({"assistant": data.to_agent}))] = None
                _trim(self._handed, self.MAX_TRACES)
            self.recorder.handoff(who, data.to_agent)
        elif isinstance(data, GuardrailSpanData):
            who = self._who(span)
            trip = self._trips.ended(span.trace_id, span.span_id, data.name, who,
                                     bool(data.triggered))
            extra: dict[str, Any] = {"guardrail": trip} if trip else {}
            self.recorder.add(who, "thought", f"guardrail {data.name}: triggered="
                              f"{data.triggered}", **extra)
        if isinstance(data, AgentSpanData):
            with self._lock:  # the caller of an agent used as a tool speaks again
                st = self._state(span.trace_id)
                st.open_agents = [a for a in st.open_agents if a[0] != span.span_id]
                if st.open_agents:
                    st.agent = st.open_agents[-1][1]
        if isinstance(data, TaskSpanData | AgentSpanData):
            self._ended_span(span)

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Events are recorded as they arrive."""


TRACING_FIX = ("keep SDK tracing on and record with recording(rec, exclusive=True): in the "
               "block only the recorder receives the traces (nothing is exported, no "
               "'OPENAI_API_KEY is not set' message); drop RunConfig(tracing_disabled=True)")
"""The fix named when a recorded run is not traced."""


def _globally_off(provider: Any) -> bool:
    """Whether the SDK's tracing is switched off for the process (False when unknown)."""
    refresh = getattr(provider, "_refresh_disabled_flag", None)
    if callable(refresh):
        refresh()
    return getattr(provider, "_disabled", False) is True


def check_traced(name: str) -> None:
    """Inside :func:`recording`, refuse a fenced call of a run the SDK does not trace.

    Raises:
        IntegrationError: the run has no trace (``RunConfig(tracing_disabled=True)``):
            only its gate decisions could be recorded; the error names the fix.
    """
    trace = get_current_trace()
    if ACTIVE_PROCESSOR.get() is not None and (trace is None or isinstance(trace, NoOpTrace)):
        raise IntegrationError(
            "this run is not traced (RunConfig(tracing_disabled=True)) inside recording(): "
            "its task, model turns, tools and end would not be recorded",
            framework="openai_agents", tool=name, fix=TRACING_FIX)


ACTIVE_RECORDER: contextvars.ContextVar[RunRecorder | None] = contextvars.ContextVar(
    "icore_openai_agents_recorder", default=None)
ACTIVE_PROCESSOR: contextvars.ContextVar[RecordingProcessor | None] = contextvars.ContextVar(
    "icore_openai_agents_processor", default=None)
"""The processor of the :func:`recording` block: fenced tools tell it which calls ran."""
"""The recorder of the :func:`recording` block this code runs in: a fenced tool built
without ``recorder=`` records its gate decisions and calls there."""


@contextmanager
def recording(recorder: RunRecorder, *, exclusive: bool = False
              ) -> Iterator[RecordingProcessor]:
    """Record every Agents SDK run inside the block into ``recorder``.

    Args:
        recorder: where the runs go.
        exclusive: for the block, this processor replaces the installed ones (nothing
            leaves the process, e.g. in tests); otherwise it is added next to them.

    Fenced tools built without ``recorder=`` record into ``recorder`` inside the block.
    The processors installed before are restored afterwards. When the SDK's provider
    does not expose them, the processor is only switched off at the end (and
    ``exclusive`` is refused, since the others could not be put back).

    SDK tracing switched off for the process (``set_tracing_disabled(True)``,
    ``OPENAI_AGENTS_DISABLE_TRACING``): with ``exclusive`` it is switched on for the block
    (only this processor receives traces: nothing is exported) and off again after;
    without ``exclusive`` it is refused (the runs would not be recorded). A run started
    with ``RunConfig(tracing_disabled=True)`` in the block is refused at its first fenced
    call (:func:`check_traced`).

    Raises:
        IntegrationError: ``recorder`` is not a RunRecorder; ``exclusive`` with a
            provider whose processors are unknown;
            SDK tracing is off for the process and ``exclusive`` is not set (the error
            names the fix).
    """
    check_recorder(recorder, where="recording()")
    watch_mcp_errors()  # an MCP tool's isError result is recorded as failed
    provider = get_trace_provider()
    off = _globally_off(provider)
    if off and not exclusive:
        raise IntegrationError(
            "Agents SDK tracing is disabled (set_tracing_disabled(True) or "
            "OPENAI_AGENTS_DISABLE_TRACING): recording() reads runs from the SDK's traces "
            "and would record nothing but gate decisions", framework="openai_agents",
            fix=TRACING_FIX)
    proc = RecordingProcessor(recorder)
    install(provider, proc, exclusive=exclusive, off=off)
    token = ACTIVE_RECORDER.set(recorder)
    ptoken = ACTIVE_PROCESSOR.set(proc)
    try:
        with recorder.active():  # fenced tools built without recorder= record here too
            yield proc
    finally:
        ACTIVE_PROCESSOR.reset(ptoken)
        ACTIVE_RECORDER.reset(token)
        proc.active = False
        uninstall(provider, proc, exclusive=exclusive)
