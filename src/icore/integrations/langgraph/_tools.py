"""Fenced LangGraph / LangChain tools (planfence App. A.3 at a ``ToolNode``).

:func:`fenced_tool` returns a ``StructuredTool`` with the wrapped tool's name, description
and the exact parameter schema the model sees. The wrapper adds one injected argument
(LangGraph's ``runtime: ToolRuntime``, hidden from the model) to read graph state and the
tool call's id. Each call:

1. normalises the model's arguments through the tool's own schema (defaults applied,
   ``date``/``UUID``/``Enum``/``Decimal``/nested models in their JSON form);
2. **agent mode** (``agent=ws.agent("shipper")``, the high-level API): builds the call's
   action record from the versions that agent read of D(a), bound to the arguments;
   calls of one model message share the reads that message came from. **Fence mode**
   (``fence=``): takes L(a) from graph state (``roots="plan_roots"``) or
   ``roots(state, args)``; the plan's bound arguments are normalised the same way;
3. runs the PlanFence protected action (sync ``invoke`` and async ``ainvoke``); once
   authorized the wrapped tool's own ``_run`` / ``_arun`` runs once (not its ``invoke``);
   with ``approval=True`` the call is first put to the human with LangGraph's
   ``interrupt``, bound to its arguments and the versions it derives from;
4. executed: returns the tool's result; in fence mode after the one replan: a
   ``Command`` whose update writes the fresh roots (and ``state_update(gated)``) back
   into graph state, with the ``ToolMessage``;
5. blocked: raises LangChain's ``ToolException``, which the tool turns into a
   ``ToolMessage`` with ``status="error"`` and the reason (a stale call's fresh values
   included), or raises :class:`~icore.errors.ActionBlocked` with ``on_block="raise"``.
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
from langchain_core.tools import tool as as_tool
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ConfigDict, create_model

from icore.errors import IntegrationError
from icore.fence import Fence, ProtectedTool
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    Gated,
    OnBlock,
    Replicator,
    RunRecorder,
    check_tool_function,
)
from icore.integrations import Scope as _Scope
from icore.integrations.langgraph._recording import RecordingHandler
from icore.records import JSONValue, RecordId
from icore.workspace import Agent, ApprovalRequest, UserReplanner, running_call

RootsFrom = str | Callable[[Any, Mapping[str, Any]], Sequence[RecordId] | None]
"""A graph-state key holding L(a), or ``f(state, args) -> L(a)`` (fence mode)."""
StateUpdate = Callable[[Gated], Mapping[str, Any]]
"""Extra graph-state updates after a replan (e.g. the fresh destination)."""

_RUNTIME = "runtime"
_FW = "langgraph"
_MAX_SUSPENDED = 4096
_MAX_PLAN_FORMS = 256
_UNSET: Any = object()


def _as_base_tool(tool: BaseTool | Callable[..., Any]) -> BaseTool:
    if isinstance(tool, BaseTool):
        for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
            if fn is not None:
                check_tool_function(fn, framework=_FW, tool=tool.name)
        return tool
    check_tool_function(tool, framework=_FW)
    name = getattr(tool, "__name__", "")
    if name == "<lambda>":
        raise IntegrationError("a lambda cannot be a tool: it has no name or description",
                               framework=_FW,
                               fix="def my_tool(...) with a docstring, then "
                               "fenced_tool(my_tool, ...)")
    if not (inspect.getdoc(tool) or "").strip():
        raise IntegrationError("the tool function has no docstring: the model reads it as "
                               "the tool's description", framework=_FW, tool=name,
                               fix=f'add a docstring: def {name}(...): """What it does."""')
    # the decorator keeps the signature, so the schema is the function's parameters
    return as_tool(tool)


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
    """The superstep a config runs in: its thread and the checkpoints of the step.

    Every task of one superstep (all tool calls of one model message, in one ``ToolNode``
    or one ``Send`` each) shares it; the next model turn is a later step; a replayed
    (resumed) step has the same one.
    """
    if not isinstance(config, Mapping):
        return None
    conf = config.get("configurable") or {}
    cmap = conf.get("checkpoint_map")
    if not isinstance(cmap, Mapping) or not cmap:
        return None
    return ("langgraph", conf.get("thread_id"), tuple(sorted(cmap.items())))


def _handler_recorder(config: Any) -> RunRecorder | None:
    """The recorder of a :class:`RecordingHandler` among the run's callbacks, if any."""
    cbs = config.get("callbacks") if isinstance(config, Mapping) else None
    handlers = getattr(cbs, "handlers", cbs)
    if isinstance(handlers, list | tuple):
        for h in handlers:
            if isinstance(h, RecordingHandler):
                return h.recorder
    return None


