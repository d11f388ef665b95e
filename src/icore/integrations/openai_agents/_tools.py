"""Fenced OpenAI Agents SDK tools (planfence App. A.3 at a ``FunctionTool``).

:func:`fenced_function_tool` copies a ``FunctionTool`` (name, description, JSON schema,
strictness, guardrails kept) and replaces its ``on_invoke_tool``: L(a) comes from the run
context (``RunContextWrapper.context``: an attribute or mapping key, default
``plan_roots``) or a function of (context, arguments); a replan writes the fresh roots
back into the context; a blocked call returns the reason as the tool's output, which the
SDK sends to the model as the call's result (the SDK's documented way for a tool to
report an error), or, with ``on_block="raise"``, raises :class:`AgentsActionBlocked`: an
:class:`~icore.errors.ActionBlocked` that is also the SDK's ``AgentsException``, so
``Runner.run`` lets it out as it is (the SDK wraps any other tool exception in its
``UserError``) and ``except ActionBlocked`` catches it around ``Runner.run``.

Human approval (the SDK's ``needs_approval``, ``RunState.approve``): an approval covers
the arguments of the approved call. If the gate's one replan changes them (the plan's
inputs changed while the human decided), the changed call does not run: the model is told
the old and new arguments (or :class:`AgentsActionBlocked` is raised), the fresh plan is
written back, and the model's next call with the fresh arguments goes to the human again.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from typing import Any

from agents import FunctionTool, function_tool
from agents.exceptions import AgentsException
from agents.tool_context import ToolContext

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import Fence, Replan, ReplanRequest
from icore.integrations import AnyReplanner, FenceGuard, OnBlock, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)


class AgentsActionBlocked(ActionBlocked, AgentsException):
    """A fenced call was blocked and ``on_block="raise"``: leaves ``Runner.run`` as is.

    An :class:`~icore.errors.ActionBlocked` (fields ``action``, ``reason``, ``detail``)
    that is also the SDK's ``AgentsException``: the SDK re-raises its own exceptions
    from a tool unchanged and wraps every other one in ``UserError``.
    """


class _ApprovalChanged(Exception):
    def __init__(self, approved: dict[str, Any], fresh: dict[str, Any]) -> None:
        super().__init__("changed after approval")
        self.approved, self.fresh = approved, fresh


def _canon(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


def _noting(replan: AnyReplanner | None, fresh: list[Replan]) -> AnyReplanner | None:
    if replan is None:
        return None
    inner = replan
    if inspect.iscoroutinefunction(inner):
        async def anoted(rq: ReplanRequest) -> Replan:
            got: Replan = await inner(rq)
            fresh.append(got)
            return got

        return anoted

    def noted(rq: ReplanRequest) -> Replan:
        got = inner(rq)
        fresh.append(got)  # type: ignore[arg-type]
        return got  # type: ignore[return-value]

    return noted


def _approved(tool: FunctionTool, ctx: ToolContext[Any]) -> bool:
    """Whether this call ran through the SDK's human approval."""
    if tool.needs_approval is False:
        return False
    if tool.needs_approval is True:
        return True
    return ctx.is_tool_approved(tool.name, ctx.tool_call_id) is True


def fenced_function_tool(tool: FunctionTool | Callable[..., Any], *, fence: Fence,
                         depends_on: _Scope, roots: ContextRoots = "plan_roots",
                         replan: AnyReplanner | None = None,
                         recorder: RunRecorder | None = None, agent: str = "executor",
                         on_block: OnBlock = "error",
                         state_update: StateUpdate | None = None,
                         replicator: Replicator | None = None) -> FunctionTool:
    """Wrap an Agents SDK tool so every call passes the PlanFence gate.

    Args:
        tool: a ``FunctionTool`` (``@function_tool``, sync or ``async def``) or a plain
            function (wrapped with ``function_tool`` first).
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a).
        roots: where L(a) comes from in the run context (attribute or key; default
            ``"plan_roots"``), or ``f(context, args)``.
        replan: the one replan (sync or ``async def``).
        recorder: records gate decisions, the replan and the call.
        agent: the agent id events are attributed to.
        on_block: ``"error"`` (the reason is the tool's output) or ``"raise"``
            (:class:`AgentsActionBlocked` out of ``Runner.run``).
        state_update: after a replan, more context updates (the fresh roots are written to
            the ``roots`` attribute / key anyway).
        replicator: names keys, not record ids, in a block's message.

    Returns:
        A ``FunctionTool`` the model sees exactly as the original.

    Raises:
        IntegrationError: ``tool`` is neither a ``FunctionTool`` nor a function, or
            ``on_block`` is neither ``"error"`` nor ``"raise"``.
    """
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_function_tool needs a FunctionTool or a function",
                                   framework="openai_agents", got=type(tool).__name__)
        tool = function_tool(tool)
    base = tool
    if on_block not in ("error", "raise"):
        raise IntegrationError("on_block must be 'error' or 'raise'", on_block=on_block,
                               framework="openai_agents", tool=base.name)
    FenceGuard(fence=fence, depends_on=depends_on, recorder=recorder).claim(base.name)

    def blocked(message: str, reason: str, detail: str = "") -> str:
        if on_block == "raise":
            raise AgentsActionBlocked(message, action=base.name, reason=reason,
                                      detail=detail)
        return message

    async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        try:
            args = json.loads(input_json or "{}")
        except json.JSONDecodeError as exc:
            return f"invalid JSON arguments for {base.name}: {exc.msg}"
        if not isinstance(args, dict):
            return f"the arguments of {base.name} must be a JSON object"
        context = ctx.context
        approved = _canon(args) if _approved(base, ctx) else None

        async def call(**a: Any) -> Any:
            if approved is not None and _canon(a) != approved:
                raise _ApprovalChanged(args, a)
            return await base.on_invoke_tool(ctx, json.dumps(a))

        fresh: list[Replan] = []
        guard = FenceGuard(fence=fence, depends_on=depends_on, replan=_noting(replan, fresh),
                           recorder=recorder, agent=agent, on_block="error",
                           replicator=replicator)
        try:
            gated = await guard.arun(base.name, call, args, plan_roots(context, roots, args))
        except _ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(context, roots, list(fresh[-1].roots))
            return blocked(
                f"PlanFence blocked {base.name} (approval_changed): the plan changed and "
                f"the fresh call {json.dumps(ch.fresh, default=str)} is not the approved "
                f"{json.dumps(ch.approved, default=str)}; nothing ran. Call {base.name} "
                "again with the fresh arguments to ask the human again", "approval_changed")
        if not gated.executed:
            res = gated.result
            return blocked(gated.message, res.final.reason.value, res.detail)
        write_back(context, roots, gated, state_update)
        return gated.value

    wrapped = copy.copy(base)
    wrapped.on_invoke_tool = invoke
    return wrapped
