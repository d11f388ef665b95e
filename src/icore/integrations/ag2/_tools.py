"""Fenced AG2 1.x tools (planfence App. A.3 in an ``ag2`` tool middleware).

:func:`fenced_tool` puts a tool middleware (``ag2.middleware.ToolMiddleware``, AG2's own
hook around one tool's execution) in front of an ``ag2.tool``. The gate sees the model's
own JSON arguments (the ``ToolCallEvent``'s ``arguments``), before AG2's pydantic
validation types them. A blocked call is the tool's error (a ``ToolErrorEvent`` carrying
:class:`~icore.errors.ActionBlocked`), which AG2 hands the model as that call's result.

High-level (``agent=`` a :class:`~icore.workspace.Agent` of a
:class:`~icore.workspace.Workspace`): the model's own tool call is the plan. Each call's
action record is derived from the versions of D(a) that agent read and bound to the
call's arguments, normalised through the tool's own signature (``date``, ``UUID``, enums,
nested models to JSON, defaults applied); calls of one model response share the reads
that response was produced from (each its own root); a stale call is refused with the
fresh values, and the model's next call from them is the one replan.

Low-level (``fence=``): L(a) comes from the conversation's ``context.variables`` (key
``plan_roots`` by default) or a function of (context, arguments); the plan must bind the
model's JSON; a replan writes the fresh roots back into ``context.variables``.

Human waits (planfence App. A.3 with a human in the loop): the gate is the innermost tool
middleware, right before the function body, so every human answer given before the tool
runs - AG2's ``approval_required()``, a user's own approval middleware, an agent
middleware asking with ``context.input`` - comes before the validation; a fact changed
while the human decided makes the call stale and it never runs. A call a human was asked
about covers exactly the arguments that reached the gate: a replan that changes them is
refused with the old and new arguments named (``approval_changed``), and the model's next
call with them is put to the human again. A question the tool body asks itself
(``await context.input(...)``) is followed by a second validation of the same action
record (:mod:`icore.integrations.ag2._human`): a change while the human decided stops the
body at the answer.
"""


from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
from collections.abc import Callable
from copy import copy
from typing import Any

from ag2 import Context
from ag2 import tool as ag2_tool
from ag2.events import ModelResponse, ToolCallEvent, ToolErrorEvent, ToolResult
from ag2.tools.types import FunctionTool
from pydantic import ValidationError

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import (
    DecisionLog,
    Fence,
    GateDecision,
    ProtectedTool,
    Reason,
    Replan,
    ReplanRequest,
)
from icore.integrations import (
    AnyReplanner,
    ArgNormalizer,
    FenceGuard,
    Replicator,
    RunRecorder,
    check_tool_function,
)
from icore.integrations import Scope as _Scope
from icore.integrations._approvals import (
    ApprovalChanged,
    canon,
    changed,
    fence_changed,
    record_changed,
)
from icore.integrations._arg_problems import invalid_args_message
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)
from icore.integrations.ag2._human import (
    AfterHuman,
    StoppedAfterHuman,
    Turns,
    Watch,
    always_granted,
    gated_context,
    reached_gate,
    was_asked,
)
from icore.workspace import (
    APPROVAL_CHANGED,
    REJECTED,
    ApprovalRequest,
    CallRefused,
    ReplanFailed,
    UserReplanner,
    running_call,
)
from icore.workspace import Agent as TeamAgent

_log = logging.getLogger("icore.integrations.ag2")

CALLING_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "icore_ag2_calling_agent", default=None)
"""The agent whose turn is running (set by :func:`~icore.integrations.ag2.record_agents`'
middleware), so gate events name the calling agent."""
CHAT_RECORDER: contextvars.ContextVar[RunRecorder | None] = contextvars.ContextVar(
    "icore_ag2_chat_recorder", default=None)
"""The recorder of a run recorded by :func:`~icore.integrations.ag2.record_agents`: a
fenced tool built without ``recorder=`` records its gate decisions and calls there."""


def _run_recorder(own: RunRecorder | None, name: str) -> RunRecorder | None:
    """``own``, else the recorder of the recorded run this call belongs to (claimed)."""
    if own is not None:
        return own
    rec = CHAT_RECORDER.get()
    if rec is not None:
        rec.fenced_tools.add(name)
    return rec


def _function_of(tool: FunctionTool) -> Callable[..., Any]:
    """The user's function behind an ag2 tool (ag2 wraps it in an async adapter)."""
    fn: Callable[..., Any] = inspect.unwrap(tool.model.call)
    return fn


