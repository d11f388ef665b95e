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

Low-level (``fence=``): L(a) comes from the run context (``RunContextWrapper.context``:
an attribute or mapping key, default ``plan_roots``) or a function of (context,
arguments); a replan writes the fresh roots back into the context; a blocked call
returns the reason as the tool's output, which the SDK sends to the model as the call's
result (the SDK's documented way for a tool to report an error), or, with
``on_block="raise"``, raises :class:`AgentsActionBlocked`: an
:class:`~icore.errors.ActionBlocked` that is also the SDK's ``AgentsException``, so
``Runner.run`` lets it out as it is (the SDK wraps any other tool exception in its
``UserError``) and ``except ActionBlocked`` catches it around ``Runner.run``. A setup
mistake found at a call (a dynamic ``depends_on`` naming undeclared facts, failing on
the call's arguments or returning a str) leaves ``Runner.run`` the same way: as its own
icore class (``WorkspaceError`` / ``IntegrationError``, :func:`agents_error`) that is
also an ``AgentsException``, chained to the original.

Human approval (the SDK's ``needs_approval``, ``RunState.approve``): an approval covers
the request put to the human, its :class:`~icore.workspace.ApprovalRequest` (arguments
and the versions of D(a) the call derives from), noted when the SDK asks the tool's
``needs_approval`` and kept per workspace agent and tool name (a tool built again for
each request finds it). A replanned call (the plan's inputs changed while the human
decided) is another request: it does not run, the model is told ``approval_changed``
and what differs (or :class:`AgentsActionBlocked` is raised), the fresh plan is written
back (``fence=``); recorded like any refused call. ``always_approve=True``: every call
of the tool approved. The human's answers: :mod:`._sdk_answers`.
One saved run state resumed twice (a retried "approve") runs an approved call once: a
later run of it gets the first run's result or refusal, recorded as a replay; one whose
first run is still going or ended with its outcome unknown is refused
``earlier_outcome_unknown`` (:mod:`~icore.integrations.openai_agents._resumes`). An
approval that came only with a saved state is refused and recorded as no human's.

Recording: gate events and the call name the SDK agent that called the tool (a fenced
tool shared by agents of a handoff), and inside a :func:`recording` block the tool is
claimed as soon as the SDK lists it, so the tracing processor never records the SDK's
function span of a call still waiting for its approval.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

from agents import AgentBase, FunctionTool, function_tool
from agents.exceptions import AgentsException
from agents.tool_context import ToolContext

from icore.errors import ActionBlocked, IcoreError, IntegrationError, StoreError
from icore.fence import Fence, Replan, ReplanRequest
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    OnBlock,
    Replicator,
    RunRecorder,
    Writes,
    check_tool_function,
)
from icore.integrations import Scope as _Scope
from icore.integrations._agent_error import agent_error
from icore.integrations._approvals import (
    ApprovalChanged,
    canon,
    changed,
    fence_changed,
    record_changed,
)
from icore.integrations._arg_normal import SCHEMA_ERRORS, schema_failed
from icore.integrations._arg_problems import invalid_args_message, refused_args
from icore.integrations._call_ledger import RAN, REFUSED, RETRY_UNKNOWN, UNKNOWN
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)
from icore.integrations._failed import Failed
from icore.integrations._json_args import read_json
from icore.integrations._recorder import active_recorder, line_fields
from icore.integrations._recorder_lines import asked_as
from icore.integrations._tool_failed import describe
from icore.integrations.openai_agents._resumes import (
    again_message,
    call_key,
    ledger_of,
    record_replay,
)
from icore.integrations.openai_agents._sdk_answers import (
    approval_line,
    kept_key,
    record_rejections,
    still_waiting,
    store_refused,
)
from icore.integrations.openai_agents._sdk_approvals import (
    NO_APPROVAL,
    always_approved,
    approved_call,
    asked_book,
    binding,
    kept_request,
    unasked_why,
    unread_after_approval,
    unwitnessed_message,
    used_elsewhere,
    witness_approvals,
    witnessed,
)
from icore.integrations.openai_agents._tool_run import (
    STARTED,
    Runs,
    invoked,
    noting_failures,
    raising,
)
from icore.integrations.openai_agents._trace_scope import sdk_run_scope
from icore.integrations.openai_agents._tracing import (
    ACTIVE_PROCESSOR,
    ACTIVE_RECORDER,
    check_traced,
)
from icore.workspace import (
    APPROVAL_CHANGED,
    NOT_READ,
    ApprovalRequest,
    CallRefused,
    UserReplanner,
)
from icore.workspace import Agent as TeamAgent


class AgentsActionBlocked(ActionBlocked, AgentsException):
    """A fenced call was blocked and ``on_block="raise"``: leaves ``Runner.run`` as is.

    An :class:`~icore.errors.ActionBlocked` (fields ``action``, ``reason``, ``detail``)
    that is also the SDK's ``AgentsException``: the SDK re-raises its own exceptions
    from a tool unchanged and wraps every other one in ``UserError``.
    """


_AGENTS_CLASSES: dict[type[IcoreError], type[Any]] = {}


def agents_error(exc: IcoreError) -> AgentsException:
    """``exc`` as an instance of its own class that is also the SDK's ``AgentsException``.

    The SDK lets its own exceptions out of ``Runner.run`` as they are and wraps every
    other tool exception in its ``UserError``; this copy (class ``Agents<Name>``, a
    subclass of ``type(exc)`` and ``AgentsException``; same message and fields) keeps
    ``except IntegrationError`` / ``except WorkspaceError`` working around ``Runner.run``.
    """
    if isinstance(exc, AgentsException):
        return exc
    cls = type(exc)
    sub = _AGENTS_CLASSES.get(cls)
    if sub is None:
        sub = type(f"Agents{cls.__name__}", (cls, AgentsException), {
            "__module__": __name__, "run_data": None,
            "__doc__": f"A {cls.__name__} that leaves Runner.run as it is."})
        _AGENTS_CLASSES[cls] = sub
    out = cast(AgentsException, BaseException.__new__(sub))
    out.args = exc.args
    out.__dict__.update(exc.__dict__)
    return out


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


class _Attempt:
    """What one run of a fenced call did: its tool body started; how it failed."""

    __slots__ = ("failed", "started")

    def __init__(self) -> None:
        self.started = False
        self.failed: Failed | None = None

    def ran(self, value: Any) -> Any:
        """Note the tool body's answer (a :class:`Failed` one kept) and return it."""
        if isinstance(value, Failed):
            self.failed = value
        return value


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


def fenced_function_tool(tool: FunctionTool | Callable[..., Any], *,
                         agent: TeamAgent | str = "executor", depends_on: _Scope,
                         fence: Fence | None = None, roots: ContextRoots = "plan_roots",
                         replan: AnyReplanner | UserReplanner | None = None,
                         recorder: RunRecorder | None = None,
                         on_block: OnBlock = "error",
                         state_update: StateUpdate | None = None,
                         replicator: Replicator | None = None,
                         writes: Writes | None = None) -> FunctionTool:
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
        writes: the keys the tool's effect writes (keys, or a function of the call's
            arguments): a sibling call of one model message whose ``depends_on`` holds
            one waits until this call ends, then is validated against the new head (a
            read-modify-write tool never acts twice on one version; docs/workspace.md).

    Returns:
        A ``FunctionTool`` the model sees exactly as the original.

    Raises:
        IntegrationError: ``tool`` is neither a ``FunctionTool`` nor a function, or is
            fenced already (a second gate would record one call twice); its
            function takes ``*args`` / ``**kwargs`` / positional-only parameters;
            ``on_block`` is neither ``"error"`` nor ``"raise"``; neither a workspace
            ``agent`` nor ``fence`` is given; ``depends_on`` is a str, empty or names
            facts no owner is declared for (each error names the fix). At a call, an
            icore error of the wrapper (e.g. a dynamic ``depends_on`` that fails on the
            call's arguments, returns a str or names undeclared facts: a
            ``WorkspaceError``) leaves ``Runner.run`` as an :func:`agents_error` copy.
    """
    if getattr(getattr(tool, "on_invoke_tool", None), _FENCED, False):
        raise IntegrationError("the tool is fenced already: a second gate would validate "
                               "a second action record for one call",
                               framework="openai_agents", tool=getattr(tool, "name", ""),
                               fix="wrap the original tool once")
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise IntegrationError("fenced_function_tool needs a FunctionTool or a function",
                                   framework="openai_agents", got=type(tool).__name__)
        check_tool_function(tool, framework="openai_agents",
                            skip=[p for p in _ctx_params(tool)])
        try:
            tool = function_tool(tool)
        except SCHEMA_ERRORS as exc:
            raise schema_failed(exc, framework="openai_agents",
                                tool=getattr(tool, "__name__", "")) from None
    base = tool
    if on_block not in ("error", "raise"):
        raise IntegrationError("on_block must be 'error' or 'raise'", on_block=on_block,
                               framework="openai_agents", tool=base.name)
    norm = _normalizer(base)
    team = agent if isinstance(agent, TeamAgent) else None
    runs = Runs(raising(base), noting_failures(base),
                team.read if team is not None else None)  # a lost write: fresh values
    if team is None and (fence is None or not isinstance(agent, str)):
        raise agent_error(agent, tool=base.name, fence=fence, framework="openai_agents",
                          wrapper="fenced_function_tool", native=isinstance(agent, AgentBase),
                          native_kind="an Agents SDK Agent")
    guard = FenceGuard(agent=agent, fence=fence, depends_on=depends_on, writes=writes,
                       replan=replan, recorder=recorder)  # checked when wrapped
    guard.claim(base.name)
    witness_approvals()  # an approval only a saved run state holds approves nothing (#29)
    turns = _Turns()
    asked: OrderedDict[Any, ApprovalRequest | None] = (
        asked_book(team, base.name) if team is not None else OrderedDict())
    """Tool-call id -> the request the human was asked (arguments and versions), kept per
    workspace agent and tool name: a tool built again finds it (QA qa-new15a S2)."""
    if team is not None:  # reads made by tools of a model call are stamped with its turn
        team.turn_source = lambda: turns.latest
        team.detect_scope(sdk_run_scope)  # and kept per run: another run's never count

    def blocked(message: str, reason: str, detail: str = "") -> str:
        if on_block == "raise":
            raise AgentsActionBlocked(message, action=base.name, reason=reason,
                                      detail=detail)
        return message

    def parse(input_json: str) -> dict[str, Any] | str:
        args, why = read_json(input_json)
        if why is not None:
            return f"invalid JSON arguments for {base.name}: {why}"
        if not isinstance(args, dict):
            return f"the arguments of {base.name} must be a JSON object"
        return args

    def caller_guard(ctx: ToolContext[Any]) -> FenceGuard:
        who = getattr(getattr(ctx, "agent", None), "name", None)
        if not isinstance(who, str) or not who or who == guard.agent:
            return guard
        per_call = copy.copy(guard)  # events name the SDK agent that called the tool
        per_call.agent = who
        return per_call

    def refused(ctx: ToolContext[Any], given: Any, said: str) -> str:
        """Arguments refused before the gate: a refused call in the recording too."""
        rec = guard.recorder or active_recorder()
        if rec is None:
            return said
        return refused_args(rec, caller_guard(ctx).agent or "agent", base.name, given, said)

    async def team_invoke(ctx: ToolContext[Any], input_json: str, attempt: _Attempt) -> Any:
        args = parse(input_json)
        if isinstance(args, str):
            return refused(ctx, input_json, args)
        try:
            norm_args = norm(args)
        except IntegrationError as exc:
            return refused(ctx, args, invalid_args_message(
                base.name, getattr(norm, "schema", None), args, fallback=str(exc)))
        wanted = (kept_request(team, asked, base.name, ctx.tool_call_id)  # type: ignore[arg-type]
                  if approved_call(base, ctx) and not always_approved(base, ctx)
                  else NO_APPROVAL)

        def approve(req: ApprovalRequest) -> bool:
            who = getattr(ctx, "agent", None)
            if wanted is not NO_APPROVAL and not witnessed(who, base.name, ctx.tool_call_id,
                                                           consume=True):
                raise CallRefused(APPROVAL_CHANGED, unwitnessed_message(
                    base.name, used=used_elsewhere(who, base.name, ctx.tool_call_id)))
            if wanted is NO_APPROVAL or (isinstance(wanted, ApprovalRequest)
                                         and wanted.id == req.id):
                return True
            if not isinstance(wanted, ApprovalRequest):
                raise CallRefused(APPROVAL_CHANGED, changed(
                    base.name, norm_args, req, None, unbound=unasked_why(base.name, wanted)))
            raise CallRefused(APPROVAL_CHANGED, changed(base.name, wanted.args, req, wanted))

        async def call(**a: Any) -> Any:
            attempt.started = True
            return attempt.ran(await invoked(base, runs, ctx, a))

        rec = _run_recorder(recorder, base.name)
        asked_as(rec, ctx.tool_call_id, norm)  # the model's call as the tool reads it
        gated = await caller_guard(ctx).arun(
            base.name, call, norm_args, turn=turns.key(ctx), recorder=rec, normalize=norm,
            approve=approve,
            durable=ctx.tool_call_id or None)  # the model's call, kept across a restart
        if not gated.executed:
            detail = gated.call.detail if gated.call is not None else ""
            message = gated.model_message
            if (wanted is not NO_APPROVAL and gated.call is not None
                    and gated.reason == NOT_READ
                    and any(v is not None for v in gated.call.fresh.values())):
                message = unread_after_approval(base.name, gated.call, team, ctx.tool_call_id)
            return blocked(message, gated.reason, detail)
        return gated.value

    async def fence_invoke(ctx: ToolContext[Any], input_json: str, attempt: _Attempt) -> Any:
        args = parse(input_json)
        if isinstance(args, str):
            return args
        context = ctx.context
        approved = canon(args) if approved_call(base, ctx) else None
        who = getattr(ctx, "agent", None)
        if approved is not None and not witnessed(who, base.name, ctx.tool_call_id,
                                                  consume=True):
            return blocked(unwitnessed_message(base.name, used=used_elsewhere(
                who, base.name, ctx.tool_call_id)), APPROVAL_CHANGED)

        async def call(**a: Any) -> Any:
            if approved is not None and (fresh or canon(a) != approved):
                raise ApprovalChanged(args, a)  # a replan is another request
            attempt.started = True
            return attempt.ran(await invoked(base, runs, ctx, a))

        fresh: list[Replan] = []
        rec = _run_recorder(recorder, base.name)
        per_call = FenceGuard(fence=guard.fence, depends_on=guard.depends_on,
                              replan=_noting(replan, fresh),  # type: ignore[arg-type]
                              recorder=rec, agent=guard.agent, replicator=replicator,
                              writes=guard.writes)
        given = plan_roots(context, roots, args)
        first = tuple(given) if isinstance(given, list | tuple) else ()
        try:
            gated = await per_call.arun(base.name, call, args, given)
        except ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(context, roots, list(fresh[-1].roots))
            message = fence_changed(base.name, ch.approved, ch.fresh)
            if rec is not None:  # recorded like any refused call
                record_changed(rec, per_call, base.name, first, fresh, ch.fresh, message,
                                caller_guard(ctx).agent)
            return blocked(message, APPROVAL_CHANGED)
        if not gated.executed:
            res = gated.result
            return blocked(gated.message, gated.reason, res.detail if res else "")
        write_back(context, roots, gated, state_update)
        return gated.value

    inner = team_invoke if team is not None else fence_invoke

    def noted(ctx: ToolContext[Any], input_json: str) -> None:
        """The recording block learns the call ran; a human's approval is recorded."""
        proc = ACTIVE_PROCESSOR.get()
        if proc is not None:
            check_traced(base.name)  # a recorded run the SDK does not trace: loud
            proc.invoked(ctx.tool_call_id, approved_call(base, ctx))
            still_waiting(proc, ctx, team, asked, base.name)  # a resume paused again
        rec = _run_recorder(recorder, base.name)
        if rec is not None and approved_call(base, ctx) and witnessed(getattr(
                ctx, "agent", None), base.name, ctx.tool_call_id):  # the human's yes
            want = kept_request(team, asked, base.name,  # type: ignore[arg-type]
                                ctx.tool_call_id)  # before the gate; a forged one: no one's
            approval_line(rec, caller_guard(ctx).agent or "executor", team, base.name,
                          ctx.tool_call_id, kept_key(team, base.name, ctx.tool_call_id),
                          input_json, want)

    ledger = ledger_of(team if team is not None else guard.fence, base.name)
    """Approved calls by :func:`call_key`: a saved run resumed twice runs each once."""

    def replayed(ctx: ToolContext[Any], args: dict[str, Any], earlier: Any) -> Any:
        """A call an earlier run of its saved state answered: that answer, not run again."""
        proc = ACTIVE_PROCESSOR.get()
        if proc is not None:
            proc.invoked(ctx.tool_call_id)
        # this run's approval is not taken: a run of the same call in flight uses it
        rec = _run_recorder(recorder, base.name)
        who = caller_guard(ctx).agent or "executor"
        if earlier.known:
            record_replay(rec, who, base.name, args, ctx.tool_call_id, earlier.value)
            return earlier.value
        said = again_message(base.name, ctx.tool_call_id, earlier)
        record_replay(rec, who, base.name, args, ctx.tool_call_id, said, RETRY_UNKNOWN)
        return blocked(said, RETRY_UNKNOWN)

    def settle(key: Any, attempt: _Attempt, value: Any) -> None:
        """How an approved call's run ended, for a later run of the same saved state."""
        failed = attempt.failed
        if not attempt.started:
            ledger.settle(key, REFUSED, value)  # the refusal, given again
        elif failed is not None and failed.may_have_run:
            ledger.settle(key, UNKNOWN, failed.error)
        else:
            ledger.settle(key, RAN, value)

    async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        STARTED.set(asyncio.get_running_loop().time())  # the SDK's timeout= counts from here
        try:
            args = parse(input_json)
            key = (call_key(ctx, args) if isinstance(args, dict) and approved_call(base, ctx)
                   else None)  # only an approved call is run again by a resume
            if key is not None:
                earlier = ledger.begin(key)
                if earlier is not None:
                    return replayed(ctx, args, earlier)  # type: ignore[arg-type]
            attempt = _Attempt()
            try:
                noted(ctx, input_json)
                with line_fields(call_id=getattr(ctx, "tool_call_id", None) or None):  # qa-new14
                    value = await inner(ctx, input_json, attempt)
            except BaseException as exc:  # raised: paused or refused (nothing ran), or it
                if key is not None:  # ran and its outcome is unknown
                    ledger.settle(key, UNKNOWN if attempt.started else None, describe(exc))
                raise
            if key is not None:
                settle(key, attempt, value)
            return value
        except AgentsException:
            raise
        except IcoreError as exc:  # ours, not the SDK's UserError around it
            if isinstance(exc, StoreError):  # the attempts file failed: nothing ran
                store_refused(_run_recorder(recorder, base.name), caller_guard(ctx).agent
                              or "executor", base.name, input_json, exc)
            raise agents_error(exc) from exc

    setattr(invoke, _FENCED, True)
    wrapped = copy.copy(base)
    wrapped.on_invoke_tool = invoke
    enabled = base.is_enabled

    def is_enabled(wrapper: Any, owner: Any) -> Any:
        turns.bump(wrapper)
        _run_recorder(recorder, base.name)  # claimed before any call waits for approval
        proc = ACTIVE_PROCESSOR.get()
        if base.needs_approval is not False:  # a human's "no", in the run it is given
            record_rejections(_run_recorder(recorder, base.name), wrapper, owner, base.name,
                              team, proc)
        return enabled(wrapper, owner) if callable(enabled) else enabled

    wrapped.is_enabled = is_enabled
    if team is not None and base.needs_approval is not False:
        wrapped.needs_approval = binding(base, team, guard, norm, turns.key, asked)
    return wrapped


_FENCED = "__icore_fenced__"
"""Marks the ``on_invoke_tool`` of a fenced tool (a second wrap is refused)."""


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
