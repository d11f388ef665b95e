"""A fenced CrewAI tool (planfence App. A.3 at a ``BaseTool``).

:func:`fenced_crewai_tool` returns a ``BaseTool`` with the wrapped tool's name,
description and ``args_schema``. A blocked call returns CrewAI's ``ToolFailure`` (the
tool's declared error result: the agent reads the reason, the framework records a failed
call and applies the ``tool_failure_policy``), or raises
:class:`~icore.errors.ActionBlocked` with ``on_block="raise"``.

High-level (``agent=`` a :class:`~icore.workspace.Agent` of a
:class:`~icore.workspace.Workspace`): the agent's own call is the plan. Its action record
is derived from the versions of D(a) that agent read and bound to the call's arguments in
normal form (CrewAI's validated values brought back to JSON through the tool's
``args_schema``: dates, UUIDs, enums, nested models, defaults applied); a stale call is
refused with the fresh values, and the agent's next call from them is the one replan.

Low-level (``fence=``, ``context=``): L(a) comes from the crew's shared context (a
mapping or object: key / attribute ``plan_roots`` by default, e.g. a Flow's state) or a
function of (context, arguments); a replan writes the fresh roots back. Arguments are
compared as the tool sees them. CrewAI validates the model's JSON through the tool's
``args_schema`` before the tool runs (typed values: ``date``, ``UUID``, nested models;
defaults filled in). The wrapper brings the call back to JSON through the same schema
(``model_dump(mode="json")``) and reads what the plan's roots bind for this tool through
it too: when the two agree, the call is the plan's call (its bound arguments go to the
gate, exactly as bound), so a plan that binds what the model sent, with or without the
defaulted parameters, is not refused as ``args_mismatch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure
from pydantic import BaseModel, PrivateAttr, ValidationError

from icore.errors import IntegrationError
from icore.fence import ACTION_FIELD, Fence
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
from icore.integrations._context import ContextRoots, StateUpdate, plan_roots, write_back
from icore.integrations.crewai._events import ACTIVE_RECORDER
from icore.workspace import Agent as TeamAgent
from icore.workspace import UserReplanner


class FencedCrewTool(BaseTool):
    """A CrewAI tool whose calls pass the PlanFence gate (see :func:`fenced_crewai_tool`)."""

    _base: BaseTool = PrivateAttr()
    _guard: FenceGuard = PrivateAttr()
    _context: Any = PrivateAttr()
    _roots: ContextRoots = PrivateAttr()
    _state_update: StateUpdate | None = PrivateAttr(default=None)
    _norm: ArgNormalizer | None = PrivateAttr(default=None)

    def _settle(self, gated: Gated) -> Any:
        if not gated.executed:
            return ToolFailure(message=gated.message, code=gated.reason,
                               retryable=False)
        if self._norm is None:
            write_back(self._context, self._roots, gated, self._state_update)
        return gated.value

    def _run_recorder(self) -> RunRecorder | None:
        """The guard's recorder, else the :func:`recording` block's (the tool claimed)."""
        if self._guard.recorder is not None:
            return None  # the guard records itself
        rec = ACTIVE_RECORDER.get()
        if rec is not None:
            rec.fenced_tools.add(self.name)
        return rec

    def _team_args(self, kwargs: Mapping[str, Any]) -> dict[str, Any] | ToolFailure:
        assert self._norm is not None
        try:
            return self._norm(kwargs)
        except IntegrationError as exc:
            return ToolFailure(message=f"the arguments of {self.name} do not fit its "
                               f"schema: {exc}", code="invalid_arguments", retryable=True)

    def _json(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``args`` through the tool's schema, as JSON (defaults filled in)."""
        schema = self.args_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel) and schema.model_fields:
            return schema.model_validate(dict(args)).model_dump(mode="json")
        return dict(args)

    def _as_planned(self, kwargs: Mapping[str, Any], roots: Sequence[str] | None
                    ) -> dict[str, Any]:
        """The call's arguments as the gate should see them (see the module docstring)."""
        call = self._json(kwargs)
        fence = self._guard.fence
        lookup = fence.lookup or (fence.install.get if fence.install is not None else None)
        for rid in roots or ():
            rec = lookup(rid) if lookup is not None else None
            content = rec.content if rec is not None else None
            body = content.get(ACTION_FIELD) if isinstance(content, dict) else None
            if not (isinstance(body, dict) and body.get("name") == self.name
                    and isinstance(body.get("args"), dict)):
                continue
            try:
                if self._json(body["args"]) == call:
                    return dict(body["args"])
            except ValidationError:
                continue
        return call

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        """The gated call (CrewAI calls ``run`` -> ``_run`` with the validated arguments)."""
        if args:
            raise IntegrationError("fenced CrewAI tools take keyword arguments",
                                   framework="crewai", tool=self.name)
        base = self._base

        def call(**a: Any) -> Any:
            return base.run(**a)

        if self._norm is not None:
            team_args = self._team_args(kwargs)
            if isinstance(team_args, ToolFailure):
                return team_args
            return self._settle(self._guard.run(self.name, call, team_args,
                                                normalize=self._norm,
                                                recorder=self._run_recorder()))
        plan = plan_roots(self._context, self._roots, kwargs)
        gated = self._guard.run(self.name, call, self._as_planned(kwargs, plan), plan,
                                recorder=self._run_recorder())
        return self._settle(gated)

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        """The gated async call (the wrapped tool's ``arun`` if it has one)."""
        if args:
            raise IntegrationError("fenced CrewAI tools take keyword arguments",
                                   framework="crewai", tool=self.name)
        base = self._base

        async def call(**a: Any) -> Any:
            try:
                return await base.arun(**a)
            except NotImplementedError:
                return base.run(**a)

        if self._norm is not None:
            team_args = self._team_args(kwargs)
            if isinstance(team_args, ToolFailure):
                return team_args
            return self._settle(await self._guard.arun(self.name, call, team_args,
                                                       normalize=self._norm,
                                                       recorder=self._run_recorder()))
        plan = plan_roots(self._context, self._roots, kwargs)
        gated = await self._guard.arun(self.name, call, self._as_planned(kwargs, plan), plan,
                                       recorder=self._run_recorder())
        return self._settle(gated)