def _normalizer(tool: FunctionTool) -> tuple[ArgNormalizer, bool]:
    """The tool's arguments in normal form, through its function's own signature.

    The parameters AG2 injects (absent from the model's JSON schema) are left out.

    Returns:
        The normaliser, and whether the function takes injected parameters (only then
        can its body reach AG2's context to ask a human).
    """
    fn = _function_of(tool)
    props = tool.schema.function.parameters.get("properties") or {}
    sig = check_tool_function(fn, framework="ag2", tool=tool.name)
    skip = [p for p in sig.parameters if p not in props]
    check_tool_function(fn, framework="ag2", tool=tool.name, skip=skip)
    norm = ArgNormalizer.for_function(fn, name=tool.name, skip=skip, framework="ag2")
    return norm, bool(skip)


class FencedTool(FunctionTool):
    """An ag2 ``FunctionTool`` whose calls pass the PlanFence gate (:func:`fenced_tool`).

    It listens to the agent's model responses (calls of one response are one turn: they
    share the reads the response was produced from; in the high-level API a call's
    dynamic ``depends_on`` is checked there, so a setup mistake leaves ``agent.ask``
    before any tool runs), and its outermost execution layer (:class:`Watch`, outside
    the agent's middleware) notes the human questions put for each call.
    """

    turns: Turns
    precheck: Callable[[ToolCallEvent], None] | None = None
    watch: Watch = Watch()

    def register(self, stack: Any, context: Any, *, middleware: Any = ()) -> None:
        """AG2's registration, plus the model-response listener and the watch layer."""
        turns, precheck, name = self.turns, self.precheck, self.name

        async def note(event: ModelResponse, context: Context) -> None:
            turns.note(event)
            if precheck is not None:
                for c in getattr(event.tool_calls, "calls", None) or []:
                    if c.name == name:
                        precheck(c)  # raises a setup mistake out of agent.ask

        stack.enter_context(context.stream.where(ModelResponse).sub_scope(note))
        # AG2 wraps each agent middleware around the tool's hooks, the last outermost
        layers: list[Any] = [*middleware, self.watch]
        super().register(stack, context, middleware=layers)


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


class _Result:
    """A tool's result event, with its text as ``content`` (what the recorder keeps)."""

    def __init__(self, event: Any) -> None:
        self.event = event
        if isinstance(event, ToolErrorEvent):
            self.content = f"Error: {type(event.error).__name__}: {event.error}"
        else:
            parts = getattr(getattr(event, "result", None), "parts", None) or []
            self.content = "\n".join(str(getattr(p, "content", p)) for p in parts)


def _error(event: ToolCallEvent, error: Exception, text: str) -> ToolErrorEvent:
    """A tool error whose text (what the model reads) is ``text``, without a traceback."""
    return ToolErrorEvent(parent_id=event.id, name=event.name, error=error,
                          result=ToolResult(text))


def _blocked(event: ToolCallEvent, message: str, name: str, reason: str) -> ToolErrorEvent:
    return ToolErrorEvent.from_call(event, error=ActionBlocked(message, action=name,
                                                               reason=reason))


def _invalid(event: ToolCallEvent, name: str, norm: ArgNormalizer, args: dict[str, Any],
             exc: IntegrationError) -> ToolErrorEvent:
    """The model's arguments do not fit the schema: which field and why (nothing ran)."""
    cause = exc.__context__  # the normaliser's pydantic error (raised "from None")
    error = cause if isinstance(cause, ValidationError) else exc
    return _error(event, error, invalid_args_message(name, norm.schema, args,
                                                     fallback=str(exc)))


def _setup_error(event: ToolCallEvent, name: str, exc: IntegrationError) -> ToolErrorEvent:
    """A setup mistake found only at the gate, logged for the developer.

    The model is told not to retry (no traceback, no paths). A broken replanner was
    logged once already, by the guard that caught it.
    """
    if not isinstance(exc, ReplanFailed):
        _log.error("fenced tool %s: %s", name, exc)
    return _error(event, exc, f"PlanFence could not check {name}: the application's "
                  "fence setup is wrong (an application error, reported to the developer); "
                  "nothing ran. Do not retry this call.")


def _stopped_message(name: str, d: GateDecision, fresh: dict[str, Any]) -> str:
    if d.reason is Reason.STALE and fresh:
        return (f"PlanFence blocked {name} (stale): {', '.join(sorted(fresh))} changed while "
                f"the human decided; the call stopped at the human's answer. Current "
                f"values: {json.dumps(fresh, sort_keys=True, default=str)}. Decide again "
                f"from these values and call {name} again.")
    return (f"PlanFence blocked {name} ({d.reason.value}): validated again after the "
            f"human's answer, the call is no longer authorized; it stopped at the answer. "
            f"Detail: {d.detail}")


