"""The fenced ``ToolNode`` call: one protected call of a fenced LangGraph tool.

:class:`_Fenced` holds what :func:`~icore.integrations.langgraph.fenced_tool` wires for
one tool: the split of the model's arguments from the injected ones, L(a) from graph
state (fence mode) or the agent's reads (agent mode), the plan's bound arguments, the
human approval (``interrupt``) and its replay, and the tool's answer (a ``Command`` after
the one replan, planfence App. A.3). :class:`_Direct` runs the wrapped tool's own
``_run`` / ``_arun``; :class:`_Order` keeps parallel approval calls of one superstep in
the model's order.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, get_type_hints

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.errors import GraphInterrupt
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from icore.errors import IntegrationError
from icore.fence import ProtectedTool
from icore.integrations import ArgNormalizer, FenceGuard, Gated, RunRecorder
from icore.integrations._call_ledger import Earlier
from icore.integrations.langgraph._answers import CallAnswers, HeardAnswers
from icore.integrations.langgraph._attempts_db import (
    AttemptsFile,
    attempts_in,
    durable_key,
    folder_of,
)
from icore.integrations.langgraph._branches import step_of
from icore.integrations.langgraph._pending import PendingCall
from icore.integrations.langgraph._replays import STARTED, STOPPED, UNKNOWN, StepMemory
from icore.records import JSONValue, RecordId
from icore.workspace import ApprovalRequest, running_call

RootsFrom = str | Callable[[Any, Mapping[str, Any]], Sequence[RecordId] | None]
"""A graph-state key holding L(a), or ``f(state, args) -> L(a)`` (fence mode)."""
StateUpdate = Callable[[Gated], Mapping[str, Any]]
"""Extra graph-state updates after a replan (e.g. the fresh destination)."""

_RUNTIME = "runtime"
_FW = "langgraph"
_MAX_SUSPENDED = 4096
_MAX_PLAN_FORMS = 256
_UNSET: Any = object()


def _state_get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def _extras(fn: Callable[..., Any]) -> tuple[bool, str | None]:
    """Whether ``fn`` takes ``run_manager``, and the name of its config parameter."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False, None
    cfg = "config" if "config" in params else None
    if cfg is None:
        try:
            hints = get_type_hints(fn)
        except Exception:
            hints = {}
        cfg = next((n for n, t in hints.items() if t is RunnableConfig), None)
    return "run_manager" in params, cfg


def _turn_of(config: Any) -> Hashable | None:
    """The superstep a config runs in, and the task's branch (:class:`~._branches.Step`).

    Its thread, the checkpoints of the step and the task's namespace.

    Every call of one ``ToolNode`` run (one model message) shares it; the next model
    turn is a later step; a replayed (resumed) step has the same one; parallel branches
    (``Send`` tasks, a graph run inside each) have their own and never count each
    other's reads (:meth:`~._branches.Step.counts`).
    """
    return step_of(config)


def pending_scope(key: Hashable) -> str:
    """The approval scope of a fenced call known as ``(thread_id, tool_call_id)``.

    Canonical JSON ``["langgraph", thread, tool_call_id]`` (each a str, or null when
    missing): part of the :class:`~icore.workspace.ApprovalRequest` id put to the human,
    so equal calls pending in two conversations (threads) get two ids, while the same
    pending call asked again (a resume, a restart: the checkpoint keeps both) gets the
    same one (QA qa-new17c #4).
    """
    thread, call_id = key if isinstance(key, tuple) and len(key) == 2 else (key, None)
    return json.dumps(["langgraph", None if thread is None else str(thread),
                       None if call_id is None else str(call_id)],
                      separators=(",", ":"))  # ASCII: any thread id encodes


_ARRIVAL_S = 0.25
_ORDER_TIMEOUT_S = 5.0
_MAX_ATTEMPTS = 256


