"""A fenced CrewAI tool (planfence App. A.3 at a ``BaseTool``).

:func:`fenced_crewai_tool` returns a ``BaseTool`` with the wrapped tool's name,
description and ``args_schema``. A blocked call returns CrewAI's ``ToolFailure`` (the
tool's declared error result: the agent reads the reason, the framework records a failed
call and applies the ``tool_failure_policy``), or, with ``on_block="raise"``, raises
:class:`~icore.integrations.crewai.CrewActionBlocked` (an
:class:`~icore.errors.ActionBlocked`) out of ``kickoff()``.

High-level (``agent=`` a :class:`~icore.workspace.Agent` of a
:class:`~icore.workspace.Workspace`): the agent's own call is the plan. Its action record
is derived from the versions of D(a) that agent read *before the model message that
proposed the call* (the message's turn, see :mod:`icore.integrations.crewai._turns`) and
bound to the call's arguments in normal form (CrewAI's validated values brought back to
JSON through the tool's ``args_schema``: dates, UUIDs, enums, nested models, defaults
applied); a stale call is refused with the fresh values, and the agent's next call from
them is the one replan. ``approve=`` puts an authorized call to a human and validates it
again once they answered (:meth:`~icore.workspace.Agent.execute`). Setup mistakes found
at a call (a ``depends_on`` function failing on the arguments, naming facts nobody owns)
raise :class:`~icore.integrations.crewai.CrewSetupError` out of ``kickoff()``; the model
never sees them.

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

A fenced call is an action, never a lookup: CrewAI's tool cache is off for it (a cached
result would answer a later call without the gate).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from crewai import Agent as CrewAgent
from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure
from pydantic import BaseModel, PrivateAttr, ValidationError

from icore.errors import IntegrationError
from icore.fence import ACTION_FIELD, INVALID_ARGUMENTS, Fence
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    Gated,
    OnBlock,
    Replicator,
    RunRecorder,
    Writes,
)
from icore.integrations import Scope as _Scope
from icore.integrations._agent_error import agent_error
from icore.integrations._arg_problems import as_given, invalid_args_message
from icore.integrations._context import ContextRoots, StateUpdate, plan_roots, write_back
from icore.integrations._refusals import BEFORE_GATE_POLICY, refused_call
from icore.integrations._rerun import outcome_unknown, unknown_outcome_text
from icore.integrations._tool_failed import describe
from icore.integrations._turn_source import install_turn_source
from icore.integrations.crewai._attempts import (
    APPROVAL_FAILED,
    RETRY_UNKNOWN,
    ApprovalFailed,
    HumanAsk,
    UnknownAttempts,
    retry_message,
)
from icore.integrations.crewai._events import ACTIVE_RECORDER, asked_normal
from icore.integrations.crewai._setup import check_base_tool, probe_scope, schema_fields
from icore.integrations.crewai._turns import (
    CrewActionBlocked,
    CrewSetupError,
    UnknownTurn,
    call_link,
    call_said,
    call_turn,
    calling_agent,
    deliver,
    install_hooks,
    read_turn,
    restore_hooks,
    run_scope,
)
from icore.workspace import Agent as TeamAgent
from icore.workspace import Approver, UserReplanner


class _ToolRaised(Exception):
    """Carries an exception the wrapped tool raised past the gate (CrewAI handles it)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class OutcomeUnknown(Exception):
    """A fenced tool's started body raised (not ``NoEffect``): what CrewAI tells the model.

    CrewAI hands the model ``str()`` of what a tool raised ("Error executing tool: ...").
    With native tool calls it does not try the call again itself, so the model's next
    message may call it again, and the body may have made its effect before it raised: the
    model reads :func:`~icore.integrations._rerun.unknown_outcome_text` (it may have run,
    check its effect before calling again), chained from the tool's own exception, which
    the trace records (QA qa-new13b S3).
    """


def _never_cache(_args: Any = None, _result: Any = None) -> bool:
    return False


