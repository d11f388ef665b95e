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
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as as_tool
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, ConfigDict, create_model

from icore.errors import IntegrationError
from icore.fence import Fence
from icore.integrations import (
    AnyReplanner,
    FenceGuard,
    NoEffect,
    OnBlock,
    Replicator,
    RunRecorder,
    Writes,
    check_tool_function,
)
from icore.integrations import Scope as _Scope
from icore.integrations._arg_normal import SCHEMA_ERRORS, schema_failed
from icore.integrations._arg_problems import refused_args
from icore.integrations._failed import leaves_open
from icore.integrations._recorder import line_fields
from icore.integrations._recorder_lines import asked_as
from icore.integrations._rerun import unknown_outcome_text
from icore.integrations._scope_once import one_call
from icore.integrations._tool_failed import MAX_ERROR_CHARS, describe, message_of
from icore.integrations.langgraph._answers import handler_answers, refused_unread
from icore.integrations.langgraph._attempts_db import AttemptsFile
from icore.integrations.langgraph._branches import branch_here
from icore.integrations.langgraph._dup_ids import DuplicateIds
from icore.integrations.langgraph._fenced_node import (
    _FW,
    _ORDER,
    _RUNTIME,
    RootsFrom,
    StateUpdate,
    _attempt,
    _earlier_approval_calls,
    _Fenced,
    _turn_of,
)
from icore.integrations.langgraph._pending import (
    PendingCall,
    PendingUnreadable,
    lost_request,
    open_pending,
    unreadable_message,
)
from icore.integrations.langgraph._recording import RecordingHandler, mark_fenced
from icore.integrations.langgraph._replays import (
    RAN,
    RUNNING_WAIT_S,
    EarlierStopped,
    EarlierUnknown,
    step_key,
)
from icore.integrations.langgraph._reviewed import middleware_reviewed, reviewed_check
from icore.integrations.langgraph._thread_scope import check_graph_scope, graph_scope
from icore.records import JSONValue
from icore.workspace import Agent, Approver, UserReplanner

Disk = tuple[AttemptsFile, str] | None
"""Where a call's first attempt is kept on disk, and its key (None: not kept)."""


def _as_base_tool(tool: BaseTool | Callable[..., Any]) -> BaseTool:
    if is_fenced(tool):
        raise IntegrationError("the tool is fenced already: wrapping it again would ask "
                               "the gate twice", framework=_FW, tool=getattr(tool, "name", ""),
                               fix="pass the fenced tool as it is, or fence the plain tool "
                               "once")
    if isinstance(tool, BaseTool):
        for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
            if fn is not None:
                check_tool_function(fn, framework=_FW, tool=tool.name)
        if getattr(tool, "func", None) is None and tool.args_schema is None:
            # a BaseTool subclass: LangChain infers the schema from its own _run
            check_tool_function(type(tool)._run, framework=_FW, tool=tool.name,
                                skip=("self", "run_manager", "config", "callbacks"))
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
    try:
        return as_tool(tool)
    except SCHEMA_ERRORS as exc:
        raise schema_failed(exc, framework=_FW, tool=name) from None


def _told_unknown(name: str, exc: BaseException, started: bool) -> None:
    """A ``ToolException`` from a started body, told as an unknown outcome.

    LangChain hands its message to the model; the call may have made its effect before
    it raised (not :class:`~icore.integrations.NoEffect`), so the model reads that
    (:func:`~icore.integrations._rerun.unknown_outcome_text`, QA qa-new13a S3). A
    ``NoEffect`` from a started body (the documented ``raise NoEffect(...) from exc`` of
    a commit's ``HeadConflict``) is handed to the model as its message, as a
    ``ToolException`` is: ``ToolNode`` re-raises any other exception and the graph
    crashed (QA qa-new14 S2); the trace still counts it failed after authorization.

    Raises:
        ToolException: that text, chained from ``exc`` (a ``NoEffect`` too when ``exc``
            is one; else nothing is raised).
    """
    if not started or not isinstance(exc, Exception):
        return
    if isinstance(exc, ToolException) and leaves_open(exc):
        raise ToolException(unknown_outcome_text(name, describe(exc)[:500])) from exc
    if isinstance(exc, NoEffect) and not isinstance(exc, ToolException):
        text = message_of(exc)
        raise _Declined(text[:MAX_ERROR_CHARS] if len(text) > MAX_ERROR_CHARS else text
                        ) from exc