def _model_args(event: ToolCallEvent, name: str) -> dict[str, Any] | ToolErrorEvent:
    try:
        args = event.serialized_arguments
    except json.JSONDecodeError as exc:
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} are not JSON: {exc.msg}", tool=name))
    if not isinstance(args, dict):
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} must be a JSON object", tool=name))
    return args


def _is_json(event: ToolCallEvent) -> bool:
    try:
        event.serialized_arguments  # noqa: B018 (parses the model's JSON)
    except json.JSONDecodeError:
        return False
    return True


def _with_args(event: ToolCallEvent, args: dict[str, Any], original: dict[str, Any]
               ) -> ToolCallEvent:
    if canon(args) == canon(original):
        return event
    run = copy(event)
    run.arguments = json.dumps(args)
    run.serialized_arguments = args
    return run


def _never(**args: Any) -> Any:
    """The protected tool of a second validation is only checked, never called."""
    raise IntegrationError("a re-validation tool is never called")


def _as_tool(tool: FunctionTool | Callable[..., Any]) -> FunctionTool:
    if isinstance(tool, FunctionTool):
        return tool
    if not callable(tool):
        raise IntegrationError("fenced_tool needs an ag2 tool or a function",
                               framework="ag2", got=type(tool).__name__)
    check_tool_function(tool, framework="ag2")
    if not hasattr(tool, "__name__") and not isinstance(tool, functools.partial):
        raise IntegrationError("fenced_tool needs a function or an ag2 tool, not a callable "
                               "object (it has no tool name)", framework="ag2",
                               got=type(tool).__name__,
                               fix="fenced_tool(tool(obj.__call__, name='book'), ...)")
    return ag2_tool(tool)


def _recheck(fence: Fence, ptool: ProtectedTool, root: str,
             args: dict[str, Any]) -> AfterHuman:
    """Validate the call's action record again (after a human answered in the body)."""
    async def check() -> None:
        d = await fence.acheck(ptool, roots=[root], args=args)
        if not d.authorized:
            raise StoppedAfterHuman(d, root, dict(args))

    return check


def _record_stop(rec: RunRecorder | None, who: str | None, name: str, fence: Fence,
                 stop: StoppedAfterHuman) -> None:
    """Record a call stopped after the human's answer.

    Its first decision (authorized), the second (refused) one, and the blocked call.
    """
    if rec is None:
        return
    log = fence.log
    entries = list(log) if isinstance(log, DecisionLog) else []
    first = next((d for d in reversed(entries) if d.roots == (stop.root,)
                  and d.authorized), None)
    lookup = fence.lookup or (fence.install.get if fence.install is not None else None)
    rec.gate(who, name, stop.result(first), lookup=lookup)