class FencedCrewTool(BaseTool):
    """A CrewAI tool whose calls pass the PlanFence gate (see :func:`fenced_crewai_tool`)."""

    _base: BaseTool = PrivateAttr()
    _guard: FenceGuard = PrivateAttr()
    _context: Any = PrivateAttr()
    _roots: ContextRoots = PrivateAttr()
    _state_update: StateUpdate | None = PrivateAttr(default=None)
    _norm: ArgNormalizer | None = PrivateAttr(default=None)
    _on_block: OnBlock = PrivateAttr(default="error")
    _approve: Approver | None = PrivateAttr(default=None)
    _name_caller: bool = PrivateAttr(default=True)
    _attempts: UnknownAttempts = PrivateAttr(default_factory=UnknownAttempts)

    def _settle(self, gated: Gated) -> Any:
        if not gated.executed:
            if self._on_block == "raise":
                detail = gated.call.detail if gated.call is not None else (
                    gated.result.detail if gated.result is not None else "")
                err = CrewActionBlocked(gated.message, action=self.name,
                                        reason=gated.reason, detail=detail)
                return deliver(err, message=gated.message, code=gated.reason)
            return ToolFailure(message=gated.message, code=gated.reason,
                               retryable=False)
        if self._norm is None:
            write_back(self._context, self._roots, gated, self._state_update)
        return gated.value

    def _setup_failed(self, exc: IntegrationError) -> ToolFailure:
        """A setup mistake found at this call: to the app, never to the model."""
        fields = {k: v for k, v in exc.fields.items() if k != "tool"}
        err = CrewSetupError(f"fenced tool {self.name}: {exc.message}", tool=self.name,
                             **fields)
        err.__cause__ = exc
        return deliver(err, message=f"the fenced tool {self.name} is misconfigured (an "
                       "application error, reported to the application); nothing ran. "
                       "Do not retry it.", code="setup_error")

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
        except IntegrationError as exc:  # named per argument and recorded as elsewhere
            said = invalid_args_message(self.name, self._norm.schema, kwargs,
                                        fallback=str(exc.fields.get("error") or exc))
            rec = self._run_recorder() or self._guard.recorder
            if rec is not None:
                refused_call(rec, (calling_agent() if self._name_caller else None)
                             or self._guard.agent or "executor", self.name,
                             as_given(kwargs), f"BLOCKED: {INVALID_ARGUMENTS}: {said}",
                             reason=INVALID_ARGUMENTS, detail=said)
            return ToolFailure(message=said, code=INVALID_ARGUMENTS, retryable=True)

    def _turn(self) -> Hashable | ToolFailure | None:
        """The model turn of this call (None outside a CrewAI run)."""
        try:
            return call_turn()
        except UnknownTurn as exc:
            return self._setup_failed(IntegrationError(
                "icore cannot tell which model message this call came from: the CrewAI "
                "agent's executor was built before icore's CrewAI hooks were installed",
                run=str(exc), fix="import icore.integrations.crewai (or call "
                "install_hooks()) before building the CrewAI Agent"))

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

    def _gate_call(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any]] | ToolFailure:
        """``(arguments for the gate, the guard's options)`` of this call, or a refusal.

        Agent mode: the normal-form arguments and the call's model turn; fence mode: the
        plan's roots from the context and the arguments as the plan binds them. Both: the
        CrewAI agent (role) that made the call, which the recorded call names.
        """
        if args:
            raise IntegrationError("fenced CrewAI tools take keyword arguments",
                                   framework="crewai", tool=self.name)
        restore_hooks(self.name)  # the app may have cleared CrewAI's global hooks
        caller = calling_agent() if self._name_caller else None
        if self._norm is None:
            plan = plan_roots(self._context, self._roots, kwargs)
            return self._as_planned(kwargs, plan), {"roots": plan, "caller": caller,
                                                    "recorder": self._run_recorder()}
        turn = self._turn()
        if isinstance(turn, ToolFailure):
            return turn
        team_args = self._team_args(kwargs)
        if isinstance(team_args, ToolFailure):
            return team_args
        rec = self._run_recorder()
        ask = None if self._approve is None else HumanAsk(
            self._approve, self.name, rec or self._guard.recorder,
            caller or self._guard.agent or "executor")
        link = call_link(self.name)  # the model's tool call this is (the audit joins them)
        if link is not None and (rec or self._guard.recorder) is not None:
            asked_normal(rec or self._guard.recorder, link, self._norm)  # type: ignore[arg-type]
        return team_args, {"turn": turn, "normalize": self._norm, "ask": ask,
                           "recorder": rec, "caller": caller, "call_id": link,
                           "durable": call_said()}

    def _refuse(self, spec: tuple[dict[str, Any], dict[str, Any]], reason: str,
                message: str, *, detail: str, policy: str = BEFORE_GATE_POLICY,
                cause: BaseException | None = None) -> ToolFailure:
        """Refuse this call without running it: recorded as a blocked protected action."""
        rec = spec[1].get("recorder") or self._guard.recorder
        if rec is not None:
            refused_call(rec, spec[1].get("caller") or self._guard.agent or "executor",
                         self.name, spec[0], f"BLOCKED: {reason}: {detail}", reason=reason,
                         policy=policy, detail=detail)
        if self._on_block == "raise":
            err = CrewActionBlocked(message, action=self.name, reason=reason, detail=detail)
            err.__cause__ = cause
            return deliver(err, message=message, code=reason)
        return ToolFailure(message=message, code=reason, retryable=False)

    def _again(self, spec: tuple[dict[str, Any], dict[str, Any]]) -> ToolFailure | None:
        """A refusal when this call failed with its outcome unknown in this model turn."""
        error = self._attempts.earlier(spec[1].get("turn"), spec[0])
        if error is None:
            return None
        return self._refuse(spec, RETRY_UNKNOWN, retry_message(self.name, error),
                            detail=f"the same call failed earlier in this model message "
                            f"with {error}; its outcome is unknown, not run again")

    def _failed(self, exc: Exception,
                spec: tuple[dict[str, Any], dict[str, Any]] | None = None) -> ToolFailure:
        """After an exception: the tool's own goes to CrewAI; a setup error to the app.

        A tool error that leaves the outcome unknown is remembered (:meth:`_again`); an
        ``approve=`` that raised refuses the call (recorded, nothing ran).

        Raises:
            OutcomeUnknown: the wrapped tool raised after its body started (not
                ``NoEffect``): CrewAI tells the model the outcome is unknown.
            Exception: what the wrapped tool raised otherwise (``NoEffect``), a
                :class:`CrewSetupError` as is, anything else unchanged.
        """
        if isinstance(exc, ApprovalFailed) and spec is not None:
            return self._refuse(spec, APPROVAL_FAILED, str(exc), policy="approval",
                                detail=f"the approve= callback raised "
                                f"{describe(exc.error)[:300]}", cause=exc.error)
        if isinstance(exc, _ToolRaised):
            if spec is not None:
                self._attempts.note(spec[1].get("turn"), spec[0], exc.error)
            if outcome_unknown(exc.error):
                raise OutcomeUnknown(unknown_outcome_text(
                    self.name, describe(exc.error)[:500])) from exc.error
            raise exc.error from None
        if isinstance(exc, IntegrationError) and not isinstance(exc, CrewSetupError):
            return self._setup_failed(exc)
        raise exc

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        """The gated call (CrewAI calls ``run`` -> ``_run`` with the validated arguments)."""
        base = self._base

        def call(**a: Any) -> Any:
            try:
                return base.run(**a)
            except Exception as exc:
                raise _ToolRaised(exc) from exc

        spec = None
        try:
            spec = self._gate_call(args, kwargs)
            if isinstance(spec, ToolFailure):
                return spec
            again = self._again(spec)
            if again is not None:
                return again
            gated = self._guard.run(self.name, call, spec[0], **spec[1])
        except Exception as exc:
            return self._failed(exc, spec if isinstance(spec, tuple) else None)
        return self._settle(gated)

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        """The gated async call (the wrapped tool's ``arun`` if it has one)."""
        base = self._base

        async def call(**a: Any) -> Any:
            try:
                try:
                    return await base.arun(**a)
                except NotImplementedError:
                    return base.run(**a)
            except Exception as exc:
                raise _ToolRaised(exc) from exc

        spec = None
        try:
            spec = self._gate_call(args, kwargs)
            if isinstance(spec, ToolFailure):
                return spec
            again = self._again(spec)
            if again is not None:
                return again
            gated = await self._guard.arun(self.name, call, spec[0], **spec[1])
        except Exception as exc:
            return self._failed(exc, spec if isinstance(spec, tuple) else None)
        return self._settle(gated)


