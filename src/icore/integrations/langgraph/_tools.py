"""Fenced LangGraph / LangChain tools (planfence App. A.3 at a ``ToolNode``).

:func:`fenced_tool` returns a ``StructuredTool`` with the wrapped tool's name, description
and the exact parameter schema the model sees. The wrapper adds one injected argument
(LangGraph's ``runtime: ToolRuntime``, hidden from the model) to read the plan roots from
graph state and the tool call's id. Each call:

1. takes L(a) from graph state (``roots="plan_roots"``: a state key holding record ids) or
   from a function of (state, arguments);
2. runs the PlanFence protected action over D(a) with the model's arguments (sync
   ``invoke`` and async ``ainvoke``; ``async def`` tools and replanners work);
3. executed: returns the tool's result; executed after the one replan: returns a
   ``Command`` whose update writes the fresh roots (and ``state_update(gated)``) back
   into graph state, with the ``ToolMessage``;
4. blocked: raises LangChain's ``ToolException``, which the tool (``handle_tool_error``)
   turns into a ``ToolMessage`` with ``status="error"`` and the reason, or raises
   :class:`~icore.errors.ActionBlocked` with ``on_block="raise"``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as as_tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel, create_model

from icore.errors import IntegrationError
from icore.fence import Fence
from icore.integrations import AnyReplanner, FenceGuard, Gated, OnBlock, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations.langgraph._record import recorder_in
from icore.records import RecordId

RootsFrom = str | Callable[[Any, Mapping[str, Any]], Sequence[RecordId] | None]
"""A graph-state key holding L(a), or ``f(state, args) -> L(a)``."""
StateUpdate = Callable[[Gated], Mapping[str, Any]]
"""Extra graph-state updates after a replan (e.g. the fresh destination)."""

_RUNTIME = "runtime"


def _as_base_tool(tool: BaseTool | Callable[..., Any]) -> BaseTool:
    if isinstance(tool, BaseTool):
        return tool
    if callable(tool):
        # the decorator keeps the signature, so the schema is the function's parameters
        return as_tool(tool)
    raise IntegrationError("fenced_tool needs a LangChain tool or a function",
                           framework="langgraph", got=type(tool).__name__)


def _state_get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


class _Fenced:
    """One fenced LangGraph tool's call plumbing, shared by its sync and async runners.

    Args:
        tool: the wrapped tool.
        guard: the :class:`~icore.integrations.FenceGuard` that gates each call.
        roots: the state field holding the plan roots L(a), or a function of
            ``(state, args)`` returning them.
        state_update: extra graph-state updates after a replanned call.
        own_runtime: True when the wrapped tool declares the injected runtime itself.
        model_fields: the argument names the model supplies (the rest are injected).
    """

    def __init__(self, tool: BaseTool, guard: FenceGuard, roots: RootsFrom,
                 state_update: StateUpdate | None, own_runtime: bool,
                 model_fields: frozenset[str]) -> None:
        self.tool = tool
        self.guard = guard
        self.roots = roots
        self.state_update = state_update
        self.own_runtime = own_runtime
        self.model_fields = model_fields

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
        """The plan roots L(a) of this call, from the graph state; None when there are none.

        With no roots the gate blocks the call (reason ``no_roots``: no plan authorizes
        it yet).
        """
        state = getattr(runtime, "state", None)
        if isinstance(self.roots, str):
            got = _state_get(state, self.roots) if state is not None else None
            return list(got) if got else None
        return self.roots(state, args)

    def payload(self, args: Mapping[str, Any], injected: Mapping[str, Any],
                call_id: str | None) -> Any:
        """What the wrapped tool is invoked with: a ``tool_call`` dict when the call has an id.

        With an id the tool returns a ``ToolMessage`` (LangGraph's convention); without
        one, the plain merged arguments.
        """
        merged = {**args, **injected}
        if call_id is not None:
            return {"type": "tool_call", "name": self.tool.name, "args": merged,
                    "id": call_id}
        return merged

    def out(self, gated: Gated, runtime: Any) -> Any:
        """The tool's answer to LangGraph for a gated call.

        After a replan (planfence App. A.3) it is a ``Command`` that also writes the new
        plan roots and ``state_update``'s fields into the graph state; otherwise the
        tool's value unchanged.

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
        if isinstance(self.roots, str):
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
        msg = value if isinstance(value, ToolMessage) else ToolMessage(
            content=str(value), tool_call_id=call_id, name=self.tool.name)
        return Command(update={**update, "messages": [msg]})


def _recording(guard: FenceGuard, runtime: Any) -> FenceGuard:
    """``guard``, or a copy recording into the run's :class:`RecordingHandler`.

    The copy is used when the tool was built without ``recorder=`` while a handler
    records the run, so the tool never vanishes from the trace.
    """
    if guard.recorder is not None:
        return guard
    rec = recorder_in(getattr(runtime, "config", None))
    if rec is None:
        return guard
    g = copy.copy(guard)
    g.recorder = rec
    return g


def fenced_tool(tool: BaseTool | Callable[..., Any], *, fence: Fence, depends_on: _Scope,
                roots: RootsFrom = "plan_roots", replan: AnyReplanner | None = None,
                recorder: RunRecorder | None = None, agent: str | None = None,
                on_block: OnBlock = "error", state_update: StateUpdate | None = None,
                replicator: Replicator | None = None) -> StructuredTool:
    """Wrap a LangChain/LangGraph tool so every call passes the PlanFence gate.

    Args:
        tool: a ``BaseTool`` (``@tool``, sync or ``async def``) or a plain function (its
            signature becomes the schema).
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        roots: where L(a) comes from: a graph-state key holding the plan's record ids
            (default ``"plan_roots"``), or ``f(state, args)`` returning them.
        replan: the one replan (sync or ``async def``); without it a change blocks.
        recorder: records gate decisions, the replan and the tool call (default: the
            recorder of a :class:`RecordingHandler` among the run's callbacks, if any).
        agent: the agent id events are attributed to (default: the node whose model
            turn asked for the call, as the recorder saw it).
        on_block: ``"error"``: the model gets a ``ToolMessage`` with ``status="error"``;
            ``"raise"``: :class:`~icore.errors.ActionBlocked` escapes the ``ToolNode``.
        state_update: after a replan, extra graph-state updates (the fresh roots are
            written to the ``roots`` key anyway).
        replicator: names keys, not record ids, in a block's message.

    Returns:
        A ``StructuredTool`` with the original name, description and model-facing
        schema, usable in ``ToolNode`` / ``create_react_agent`` / ``bind_tools``.

    Raises:
        IntegrationError: ``tool`` is not a tool or function, its ``args_schema`` is not a
            pydantic model, or ``on_block`` is invalid.
    """
    base = _as_base_tool(tool)
    schema = base.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise IntegrationError("the tool's args_schema must be a pydantic model",
                               framework="langgraph", tool=base.name)
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block=on_block, replicator=replicator)
    own_runtime = _RUNTIME in schema.model_fields
    wrapped_schema: type[BaseModel] = schema if own_runtime else create_model(
        schema.__name__, __base__=schema, __doc__=schema.__doc__,
        runtime=(ToolRuntime, None))
    call_schema = base.tool_call_schema
    model_fields = frozenset(call_schema.model_fields if isinstance(call_schema, type)
                             and issubclass(call_schema, BaseModel) else ())
    f = _Fenced(base, guard, roots, state_update, own_runtime, model_fields)

    def run_sync(**kwargs: Any) -> Any:
        runtime, args, injected = f.split(kwargs)
        call_id = getattr(runtime, "tool_call_id", None)

        def call(**a: Any) -> Any:
            return base.invoke(f.payload(a, injected, call_id))

        gated = _recording(guard, runtime).run(base.name, call, args, f.plan_roots(runtime, args))
        return f.out(gated, runtime)

    async def run_async(**kwargs: Any) -> Any:
        runtime, args, injected = f.split(kwargs)
        call_id = getattr(runtime, "tool_call_id", None)

        async def call(**a: Any) -> Any:
            return await base.ainvoke(f.payload(a, injected, call_id))

        gated = await _recording(guard, runtime).arun(base.name, call, args,
                                                      f.plan_roots(runtime, args))
        return f.out(gated, runtime)

    def run_via_loop(**kwargs: Any) -> Any:  # an async-only tool under invoke()
        return asyncio.run(run_async(**kwargs))

    async_only = getattr(base, "func", None) is None and getattr(
        base, "coroutine", None) is not None
    wrapped = StructuredTool.from_function(
        func=run_via_loop if async_only else run_sync, coroutine=run_async, name=base.name,
        description=base.description, args_schema=wrapped_schema,
        return_direct=base.return_direct,  # the wrapped tool formats its own output
        handle_tool_error=True, metadata={**(base.metadata or {}), "planfence": True},
        tags=base.tags)
    return wrapped


def is_fenced(tool: Any) -> bool:
    """Whether ``tool`` came from :func:`fenced_tool`."""
    return bool(isinstance(tool, BaseTool) and (tool.metadata or {}).get("planfence"))