def _graph_turn() -> Hashable | None:
    """The superstep of the graph run this code runs in (None outside a graph)."""
    try:
        return _turn_of(get_config())
    except RuntimeError:
        return None


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

    def approver(self, key: Hashable, granted: list[str],
                 asked: Callable[[], None]) -> Callable[[ApprovalRequest], bool] | None:
        """The check before an authorized call runs: approvals bound to the call.

        None (no check) unless ``approval=True`` or this call's body suspended earlier
        with its own question (then an answer given for another call is not reused).
        The approved request's id is appended to ``granted``; ``asked()`` runs once the
        human's answer is known (the next call of the message may ask).
        """
        book = self.guard.handle.approvals if self.guard.handle is not None else None
        prior = self.suspended.get(key)
        if book is None or (not self.approval and prior is None):
            return None

        def approve(req: ApprovalRequest) -> bool:
            if not self.approval and (prior is None or prior.id == req.id):
                granted.append(req.id)
                return True  # the tool's own question was asked for exactly this call
            if not self.approval and not book.asked(key):
                book.note(key, prior)  # type: ignore[arg-type]  # not None here
            verdict = book.resolve(key, req, interrupt)
            asked()
            if verdict.approved:
                granted.append(req.id)
            return verdict.approved

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
            raise ToolException(gated.message)
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


