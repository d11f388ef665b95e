"""Fenced OpenAI Agents SDK tools (planfence App. A.3 at a ``FunctionTool``).

:func:`fenced_function_tool` copies a ``FunctionTool`` (name, description, JSON schema,
strictness, guardrails, approval policy kept) and replaces its ``on_invoke_tool``.

High-level (``agent=`` a :class:`~icore.workspace.Agent` of a
:class:`~icore.workspace.Workspace`): the model's own call is the plan. Its action record
is derived from the versions of D(a) that agent read and bound to the model's JSON
arguments, normalised through the tool function's signature (defaults applied, dates,
UUIDs, enums, nested models to JSON); calls of one model response share the reads that
response was produced from (each its own root); a stale call is refused with the fresh
values as the tool's output, and the model's next call from them is the one replan.

Low-level (``fence=``): L(a) comes from the run
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
import weakref
from collections.abc import Callable
from typing import Any

from agents import FunctionTool, function_tool
from agents.exceptions import AgentsException
from agents.tool_context import ToolContext

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import Fence, Replan, ReplanRequest
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    OnBlock,
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
from icore.integrations.openai_agents._tracing import ACTIVE_RECORDER
from icore.workspace import Agent as TeamAgent
from icore.workspace import ApprovalRequest, UserReplanner


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


class _Turns:
    """Model turns of each run, counted per run (its ``Usage`` object).

    The SDK asks a tool's ``is_enabled`` when it lists the tools for a model call (never
    while the tool calls of a response run), so the count names the response a call
    came from.
    """

    MAX = 1024

    def __init__(self) -> None:
        self.count: dict[int, tuple[weakref.ref[Any], int]] = {}
        self.latest: tuple[int, int] | None = None

    def _n(self, usage: Any) -> int:
        got = self.count.get(id(usage))
        return got[1] if got is not None and got[0]() is usage else 0

    def bump(self, wrapper: Any) -> None:
        """One more model call of the run whose ``RunContextWrapper`` is ``wrapper``."""
        usage = getattr(wrapper, "usage", None)
        if usage is None:
            return
        n = self._n(usage) + 1
        self.count[id(usage)] = (weakref.ref(usage), n)
        self.latest = (id(usage), n)  # reads by tools from now on belong to this turn
        while len(self.count) > self.MAX:
            self.count.pop(next(iter(self.count)))

    def key(self, ctx: ToolContext[Any]) -> tuple[int, int] | None:
        """The turn of a tool call: (run, model call), None when no count is known."""
        n = self._n(ctx.usage)
        return (id(ctx.usage), n) if n else None


def _normalizer(tool: FunctionTool) -> Callable[[Any], dict[str, Any]]:
    """The normal form of the tool's arguments.

    Through the wrapped function's signature (run-context parameters left out), else the
    model's JSON as it is.
    """
    try:
        fn = tool.__wrapped__
    except AttributeError:
        return lambda args: dict(args)
    props = tool.params_json_schema.get("properties") or {}
    sig = check_tool_function(fn, framework="openai_agents", tool=tool.name)
    skip = [p for p in sig.parameters if p not in props]
    check_tool_function(fn, framework="openai_agents", tool=tool.name, skip=skip)
    return ArgNormalizer.for_function(fn, name=tool.name, skip=skip,
                                      framework="openai_agents")


def _run_recorder(own: RunRecorder | None, name: str) -> RunRecorder | None:
    """``own``, else the recorder of the :func:`recording` block (the tool claimed)."""
    if own is not None:
        return own
    rec = ACTIVE_RECORDER.get()
    if rec is not None:
        rec.fenced_tools.add(name)
    return rec


def _changed(name: str, approved: Any, fresh: Any) -> str:
    return (f"PlanFence blocked {name} (approval_changed): the plan changed and the fresh "
            f"call {json.dumps(fresh, default=str)} is not the approved "
            f"{json.dumps(approved, default=str)}; nothing ran. Call {name} again with the "
            "fresh arguments to ask the human again")


def fenced_function_tool(tool: FunctionTool | Callable[..., Any], *,
                         agent: TeamAgent | str = "executor", depends_on: _Scope,
                         fence: Fence | None = None, roots: ContextRoots = "plan_roots",
                         replan: AnyReplanner | UserReplanner | None = None,
                         recorder: RunRecorder | None = None,
                         on_block: OnBlock = "error",
                         state_update: StateUpdate | None = None,
                         replicator: Replicator | None = None) -> FunctionTool:
    """Wrap an Agents SDK tool so every call passes the PlanFence gate.

    Args:
        tool: a ``FunctionTool`` (``@function_tool``, sync or ``async def``) or a plain
            function (wrapped with ``function_tool`` first).
        agent: high-level: the :class:`~icore.workspace.Agent` whose reads the calls
            derive from (``ws.agent("shipper")``). Low-level: the agent id events are
            attributed to.
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        fence: low-level only: the executor's :class:`~icore.fence.Fence`.
        roots: low-level only: where L(a) comes from in the run context (attribute or
            key; default ``"plan_roots"``), or ``f(context, args)``.
        replan: high-level: a :data:`~icore.workspace.UserReplanner` returning new
            arguments from the fresh values (default: the model gets the fresh values and
            its next call is the one replan). Low-level: the one replan (sync or
            ``async def``).
        recorder: records gate decisions, the replan and the call.
        on_block: ``"error"`` (the reason is the tool's output) or ``"raise"``
            (:class:`AgentsActionBlocked` out of ``Runner.run``).
        state_update: low-level: after a replan, more context updates (the fresh roots
            are written to the ``roots`` attribute / key anyway).
        replicator: low-level: names keys, not record ids, in a block's message.

    Returns:
        A ``FunctionTool`` the model sees exactly as the original.

    Raises:
        IntegrationError: ``tool`` is neither a ``FunctionTool`` nor a function; its
            function takes ``*args`` / ``**kwargs`` / positional-only parameters;
            ``on_block`` is neither ``"error"`` nor ``"raise"``; neither a workspace
            ``agent`` nor ``fence`` is given; ``depends_on`` is a str, empty or names
            facts no owner is declared for (each error names the fix).
    """
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_function_tool needs a FunctionTool or a function",
                                   framework="openai_agents", got=type(tool).__name__)
        check_tool_function(tool, framework="openai_agents",
                            skip=[p for p in _ctx_params(tool)])
        tool = function_tool(tool)
    base = tool
    if on_block not in ("error", "raise"):
        raise IntegrationError("on_block must be 'error' or 'raise'", on_block=on_block,
                               framework="openai_agents", tool=base.name)
    norm = _normalizer(base)
    team = agent if isinstance(agent, TeamAgent) else None
    if team is None and not isinstance(agent, str):
        raise IntegrationError("agent= must be a workspace agent (ws.agent('name')) or an "
                               "agent id", framework="openai_agents", tool=base.name,
                               got=type(agent).__name__)
    guard = FenceGuard(agent=agent, fence=fence, depends_on=depends_on,
                       replan=replan if team is not None else None, recorder=recorder)
    guard.claim(base.name)
    turns = _Turns()
    if team is not None:  # reads made by tools of a model call are stamped with its turn
        team.turn_source = lambda: turns.latest

    def blocked(message: str, reason: str, detail: str = "") -> str:
        if on_block == "raise":
            raise AgentsActionBlocked(message, action=base.name, reason=reason,
                                      detail=detail)
        return message

    def parse(input_json: str) -> dict[str, Any] | str:
        try:
            args = json.loads(input_json or "{}")
        except json.JSONDecodeError as exc:
            return f"invalid JSON arguments for {base.name}: {exc.msg}"
        if not isinstance(args, dict):
            return f"the arguments of {base.name} must be a JSON object"
        return args

    async def team_invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        args = parse(input_json)
        if isinstance(args, str):
            return args
        try:
            norm_args = norm(args)
        except IntegrationError as exc:
            return f"the arguments of {base.name} do not fit its schema: {exc}"
        approved = _canon(norm_args) if _approved(base, ctx) else None

        def approve(req: ApprovalRequest) -> bool:
            if approved is not None and _canon(dict(req.args)) != approved:
                raise _ApprovalChanged(norm_args, dict(req.args))
            return True

        async def call(**a: Any) -> Any:
            return await base.on_invoke_tool(ctx, json.dumps(a))

        try:
            gated = await guard.arun(base.name, call, norm_args, turn=turns.key(ctx),
                                     recorder=_run_recorder(recorder, base.name),
                                     normalize=norm, approve=approve)
        except _ApprovalChanged as ch:
            return blocked(_changed(base.name, ch.approved, ch.fresh), "approval_changed")
        if not gated.executed:
            detail = gated.call.detail if gated.call is not None else ""
            return blocked(gated.message, gated.reason, detail)
        return gated.value

    async def fence_invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        args = parse(input_json)
        if isinstance(args, str):
            return args
        context = ctx.context
        approved = _canon(args) if _approved(base, ctx) else None

        async def call(**a: Any) -> Any:
            if approved is not None and _canon(a) != approved:
                raise _ApprovalChanged(args, a)
            return await base.on_invoke_tool(ctx, json.dumps(a))

        fresh: list[Replan] = []
        per_call = FenceGuard(fence=guard.fence, depends_on=guard.depends_on,
                              replan=_noting(replan, fresh),  # type: ignore[arg-type]
                              recorder=_run_recorder(recorder, base.name), agent=guard.agent,
                              replicator=replicator)
        try:
            gated = await per_call.arun(base.name, call, args,
                                        plan_roots(context, roots, args))
        except _ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(context, roots, list(fresh[-1].roots))
            return blocked(_changed(base.name, ch.approved, ch.fresh), "approval_changed")
        if not gated.executed:
            res = gated.result
            return blocked(gated.message, gated.reason, res.detail if res else "")
        write_back(context, roots, gated, state_update)
        return gated.value

    wrapped = copy.copy(base)
    wrapped.on_invoke_tool = team_invoke if team is not None else fence_invoke
    enabled = base.is_enabled

    def is_enabled(wrapper: Any, owner: Any) -> Any:
        turns.bump(wrapper)
        return enabled(wrapper, owner) if callable(enabled) else enabled

    wrapped.is_enabled = is_enabled
    return wrapped


def _ctx_params(fn: Callable[..., Any]) -> list[str]:
    """Parameters the SDK injects (a first ``RunContextWrapper`` / ``ToolContext``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    if params and ("Context" in str(params[0].annotation) or params[0].name in ("ctx",
                                                                                "context")):
        return [params[0].name]
    return []