class _Order:
    """Approval questions of one tool node run put to the human in the message's order.

    LangGraph numbers a task's ``interrupt`` calls and matches resume values by that
    number; a ``ToolNode`` runs a message's calls in threads (or ``gather``), so two
    approval-requiring calls would race for the numbers and a "yes" given to one
    question could reach the other. Calls of one node run (same task and run id) ask in
    the order of the model's message: a call waits until the earlier approval calls of
    its node run have asked (or finished). An earlier call that does not arrive within
    ``_ARRIVAL_S`` runs in another task (``Send`` per call) and is not waited for.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.runs: OrderedDict[Hashable, tuple[set[str], set[str]]] = OrderedDict()

    def _run(self, attempt: Hashable) -> tuple[set[str], set[str]]:
        run = self.runs.get(attempt)
        if run is None:
            run = self.runs[attempt] = (set(), set())
            while len(self.runs) > _MAX_ATTEMPTS:
                self.runs.popitem(last=False)
        return run

    def arrive(self, attempt: Hashable, call_id: str) -> None:
        """Note that ``call_id`` of node run ``attempt`` has started."""
        with self.cond:
            self._run(attempt)[0].add(call_id)
            self.cond.notify_all()

    def done(self, attempt: Hashable, call_id: str) -> None:
        """Note that ``call_id`` of node run ``attempt`` has asked (or needs not ask)."""
        with self.cond:
            self._run(attempt)[1].add(call_id)
            self.cond.notify_all()

    def pending(self, attempt: Hashable, earlier: Sequence[str], waited_s: float) -> bool:
        """Whether an earlier call of this node run still has to ask first."""
        with self.cond:
            arrived, done = self._run(attempt)
            return any(c not in done and (c in arrived or waited_s < _ARRIVAL_S)
                       for c in earlier)

    def wait(self, attempt: Hashable, earlier: Sequence[str]) -> None:
        """Block until the ``earlier`` calls of this node run have asked (bounded)."""
        start = time.monotonic()
        with self.cond:
            while (waited := time.monotonic() - start) < _ORDER_TIMEOUT_S and \
                    self.pending(attempt, earlier, waited):
                self.cond.wait(0.01)

    async def await_(self, attempt: Hashable, earlier: Sequence[str]) -> None:
        """:meth:`wait` for async tools, polling without blocking the event loop."""
        start = time.monotonic()
        while (waited := time.monotonic() - start) < _ORDER_TIMEOUT_S and \
                self.pending(attempt, earlier, waited):
            await asyncio.sleep(0.002)


_ORDER = _Order()


def _attempt(config: Any) -> Hashable | None:
    """One run of one graph task (a resume re-runs the task: another run id)."""
    if not isinstance(config, Mapping):
        return None
    conf = config.get("configurable") or {}
    run_id = getattr(config.get("callbacks"), "parent_run_id", None)
    task = conf.get("__pregel_task_id")
    return None if run_id is None or task is None else (task, run_id)


def _earlier_approval_calls(runtime: Any, call_id: str | None) -> list[str]:
    """The ids of the approval-requiring fenced calls before ``call_id`` in its message."""
    state = getattr(runtime, "state", None)
    msgs = _state_get(state, "messages") if state is not None else None
    tools = {t.name: t for t in (getattr(runtime, "tools", None) or ())
             if isinstance(t, BaseTool)}
    if call_id is None or not isinstance(msgs, Sequence):
        return []
    for m in reversed(msgs):
        calls = getattr(m, "tool_calls", None) or []
        ids = [c.get("id") for c in calls]
        if call_id in ids:
            out = []
            for c in calls[:ids.index(call_id)]:
                t = tools.get(c.get("name"))
                if t is not None and (t.metadata or {}).get("planfence.approval") \
                        and isinstance(c.get("id"), str):
                    out.append(c["id"])
            return out
    return []


class _Direct:
    """Calls the wrapped tool once, below its ``invoke``.

    A ``StructuredTool``'s own function / coroutine, else the tool's ``_run`` / ``_arun``.
    """

    def __init__(self, base: BaseTool) -> None:
        self.base = base
        func = getattr(base, "func", None) if isinstance(base, StructuredTool) else None
        coro = getattr(base, "coroutine", None) if isinstance(base, StructuredTool) else None
        self.func: Callable[..., Any] | None = func
        self.coro: Callable[..., Any] | None = coro
        # config slots are found once here (LangChain looks them up on every call)
        self.sync_rm, self.sync_cfg = (False, _extras(func)[1]) if func is not None \
            else _extras(base._run)
        if coro is not None:
            self.async_rm, self.async_cfg = False, _extras(coro)[1]
        else:
            own_arun = type(base)._arun is not BaseTool._arun
            self.async_rm, self.async_cfg = (_extras(base._arun) if own_arun and func is None
                                             else (self.sync_rm, self.sync_cfg))

    def _kw(self, args: Mapping[str, Any], injected: Mapping[str, Any], config: Any,
            rm: bool, cfg: str | None) -> dict[str, Any]:
        kw = {**args, **injected}
        if rm:
            kw["run_manager"] = None
        if cfg is not None:
            kw[cfg] = config if config is not None else {}
        return kw

    def run(self, args: Mapping[str, Any], injected: Mapping[str, Any], config: Any) -> Any:
        """The tool's function (or ``_run``) with the arguments and its config slot."""
        kw = self._kw(args, injected, config, self.sync_rm, self.sync_cfg)
        if self.func is not None:
            return self.func(**kw)
        return self.base._run(**kw)

    async def arun(self, args: Mapping[str, Any], injected: Mapping[str, Any],
                   config: Any) -> Any:
        """The tool's coroutine (or ``_arun``; a sync function runs on the loop)."""
        kw = self._kw(args, injected, config, self.async_rm, self.async_cfg)
        if self.coro is not None:
            return await self.coro(**kw)
        if self.func is not None:
            return self.func(**kw)
        return await self.base._arun(**kw)