class _FencedTool(StructuredTool):
    """The fenced wrapper: its runners take no ``config`` / ``run_manager`` slots.

    LangChain looks a tool's ``_run`` and function up for those slots (type hints and
    signatures) on every call; the fenced runners read the call's config from the
    injected runtime instead, so these lean overrides skip that work (issue 28 item 8).
    """

    def _run(self, *args, **kwargs):  # type: ignore[no-untyped-def]  # no hints to read
        assert self.func is not None
        return self.func(*args, **kwargs)

    async def _arun(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        assert self.coroutine is not None
        return await self.coroutine(*args, **kwargs)


for _runner in (_FencedTool._run, _FencedTool._arun):  # LangChain reads them every call
    _runner.__signature__ = inspect.signature(_runner)  # type: ignore[union-attr]


def fenced_tool(tool: BaseTool | Callable[..., Any], *, depends_on: _Scope,
                agent: str | Agent | None = None, fence: Fence | None = None,
                roots: RootsFrom = "plan_roots",
                replan: AnyReplanner | UserReplanner | None = None,
                recorder: RunRecorder | None = None, on_block: OnBlock = "error",
                state_update: StateUpdate | None = None,
                replicator: Replicator | None = None, approval: bool = False
                ) -> StructuredTool:
    """Wrap a LangChain/LangGraph tool so every call passes the PlanFence gate.

    Args:
        tool: a ``BaseTool`` (``@tool``, sync or ``async def``) or a plain function (its
            signature becomes the schema).
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        agent: a workspace agent (``ws.agent("shipper")``, the high-level API: the call
            itself is the plan), or - with ``fence`` - the agent id events are
            attributed to (default: the node whose model turn asked for the call, as
            the recorder saw it).
        fence: the low-level API: the executor's :class:`~icore.fence.Fence`; plans come
            from ``roots``.
        roots: fence mode: where L(a) comes from: a graph-state key holding the plan's
            record ids (default ``"plan_roots"``), or ``f(state, args)``.
        replan: agent mode: a :data:`~icore.workspace.UserReplanner` returning new
            arguments from the fresh values (default: the model gets the fresh values
            as the tool error and its next call is the one replan); fence mode: the one
            replan (sync or ``async def``), without it a change blocks.
        recorder: records gate decisions, the replan and the tool call.
        on_block: ``"error"``: the model gets a ``ToolMessage`` with ``status="error"``;
            ``"raise"``: :class:`~icore.errors.ActionBlocked` escapes the ``ToolNode``.
        state_update: after a replan, extra graph-state updates (fence mode also writes
            the fresh roots to the ``roots`` key).
        replicator: names keys, not record ids, in a block's message.
        approval: agent mode: put every authorized call to the human with LangGraph's
            ``interrupt`` (payload: :meth:`~icore.workspace.ApprovalRequest.payload`;
            resume with ``Command(resume=True)`` or ``request.approve()``) before it
            runs; an answer counts only for the exact arguments and fact versions it was
            given for (needs a checkpointer). Several approval calls of one message
            in one ``ToolNode`` are asked one at a time, in the message's order; a call
            that ran under its approval never runs again when LangGraph replays the
            node (its recorded result is returned).

    Returns:
        A ``StructuredTool`` with the original name, description and model-facing
        schema, usable in ``ToolNode`` / ``create_react_agent`` / ``bind_tools``.

    Raises:
        IntegrationError: ``tool`` is not a tool or function (None, a class, a
            ``functools.partial``), takes ``*args`` / ``**kwargs``, its ``args_schema`` is
            not a pydantic model; neither ``agent`` (a workspace agent) nor ``fence`` is
            given; ``depends_on`` is a str, empty or names keys without an owner;
            ``roots`` is neither a state key nor a function; ``approval`` is not a bool
            or is given without a workspace agent; ``on_block`` is invalid; a plain
            function has no docstring (the model's description) or is a lambda.
    """
    if not isinstance(approval, bool):
        raise IntegrationError("approval= must be True or False", framework=_FW,
                               got=repr(approval)[:80], fix="approval=True")
    base = _as_base_tool(tool)
    schema = base.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise IntegrationError("the tool's args_schema must be a pydantic model",
                               framework=_FW, tool=base.name)
    if not (isinstance(roots, str) and roots) and not callable(roots):
        raise IntegrationError("roots= names a graph-state key or is f(state, args)",
                               framework=_FW, tool=base.name, got=type(roots).__name__)
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block=on_block, replicator=replicator)
    if approval and guard.handle is None:
        raise IntegrationError("approval=True needs a workspace agent (agent=ws.agent(...))",
                               framework=_FW, tool=base.name)
    guard.claim(base.name)
    if guard.handle is not None and guard.handle.turn_source is None:
        # reads made in a graph run are stamped with its superstep (see _turn_of)
        guard.handle.turn_source = _graph_turn
    own_runtime = _RUNTIME in schema.model_fields
    # the wrapped schema plus LangGraph's injected runtime (hidden from the model); a
    # user's own args_schema may not allow arbitrary types, which ToolRuntime needs
    wrapped_schema: type[BaseModel] = schema if own_runtime else create_model(
        schema.__name__, __base__=type(schema.__name__, (schema,), {
            "model_config": ConfigDict(arbitrary_types_allowed=True),
            "__doc__": schema.__doc__, "__module__": schema.__module__}),
        __doc__=schema.__doc__, runtime=(ToolRuntime, None))
    call_schema = base.tool_call_schema
    model_fields = frozenset(call_schema.model_fields if isinstance(call_schema, type)
                             and issubclass(call_schema, BaseModel) else ())
    f = _Fenced(base, guard, roots, state_update, own_runtime, model_fields, approval)
    agent_mode = guard.handle is not None

    def prepare(kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any],
                                                 dict[str, JSONValue], str | None]:
        runtime, args, injected = f.split(kwargs)
        try:
            norm = f.norm(args)
        except IntegrationError as exc:
            raise ToolException(f"PlanFence refused {base.name}: {exc}") from None
        return runtime, args, injected, norm, getattr(runtime, "tool_call_id", None)

    def signal(attempt: Hashable | None, call_id: str | None) -> None:
        if attempt is not None and call_id is not None:
            _ORDER.done(attempt, call_id)

    def python_args(a: Mapping[str, Any], args: dict[str, Any],
                    norm: dict[str, JSONValue]) -> Mapping[str, Any]:
        return args if a == norm else f.norm.to_python(a)

    def run_sync(**kwargs: Any) -> Any:
        runtime, args, injected, norm, call_id = prepare(kwargs)
        config = getattr(runtime, "config", None)
        key = (((config or {}).get("configurable") or {}).get("thread_id"), call_id)
        attempt = _attempt(config) if approval and call_id is not None else None
        if attempt is not None:
            _ORDER.arrive(attempt, call_id)  # type: ignore[arg-type]
        try:
            if attempt is not None:
                _ORDER.wait(attempt, _earlier_approval_calls(runtime, call_id))
            if agent_mode:
                again, value = f.replayed(key, f.turn(runtime, call_id))
                if again:
                    return value

            def call(**a: Any) -> Any:
                try:
                    return f.direct.run(python_args(a, args, norm), injected, config)
                except GraphInterrupt:
                    if agent_mode:
                        f.suspend(key, a)
                    raise

            # recording on (a RecordingHandler) but no recorder= given: recorded anyway
            rec = _handler_recorder(config) if guard.recorder is None else None
            if agent_mode:
                granted: list[str] = []
                approve = f.approver(key, granted, lambda: signal(attempt, call_id))
                gated = guard.run(base.name, call, norm, turn=f.turn(runtime, call_id),
                                  normalize=f.norm, approve=approve, recorder=rec)
                result = f.out(gated, runtime)
                f.executed(key, f.turn(runtime, call_id), granted, result)
                return result
            r = f.plan_roots(runtime, args)
            gated = guard.run(base.name, call, f.plan_args(norm, r), r, recorder=rec)
            return f.out(gated, runtime)
        finally:
            signal(attempt, call_id)

    async def run_async(**kwargs: Any) -> Any:
        runtime, args, injected, norm, call_id = prepare(kwargs)
        config = getattr(runtime, "config", None)
        key = (((config or {}).get("configurable") or {}).get("thread_id"), call_id)
        attempt = _attempt(config) if approval and call_id is not None else None
        if attempt is not None:
            _ORDER.arrive(attempt, call_id)  # type: ignore[arg-type]
        try:
            if attempt is not None:
                await _ORDER.await_(attempt, _earlier_approval_calls(runtime, call_id))
            if agent_mode:
                again, value = f.replayed(key, f.turn(runtime, call_id))
                if again:
                    return value

            async def call(**a: Any) -> Any:
                try:
                    return await f.direct.arun(python_args(a, args, norm), injected, config)
                except GraphInterrupt:
                    if agent_mode:
                        f.suspend(key, a)
                    raise

            rec = _handler_recorder(config) if guard.recorder is None else None
            if agent_mode:
                granted: list[str] = []
                approve = f.approver(key, granted, lambda: signal(attempt, call_id))
                gated = await guard.arun(base.name, call, norm,
                                         turn=f.turn(runtime, call_id), normalize=f.norm,
                                         approve=approve, recorder=rec)
                result = f.out(gated, runtime)
                f.executed(key, f.turn(runtime, call_id), granted, result)
                return result
            r = f.plan_roots(runtime, args)
            gated = await guard.arun(base.name, call, f.plan_args(norm, r), r, recorder=rec)
            return f.out(gated, runtime)
        finally:
            signal(attempt, call_id)

    def run_via_loop(**kwargs: Any) -> Any:  # an async-only tool under invoke()
        return asyncio.run(run_async(**kwargs))

    # LangChain evaluates the tool function's type hints on every call (to find a config
    # parameter); these have none to find, so their (string) annotations are dropped
    for fn in (run_sync, run_async, run_via_loop):
        fn.__annotations__ = {}

    async_only = getattr(base, "func", None) is None and getattr(
        base, "coroutine", None) is not None
    wrapped = _FencedTool.from_function(
        func=run_via_loop if async_only else run_sync, coroutine=run_async, name=base.name,
        description=base.description, args_schema=wrapped_schema,
        return_direct=base.return_direct, response_format=base.response_format,
        handle_tool_error=True, handle_validation_error=base.handle_validation_error,
        metadata={**(base.metadata or {}), "planfence": True,
                  "planfence.approval": bool(approval)}, tags=base.tags)
    return wrapped


def is_fenced(tool: Any) -> bool:
    """Whether ``tool`` came from :func:`fenced_tool`."""
    return bool(isinstance(tool, BaseTool) and (tool.metadata or {}).get("planfence"))
