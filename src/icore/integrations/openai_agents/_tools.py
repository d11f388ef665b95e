"""Fenced OpenAI Agents SDK tools (planfence App. A.3 at a ``FunctionTool``).

:func:`fenced_function_tool` copies a ``FunctionTool`` (name, description, JSON schema,
strictness, guardrails kept) and replaces its ``on_invoke_tool``: L(a) comes from the run
context (``RunContextWrapper.context``: an attribute or mapping key, default
``plan_roots``) or a function of (context, arguments); a replan writes the fresh roots
back into the context; a blocked call returns the reason as the tool's output, which the
SDK sends to the model as the call's result (the SDK's documented way for a tool to
report an error), or raises :class:`~icore.errors.ActionBlocked` with ``on_block="raise"``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext

from icore.errors import IntegrationError
from icore.fence import Fence
from icore.integrations import AnyReplanner, FenceGuard, OnBlock, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations._context import ContextRoots, StateUpdate, plan_roots, write_back


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
        on_block: ``"error"`` (the reason is the tool's output) or ``"raise"``.
        state_update: after a replan, more context updates (the fresh roots are written to
            the ``roots`` attribute / key anyway).
        replicator: names keys, not record ids, in a block's message.

    Returns:
        A ``FunctionTool`` the model sees exactly as the original.

    Raises:
        IntegrationError: ``tool`` is neither a ``FunctionTool`` nor a function.
    """
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_function_tool needs a FunctionTool or a function",
                                   framework="openai_agents", got=type(tool).__name__)
        tool = function_tool(tool)
    base = tool
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block=on_block, replicator=replicator)
    guard.claim(base.name)

    async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        try:
            args = json.loads(input_json or "{}")
        except json.JSONDecodeError as exc:
            return f"invalid JSON arguments for {base.name}: {exc.msg}"
        if not isinstance(args, dict):
            return f"the arguments of {base.name} must be a JSON object"
        context = ctx.context

        async def call(**a: Any) -> Any:
            return await base.on_invoke_tool(ctx, json.dumps(a))

        gated = await guard.arun(base.name, call, args, plan_roots(context, roots, args))
        if not gated.executed:
            return gated.message
        write_back(context, roots, gated, state_update)
        return gated.value

    wrapped = copy.copy(base)
    wrapped.on_invoke_tool = invoke
    return wrapped
