"""The framework-neutral core of every fenced tool (planfence Sec. 4, App. A.3).

A framework integration resolves the plan roots L(a) from its own state (LangGraph graph
state, an Agents SDK run context, an AG2 context variable, a CrewAI tool's context),
calls :meth:`FenceGuard.run` / :meth:`FenceGuard.arun` with the model's arguments, and
turns the returned :class:`Gated` into the framework's tool result or tool error. The
guard records every gate decision, the replan and the tool call in a
:class:`~icore.integrations.RunRecorder`, and phrases a block as a reason the model can
act on, with keys named (not 64-hex ids).

The PlanFence calls themselves go through :mod:`icore.integrations._fence_seam` (one small
internal module), the only place that touches the :class:`~icore.fence.Fence` API.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import ActionResult, AsyncReplanner, Fence, Reason, Replanner
from icore.integrations import _fence_seam
from icore.integrations._arg_problems import not_finite_call
from icore.integrations._recorder import RunRecorder, active_recorder
from icore.integrations._recorder_arg import check_recorder
from icore.integrations._refusals import refused_call, with_given_args
from icore.integrations._scope_once import ScopeOnce, one_call
from icore.integrations._tool_failed import body, check_fits, record_ran, unwrapped
from icore.integrations._wiring import Replicator
from icore.integrations._writes import Writes, aclaimed, claimed, static_keys
from icore.records import Lookup, RecordId
from icore.workspace import (
    APPROVAL_CHANGED,
    Agent,
    Approver,
    Call,
    ReplanFailed,
    UserReplanner,
    WorkspaceError,
)

_log = logging.getLogger("icore.integrations")

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
        result: the fence's :class:`~icore.fence.ActionResult` (None for a call an
            agent-mode guard refused before the gate, e.g. a fact it had not read).
        message: a blocked call's reason, phrased for the model (empty when executed).
        call: the agent-mode :class:`~icore.workspace.Call` (None in fence mode).
    """

    result: ActionResult | None
    message: str = ""
    call: Call | None = None

    @property
    def executed(self) -> bool:
        """Whether the tool ran."""
        if self.call is not None:
            return self.call.executed
        return self.result is not None and self.result.executed

    @property
    def value(self) -> Any:
        """What the tool returned (None when blocked)."""
        return self.result.value if self.result is not None else None

    @property
    def replanned(self) -> bool:
        """Whether a replan happened and the tool then ran with the fresh plan."""
        return self.result is not None and self.result.executed and self.result.replanned

    @property
    def roots(self) -> tuple[RecordId, ...]:
        """The roots the tool ran with (the fresh plan's after a replan)."""
        return self.result.roots if self.result is not None else ()

    @property
    def reason(self) -> str:
        """``valid`` when it ran, else why not (a gate reason or a workspace reason)."""
        if self.call is not None:
            return self.call.reason
        return self.result.final.reason.value if self.result is not None else "no_roots"

    @property
    def model_message(self) -> str:
        """What the model reads for a blocked call, in every framework.

        :attr:`message`, except that a call refused ``approval_changed`` is told exactly
        what differs from the approved request (the workspace call's detail).
        """
        call = self.call
        if call is not None and call.reason == APPROVAL_CHANGED and call.detail:
            return call.detail
        return self.message


def _args_hint(detail: str) -> str:
    """The hint for an ``args_mismatch`` block, from the fence's detail (the real cause)."""
    if "roots bind an action; exactly one must" in detail:
        return ("several plan roots bind an action; each call needs its own action record "
                "as its root (per-call roots)")
    if "root binds action" in detail:
        return "the plan authorizes another tool; call the tool the plan names"
    if "no root binds" in detail or "no readable root" in detail or "no lookup" in detail:
        return "no plan record authorizes this call; make a plan first"
    if "not JSON" in detail:
        return ("an argument has no JSON form (normalise the arguments through the "
                "tool's schema); do not retry it unchanged: a corrected call may be retried")
    if "digest" in detail:
        return "the fresh plan binds only an argument digest; the replanner must pass args"
    return _HINTS[Reason.ARGS_MISMATCH.value]


