"""Fenced AG2 1.x tools (planfence App. A.3 in an ``ag2`` tool middleware).

:func:`fenced_tool` puts a tool middleware (``ag2.middleware.ToolMiddleware``, AG2's own
hook around one tool's execution) in front of an ``ag2.tool``. The gate sees the model's
own JSON arguments (the ``ToolCallEvent``'s ``arguments``), before AG2's pydantic
validation types them. A blocked call is the tool's error (a ``ToolErrorEvent`` carrying
:class:`~icore.errors.ActionBlocked`), which AG2 hands the model as that call's result.

High-level (``agent=`` a :class:`~icore.workspace.Agent` of a
:class:`~icore.workspace.Workspace`): the model's own tool call is the plan. Each call's
action record is derived from the versions of D(a) that agent read and bound to the
call's arguments, normalised through the tool's own signature (``date``, ``UUID``, enums,
nested models to JSON, defaults applied); calls of one model response share the reads
that response was produced from (each its own root); a stale call is refused with the
fresh values, and the model's next call from them is the one replan.

Low-level (``fence=``): L(a) comes from the conversation's ``context.variables`` (key
``plan_roots`` by default) or a function of (context, arguments); the plan must bind the
model's JSON; a replan writes the fresh roots back into ``context.variables``.

Human approval: an ``ag2.middleware.builtin.approval_required()`` hook on the tool stays
in front of the gate, so the human answers before the call is validated, and the gate
runs the call right after; the approval covers the arguments the human saw. A call whose
arguments a replan changed does not run: it is refused with the old and new arguments
named (``approval_changed``), and the model's next call with them is put to the human
again.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable, Iterable
from copy import copy
from typing import Any

from ag2 import Context
from ag2 import tool as ag2_tool
from ag2.events import ModelResponse, ToolCallEvent, ToolErrorEvent
from ag2.middleware.builtin import ApprovalRequired
from ag2.tools.types import FunctionTool

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import Fence, Replan, ReplanRequest
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    Replicator,
    RunRecorder,
    check_tool_function,
)
from icore.integrations import Scope as _Scope
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)
from icore.workspace import Agent as TeamAgent
from icore.workspace import ApprovalRequest, UserReplanner

CALLING_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "icore_ag2_calling_agent", default=None)
"""The agent whose turn is running (set by :func:`~icore.integrations.ag2.record_agents`'
middleware), so gate events name the calling agent."""
CHAT_RECORDER: contextvars.ContextVar[RunRecorder | None] = contextvars.ContextVar(
    "icore_ag2_chat_recorder", default=None)
"""The recorder of a run recorded by :func:`~icore.integrations.ag2.record_agents`: a
fenced tool built without ``recorder=`` records its gate decisions and calls there."""


def _run_recorder(own: RunRecorder | None, name: str) -> RunRecorder | None:
    """``own``, else the recorder of the recorded run this call belongs to (claimed)."""
    if own is not None:
        return own
    rec = CHAT_RECORDER.get()
    if rec is not None:
        rec.fenced_tools.add(name)
    return rec


class _ApprovalChanged(Exception):
    """The one replan changed the arguments a human approved (internal signal)."""

    def __init__(self, approved: dict[str, Any], fresh: dict[str, Any]) -> None:
        super().__init__("changed after approval")
        self.approved = approved
        self.fresh = fresh


def _canon(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


def _function_of(tool: FunctionTool) -> Callable[..., Any]:
    """The user's function behind an ag2 tool (ag2 wraps it in an async adapter)."""
    fn: Callable[..., Any] = inspect.unwrap(tool.model.call)
    return fn


def _normalizer(tool: FunctionTool) -> ArgNormalizer:
    """The tool's arguments in normal form, through its function's own signature.

    The parameters AG2 injects (absent from the model's JSON schema) are left out.
    """
    fn = _function_of(tool)
    props = tool.schema.function.parameters.get("properties") or {}
    sig = check_tool_function(fn, framework="ag2", tool=tool.name)
    skip = [p for p in sig.parameters if p not in props]
    check_tool_function(fn, framework="ag2", tool=tool.name, skip=skip)
    return ArgNormalizer.for_function(fn, name=tool.name, skip=skip, framework="ag2")