def fenced_tool(tool: FunctionTool | Callable[..., Any], *,
                agent: TeamAgent | str | None = None, depends_on: _Scope,
                fence: Fence | None = None, roots: ContextRoots = "plan_roots",
                replan: AnyReplanner | UserReplanner | None = None,
                recorder: RunRecorder | None = None,
                state_update: StateUpdate | None = None,
                replicator: Replicator | None = None) -> FunctionTool:
    """Wrap an AG2 1.x tool so every call passes the PlanFence gate.

    Args:
        tool: an ``ag2.tool`` (``@tool``, sync or ``async def``) or a plain function
            (wrapped with ``ag2.tool`` first). Its registered name is the tool's name.
        agent: high-level: the :class:`~icore.workspace.Agent` whose reads the calls
            derive from (``ws.agent("shipper")``). Low-level: the agent id events are
            attributed to (default: the agent whose turn runs, as
            :func:`~icore.integrations.ag2.record_agents` sees it, else ``"executor"``).
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        fence: low-level only: the executor's :class:`~icore.fence.Fence`.
        roots: low-level only: the ``context.variables`` key holding L(a) (default
            ``"plan_roots"``), or ``f(context, args)`` (``context``: AG2's ``Context``).
        replan: high-level: a :data:`~icore.workspace.UserReplanner` returning new
            arguments from the fresh values (default: the model gets the fresh values and
            its next call is the one replan). Low-level: the one replan (sync or
            ``async def``).
        recorder: records gate decisions, the replan and the call.
        state_update: low-level: after a replan, more ``context.variables`` updates.
        replicator: low-level: names keys, not record ids, in a block's message.

    Returns:
        A :class:`FencedTool` with the same name, description and JSON schema; its
        middleware runs the tool's own hooks first (approvals among them) and the gate
        last, right before the function body.

    Raises:
        IntegrationError: ``tool`` is neither an AG2 ``FunctionTool`` nor a function (a
            class, a ``functools.partial``, a callable object); it takes ``*args`` /
            ``**kwargs`` / positional-only parameters; neither a workspace ``agent`` nor
            ``fence`` is given; ``depends_on`` is a str, empty or names facts no owner is
            declared for (each error names the fix). High-level, a dynamic ``depends_on``
            that fails on the model's (valid) arguments, returns a str or names undeclared
            facts raises a :class:`~icore.workspace.WorkspaceError` out of ``agent.ask``
            when the model response naming the call arrives, before any tool runs.
    """
    tool = _as_tool(tool)
    name = tool.name
    norm, injected = _normalizer(tool)
    team = agent if isinstance(agent, TeamAgent) else None
    if team is None and agent is not None and not isinstance(agent, str):
        raise IntegrationError("agent= must be a workspace agent (ws.agent('name')) or an "
                               "agent id", framework="ag2", tool=name,
                               got=type(agent).__name__)
    guard = FenceGuard(agent=team if team is not None else (agent or "executor"),
                       fence=fence, depends_on=depends_on,
                       replan=replan, recorder=recorder)  # checked when wrapped
    guard.claim(name)
    hooks = [d.middleware for d in tool.middleware]
    turns = Turns()
    ptool = ProtectedTool(_never, depends_on=guard.depends_on, name=name)
    if team is not None:  # reads made by tools of a response are stamped with its turn
        team.turn_source = lambda: turns.current

    def precheck(event: ToolCallEvent) -> None:
        try:
            args = event.serialized_arguments
        except json.JSONDecodeError:
            return
        if not isinstance(args, dict):
            return
        try:
            norm_args = norm(args)
        except IntegrationError:
            return  # the model's mistake: the gate tells the model
        guard._scope_checked(norm_args)

    def caller_guard() -> FenceGuard:
        who = CALLING_AGENT.get()
        if who is None or who == guard.agent:
            return guard
        per_call = copy(guard)  # gate events name the AG2 agent whose turn runs
        per_call.agent = who
        return per_call

    async def team_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        reached_gate()
        args = _model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return args
        try:
            norm_args = norm(args)
        except IntegrationError as exc:
            return _invalid(event, name, norm, args, exc)
        turn = turns.of.get(event.id, event.id)
        wanted = _asked_request(team, guard, name, context, event, norm_args, turn)

        def approve(req: ApprovalRequest) -> bool:
            if wanted is _NOT_ASKED or (wanted is not None and wanted.id == req.id):
                return True
            raise CallRefused(APPROVAL_CHANGED, changed(
                name, wanted.args if wanted is not None else norm_args, req, wanted))

        async def call(**a: Any) -> Any:
            rc = running_call() if injected else None
            after = _recheck(guard.fence, ptool, rc.record.id, a) if rc is not None else None
            return _Result(await call_next(_with_args(event, a, args),
                                           gated_context(context, after)))

        g = caller_guard()
        rec = _run_recorder(recorder, name)
        try:
            gated = await g.arun(name, call, norm_args, recorder=rec, turn=turn,
                                 normalize=norm, approve=approve)
        except StoppedAfterHuman as stop:
            _record_stop(rec, g.agent, name, guard.fence, stop)
            fresh = _hand_over(team, stop.decision)
            return _blocked(event, _stopped_message(name, stop.decision, fresh), name,
                            stop.decision.reason.value)
        except IntegrationError as exc:
            return _setup_error(event, name, exc)
        if not gated.executed:
            message = gated.message
            if gated.reason == APPROVAL_CHANGED and gated.call is not None:
                message = gated.call.detail  # what differs from the approved request
            return _blocked(event, message, name, gated.reason)
        return gated.value.event

    async def fence_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        reached_gate()
        args = _model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return args
        asked = was_asked(context)
        fresh: list[Any] = []
        variables = getattr(context, "variables", None)
        where = variables if isinstance(roots, str) else context
        first_roots = plan_roots(where, roots, args)

        async def call(**a: Any) -> Any:
            if asked and not always_granted(context, event) and (
                    fresh or canon(a) != canon(args)):
                raise ApprovalChanged(args, a)  # a replan is another request
            used = fresh[-1].roots if fresh else first_roots
            after = _recheck(guard.fence, per_call._tools.get(name), used[0], a) \
                if injected and isinstance(used, list | tuple) and len(used) == 1 else None
            return _Result(await call_next(_with_args(event, a, args),
                                           gated_context(context, after)))

        rec = _run_recorder(recorder, name)
        per_call = FenceGuard(fence=guard.fence, depends_on=guard.depends_on,
                              replan=_noting(replan, fresh),  # type: ignore[arg-type]
                              recorder=rec, agent=agent or CALLING_AGENT.get() or "executor",
                              replicator=replicator)
        try:
            gated = await per_call.arun(name, call, args, first_roots)
        except ApprovalChanged as ch:
            if isinstance(roots, str) and fresh:  # the fresh plan stands; it needs a "yes"
                context_set(where, roots, list(fresh[-1].roots))
            message = fence_changed(name, ch.approved, ch.fresh)
            if rec is not None:  # recorded like any refused call
                first = tuple(first_roots) if isinstance(first_roots, list | tuple) else ()
                record_changed(rec, per_call, name, first, fresh, ch.fresh, message,
                               per_call.agent)
            return _blocked(event, message, name, APPROVAL_CHANGED)
        except StoppedAfterHuman as stop:
            _record_stop(rec, per_call.agent, name, guard.fence, stop)
            return _blocked(event, _stopped_message(name, stop.decision, {}), name,
                            stop.decision.reason.value)
        if not gated.executed:
            return _blocked(event, gated.message, name, gated.reason)
        write_back(where, roots, gated, state_update)
        return gated.value.event

    gate = team_gate if team is not None else fence_gate
    wrapped = FencedTool(tool.model, name=name, description=tool.schema.function.description,
                         schema=tool.schema.function.parameters, middleware=[*hooks, gate])
    wrapped.turns = turns

    def unreached(event: ToolCallEvent, context: Any, result: Any) -> None:
        """A human was asked and the call never reached the gate: a refused call."""
        rec = _run_recorder(recorder, name)
        if rec is None:
            return
        args = event.serialized_arguments if _is_json(event) else {"raw": event.arguments}
        who = CALLING_AGENT.get() or (team.name if team is not None else
                                      agent if isinstance(agent, str) else "executor")
        rec.tool_call(who, name, args if isinstance(args, dict) else {"raw": args},
                      f"BLOCKED: {REJECTED}: {_Result(result).content}", error=True, blocked=True,
                      ran=False, answered_by="human", decision="reject")

    wrapped.watch = Watch(unreached)
    if team is not None and callable(guard.depends_on):
        wrapped.precheck = precheck
    return wrapped