def fenced_crewai_tool(tool: BaseTool, *, agent: TeamAgent | str = "executor",
                       depends_on: _Scope, fence: Fence | None = None, context: Any = None,
                       roots: ContextRoots = "plan_roots",
                       replan: AnyReplanner | UserReplanner | None = None,
                       recorder: RunRecorder | None = None, on_block: OnBlock = "error",
                       state_update: StateUpdate | None = None,
                       replicator: Replicator | None = None) -> FencedCrewTool:
    """Wrap a CrewAI ``BaseTool`` so every call passes the PlanFence gate.

    Args:
        tool: the CrewAI tool (``@tool`` or a ``BaseTool`` subclass).
        agent: high-level: the :class:`~icore.workspace.Agent` whose reads the calls
            derive from (``ws.agent("shipper")``). Low-level: the agent id events are
            attributed to.
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        fence: low-level only: the executor's :class:`~icore.fence.Fence`.
        context: low-level only: where the plan lives (a mapping or an object, e.g. a
            Flow state).
        roots: low-level only: the context key / attribute holding L(a), or
            ``f(context, args)``.
        replan: high-level: a :data:`~icore.workspace.UserReplanner` returning new
            arguments from the fresh values (default: the agent gets the fresh values and
            its next call is the one replan). Low-level: the one replan (sync; ``async
            def`` only for ``arun``).
        recorder: records gate decisions, the replan and the call.
        on_block: ``"error"``: a ``ToolFailure`` result; ``"raise"``: ActionBlocked.
        state_update: low-level: after a replan, more context updates.
        replicator: low-level: names keys, not record ids, in a block's message.

    Returns:
        A :class:`FencedCrewTool` with the original name, description and schema.

    Raises:
        IntegrationError: ``tool`` is not a CrewAI ``BaseTool``; its function takes
            ``*args`` / ``**kwargs`` / positional-only parameters; neither a workspace
            ``agent`` nor ``fence`` is given; ``depends_on`` is a str, empty or names facts
            no owner is declared for (each error names the fix).
    """
    if not isinstance(tool, BaseTool):
        raise IntegrationError("fenced_crewai_tool needs a CrewAI BaseTool",
                               framework="crewai", got=type(tool).__name__)
    func = getattr(tool, "func", None)
    if callable(func):
        check_tool_function(func, framework="crewai", tool=tool.name)
    team = agent if isinstance(agent, TeamAgent) else None
    if team is None and not isinstance(agent, str):
        raise IntegrationError("agent= must be a workspace agent (ws.agent('name')) or an "
                               "agent id", framework="crewai", tool=tool.name,
                               got=type(agent).__name__)
    guard = FenceGuard(agent=agent, fence=fence, depends_on=depends_on, replan=replan,
                       recorder=recorder, on_block=on_block, replicator=replicator)
    guard.claim(tool.name)
    wrapped = FencedCrewTool(name=tool.name, description=tool.description,
                             args_schema=tool.args_schema,
                             result_as_answer=tool.result_as_answer)
    wrapped._base = tool
    wrapped._guard = guard
    wrapped._context = context
    wrapped._roots = roots
    wrapped._state_update = state_update
    if team is not None:
        wrapped._norm = ArgNormalizer(tool.args_schema, name=tool.name, framework="crewai")
    return wrapped
