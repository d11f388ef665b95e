"""Fenced AG2 1.x tools (planfence App. A.3 at an ``ag2`` tool's middleware).

:func:`fenced_tool` puts a tool middleware (AG2's own hook around one tool's execution,
``ag2.middleware.ToolMiddleware``) in front of an ``ag2.tool``: every call the model makes
passes the PlanFence gate with the model's own JSON arguments (the ``ToolCallEvent``'s
``arguments``, compared before AG2's pydantic validation, so ``date``, ``UUID`` and nested
model parameters are compared as the JSON the model sent). L(a) comes from the
conversation's ``context.variables`` (key ``plan_roots`` by default) or a function of
(context, arguments); a replan writes the fresh roots back into ``context.variables``.
A blocked call is the tool's error (``ToolErrorEvent`` carrying
:class:`~icore.errors.ActionBlocked`), which AG2 hands the model as that call's failed
result.

Human approval: an ``ag2.middleware.builtin.approval_required()`` hook on the tool stays
in front of the gate, so the human is asked before the plan is validated; the approval
covers the arguments the human saw. If the gate's one replan changes them, the changed
call does not run: it is refused with the old and new arguments named, and the model's
next call with them is put to the human again.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable, Iterable
from copy import copy
from typing import Any

from ag2 import tool as ag2_tool
from ag2.events import ToolCallEvent, ToolErrorEvent
from ag2.middleware.builtin import ApprovalRequired
from ag2.tools.types import FunctionTool

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import Fence, Replan, ReplanRequest
from icore.integrations import AnyReplanner, FenceGuard, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)

CALLING_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "icore_ag2_calling_agent", default=None)
"""The agent whose turn is running (set by :func:`~icore.integrations.ag2.record_agents`'
middleware), so gate events name the calling agent."""


class _ApprovalChanged(Exception):
    """The one replan changed the arguments a human approved (internal signal)."""

    def __init__(self, approved: dict[str, Any], fresh: dict[str, Any]) -> None:
        super().__init__("changed after approval")
        self.approved = approved
        self.fresh = fresh


def _canon(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


def check_signature(fn: Callable[..., Any], tool_name: str) -> None:
    """Refuse a tool taking ``*args`` / ``**kwargs`` (its schema cannot bind a plan).

    Raises:
        IntegrationError: the function has a variadic parameter.
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    var = [p.name for p in params
           if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    if var:
        raise IntegrationError(
            f"tool {tool_name!r} takes *{var[0]}: a plan can bind only named parameters; "
            "declare each argument as a parameter", framework="ag2", tool=tool_name,
            parameter=var[0])


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


def fenced_tool(tool: FunctionTool | Callable[..., Any], *, fence: Fence,
                depends_on: _Scope, roots: ContextRoots = "plan_roots",
                replan: AnyReplanner | None = None, recorder: RunRecorder | None = None,
                agent: str | None = None, state_update: StateUpdate | None = None,
                replicator: Replicator | None = None) -> FunctionTool:
    """Wrap an AG2 1.x tool so every call passes the PlanFence gate.

    Args:
        tool: an ``ag2.tool`` (``@tool``, sync or ``async def``) or a plain function
            (wrapped with ``ag2.tool`` first). Its registered name is the tool's name.
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a).
        roots: the ``context.variables`` key holding L(a) (default ``"plan_roots"``), or
            ``f(context, args)`` (``context``: AG2's conversation ``Context``).
        replan: the one replan (sync or ``async def``).
        recorder: records gate decisions, the replan and the call.
        agent: the agent id events are attributed to (default: the agent whose turn runs,
            as :func:`~icore.integrations.ag2.record_agents` sees it, else ``"executor"``).
        state_update: after a replan, more ``context.variables`` updates.
        replicator: names keys, not record ids, in a block's message.

    Returns:
        A new ``FunctionTool`` with the same name, description and JSON schema; its
        middleware runs approvals first, then the gate, then the tool's other hooks.

    Raises:
        IntegrationError: ``tool`` is neither an AG2 ``FunctionTool`` nor a function, or
            it takes ``*args`` / ``**kwargs``.
    """
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_tool needs an ag2 tool or a function",
                                   framework="ag2", got=type(tool).__name__)
        check_signature(tool, getattr(tool, "__name__", "tool"))
        tool = ag2_tool(tool)
    name = tool.name
    check_signature(tool.model.call, name)
    FenceGuard(fence=fence, depends_on=depends_on, recorder=recorder).claim(name)
    approvals, rest = _split(d.middleware for d in tool.middleware)

    async def gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        try:
            args = event.serialized_arguments
        except json.JSONDecodeError as exc:
            return ToolErrorEvent.from_call(event, error=IntegrationError(
                f"the arguments of {name} are not JSON: {exc.msg}", tool=name))
        if not isinstance(args, dict):
            return ToolErrorEvent.from_call(event, error=IntegrationError(
                f"the arguments of {name} must be a JSON object", tool=name))
        approved = _canon(args) if approvals else None

        async def call(**a: Any) -> Any:
            if approved is not None and _canon(a) != approved:
                raise _ApprovalChanged(args, a)
            run = event
            if _canon(a) != _canon(args):
                run = copy(event)
                run.arguments = json.dumps(a)
                run.serialized_arguments = a
            return await call_next(run, context)

        fresh: list[Any] = []
        guard = FenceGuard(fence=fence, depends_on=depends_on,
                           replan=_noting(replan, fresh), recorder=recorder,
                           agent=agent or CALLING_AGENT.get() or "executor",
                           on_block="error", replicator=replicator)
        variables = getattr(context, "variables", None)
        where = variables if isinstance(roots, str) else context
        try:
            gated = await guard.arun(name, call, args, plan_roots(where, roots, args))
        except _ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(where, roots, list(fresh[-1].roots))
            return ToolErrorEvent.from_call(event, error=ActionBlocked(
                f"PlanFence blocked {name} (approval_changed): the plan changed and the "
                f"fresh call {json.dumps(ch.fresh, default=str)} is not the approved "
                f"{json.dumps(ch.approved, default=str)}; nothing ran. Call {name} again "
                "with the fresh arguments to ask the human again", action=name,
                reason="approval_changed"))
        if not gated.executed:
            return ToolErrorEvent.from_call(event, error=ActionBlocked(
                gated.message, action=name, reason=gated.result.final.reason.value))
        write_back(where, roots, gated, state_update)
        return gated.value

    return FunctionTool(tool.model, name=name, description=tool.schema.function.description,
                        schema=tool.schema.function.parameters,
                        middleware=[*approvals, gate, *rest])