_NOT_ASKED: Any = object()
"""A call no human was asked about (or one the human approved for every call)."""


def _asked_request(team: TeamAgent | None, guard: FenceGuard, name: str, context: Any,
                   event: Any, args: dict[str, Any], turn: Any) -> ApprovalRequest | None:
    """The request a human approved for this call, or :data:`_NOT_ASKED`.

    A human answered before the gate (``approval_required()``, a hook of the user's): the
    call is bound to its :class:`~icore.workspace.ApprovalRequest`, the normalised
    arguments that reached the gate and the versions of D(a) this agent read for the
    call's model turn (the facts the human was shown the call from). Only that exact
    request runs; a replan (other arguments, or the same ones from other versions) is
    refused ``approval_changed``. None when the request cannot be built (an unread fact,
    a broken ``depends_on``): the approved call is then refused, fail closed, unless the
    gate refuses it first with the real cause. An "always" answer (AG2's bypass for the
    tool) approves every call: :data:`_NOT_ASKED`.
    """
    if team is None or not was_asked(context) or always_granted(context, event):
        asked: ApprovalRequest | None = _NOT_ASKED
        return asked
    try:
        deps = guard.depends_on
        keys = deps(args) if callable(deps) else deps
        return team.request_for(name, args, keys, turn=turn)
    except Exception:  # fail closed: refused approval_changed (or by the gate first)
        return None


def _hand_over(team: TeamAgent | None, d: GateDecision) -> dict[str, Any]:
    """The changed facts' current values, now the agent's reads (its next turn's basis)."""
    if team is None:
        return {}
    out: dict[str, Any] = {}
    for key in sorted(d.fresh):
        try:
            out[key] = team.read(key)
        except Exception:  # the owner did not answer: the value is not handed over
            continue
    return out