class _Turns:
    """Tool call id -> the model response it came in (shared by a tool's copies)."""

    MAX = 4096

    def __init__(self) -> None:
        self.of: dict[str, str] = {}
        self.current: str | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> _Turns:
        return self

    def note(self, response: ModelResponse) -> None:
        """Name the response's tool calls as one turn (its first call's id)."""
        calls = getattr(response.tool_calls, "calls", None) or []
        self.current = str(calls[0].id) if calls else None
        for c in calls:  # the response's first call id names the turn
            self.of[c.id] = str(calls[0].id)
        while len(self.of) > self.MAX:
            self.of.pop(next(iter(self.of)))


class FencedTool(FunctionTool):
    """An ag2 ``FunctionTool`` whose calls pass the PlanFence gate (:func:`fenced_tool`).

    It also listens for the agent's model responses, so calls of one response are known
    as one turn (they share the reads the response was produced from).
    """

    turns: _Turns

    def register(self, stack: Any, context: Any, *, middleware: Iterable[Any] = ()) -> None:
        """AG2's registration, plus the model-response listener."""
        turns = self.turns

        async def note(event: ModelResponse, context: Context) -> None:
            turns.note(event)

        stack.enter_context(context.stream.where(ModelResponse).sub_scope(note))
        super().register(stack, context, middleware=middleware)


def _noting(replan: AnyReplanner | None, fresh: list[Any]) -> AnyReplanner | None:
    """``replan``, noting the :class:`~icore.fence.Replan` it returns in ``fresh``."""
    if replan is None:
        return None
    inner = replan
    if inspect.iscoroutinefunction(inner):
        async def anoted(rq: ReplanRequest) -> Replan:
            got: Replan = await inner(rq)  # type: ignore[misc]
            fresh.append(got)
            return got

        return anoted

    def noted(rq: ReplanRequest) -> Replan:
        got = inner(rq)
        fresh.append(got)
        return got  # type: ignore[return-value]

    return noted


def _split(hooks: Iterable[Any]) -> tuple[list[Any], list[Any]]:
    approvals: list[Any] = []
    rest: list[Any] = []
    for h in hooks:
        (approvals if isinstance(h, ApprovalRequired) else rest).append(h)
    return approvals, rest


class _Result:
    """A tool's result event, with its text as ``content`` (what the recorder keeps)."""

    def __init__(self, event: Any) -> None:
        self.event = event
        if isinstance(event, ToolErrorEvent):
            self.content = f"Error: {type(event.error).__name__}: {event.error}"
        else:
            parts = getattr(getattr(event, "result", None), "parts", None) or []
            self.content = "\n".join(str(getattr(p, "content", p)) for p in parts)


def _blocked(event: ToolCallEvent, message: str, name: str, reason: str) -> ToolErrorEvent:
    return ToolErrorEvent.from_call(event, error=ActionBlocked(message, action=name,
                                                               reason=reason))


def _changed(name: str, approved: Any, fresh: Any) -> str:
    return (f"PlanFence blocked {name} (approval_changed): the plan changed and the fresh "
            f"call {json.dumps(fresh, default=str)} is not the approved "
            f"{json.dumps(approved, default=str)}; nothing ran. Call {name} again with the "
            "fresh arguments to ask the human again")


def _model_args(event: ToolCallEvent, name: str) -> dict[str, Any] | ToolErrorEvent:
    try:
        args = event.serialized_arguments
    except json.JSONDecodeError as exc:
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} are not JSON: {exc.msg}", tool=name))
    if not isinstance(args, dict):
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} must be a JSON object", tool=name))
    return args


def _with_args(event: ToolCallEvent, args: dict[str, Any], original: dict[str, Any]
               ) -> ToolCallEvent:
    if _canon(args) == _canon(original):
        return event
    run = copy(event)
    run.arguments = json.dumps(args)
    run.serialized_arguments = args
    return run