class FenceGuard:
    """Runs one framework tool's calls through the PlanFence gate.

    Two modes:

    * **agent mode** (``agent=`` a :class:`~icore.workspace.Agent`, the high-level API):
      each call's action record is built from the versions that agent read of D(a) and
      bound to the call's (normalised) arguments; no roots, no replanner needed (a stale
      call hands the model the fresh values and counts as the one replan);
    * **fence mode** (``fence=``, the low-level API): the plan roots L(a) come from the
      framework's state and must bind the call (``bind_action``).

    Args:
        fence: the executor's :class:`~icore.fence.Fence` (fence mode).
        depends_on: D(a) (:data:`Scope`); static keys are checked against the ownership
            map here.
        replan: fence mode: the one replan (sync, or ``async def`` for :meth:`arun`),
            without it a changed dependency blocks; agent mode: a
            :data:`~icore.workspace.UserReplanner` returning new arguments (default: hand
            the model the fresh values).
        recorder: receives gate decisions (with the records they cite), the replan and
            the tool call.
        agent: a :class:`~icore.workspace.Agent` (agent mode), or the agent id events are
            attributed to (fence mode; default: the agent whose model turn asked for the
            tool, as the recorder saw it, else ``"executor"``).
        on_block: ``"error"`` (the framework's tool error) or ``"raise"``
            (:class:`~icore.errors.ActionBlocked` escapes to the caller).
        replicator: names keys instead of record ids in a block's message.
        writes: the keys the tool's effect writes (keys, or a function of the call's
            arguments): a sibling call whose D(a) holds one waits until this call ends,
            then its gate check sees the new head (:mod:`icore.integrations._writes`).

    A broken replanner (it raises, or returns no arguments, arguments that do not fit the
    tool's schema, or - fence mode - something that is not a ``Replan``) is an
    application error: the call does not run, it is recorded as blocked, logged at ERROR
    on the ``icore.integrations`` logger, and :meth:`run` / :meth:`arun` raise
    :class:`~icore.workspace.ReplanFailed` chained to the replanner's exception.

    Raises:
        IntegrationError: ``recorder`` is not a :class:`RunRecorder` (a path: the fix
            names ``rec.write(path)``), or ``replicator`` not a Replicator; ``replan`` is given
            but not callable;
            ``on_block`` is neither ``"error"`` nor ``"raise"``; neither ``agent`` (a
            workspace agent) nor ``fence`` is given, or ``fence`` is not a Fence;
            ``depends_on`` is a str or a mapping, not a collection, holds a key that is no
            str (``[1, 2]``: never coerced), empty, or names keys no owner
            is declared for (the error names them and the fix); agent mode: a static key
            that was never written while a written key is close to it (a typo: ``did
            you mean ...?``; a :class:`~icore.workspace.WorkspaceError`); ``writes``
            holds a key that names no fact (a pattern, an empty key, a NUL or a lone
            surrogate: such a claim would guard nothing) or, agent mode, a key no owner
            is declared for (a ``WorkspaceError``). A ``writes`` function's own such key
            raises when the call is made.
    """

    def __init__(self, *, fence: Fence | None = None, depends_on: Scope,
                 replan: AnyReplanner | UserReplanner | None = None,
                 recorder: RunRecorder | None = None, agent: str | Agent | None = None,
                 on_block: OnBlock = "error", replicator: Replicator | None = None,
                 writes: Writes | None = None) -> None:
        if on_block not in ("error", "raise"):
            raise IntegrationError("on_block must be 'error' or 'raise'", on_block=on_block)
        self.handle: Agent | None = agent if isinstance(agent, Agent) else None
        if self.handle is not None:
            if fence is not None and fence is not self.handle.fence:
                raise IntegrationError("give agent= (a workspace agent) or fence=, not both",
                                       agent=self.handle.name)
            fence = self.handle.fence
        elif fence is None:
            raise IntegrationError(
                "a fenced tool needs agent= (a workspace agent: ws.agent('name')) or "
                "fence= (a Fence, the low-level API)",
                fix="fenced_tool(tool, agent=ws.agent('shipper'), depends_on={'order/42'})")
        elif not isinstance(fence, Fence):
            raise IntegrationError("fence= must be an icore.fence.Fence",
                                   got=type(fence).__name__)
        if agent is not None and (not isinstance(agent, str | Agent) or (
                isinstance(agent, str) and not agent)):
            raise IntegrationError("agent must be a workspace agent or a non-empty agent id",
                                   got=type(agent).__name__)
        check_recorder(recorder, where="recorder=", optional=True)
        if replicator is not None and not isinstance(replicator, Replicator):
            raise IntegrationError("replicator= must be an icore.integrations.Replicator or "
                                   "None", got=type(replicator).__name__)
        if replan is not None and not callable(replan):
            raise IntegrationError(
                "replan= must be a function: (Stale) -> the new call's arguments (the "
                "high-level API) or (ReplanRequest) -> Replan (fence=)",
                got=type(replan).__name__, fix="def replan(stale): return {...}; or leave "
                "replan out: the model gets the fresh values and decides again")
        keys = static_keys(depends_on, what="depends_on")
        if keys is not None:
            if not keys:
                raise IntegrationError("depends_on is empty: name the facts the tool's "
                                       "effect depends on", fix="depends_on={'order/42'}")
            if self.handle is not None:
                keys = self.handle.workspace.check_keys(keys, where="depends_on")
                self.handle.workspace.check_written(keys, where="depends_on")
            else:
                om = getattr(getattr(fence.validator, "context", None), "ownership", None)
                if om is None and fence.install is not None:
                    om = fence.install.ownership
                unowned = sorted(k for k in keys if not isinstance(k, str) or (
                    om is not None and om.owner_of(k) is None))
                if unowned:
                    raise IntegrationError("depends_on names keys no owner is declared for",
                                           keys=[str(k) for k in unowned],
                                           fix="add them to the ownership map")
            depends_on = keys
        elif not isinstance(depends_on, ScopeOnce):  # a per-call guard reuses its memo
            depends_on = ScopeOnce(depends_on)  # type: ignore[arg-type]  # callable here
        self.fence = fence
        self.depends_on = depends_on
        self.writes = writes if writes is None or callable(writes) else static_keys(
            writes, what="writes")
        if self.handle is not None and isinstance(self.writes, frozenset):
            # a key no owner is declared for is a typo: its claim would guard nothing
            self.handle.workspace.check_keys(self.writes, where="writes")
        self._tools = _fence_seam.Tools(depends_on)
        self.replan = replan
        self.recorder = recorder
        self.agent: str | None = (self.handle.name if self.handle is not None
                                  else str(agent) if agent is not None else None)
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
        if not res.roots:
            hint = _HINTS["no_roots"]
        elif reason == Reason.ARGS_MISMATCH.value:
            hint = _args_hint(detail)
        else:
            hint = _HINTS.get(reason, "the call was refused")
        return f"PlanFence blocked {name} ({reason}): {hint}. Detail: {detail}"

    def claim(self, name: str) -> None:
        """Tell the recorder that this guard records ``name``'s calls itself."""
        if self.recorder is not None:
            self.recorder.fenced_tools.add(name)

    def _lookup(self) -> Lookup | None:
        """Where the recorder reads the records a call's roots cite."""
        if self.fence.lookup is not None:
            return self.fence.lookup
        return self.fence.install.get if self.fence.install is not None else None

    def _recorder(self, name: str) -> RunRecorder | None:
        """``recorder=``, else the recording block's (:func:`active_recorder`).

        The block's recorder is told that this guard records ``name``'s calls, so the
        framework hooks skip them.
        """
        if self.recorder is not None:
            return self.recorder
        rec = active_recorder()
        if rec is not None:
            rec.fenced_tools.add(name)
        return rec

    def _body(self, name: str, fn: Callable[..., Any], recorder: RunRecorder | None
              ) -> Callable[..., Any]:
        """``fn`` caught, its decisions written to the recorder's file first (#25)."""
        return body(fn, recorder or self._recorder(name), name, self._lookup)

    def _finish(self, name: str, res: ActionResult,
                recorder: RunRecorder | None = None,
                failed: list[BaseException] | None = None,
                caller: str | None = None) -> Gated:
        rec = recorder if recorder is not None else self._recorder(name)
        if rec is not None:
            who = rec.gate(caller or self.agent, name, res, lookup=self._lookup())
            if res.executed:
                record_ran(rec, who, name, res.args, res.value, res.replanned)
        if res.executed:
            return Gated(unwrapped(res))
        broken = _fence_replan_failure(name, res, failed)
        if broken is not None:
            raise _loud(name, broken)
        msg = self.message(name, res)
        if self.on_block == "raise":
            raise ActionBlocked(msg, action=name, reason=res.final.reason.value,
                                detail=res.detail)
        return Gated(res, msg)

    def _finish_call(self, name: str, call: Call, recorder: RunRecorder | None = None,
                     call_id: Any = None, caller: str | None = None,
                     given: Mapping[str, Any] | None = None) -> Gated:
        self._record_call(name, with_given_args(call, given), recorder, call_id, caller)
        res = call.result
        if call.executed and res is not None:
            res = unwrapped(res)  # a failed tool: raised again once recorded
            return Gated(res, "", dataclasses.replace(call, value=res.value, result=res))
        msg = call.message
        if self.replicator is not None:
            msg = self.replicator.explain(msg)
        if self.on_block == "raise":
            raise ActionBlocked(msg, action=name, reason=call.reason, detail=call.detail)
        return Gated(res, msg, call)

    def _record_call(self, name: str, call: Call, recorder: RunRecorder | None,
                     call_id: Any = None, caller: str | None = None) -> None:
        res = call.result
        rec = recorder if recorder is not None else self._recorder(name)
        # the framework agent whose model turn asked for the call (by the call's id), not
        # the workspace agent serving it: a handoff's refusal and replan name who made them
        asker = caller or (rec.caller(name, call_id) if rec is not None and call_id is not None
                           else None)
        if rec is not None and res is not None:
            who = rec.gate(asker or self.agent, name, res, lookup=self._lookup(), args=call.args,
                           call_id=call_id,
                           owner=self.handle.name if self.handle is not None else None,
                           turn=call.turn, refused=None if call.executed or (
                               call.reason == res.final.reason.value) else call.reason)
            if call.executed:
                record_ran(rec, who, name, call.args, call.value, call.replanned)
        elif rec is not None:  # refused before the gate: a blocked protected action
            refused_call(rec, asker or self.agent or "executor", name, call.args,
                         f"BLOCKED: {call.reason}: {call.detail}", reason=call.reason,
                         detail=call.detail)

    def _failed_call(self, name: str, exc: ReplanFailed, recorder: RunRecorder | None,
                     call_id: Any = None, caller: str | None = None) -> ReplanFailed:
        """A broken user replanner: the blocked call recorded, the error logged."""
        if exc.call is not None:
            self._record_call(name, exc.call, recorder, call_id, caller)
        return _loud(name, exc)

    def _check_roots(self, roots: Sequence[RecordId] | None) -> tuple[RecordId, ...]:
        if isinstance(roots, str | bytes):
            raise IntegrationError("the plan roots are a str; L(a) is a list of record ids",
                                   got=str(roots)[:80], fix="store [record.id], not record.id")
        return tuple(roots or ())

    def _scope_checked(self, args: Mapping[str, Any]) -> None:
        """Agent mode, dynamic D(a): a setup mistake is raised, never told the model.

        The same checks as a static ``depends_on`` at wrap time: the function must run
        on the call's (normalised) arguments and return a collection of keys (not a
        str), each a declared fact (not a pattern); the error names the fix.
        """
        if self.handle is not None and callable(self.depends_on):
            try:
                keys = self.depends_on(args)
            except Exception as exc:
                names = ", ".join(sorted(args))
                fix = (f"read the call's arguments by the tool's parameter names: {names}"
                       if isinstance(exc, KeyError | TypeError | IndexError) else
                       f"the function's own error: fix it for arguments like these "
                       f"(its exception is this error's __cause__; parameters: {names})")
                raise WorkspaceError(
                    "the depends_on function failed on the call's arguments (an "
                    "application error)", error=f"{type(exc).__name__}: {exc}",
                    args=sorted(args), fix=fix) from exc
            if isinstance(keys, str | bytes):
                raise WorkspaceError(
                    "the depends_on function returned a str, not a collection of keys",
                    got=str(keys)[:80], fix=f"return a set: {{{str(keys)[:80]!r}}}")
            # a key made of the model's text is refused to the model by the agent
            self.handle.workspace.check_keys(keys, where="depends_on", args=args)

    def run(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
            roots: Sequence[RecordId] | None = None, *, turn: Any = None,
            normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
            approve: Approver | None = None, ask: Approver | None = None,
            recorder: RunRecorder | None = None, call_id: Any = None,
            caller: str | None = None, durable: str | None = None) -> Gated:
        """Gate one call of the sync tool ``fn(**args)``.

        Agent mode: ``args`` are the normalised arguments, ``roots`` is ignored, ``turn``
        names the model message the call came from, ``normalize`` normalises a user
        replanner's arguments, ``approve`` is a check asked right before an authorized
        call runs (no human waits there: :meth:`icore.workspace.Agent.execute`'s
        ``check``) and ``ask`` a human's decision, after which the gate validates the
        call again (``Agent.execute``'s ``approve``). Fence mode: the call must be the one
        ``roots`` authorize. ``recorder`` records this call when the guard has none (a
        run recorded by the framework's handler). ``call_id`` (the framework's tool-call
        id) attributes the recorded call to the agent whose model turn asked for it
        (:meth:`RunRecorder.caller`) rather than to the workspace agent; ``caller`` names
        that agent directly when the framework says who made the call (CrewAI's tool
        hook). ``durable`` (agent mode) names the call across a restart (the model's
        tool-call id): on a ``Workspace.sqlite`` folder its first attempt is kept on disk
        (:meth:`icore.workspace.Agent.execute`'s ``call_id``).

        Returns:
            :class:`Gated`; the tool ran only when ``executed``.

        Raises:
            ActionBlocked: blocked and ``on_block="raise"``.
            ReplanFailed: the replanner raised (chained) or returned no usable arguments;
                the call did not run (recorded as blocked, logged).
            IntegrationError: ``fn`` or the replanner is ``async def`` (use :meth:`arun`);
                the roots are a str; a dynamic D(a) fails, returns a str, a pattern or
                unowned keys (a :class:`~icore.workspace.WorkspaceError`).
            Exception: whatever the tool raises once authorized.
        """
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(self.replan):
            raise IntegrationError("an async tool or replanner needs arun()", tool=name)
        with one_call(), claimed(self.depends_on, self.writes, args, tool=name):
            return self._run(name, fn, args, roots, turn=turn, normalize=normalize,
                             approve=approve, ask=ask, recorder=recorder, call_id=call_id,
                             caller=caller, durable=durable)

    def _run(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
             roots: Sequence[RecordId] | None, *, turn: Any,
             normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
             approve: Approver | None, ask: Approver | None,
             recorder: RunRecorder | None, call_id: Any, caller: str | None,
             durable: str | None = None) -> Gated:
        if self.handle is not None:
            self._scope_checked(args)
            check_fits(name, fn, args)
            try:
                call = self.handle.execute(name, self._body(name, fn, recorder), args,
                                           depends_on=self.depends_on,
                                           replan=self.replan,  # type: ignore[arg-type]
                                           turn=turn, normalize=normalize, approve=ask,
                                           check=approve, call_id=durable)
            except ReplanFailed as exc:
                raise self._failed_call(name, exc, recorder, call_id, caller) from exc.__cause__
            return self._finish_call(name, call, recorder, call_id, caller, args)
        if (unfit := not_finite_call(name, args)) is not None:  # as in agent mode (#29)
            return self._finish_call(name, unfit, recorder, call_id, caller)
        failed: list[BaseException] = []
        res = _fence_seam.execute(self.fence, self._body(name, fn, recorder), name=name,
                                  depends_on=self.depends_on,
                            roots=self._check_roots(roots), args=args,
                            replan=_capturing(self.replan, failed),  # type: ignore[arg-type]
                            tools=self._tools)
        return self._finish(name, res, recorder, failed, caller)

    async def arun(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
                   roots: Sequence[RecordId] | None = None, *, turn: Any = None,
                   normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                   approve: Approver | None = None, ask: Approver | None = None,
                   recorder: RunRecorder | None = None, call_id: Any = None,
                   caller: str | None = None, durable: str | None = None) -> Gated:
        """Gate one call of ``fn(**args)`` (sync or ``async def``); see :meth:`run`."""
        with one_call():  # D(a) asked once for the whole call
            async with aclaimed(self.depends_on, self.writes, args, tool=name):
                return await self._arun(name, fn, args, roots, turn=turn,
                                        normalize=normalize, approve=approve, ask=ask,
                                        recorder=recorder, call_id=call_id, caller=caller,
                                        durable=durable)

    async def _arun(self, name: str, fn: Callable[..., Any], args: Mapping[str, Any],
                    roots: Sequence[RecordId] | None, *, turn: Any,
                    normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
                    approve: Approver | None, ask: Approver | None,
                    recorder: RunRecorder | None, call_id: Any, caller: str | None,
                    durable: str | None = None) -> Gated:
        if self.handle is not None:
            self._scope_checked(args)
            check_fits(name, fn, args)
            try:
                call = await self.handle.aexecute(
                    name, self._body(name, fn, recorder), args, depends_on=self.depends_on,
                    replan=self.replan,  # type: ignore[arg-type]
                    turn=turn, normalize=normalize, approve=ask, check=approve,
                    call_id=durable)
            except ReplanFailed as exc:
                raise self._failed_call(name, exc, recorder, call_id, caller) from exc.__cause__
            return self._finish_call(name, call, recorder, call_id, caller, args)
        if (unfit := not_finite_call(name, args)) is not None:
            return self._finish_call(name, unfit, recorder, call_id, caller)
        failed: list[BaseException] = []
        res = await _fence_seam.aexecute(self.fence, self._body(name, fn, recorder), name=name,
                                   depends_on=self.depends_on,
                                   roots=self._check_roots(roots), args=args,
                                   replan=_capturing(self.replan, failed),  # type: ignore[arg-type]
                                   tools=self._tools)
        return self._finish(name, res, recorder, failed, caller)


