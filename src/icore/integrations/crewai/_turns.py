"""Which model message a CrewAI tool call came from, and errors that must reach the app.

The rule every integration follows (planfence App. A.3; :class:`~icore.workspace.Agent`
keys its reads by model turn): a protected call is planned from the reads made *before*
the model message that proposed it. Reads made by tools of that same message, and fresh
values handed to a sibling call of that message, never authorize it.

How CrewAI exposes the turn. An ``AgentExecutor`` run (one task, or one
``Agent.kickoff``) is a CrewAI ``Flow``: it opens a ``flow_started`` event scope, and all
its model calls and tool calls happen inside that scope (on CrewAI's event-context
stack, inherited by the threads of parallel tool calls). Within one run the executor is
sequential: a model call, then the tool calls of its message, then the next model call.
A ``before_llm_call`` hook (registered globally; CrewAI copies the global list into each
executor when the executor is built) numbers every model call of the run; a tool call,
or a read made by a tool, belongs to the run's latest model call. Tool calls of one
message therefore share a turn, the next message gets the next one, and two runs (two
agents, two crews, a delegated coworker) never share one.

Fail closed: a tool call inside a CrewAI run whose model calls were never numbered (the
executor was built before this module was imported) has no known turn; a protected call
then does not run and :class:`CrewSetupError` reaches the app. A call outside any
executor run (``tool.run(...)`` from your own code) has no turn: it derives from the
agent's latest reads. Model calls CrewAI makes without an executor (planning-mode steps)
are not numbered: reads made inside such steps never authorize a call of the same run.

Errors for the app: CrewAI turns every exception a tool raises into a message for the
model. A ``before_tool_call`` hook gives each call a :class:`_Slot`; the fenced tool
puts an error there and an ``after_tool_call`` hook raises it as CrewAI's
``HookAborted``, the one exception CrewAI lets out of ``kickoff()`` unchanged.

Cleared hooks: the hooks are global to the process. An app (or a test fixture) that
calls ``crewai.hooks.clear_all_global_hooks()`` removes icore's too; every fenced call
checks and puts them back (:func:`restore_hooks`), so the call's error still leaves
``kickoff()``, and the next kickoff and every other crew of the process have them again.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from crewai.hooks import (
    get_after_tool_call_hooks,
    get_before_llm_call_hooks,
    get_before_tool_call_hooks,
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
)
from crewai.hooks.dispatch import HookAborted
from crewai.tools.tool_failure import ToolFailure

from icore.errors import ActionBlocked, IntegrationError
from icore.integrations.crewai._call_ids import Place, call_place, react_link

_LOG = logging.getLogger("icore.integrations.crewai")

_MAX_RUNS = 4096
_RUN_SCOPE = "flow_started"
_TOOL_SCOPE = "tool_usage_started"
_RUNS = frozenset({"crew_kickoff_started", "lite_agent_execution_started"})
"""The CrewAI event scopes that open a crew run or a standalone agent run: the innermost
one names the run's scope (not the outermost: a run that raised out of ``kickoff()``
may leave its scope on the stack of the thread that ran it)."""


class CrewActionBlocked(ActionBlocked, HookAborted):
    """A fenced call was blocked and ``on_block="raise"``: leaves ``kickoff()`` as is.

    An :class:`~icore.errors.ActionBlocked` (fields ``action``, ``reason``, ``detail``)
    that is also CrewAI's ``HookAborted``, the exception CrewAI lets out of a crew run
    (it stops the run; parallel calls of the message not started yet are cancelled).
    """


class CrewSetupError(IntegrationError, HookAborted):
    """An application error found at a fenced call (not the model's): leaves ``kickoff()``.

    E.g. a ``depends_on`` function that fails on the call's arguments or names facts
    nobody owns, or a CrewAI agent built before icore could number its model calls.
    Its ``__cause__`` is the original error (a :class:`~icore.workspace.WorkspaceError`
    for ``depends_on``); its fields name the tool and the fix. Nothing ran.
    """


@dataclass
class _Slot:
    """One CrewAI tool call (set by the ``before_tool_call`` hook, in the call's context).

    Attributes:
        tool: the tool name CrewAI resolved (sanitized).
        agent: the role of the CrewAI agent that made the call ("" when CrewAI did not
            say).
        error: an error the ``after_tool_call`` hook raises (it then reaches the app).
        place: where the call stands in its model message (:mod:`._call_ids`).
    """

    tool: str
    agent: str = ""
    error: HookAborted | None = None
    place: Place = field(default_factory=Place)


@dataclass(frozen=True, slots=True)
class _Read:
    """The stamp of a read made by a tool of a CrewAI run: its run and its place in time.

    ``seq`` is drawn from the counter that numbers model calls, so a read and a model
    call of any run are ordered.
    """

    run: str
    seq: int


@dataclass(frozen=True, slots=True)
class _Turn:
    """One model call of a CrewAI executor run: the turn of the calls of its message.

    ``n``: its place in time (drawn when the model call started); ``start``: the ``n`` of
    the run's first model call (not compared: one per run).
    """

    run: str
    n: int
    start: int = field(compare=False)

    def counts(self, stamp: Hashable | None) -> bool:
        """Whether a read stamped ``stamp`` counts for a call of this model message.

        A read made before this model call started, by this executor run (the same
        CrewAI agent's task), or by another run of the crew before this run's first
        model call (a scout task's read counts for the booking task after it); never a
        read of another agent's task running alongside that happened after this run
        began (QA qa-new17b #3: two async tasks), nor one of this message's own tools.
        A value handed over with a refusal in turn ``t`` counts for a later turn of the
        same run, and for another run only when ``t``'s run had moved on to its next
        model call before this run began. A read outside any run (None) counts.
        """
        if stamp is None:
            return True
        if isinstance(stamp, _Read):
            return stamp.seq < (self.n if stamp.run == self.run else self.start)
        if isinstance(stamp, _Turn):
            if stamp.run == self.run:
                return stamp.n < self.n
            with _LOCK:
                after = _NEXT.get(stamp)
            return after is not None and after < self.start
        return stamp != self


_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "icore_crewai_call", default=None)
_LATEST: OrderedDict[str, _Turn] = OrderedDict()
_NEXT: OrderedDict[_Turn, int] = OrderedDict()  # a turn -> its run's next model call's n
_SAID: dict[str, str] = {}  # run -> its latest model call's input digest (:func:`_said`)
_EXECUTORS: dict[str, weakref.ref[Any]] = {}  # run -> its executor (the calls' messages)
_MODEL_SAID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "icore_crewai_model_said", default=None)  # the model call made here: its digest
_LOCK = threading.Lock()
_COUNT = itertools.count(1)


def _stack() -> tuple[tuple[str, str], ...]:
    """CrewAI's event-scope stack in this context: ``(event id, event type)`` pairs."""
    try:
        from crewai.events.event_context import _event_id_stack
    except ImportError:  # pragma: no cover - a CrewAI without it: no turn is known
        return ()
    got = _event_id_stack.get()
    return got if isinstance(got, tuple) else ()


def _run_here() -> tuple[str | None, bool]:
    """``(innermost executor run's scope id or None, whether a tool call runs in it)``."""
    stack = _stack()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][1] == _RUN_SCOPE:
            return stack[i][0], any(t == _TOOL_SCOPE for _, t in stack[i + 1:])
    return None, False


def run_scope() -> Hashable | None:
    """The workspace run scope of the CrewAI run this code runs in (#28, QA qa-crew S1).

    ``("crewai", event id)`` of the innermost run on CrewAI's event-scope stack: a
    ``Crew.kickoff`` / ``akickoff`` (each input of ``kickoff_for_each`` and
    ``kickoff_for_each_async`` is one) or an ``Agent.kickoff`` / ``kickoff_async``. Its
    tasks, their agents and delegated coworkers are one run; a CrewAI ``Flow`` that
    kicks off two crews runs two. Two crews run at the same time on one workspace agent
    handle therefore keep their reads apart: one crew's read never authorizes the
    other's call. None outside any run (the agent's own unscoped reads). A workspace
    agent asks it after ``with agent.scope(...)`` and its ``scope=``
    (:meth:`~icore.workspace.Agent.detect_scope`).
    """
    stack = _stack()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][1] in _RUNS:
            # a live run is doing something (a task, an agent, a tool, a model call): a
            # run's entry with nothing above it is one a raised kickoff left behind on
            # this thread's stack, not a run: unscoped (fail closed on a scoped handle)
            return ("crewai", stack[i][0]) if i < len(stack) - 1 else None
    return None


def _before_model(ctx: Any) -> None:
    """``before_llm_call``: a new model turn of the executor run this call belongs to."""
    if getattr(ctx, "executor", None) is None:
        return None  # a model call outside an executor's loop: not a turn of it
    run, _ = _run_here()
    if run is not None:
        said = _said(ctx)
        _MODEL_SAID.set(said)  # the model call's completed event is emitted from here
        try:
            ex: weakref.ref[Any] | None = weakref.ref(ctx.executor)
        except TypeError:
            ex = None
        with _LOCK:
            n = next(_COUNT)
            prev = _LATEST.get(run)
            _LATEST[run] = _Turn(run, n, n if prev is None else prev.start)
            _LATEST.move_to_end(run)
            if prev is not None:
                _NEXT[prev] = n
                while len(_NEXT) > _MAX_RUNS * 4:
                    _NEXT.popitem(last=False)
            _SAID[run] = said
            if ex is not None:
                _EXECUTORS[run] = ex
            while len(_LATEST) > _MAX_RUNS:
                gone = _LATEST.popitem(last=False)[0]
                _SAID.pop(gone, None)
                _EXECUTORS.pop(gone, None)
    return None


def model_said() -> str | None:
    """The input digest of the model call made in this context (:func:`_said`), or None.

    Read by the recorder's handler of CrewAI's ``LLMCallCompletedEvent`` (run in a copy
    of the emitter's context) to name a ReAct action as its fenced call does
    (:func:`call_link`).
    """
    return _MODEL_SAID.get()


def _said(ctx: Any) -> str:
    """sha256 hex of a model call's input: the agent's role and the messages it is sent.

    The same on a restart replaying the same task (the same prompt, the same tool results
    so far): what names a CrewAI tool call across a restart, which CrewAI gives no id.
    """
    role = getattr(getattr(ctx, "agent", None), "role", None)
    msgs = [(m.get("role"), m.get("content")) if isinstance(m, dict) else str(m)
            for m in (getattr(ctx, "messages", None) or ())]
    text = json.dumps([str(role), msgs], default=str, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def call_said() -> str | None:
    """The durable identity of the tool call running here: ``<digest>:<index>``.

    The digest of the model call it came from (:func:`_said`) and the call's index in
    that model message (:mod:`._call_ids`): two calls of one message are two identities;
    the same call retried or replayed after a restart gets the same one. None outside an
    executor run, or before its first numbered model call. A fenced call passes it on as
    its identity across a restart (the workspace's ``call_id``).
    """
    run, in_tool = _run_here()
    if run is None or not in_tool:
        return None
    with _LOCK:
        said = _SAID.get(run)
    slot = _SLOT.get()
    return None if said is None else f"{said}:{slot.place.index if slot else 0}"


def call_link(tool: str) -> str | None:
    """The link of the tool call of ``tool`` running here (:mod:`._call_ids`), or None.

    The model's tool-call id (native calls), else the derived id of a ReAct action;
    None when the model named the tool otherwise than ``tool``, or outside a run.
    """
    run, in_tool = _run_here()
    slot = _SLOT.get()
    if run is None or not in_tool or slot is None or slot.place.name != tool:
        return None
    if slot.place.model_id is not None:
        return slot.place.model_id
    with _LOCK:
        said = _SAID.get(run)
    return react_link(said, slot.place.index) if slot.place.react and said else None


def _before_tool(ctx: Any) -> None:
    """``before_tool_call``: this call's slot (where a fenced tool leaves an error)."""
    role = getattr(getattr(ctx, "agent", None), "role", None)
    tool = str(getattr(ctx, "tool_name", ""))
    run, _ = _run_here()
    with _LOCK:
        ref = _EXECUTORS.get(run) if run is not None else None
    place = call_place(ref() if ref is not None else None, tool,
                       getattr(ctx, "tool_input", None))
    _SLOT.set(_Slot(tool, str(role or ""), place=place))
    return None


def _after_tool(ctx: Any) -> None:
    """``after_tool_call``: raise the error a fenced tool left (it reaches the app)."""
    slot = _SLOT.get()
    if slot is not None and slot.error is not None:
        err, slot.error = slot.error, None
        raise err
    return None


def install_hooks() -> None:
    """Register the three hooks with CrewAI (idempotent).

    Call it before the CrewAI agents are built (importing this package does): CrewAI
    copies the global ``before_llm_call`` hooks into an executor when it builds it.
    """
    with _LOCK:
        if _before_model not in get_before_llm_call_hooks():
            register_before_llm_call_hook(_before_model)
        if _before_tool not in get_before_tool_call_hooks():
            register_before_tool_call_hook(_before_tool)
        if _after_tool not in get_after_tool_call_hooks():
            register_after_tool_call_hook(_after_tool)


def restore_hooks(tool: str) -> bool:
    """At a fenced call: put back icore's hooks if the app cleared CrewAI's (True then).

    ``crewai.hooks.clear_all_global_hooks()`` (a test fixture, an app resetting its own
    hooks) also removes icore's. CrewAI reads the tool hooks when a call runs, so the
    ones put back here serve this very call (its error still leaves ``kickoff()``, this
    call gets its slot) and every later call, in every crew of the process; the model-call
    hook serves executors built from now on (the next task or kickoff). Logged once per
    restore at WARNING on the ``icore.integrations.crewai`` logger.
    """
    with _LOCK:
        missing = (_before_model not in get_before_llm_call_hooks()
                   or _before_tool not in get_before_tool_call_hooks()
                   or _after_tool not in get_after_tool_call_hooks())
    if missing:
        install_hooks()
        _LOG.warning("CrewAI's global hooks were cleared; icore's were put back (at a call "
                     "of %s)", tool)
    if _run_here()[1] and _SLOT.get() is None:  # no before_tool_call ran for this call
        _SLOT.set(_Slot(tool))
    return missing


class UnknownTurn(Exception):
    """A tool call inside a CrewAI run whose model calls were never numbered."""


def call_turn() -> Hashable | None:
    """The model turn of the tool call running here (None outside an executor run).

    Raises:
        UnknownTurn: a CrewAI tool call whose executor run has no numbered model call.
    """
    run, in_tool = _run_here()
    if run is None or not in_tool:
        return None
    with _LOCK:
        turn = _LATEST.get(run)
    if turn is None:
        raise UnknownTurn(run)
    return turn


def calling_agent() -> str | None:
    """The role of the CrewAI agent whose tool call runs here (None: not known).

    Set by the ``before_tool_call`` hook, so a recorded fenced call names the CrewAI
    agent that made it, not the workspace agent serving it (icore Sec. 3).
    """
    slot = _SLOT.get()
    return slot.agent or None if slot is not None else None


def read_turn() -> Hashable | None:
    """A workspace agent's ``turn_source``: the stamp of a read made here.

    Inside a tool call of a CrewAI executor run: the run and the read's place in time
    (a :class:`_Turn` decides from it whether the read counts for a call, ``counts``);
    None outside any run, or in a run with no numbered model call.
    """
    try:
        turn = call_turn()
    except UnknownTurn:
        return None
    if not isinstance(turn, _Turn):
        return None
    with _LOCK:
        return _Read(turn.run, next(_COUNT))


def deliver(err: HookAborted, *, message: str, code: str) -> ToolFailure:
    """Get ``err`` to the app: raised here, or out of ``kickoff()`` from a CrewAI call.

    Inside a CrewAI tool call the error is left in the call's slot (the
    ``after_tool_call`` hook raises it) and the call's result is a ``ToolFailure``
    (nothing ran). Were CrewAI's hooks cleared, they are put back first
    (:func:`restore_hooks`): CrewAI reads the after-call hooks when the call ends, so the
    error still leaves ``kickoff()``.

    Raises:
        HookAborted: ``err`` itself, outside a CrewAI tool call.
    """
    run, in_tool = _run_here()
    if run is None or not in_tool:
        raise err
    here = _SLOT.get()
    if here is None:  # the hooks were cleared: back for this call (see restore_hooks)
        restore_hooks("")
        here = _SLOT.get()
    if here is not None:
        here.error = err
    return ToolFailure(message=message, code=code, retryable=False)


__all__ = ["CrewActionBlocked", "CrewSetupError", "UnknownTurn", "call_link", "call_said",
           "call_turn", "calling_agent", "deliver", "install_hooks", "model_said", "read_turn",
           "restore_hooks", "run_scope"]