def fenced_tool(tool: FunctionTool | Callable[..., Any], *,
                agent: TeamAgent | str | None = None, depends_on: _Scope,
                fence: Fence | None = None, roots: ContextRoots = "plan_roots",
                replan: AnyReplanner | UserReplanner | None = None,
                recorder: RunRecorder | None = None,
                state_update: StateUpdate | None = None,
                replicator: Replicator | None = None) -> FunctionTool:
    """Wrap an AG2 1.x tool so every call passes the PlanFence gate.

    Args:
        tool: an ``ag2.tool`` (``@tool``, sync or ``async def``) or a plain function
            (wrapped with ``ag2.tool`` first). Its registered name is the tool's name.
        agent: high-level: the :class:`~icore.workspace.Agent` whose reads the calls
            derive from (``ws.agent("shipper")``). Low-level: the agent id events are
            attributed to (default: the agent whose turn runs, as
            :func:`~icore.integrations.ag2.record_agents` sees it, else ``"executor"``).
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        fence: low-level only: the executor's :class:`~icore.fence.Fence`.
        roots: low-level only: the ``context.variables`` key holding L(a) (default
            ``"plan_roots"``), or ``f(context, args)`` (``context``: AG2's ``Context``).
        replan: high-level: a :data:`~icore.workspace.UserReplanner` returning new
            arguments from the fresh values (default: the model gets the fresh values and
            its next call is the one replan). Low-level: the one replan (sync or
            ``async def``).
        recorder: records gate decisions, the replan and the call.
        state_update: low-level: after a replan, more ``context.variables`` updates.
        replicator: low-level: names keys, not record ids, in a block's message.

    Returns:
        A :class:`FencedTool` with the same name, description and JSON schema; its
        middleware runs approvals (``approval_required``) first, then the gate, then the
        tool's other hooks.

    Raises:
        IntegrationError: ``tool`` is neither an AG2 ``FunctionTool`` nor a function; it
            takes ``*args`` / ``**kwargs`` / positional-only parameters; neither a
            workspace ``agent`` nor ``fence`` is given; ``depends_on`` is a str, empty or
            names facts no owner is declared for (each error names the fix).
    """
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_tool needs an ag2 tool or a function",
                                   framework="ag2", got=type(tool).__name__)
        check_tool_function(tool, framework="ag2")
        tool = ag2_tool(tool)
    name = tool.name
    norm = _normalizer(tool)
    team = agent if isinstance(agent, TeamAgent) else None
    if team is None and agent is not None and not isinstance(agent, str):
        raise IntegrationError("agent= must be a workspace agent (ws.agent('name')) or an "
                               "agent id", framework="ag2", tool=name,
                               got=type(agent).__name__)
    guard = FenceGuard(agent=team if team is not None else (agent or "executor"),
                       fence=fence, depends_on=depends_on,
                       replan=replan if team is not None else None, recorder=recorder)
    guard.claim(name)
    approvals, rest = _split(d.middleware for d in tool.middleware)
    turns = _Turns()
    if team is not None:  # reads made by tools of a response are stamped with its turn
        team.turn_source = lambda: turns.current

    async def team_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        args = _model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return args
        try:
            norm_args = norm(args)
        except IntegrationError as exc:
            return ToolErrorEvent.from_call(event, error=exc)
        approved = _canon(norm_args) if approvals else None

        def approve(req: ApprovalRequest) -> bool:
            if approved is not None and _canon(dict(req.args)) != approved:
                raise _ApprovalChanged(norm_args, dict(req.args))
            return True

        async def call(**a: Any) -> Any:
            return _Result(await call_next(_with_args(event, a, args), context))

        try:
            gated = await guard.arun(name, call, norm_args,
                                     recorder=_run_recorder(recorder, name),
                                     turn=turns.of.get(event.id, event.id),
                                     normalize=norm, approve=approve)
        except _ApprovalChanged as ch:
            return _blocked(event, _changed(name, ch.approved, ch.fresh), name,
                            "approval_changed")
        if not gated.executed:
            return _blocked(event, gated.message, name, gated.reason)
        return gated.value.event

    async def fence_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        args = _model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return args
        approved = _canon(args) if approvals else None

        async def call(**a: Any) -> Any:
            if approved is not None and _canon(a) != approved:
                raise _ApprovalChanged(args, a)
            return _Result(await call_next(_with_args(event, a, args), context))

        fresh: list[Any] = []
        per_call = FenceGuard(fence=guard.fence, depends_on=guard.depends_on,
                              replan=_noting(replan, fresh),  # type: ignore[arg-type]
                              recorder=_run_recorder(recorder, name),
                              agent=agent or CALLING_AGENT.get() or "executor",
                              replicator=replicator)
        variables = getattr(context, "variables", None)
        where = variables if isinstance(roots, str) else context
        try:
            gated = await per_call.arun(name, call, args, plan_roots(where, roots, args))
        except _ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(where, roots, list(fresh[-1].roots))
            return _blocked(event, _changed(name, ch.approved, ch.fresh), name,
                            "approval_changed")
        if not gated.executed:
            return _blocked(event, gated.message, name, gated.reason)
        write_back(where, roots, gated, state_update)
        return gated.value.event

    gate = team_gate if team is not None else fence_gate
    wrapped = FencedTool(tool.model, name=name, description=tool.schema.function.description,
                         schema=tool.schema.function.parameters,
                         middleware=[*approvals, gate, *rest])
    wrapped.turns = turns
    return wrapped