def _loud(name: str, exc: ReplanFailed) -> ReplanFailed:
    """Log a broken replanner at ERROR (``icore.integrations``); the error to raise."""
    _log.error("fenced tool %s: %s", name, exc)
    return exc


def _capturing(replan: Any, failed: list[BaseException]) -> Any:
    """Fence mode: ``replan``, noting what it raises in ``failed`` (then re-raising)."""
    if replan is None:
        return None
    inner = replan
    if inspect.iscoroutinefunction(inner):
        async def acaught(rq: Any) -> Any:
            try:
                return await inner(rq)
            except Exception as exc:
                failed.append(exc)
                raise

        return acaught

    def caught(rq: Any) -> Any:
        try:
            return inner(rq)
        except Exception as exc:
            failed.append(exc)
            raise

    return caught


def _fence_replan_failure(name: str, res: ActionResult,
                          failed: list[BaseException] | None) -> ReplanFailed | None:
    """Fence mode: the :class:`ReplanFailed` of a blocked call whose replanner broke."""
    if failed:
        cause = failed[-1]
        err = ReplanFailed("the replanner raised", action=name,
                           error=f"{type(cause).__name__}: {cause}"[:300],
                           fix="fix the replanner; a replanner that cannot plan returns "
                           "None (declines)")
        err.__cause__ = cause
        return err
    if res.detail.startswith("replan failed:"):
        return ReplanFailed("the replanner returned something other than a Replan",
                            action=name, error=res.detail,
                            fix="return Replan(roots=[fresh_root.id]) or None (declines)")
    return None
