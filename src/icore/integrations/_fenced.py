"""The framework-neutral core of every fenced tool (planfence Sec. 4, App. A.3).

A framework integration resolves the plan roots L(a) from its own state (LangGraph graph
state, an Agents SDK run context, an AG2 context variable, a CrewAI tool's context),
calls :meth:`FenceGuard.run` / :meth:`FenceGuard.arun` with the model's arguments, and
turns the returned :class:`Gated` into the framework's tool result or tool error. The
guard records every gate decision, the replan and the tool call in a
:class:`~icore.integrations.RunRecorder`, and phrases a block as a reason the model can
act on, with keys named (not 64-hex ids).

The PlanFence calls themselves go through :mod:`icore.integrations._seam` (one small
internal module), the only place that touches the :class:`~icore.fence.Fence` API.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import ActionResult, AsyncReplanner, Fence, Reason, Replanner
from icore.integrations import _seam
from icore.integrations._memory import Replicator
from icore.integrations._recorder import RunRecorder
from icore.records import RecordId

Scope = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]
"""D(a): keys, or a function of the call's arguments returning them."""
AnyReplanner = Replanner | AsyncReplanner
"""A replanner, sync or ``async def`` (``arun`` awaits it; ``run`` needs a sync one).
Its :class:`~icore.fence.Replan` names the fresh plan's roots; the arguments that run are
the ones the fresh root binds (``bind_action``)."""
OnBlock = Literal["error", "raise"]

_HINTS: dict[str, str] = {
    Reason.STALE.value: "the plan's inputs changed; get a fresh plan before calling again",
    Reason.SECOND_CHANGE.value: "the plan's inputs changed again after the one replan; "
    "do not retry with this plan: report it or ask for a fresh plan",
    Reason.LINEAGE_INCOMPLETE.value: "a record the plan cites is missing from this "
    "agent's memory; it must be replicated here before the call can run",
    Reason.MISSING_BOUNDARY.value: "the plan does not cite a version of every key the "
    "tool depends on; plan again from the current records",
    Reason.FRONTIER_CONFLICT.value: "the plan cites two versions of one key; plan again "
    "from the current records",
    Reason.OWNER_UNAVAILABLE.value: "an owner of the plan's inputs did not answer; try "
    "again later",
    Reason.INCOMPLETE_DECLARATION.value: "the tool's dependency declaration is "
    "incomplete (an application error); do not retry",
    Reason.ARGS_MISMATCH.value: "the arguments differ from what the plan authorizes; call "
    "the tool with exactly the plan's arguments",
    "no_roots": "no plan authorizes this call yet; make a plan first",
}


@dataclass(frozen=True, slots=True)
class Gated:
    """What one fenced call did.

    Attributes:
        result: the fence's :class:`~icore.fence.ActionResult`.
        message: a blocked call's reason, phrased for the model (empty when executed).
    """

    result: ActionResult
    message: str = ""

    @property
    def executed(self) -> bool:
        """Whether the tool ran."""
        return self.result.executed

    @property
    def value(self) -> Any:
        """What the tool returned (None when blocked)."""
        return self.result.value

    @property
    def replanned(self) -> bool:
        """Whether the one replan happened and the tool then ran with the fresh plan."""
        return self.result.executed and self.result.replanned

    @property
    def roots(self) -> tuple[RecordId, ...]:
        """The roots the tool ran with (the fresh plan's after a replan)."""
        return self.result.roots


class FenceGuard:
    """Runs one framework tool's calls through the PlanFence gate.

    Args:
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a) (:data:`Scope`).
        replan: the one replan (sync, or ``async def`` for :meth:`arun`); without it a
            changed dependency blocks.
        recorder: receives gate decisions (with the records they cite), the replan and
            the tool call.
        agent: the agent id events are attributed to (default: the agent whose model
            turn asked for the tool, as the recorder saw it; else ``"executor"``).
        on_block: ``"error"`` (the framework's tool error) or ``"raise"``
            (:class:`~icore.errors.ActionBlocked` escapes to the caller).
        replicator: names keys instead of record ids in a block's message.

    Raises:
        IntegrationError: ``on_block`` is neither ``"error"`` nor ``"raise"``.
    """

    def __init__(self, *, fence: Fence, depends_on: Scope, replan: AnyReplanner | None = None,
                 recorder: RunRecorder | None = None, agent: str | None = None,
                 on_block: OnBlock = "error", replicator: Replicator | None = None) -> None:
        if on_block not in ("error", "raise"):
            raise IntegrationError("on_block must be 'error' or 'raise'", on_block=on_block)
        self.fence = fence
        self.depends_on = depends_on
        self.replan = replan
        self.recorder = recorder
        self.agent = agent
        self.on_block: OnBlock = on_block
        self.replicator = replicator

    def message(self, name: str, res: ActionResult) -> str:
        """A blocked call's reason for the model: what, why, and what to do."""
        reason = res.final.reason.value
        detail = res.detail or res.final.detail
        if self.replicator is not None:
            detail = self.replicator.explain(detail)
            if reason == Reason.LINEAGE_INCOMPLETE.value and self.fence.install is not None:
                miss = self.replicator.missing(self.fence.install, res.roots)
                if miss:
                    detail += f"; missing from this agent's replica: {', '.join(miss)}"
        hint = _HINTS["no_roots"] if not res.roots else _HINTS.get(reason,
                                                                  "the call was refused")
        return f"PlanFence blocked {name} ({reason}): {hint}. Detail: {detail}"

    def claim(self, name: str) -> None:
        """Tell the recorder that this guard records ``name``'s calls itself."""
        if self.recorder is not None:
            self.recorder.fenced_tools.add(name)

    def _finish(self, name: str, res: ActionResult) -> Gated:
        if self.recorder is not None:
            who = self.recorder.gate(self.agent, name, res, lookup=self.fence.lookup or (
                self.fence.install.get if self.fence.install is not None else None))
            if res.executed:
                self.recorder.tool_call(who, name, res.args, res.value,
                                        replanned=res.replanned)
        if res.executed:
            return Gated(res)
        msg = self.message(name, res)
        if self.on_block == "raise":
            raise ActionBlocked(msg, action=name, reason=res.final.reason.value,
                                detail=res.detail)
        return Gated(res, msg)

    def _check_roots(self, roots: Sequence[RecordId] | None) -> tuple[RecordId, ...]:
        return tuple(roots or ())

    def run(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
            roots: Sequence[RecordId] | None) -> Gated:
        """Gate one call of the sync tool ``fn(**args)`` authorized by ``roots``.

        Returns:
            :class:`Gated`; the tool ran only when ``executed``.

        Raises:
            ActionBlocked: blocked and ``on_block="raise"``.
            IntegrationError: ``fn`` or the replanner is ``async def`` (use :meth:`arun`).
            Exception: whatever the tool raises once authorized.
        """
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(self.replan):
            raise IntegrationError("an async tool or replanner needs arun()", tool=name)
        res = _seam.execute(self.fence, fn, name=name, depends_on=self.depends_on,
                            roots=self._check_roots(roots), args=args,
                            replan=self.replan)  # type: ignore[arg-type]  # sync, checked
        return self._finish(name, res)

    async def arun(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
                   roots: Sequence[RecordId] | None) -> Gated:
        """Gate one call of ``fn(**args)`` (sync or ``async def``); see :meth:`run`."""
        res = await _seam.aexecute(self.fence, fn, name=name, depends_on=self.depends_on,
                                   roots=self._check_roots(roots), args=args,
                                   replan=self.replan)
        return self._finish(name, res)