def _stamp_reads(team: TeamAgent) -> None:
    """Reads of ``team`` made by a CrewAI tool belong to that tool call's model turn.

    And to its CrewAI run's scope (:func:`~._turns.run_scope`): two crews running at once
    on one agent handle never pool their reads (QA qa-crew S1).
    """
    team.detect_scope(run_scope)
    install_turn_source(team, read_turn, "icore_crewai")


def fenced_crewai_tool(tool: BaseTool, *, agent: TeamAgent | str = "executor",
                       depends_on: _Scope, fence: Fence | None = None, context: Any = None,
                       roots: ContextRoots = "plan_roots",
                       replan: AnyReplanner | UserReplanner | None = None,
                       recorder: RunRecorder | None = None, on_block: OnBlock = "error",
                       state_update: StateUpdate | None = None,
                       replicator: Replicator | None = None,
                       approve: Approver | None = None,
                       writes: Writes | None = None) -> FencedCrewTool:
    """Wrap a CrewAI ``BaseTool`` so every call passes the PlanFence gate.

    Args:
        tool: the CrewAI tool (``@tool`` or a ``BaseTool`` subclass).
        agent: high-level: the :class:`~icore.workspace.Agent` whose reads the calls
            derive from (``ws.agent("shipper")``); recorded events name the CrewAI agent
            (its ``role``) that made each call. Low-level: the agent id events are
            attributed to (default: the calling CrewAI agent's role).
        depends_on: D(a): keys, or a function of the call's arguments returning them
            (probed once when wrapped, see :func:`~._setup.probe_scope`).
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
        on_block: ``"error"``: a ``ToolFailure`` result the agent reads; ``"raise"``:
            :class:`~icore.integrations.crewai.CrewActionBlocked` (an ``ActionBlocked``)
            out of ``kickoff()`` (or out of ``run()`` called directly).
        state_update: low-level: after a replan, more context updates.
        replicator: low-level: names keys, not record ids, in a block's message.
        writes: the keys the tool's effect writes (keys, or a function of the call's
            arguments): a sibling call of one model message whose ``depends_on`` holds
            one waits until this call ends, then is validated against the new head (a
            read-modify-write tool never acts twice on one version; docs/workspace.md).
        approve: high-level: ``approve(ApprovalRequest) -> bool``, a human's decision on
            an authorized call (its arguments and the versions it derives from); the
            call is validated again after the answer and runs only if still authorized
            and approved (a change meanwhile hands the model the fresh values; its next
            call is put to the human again).

    Returns:
        A :class:`FencedCrewTool` with the original name, description and schema.

    Raises:
        IntegrationError: ``tool`` is not a CrewAI ``BaseTool`` or is fenced already;
            its function (or, for a ``BaseTool`` subclass without schema fields, its
            ``_run``) takes ``*args`` / ``**kwargs`` / positional-only parameters; neither
            a workspace ``agent`` nor
            ``fence`` is given; ``on_block`` is neither ``"error"`` nor ``"raise"``;
            ``approve`` is not callable or given without a workspace agent;
            ``depends_on`` is a str, empty or names facts no owner is declared for, or
            (a function) reads a parameter the tool does not have or returns a str
            (each error names the fix).
    """
    if not isinstance(tool, BaseTool):
        raise IntegrationError("fenced_crewai_tool needs a CrewAI BaseTool",
                               framework="crewai", got=type(tool).__name__)
    if isinstance(tool, FencedCrewTool):
        raise IntegrationError("the tool is fenced already: a second gate would validate "
                               "a second action record for one call", framework="crewai",
                               tool=tool.name, fix="wrap the original tool once")
    check_base_tool(tool)
    team = agent if isinstance(agent, TeamAgent) else None
    if team is None and (fence is None or not isinstance(agent, str)):
        raise agent_error(agent, tool=tool.name, fence=fence, framework="crewai",
                          wrapper="fenced_crewai_tool", native=isinstance(agent, CrewAgent),
                          native_kind="a CrewAI Agent")
    if on_block not in ("error", "raise"):
        raise IntegrationError("on_block must be 'error' or 'raise'", framework="crewai",
                               tool=tool.name, on_block=on_block)
    if approve is not None and (team is None or not callable(approve)):
        raise IntegrationError("approve= needs a workspace agent= and a callable "
                               "approve(request) -> bool", framework="crewai",
                               tool=tool.name, got=type(approve).__name__)
    guard = FenceGuard(agent=agent, fence=fence, depends_on=depends_on, replan=replan,
                       recorder=recorder, on_block="error", replicator=replicator,
                       writes=writes)
    if team is not None and callable(depends_on):
        probe_scope(depends_on, schema_fields(tool), team.workspace.ownership,
                    tool=tool.name)
    guard.claim(tool.name)
    install_hooks()
    wrapped = FencedCrewTool(name=tool.name, description=tool.description,
                             args_schema=tool.args_schema,
                             result_as_answer=tool.result_as_answer,
                             cache_function=_never_cache)
    wrapped._base = tool
    wrapped._guard = guard
    wrapped._context = context
    wrapped._roots = roots
    wrapped._state_update = state_update
    wrapped._on_block = on_block
    wrapped._approve = approve
    wrapped._name_caller = team is not None or agent == "executor"
    if team is not None:
        wrapped._norm = ArgNormalizer(tool.args_schema, name=tool.name, framework="crewai")
        _stamp_reads(team)
    return wrapped