class _Fenced:
    """One fenced LangGraph tool's call plumbing, shared by its sync and async runners.

    Args:
        tool: the wrapped tool.
        guard: the :class:`~icore.integrations.FenceGuard` that gates each call.
        roots: fence mode: the state field holding the plan roots L(a), or a function
            of ``(state, args)`` returning them.
        state_update: extra graph-state updates after a replanned call.
        own_runtime: True when the wrapped tool declares the injected runtime itself.
        model_fields: the argument names the model supplies (the rest are injected).
        approval: put each authorized call to the human (``interrupt``) before it runs.
    """

    def __init__(self, tool: BaseTool, guard: FenceGuard, roots: RootsFrom,
                 state_update: StateUpdate | None, own_runtime: bool,
                 model_fields: frozenset[str], approval: bool) -> None:
        self.tool = tool
        self.guard = guard
        self.roots = roots
        self.state_update = state_update
        self.own_runtime = own_runtime
        self.model_fields = model_fields
        self.approval = approval
        self.direct = _Direct(tool)
        schema: Any = tool.tool_call_schema  # the model-facing fields only (no injected)
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            schema = tool.args_schema
        assert isinstance(schema, type) and issubclass(schema, BaseModel)
        self.norm = ArgNormalizer(schema, name=tool.name, fields=model_fields, framework=_FW)
        self.protected = ProtectedTool(lambda **_: None, depends_on=("-",), name=tool.name)
        self.suspended: OrderedDict[Hashable, ApprovalRequest] = OrderedDict()
        self.memory = StepMemory(tool.name)
        self.plan_forms: dict[str, Any] = {}

    @property
    def agent_mode(self) -> bool:
        """Whether the guard builds action records itself (a workspace agent)."""
        return self.guard.handle is not None

    def split(self, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """Split a call's keyword arguments into ``(runtime, model args, injected args)``.

        The runtime stays in ``kwargs`` only when the wrapped tool takes it itself.
        """
        runtime = kwargs.get(_RUNTIME)
        if not self.own_runtime:
            kwargs.pop(_RUNTIME, None)
        model = {k: v for k, v in kwargs.items() if k in self.model_fields}
        injected = {k: v for k, v in kwargs.items() if k not in self.model_fields}
        return runtime, model, injected

    def plan_roots(self, runtime: Any, args: Mapping[str, Any]) -> Sequence[RecordId] | None:
        """Fence mode: the plan roots L(a) of this call from the graph state (None: none).

        With no roots the gate blocks the call (no plan authorizes it yet).

        Raises:
            IntegrationError: the state field (or ``roots()``) gives a str or another
                non-list: one record id is not L(a).
        """
        state = getattr(runtime, "state", None)
        if isinstance(self.roots, str):
            got = _state_get(state, self.roots) if state is not None else None
            source = self.roots
        else:
            got, source = self.roots(state, args), "roots()"
        if not got:
            return None
        if isinstance(got, str | bytes) or not isinstance(got, list | tuple):
            raise IntegrationError("the plan roots must be a list of record ids",
                                   framework=_FW, tool=self.tool.name, source=source,
                                   got=type(got).__name__,
                                   fix="store [record.id] in the state, not record.id")
        return list(got)

    @staticmethod
    def turn(runtime: Any, call_id: str | None) -> Hashable | None:
        """The model turn a call came from: the graph superstep it runs in.

        Outside a graph run (``invoke`` with a tool call): its model message, found in the
        state by the call's id; else None.
        """
        step = _turn_of(getattr(runtime, "config", None))
        if step is not None or call_id is None:
            return step
        state = getattr(runtime, "state", None)
        msgs = _state_get(state, "messages") if state is not None else None
        if isinstance(msgs, Sequence):
            for m in reversed(msgs):
                calls = getattr(m, "tool_calls", None)
                if calls and any(c.get("id") == call_id for c in calls):
                    return ("message", getattr(m, "id", None),
                            tuple(str(c.get("id")) for c in calls))
        return None

    def plan_args(self, norm_args: dict[str, JSONValue],
                  roots: Sequence[RecordId] | None) -> Mapping[str, Any]:
        """Fence mode: the plan's bound arguments when they normalise to the call's.

        The fence then compares them byte for byte with what the root binds; otherwise the
        call's normal form is passed and the fence names the real mismatch.
        """
        if not roots:
            return norm_args
        bound = self.guard.fence.bound_args(self.protected, roots)
        if bound is None:
            return norm_args
        # the plan's normal form is remembered by its canonical text (same plan, same form)
        text = json.dumps(bound, sort_keys=True, default=repr)
        normal = self.plan_forms.get(text, _UNSET)
        if normal is _UNSET:
            try:
                normal = self.norm(bound)
            except IntegrationError:
                normal = None
            if len(self.plan_forms) >= _MAX_PLAN_FORMS:
                self.plan_forms.clear()
            self.plan_forms[text] = normal
        return bound if normal == norm_args else norm_args

    def approver(self, key: Hashable, granted: list[str], asked: Callable[[], None],
                 pend: PendingCall | None = None,
                 tell: tuple[RunRecorder | None, str, HeardAnswers | None] | None = None
                 ) -> Callable[[ApprovalRequest], bool] | None:
        """The check before an authorized call runs: approvals bound to the call.

        None (no check) unless ``approval=True`` or this call's body suspended earlier
        with its own question (then an answer given for another call is not reused).
        The approved request's id is appended to ``granted``; ``asked()`` runs once the
        human's answer is known (the next call of the message may ask). ``pend`` keeps
        the questions on disk while the human decides (:mod:`~._pending`). ``tell``
        (recorder, agent, the run's handler's :class:`~._answers.HeardAnswers`): where
        the human's answer to ``approval=True``'s question is written, once, unless the
        handler that saw the pause wrote it (:class:`~._answers.CallAnswers`).
        """
        book = self.guard.handle.approvals if self.guard.handle is not None else None
        prior = self.suspended.get(key)
        if book is None or (not self.approval and prior is None):
            return None
        told = CallAnswers(*tell, pend.resumed if pend is not None else None,
                           len(book.asked(key))) if self.approval and tell else None
        if told is not None:  # before the gate: a stale refusal reads no answer
            told.early(book.asked(key))

        scope = pending_scope(key)

        def approve(req: ApprovalRequest) -> bool:
            if not self.approval and (prior is None or prior.id == req.id):
                granted.append(req.id)
                return True  # the tool's own question was asked for exactly this call
            if not self.approval and not book.asked(key) and prior is not None:
                book.note(key, prior.scoped(scope))
            # the id names this pending request: its thread and tool-call id too, so an
            # answer naming another conversation's equal call is asked again (#4)
            try:
                verdict = book.resolve(key, req.scoped(scope),
                                       told.asker() if told else interrupt)
            except GraphInterrupt:
                if pend is not None:  # committed before LangGraph saves the pause
                    pend.paused(book.asked(key))
                raise
            asked()
            if verdict.approved:
                granted.append(req.id)
            return verdict.approved

        if told is not None:  # a refusal before the answer is read (refused_unread)
            approve.unread = lambda: told.unread(book.asked(key))  # type: ignore[attr-defined]
        return approve

    def replayed(self, key: Hashable, turn: Hashable | None) -> tuple[bool, Any]:
        """A call that already executed under an approval: ``(True, its recorded result)``.

        LangGraph re-runs the whole tool node on each resume; such a call never runs
        again. The questions it was asked are asked again first: LangGraph hands back
        the answers already given (by number), so the next call's answers stay aligned.
        """
        book = self.guard.handle.approvals if self.guard.handle is not None else None
        done = book.executed((key, turn)) if book is not None else None
        if done is None:
            return False, None
        for req in book.asked(key):  # type: ignore[union-attr]  # book is set here
            interrupt(req.payload())
        return True, done[1]

    def executed(self, key: Hashable, turn: Hashable | None, granted: list[str],
                 result: Any) -> None:
        """Remember an approved call that ran (ledger key: the call and its model turn)."""
        book = self.guard.handle.approvals if self.guard.handle is not None else None
        if book is not None and granted:
            book.ran((key, turn), granted[-1], result)

    def disk(self, step: Hashable | None, config: Any) -> tuple[AttemptsFile, str] | None:
        """Where a call's first attempt is kept on disk (None: nothing durable configured).

        The ``attempts`` table next to the app's SQLite state (:mod:`~._attempts_db`) and
        the call's key in it; None outside a graph step or without a tool-call id.

        Raises:
            StoreError: the attempts file cannot be opened or used (field ``path``).
        """
        key = durable_key(step)
        if key is None:
            return None
        got = attempts_in(folder_of(self.guard.handle, config))
        return None if got is None else (got, key)

    def keep(self, step: Hashable | None, disk: tuple[AttemptsFile, str] | None) -> None:
        """Write how a started call's attempt ended (the step memory's entry) to disk."""
        if disk is not None:
            disk[0].settle(disk[1], self.memory.earlier(step))

    def earlier(self, step: Hashable | None, key: Hashable,
                disk: tuple[AttemptsFile, str] | None = None) -> tuple[bool, Any]:
        """A call of a re-run step that already ran or was refused: ``(True, result)``.

        :class:`~._replays.StepMemory` (both modes), else ``disk`` (the attempt another
        process kept, :meth:`disk`; one that never finished is refused as outcome
        unknown): the earlier answer, neither decided
        nor run again; otherwise the call is marked started (``(False, None)``). The
        approval questions already answered in this step are asked again first
        (LangGraph hands back the answers by number: kept aligned).

        Raises:
            ToolException: the earlier attempt was refused (the same refusal), failed
                after its tool started, or never finished: refused, never run twice.
        """
        prior = self.memory.begin(step)
        if prior is None and disk is not None and (prior := disk[0].get(disk[1])) is not None:
            # a new process resuming the step: the attempt kept on disk answers (#28)
            prior = prior if prior.how != STARTED else Earlier(UNKNOWN, STOPPED)
            self.memory.settle(step, prior.how, prior.value)
        if prior is None:
            return False, None
        book = self.guard.handle.approvals if self.guard.handle is not None else None
        for req in book.asked(key) if book is not None else ():
            interrupt(req.payload())  # the answers already given, by number: kept aligned
        return True, self.memory.answer(prior)

    def suspend(self, key: Hashable, args: Mapping[str, Any]) -> None:
        """The tool body interrupted (its own question): remember which call it was for."""
        cur = running_call()
        if cur is None or key in self.suspended:
            return
        self.suspended[key] = cur.request(args)
        while len(self.suspended) > _MAX_SUSPENDED:
            self.suspended.popitem(last=False)

    def out(self, gated: Gated, runtime: Any) -> Any:
        """The tool's answer to LangGraph for a gated call.

        Fence mode, after a replan (planfence App. A.3): a ``Command`` that also writes
        the new plan roots and ``state_update``'s fields into the graph state; otherwise
        the tool's value unchanged.

        Raises:
            ToolException: the gate blocked the call (the tool did not run); its message
                says why.
        """
        if not gated.executed:
            raise ToolException(gated.model_message)
        value = gated.value
        if not gated.replanned:
            return value
        update: dict[str, Any] = {}
        if isinstance(self.roots, str) and not self.agent_mode:
            update[self.roots] = list(gated.roots)
        if self.state_update is not None:
            update.update(self.state_update(gated))
        call_id = getattr(runtime, "tool_call_id", None)
        if not update:
            return value
        if isinstance(value, Command):
            inner = value.update if isinstance(value.update, Mapping) else {}
            return Command(graph=value.graph, goto=value.goto, resume=value.resume,
                           update={**inner, **update})
        if call_id is None:  # invoked outside a ToolNode: nowhere to write state
            return value
        if self.tool.response_format == "content_and_artifact" and isinstance(value, tuple):
            content, artifact = value
            msg = ToolMessage(content=str(content), artifact=artifact,
                              tool_call_id=call_id, name=self.tool.name)
        else:
            msg = value if isinstance(value, ToolMessage) else ToolMessage(
                content=str(value), tool_call_id=call_id, name=self.tool.name)
        return Command(update={**update, "messages": [msg]})