class _Declined(NoEffect, ToolException):
    """A started body's ``NoEffect``, as LangChain hands a ``ToolException`` to the model.

    Still a ``NoEffect`` for whoever calls the tool directly (``tool.invoke``).
    """


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
                replicator: Replicator | None = None, approval: bool = False,
                writes: Writes | None = None) -> StructuredTool:
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
        writes: the keys the tool's effect writes (keys, or a function of the call's
            arguments): a sibling call of one model message whose ``depends_on`` holds
            one waits until this call ends, then is validated against the new head (a
            read-modify-write tool never acts twice on one version; docs/workspace.md).
        approval: agent mode: put every authorized call to the human with LangGraph's
            ``interrupt`` (payload: :meth:`~icore.workspace.ApprovalRequest.payload`;
            resume with ``Command(resume=True)`` or ``request.approve()``) before it
            runs; an answer counts only for the exact arguments and fact versions it was
            given for (needs a checkpointer). Several approval calls of one message
            in one ``ToolNode`` are asked one at a time, in the message's order; a call
            that ran under its approval never runs again when LangGraph replays the
            node (its recorded result is returned). In both modes, a call that ran or
            was refused before LangGraph runs its step again (a resume, a node's
            ``RetryPolicy``) returns that answer (recorded as a replay); one whose tool
            raised after it started is refused ``earlier_outcome_unknown``, one that
            never finished refused as outcome unknown: never run twice.

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
    # no args_schema: LangChain's own inference from _run (what the plain tool runs with)
    schema = base.args_schema if base.args_schema is not None else base.get_input_schema()
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise IntegrationError("the tool's args_schema must be a pydantic model class "
                               "(a JSON-schema dict cannot normalise the arguments)",
                               framework=_FW, tool=base.name, got=type(schema).__name__,
                               fix="args_schema=<a pydantic BaseModel subclass>")
    if not (isinstance(roots, str) and roots) and not callable(roots):
        raise IntegrationError("roots= names a graph-state key or is f(state, args)",
                               framework=_FW, tool=base.name, got=type(roots).__name__)
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block=on_block, replicator=replicator, writes=writes)
    if approval and guard.handle is None:
        raise IntegrationError("approval=True needs a workspace agent (agent=ws.agent(...))",
                               framework=_FW, tool=base.name)
    guard.claim(base.name)
    if guard.handle is not None and guard.handle.turn_source is None:
        # reads made in a graph run are stamped with its superstep (see _turn_of)
        guard.handle.turn_source = _graph_turn
    if guard.handle is not None:  # reads and calls kept per thread (conversation)
        guard.handle.detect_scope(graph_scope)
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
    dups = DuplicateIds(base.name)

    def prepare(kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any],
                                                 dict[str, JSONValue], str | None]:
        runtime, args, injected = f.split(kwargs)
        call_id = getattr(runtime, "tool_call_id", None)
        try:
            norm = f.norm(args)
        except IntegrationError as exc:
            said = f"PlanFence refused {base.name}: {exc}"
            rec = guard.recorder or _handler_recorder(getattr(runtime, "config", None))
            if rec is not None:  # a refused call, recorded as a plain tool's error is
                refused_args(rec, rec.caller(base.name, call_id) or guard.agent or "agent",
                             base.name, args, said)
            raise ToolException(said) from None
        # calls sharing one tool_call_id in their model message: refused, nothing runs
        config = getattr(runtime, "config", None)
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        dups.check(runtime, call_id, norm, step_key((thread, call_id), config, norm),
                   _attempt(config), guard.recorder or _handler_recorder(config),
                   guard.agent)
        return runtime, args, injected, norm, call_id

    def signal(attempt: Hashable | None, call_id: str | None) -> None:
        if attempt is not None and call_id is not None:
            _ORDER.done(attempt, call_id)

    def python_args(a: Mapping[str, Any], args: dict[str, Any],
                    norm: dict[str, JSONValue]) -> Mapping[str, Any]:
        return args if a == norm else f.norm.to_python(a)

    def reviewed(runtime: Any, norm: Mapping[str, Any], call_id: str | None,
                 inner: Approver | None) -> Approver | None:
        # a call HumanInTheLoopMiddleware put to its human runs only as the request the
        # human saw: a replan's call is refused approval_changed, the model asks again
        if not middleware_reviewed(runtime):
            return inner
        return reviewed_check(guard, base.name, norm, f.turn(runtime, call_id), inner)

    def speaker(rec: RunRecorder | None, call_id: str | None
                ) -> tuple[RunRecorder | None, str]:
        # where a call's own lines go (the handler's recorder without recorder=), and who
        r = rec or guard.recorder
        return r, (r.caller(base.name, call_id) if r is not None else None) or guard.agent \
            or "agent"

    def pending(key: Hashable, disk: Disk, call_id: str | None, rec: RunRecorder | None,
                norm: dict[str, JSONValue], turn: Hashable | None) -> PendingCall | None:
        # an approval call's questions kept on disk while the human decides; a call
        # another process asked is restored (its reads and questions) or refused
        r, who = speaker(rec, call_id)
        try:
            return open_pending(guard.handle, approval, key, base.name, disk, call_id, r, who,
                                turn)
        except PendingUnreadable as exc:
            said = unreadable_message(base.name, str(exc))
            if r is not None:
                r.tool_call(who, base.name, norm, f"BLOCKED: not_read: {said}", error=True,
                            blocked=True)
            raise ToolException(said) from None

    def replay(step: Hashable | None, key: Hashable, config: Any, call_id: str | None,
               norm: dict[str, JSONValue], disk: Disk) -> tuple[bool, Any]:
        # a call answered in an earlier attempt of this step: recorded as a replay (one
        # thought line with the call id), never as a new decision or action
        try:
            again, value = f.earlier(step, key, disk)
        except ToolException as exc:
            said: Any = str(exc)
            again, value = True, exc
        else:
            said = value
        if again:
            rec = guard.recorder or _handler_recorder(config)
            if rec is not None:
                who = rec.caller(base.name, call_id) or guard.agent or "agent"
                how = ("refused: its attempt in a process that stopped mid-call started "
                       "and never finished, so its outcome is unknown; not run again"
                       if isinstance(value, EarlierStopped) else
                       "refused: its attempt before the resume started and did not finish "
                       "(it raised, or the run stopped), so its outcome is unknown; not run "
                       "again" if isinstance(value, EarlierUnknown) else
                       "answered before the resume, not run again")
                rec.add(who, "thought", f"replayed {base.name}: {how}: {str(said)[:200]}",
                        tool=base.name, args=norm, tool_call_id=call_id, replay=True)
        if isinstance(value, ToolException):
            raise value
        return again, value

    def ran(step: Hashable | None, key: Hashable, runtime: Any, call_id: str | None,
            granted: list[str], result: Any, disk: Disk) -> Any:
        # the call's answer, kept for re-runs of its step (and an approved call's ledger)
        f.memory.settle(step, RAN, result)
        f.keep(step, disk)
        if agent_mode:
            f.executed(key, f.turn(runtime, call_id), granted, result)
        return result

    def run_sync(**kwargs: Any) -> Any:
        # a call of a parallel branch: its lines name the branch (the audit tells them apart)
        with line_fields(branch=branch_here(getattr(kwargs.get(_RUNTIME), "config", None))):
            return gated_sync(**kwargs)

    def gated_sync(**kwargs: Any) -> Any:
        runtime, args, injected, norm, call_id = prepare(kwargs)
        if agent_mode:  # two invocations sharing one thread at once: refused
            check_graph_scope(base.name, norm)
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
            step = step_key(key, config, norm)  # a re-run step: answered before (both modes)
            disk = f.disk(step, config)  # kept on disk too: the app's SQLite folder
            if (ev := f.memory.running(step)) is not None:  # a sibling still running
                ev.wait(RUNNING_WAIT_S)
            again, value = replay(step, key, config, call_id, norm, disk)
            if again:
                return value
            started: list[bool] = []

            def call(**a: Any) -> Any:
                if agent_mode:  # again: a use off this line while the gate decided
                    check_graph_scope(base.name)
                if disk is not None:  # committed before the body: a kill leaves it started
                    disk[0].start(disk[1], base.name, key[0], call_id)
                started.append(True)
                try:
                    return f.direct.run(python_args(a, args, norm), injected, config)
                except GraphInterrupt:
                    if agent_mode:
                        f.suspend(key, a)
                    raise

            # recording on (a RecordingHandler) but no recorder= given: recorded anyway
            rec = _handler_recorder(config) if guard.recorder is None else None
            asked_as(rec or guard.recorder, call_id if agent_mode else None, f.norm)
            granted: list[str] = []
            pend: PendingCall | None = None
            try:
                if agent_mode:
                    with one_call():  # D(a) asked once: the approval's request and the gate
                        pend = pending(key, disk, call_id, rec, norm, f.turn(runtime, call_id))
                        told = f.approver(key, granted, lambda: signal(attempt, call_id),
                                          pend, (*speaker(rec, call_id), handler_answers(config)))
                        gated = guard.run(base.name, call, norm,
                                          turn=f.turn(runtime, call_id), normalize=f.norm,
                                          approve=reviewed(runtime, norm, call_id, told),
                                          recorder=rec, call_id=call_id,
                                          durable=disk[1] if disk is not None else None)
                        refused_unread(told, gated)  # the human did answer (QA qa-new18a)
                        lost_request(pend, gated, getattr(handler_answers(config), "resume",
                                                          None))
                else:
                    r = f.plan_roots(runtime, args)
                    gated = guard.run(base.name, call, f.plan_args(norm, r), r, recorder=rec)
                result = f.out(gated, runtime)
            except BaseException as exc:  # refused, paused, or the tool raised
                if pend is not None and not isinstance(exc, GraphInterrupt):
                    pend.done()  # decided: nothing pending any more
                f.memory.raised(step, exc, bool(started))
                if started:
                    f.keep(step, disk)
                _told_unknown(base.name, exc, bool(started))
                raise
            if pend is not None:
                pend.done()
            return ran(step, key, runtime, call_id, granted, result, disk)
        finally:
            signal(attempt, call_id)

    async def run_async(**kwargs: Any) -> Any:
        with line_fields(branch=branch_here(getattr(kwargs.get(_RUNTIME), "config", None))):
            return await gated_async(**kwargs)

    async def gated_async(**kwargs: Any) -> Any:
        runtime, args, injected, norm, call_id = prepare(kwargs)
        if agent_mode:  # two invocations sharing one thread at once: refused
            check_graph_scope(base.name, norm)
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
            step = step_key(key, config, norm)
            disk = f.disk(step, config)  # kept on disk too: the app's SQLite folder
            if (ev := f.memory.running(step)) is not None:  # a sibling still running
                await asyncio.to_thread(ev.wait, RUNNING_WAIT_S)
            again, value = replay(step, key, config, call_id, norm, disk)
            if again:
                return value
            started: list[bool] = []

            async def call(**a: Any) -> Any:
                if agent_mode:  # again: a use off this line while the gate decided
                    check_graph_scope(base.name)
                if disk is not None:  # committed before the body: a kill leaves it started
                    disk[0].start(disk[1], base.name, key[0], call_id)
                started.append(True)
                try:
                    return await f.direct.arun(python_args(a, args, norm), injected, config)
                except GraphInterrupt:
                    if agent_mode:
                        f.suspend(key, a)
                    raise

            rec = _handler_recorder(config) if guard.recorder is None else None
            asked_as(rec or guard.recorder, call_id if agent_mode else None, f.norm)
            granted: list[str] = []
            pend: PendingCall | None = None
            try:
                if agent_mode:
                    with one_call():
                        pend = pending(key, disk, call_id, rec, norm, f.turn(runtime, call_id))
                        told = f.approver(key, granted, lambda: signal(attempt, call_id),
                                          pend, (*speaker(rec, call_id), handler_answers(config)))
                        gated = await guard.arun(base.name, call, norm,
                                                 turn=f.turn(runtime, call_id), normalize=f.norm,
                                                 approve=reviewed(runtime, norm, call_id, told),
                                                 recorder=rec, call_id=call_id,
                                                 durable=disk[1] if disk is not None else None)
                        refused_unread(told, gated)
                        lost_request(pend, gated, getattr(handler_answers(config), "resume",
                                                          None))
                else:
                    r = f.plan_roots(runtime, args)
                    gated = await guard.arun(base.name, call, f.plan_args(norm, r), r,
                                             recorder=rec)
                result = f.out(gated, runtime)
            except BaseException as exc:
                if pend is not None and not isinstance(exc, GraphInterrupt):
                    pend.done()
                f.memory.raised(step, exc, bool(started))
                if started:
                    f.keep(step, disk)
                _told_unknown(base.name, exc, bool(started))
                raise
            if pend is not None:
                pend.done()
            return ran(step, key, runtime, call_id, granted, result, disk)
        finally:
            signal(attempt, call_id)

    def run_via_loop(**kwargs: Any) -> Any:  # an async-only tool under invoke()
        return asyncio.run(run_async(**kwargs))

    # LangChain evaluates the tool function's type hints on every call (to find a config
    # parameter); these have none to find, so their (string) annotations are dropped
    for fn in (run_sync, gated_sync, run_async, gated_async, run_via_loop):
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
    mark_fenced(base.name, wrapped)
    return wrapped


def is_fenced(tool: Any) -> bool:
    """Whether ``tool`` came from :func:`fenced_tool`."""
    return bool(isinstance(tool, BaseTool) and (tool.metadata or {}).get("planfence"))
