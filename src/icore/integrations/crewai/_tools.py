"""A fenced CrewAI tool (planfence App. A.3 at a ``BaseTool``).

:func:`fenced_crewai_tool` returns a ``BaseTool`` with the wrapped tool's name,
description and ``args_schema``. L(a) comes from the crew's shared context (a mapping or
object: key / attribute ``plan_roots`` by default, e.g. a Flow's state) or a function of
(context, arguments); a replan writes the fresh roots back. A blocked call returns
CrewAI's ``ToolFailure`` (the tool's declared error result: the agent reads the reason,
the framework records a failed call and applies the ``tool_failure_policy``), or raises
:class:`~icore.errors.ActionBlocked` with ``on_block="raise"``.
"""

from __future__ import annotations

from typing import Any

from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure
from pydantic import PrivateAttr

from icore.errors import IntegrationError
from icore.fence import Fence
from icore.integrations import AnyReplanner, FenceGuard, Gated, OnBlock, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations._context import ContextRoots, StateUpdate, plan_roots, write_back


class FencedCrewTool(BaseTool):
    """A CrewAI tool whose calls pass the PlanFence gate (see :func:`fenced_crewai_tool`)."""

    _base: BaseTool = PrivateAttr()
    _guard: FenceGuard = PrivateAttr()
    _context: Any = PrivateAttr()
    _roots: ContextRoots = PrivateAttr()
    _state_update: StateUpdate | None = PrivateAttr(default=None)

    def _settle(self, gated: Gated) -> Any:
        if not gated.executed:
            return ToolFailure(message=gated.message, code=gated.reason,
                               retryable=False)
        write_back(self._context, self._roots, gated, self._state_update)
        return gated.value

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        """The gated call (CrewAI calls ``run`` -> ``_run`` with the validated arguments)."""
        if args:
            raise IntegrationError("fenced CrewAI tools take keyword arguments",
                                   framework="crewai", tool=self.name)
        base = self._base

        def call(**a: Any) -> Any:
            return base.run(**a)

        plan = plan_roots(self._context, self._roots, kwargs)
        return self._settle(self._guard.run(self.name, call, kwargs, plan))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        """The gated async call (the wrapped tool's ``arun`` if it has one)."""
        base = self._base

        async def call(**a: Any) -> Any:
            try:
                return await base.arun(**a)
            except NotImplementedError:
                return base.run(**a)

        plan = plan_roots(self._context, self._roots, kwargs)
        gated = await self._guard.arun(self.name, call, kwargs, plan)
        return self._settle(gated)


def fenced_crewai_tool(tool: BaseTool, *, fence: Fence, depends_on: _Scope, context: Any,
                       roots: ContextRoots = "plan_roots", replan: AnyReplanner | None = None,
                       recorder: RunRecorder | None = None, agent: str = "executor",
                       on_block: OnBlock = "error",
                       state_update: StateUpdate | None = None,
                       replicator: Replicator | None = None) -> FencedCrewTool:
    """Wrap a CrewAI ``BaseTool`` so every call passes the PlanFence gate.

    Args:
        tool: the CrewAI tool (``@tool`` or a ``BaseTool`` subclass).
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a).
        context: where the plan lives (a mapping or an object, e.g. a Flow state).
        roots: the context key / attribute holding L(a), or ``f(context, args)``.
        replan: the one replan (sync; ``async def`` only for ``arun``).
        recorder: records gate decisions, the replan and the call.
        agent: the agent id events are attributed to.
        on_block: ``"error"``: a ``ToolFailure`` result; ``"raise"``: ActionBlocked.
        state_update: after a replan, more context updates.
        replicator: names keys, not record ids, in a block's message.

    Returns:
        A :class:`FencedCrewTool` with the original name, description and schema.

    Raises:
        IntegrationError: ``tool`` is not a CrewAI ``BaseTool``.
    """
    if not isinstance(tool, BaseTool):
        raise IntegrationError("fenced_crewai_tool needs a CrewAI BaseTool",
                               framework="crewai", got=type(tool).__name__)
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block=on_block, replicator=replicator)
    guard.claim(tool.name)
    wrapped = FencedCrewTool(name=tool.name, description=tool.description,
                             args_schema=tool.args_schema,
                             result_as_answer=tool.result_as_answer)
    wrapped._base = tool
    wrapped._guard = guard
    wrapped._context = context
    wrapped._roots = roots
    wrapped._state_update = state_update
    return wrapped
