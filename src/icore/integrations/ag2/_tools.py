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
import inspect
from collections.abc import Callable
from copy import copy
from typing import Any

from ag2 import Context
from ag2.events import ModelResponse, ToolCallEvent, ToolErrorEvent
from ag2.tools.types import FunctionTool

from icore.errors import IntegrationError
from icore.fence import INVALID_ARGUMENTS as FENCE_INVALID_ARGUMENTS
from icore.fence import Fence, ProtectedTool, Replan, ReplanRequest
from icore.integrations import (
    AnyReplanner,
    FenceGuard,
    Replicator,
    RunRecorder,
    Writes,
)
from icore.integrations import Scope as _Scope
from icore.integrations._approvals import (
    ApprovalChanged,
    canon,
    changed,
    fence_changed,
    record_changed,
)
from icore.integrations._context import (
    ContextRoots,
    StateUpdate,
    context_set,
    plan_roots,
    write_back,
)
from icore.integrations._recorder_lines import asked_as
from icore.integrations._refusals import refused_call
from icore.integrations.ag2._conversation import CONVERSATION, enter_for_turn, stamp_reads
from icore.integrations.ag2._human import (
    StoppedAfterHuman,
    Watch,
    always_granted,
    approval_asked,
    gated_context,
    reached_gate,
    was_asked,
)
from icore.integrations.ag2._human_answers import (
    NOT_ASKED,
    asked_request,
    hand_over,
    recheck,
    record_approval,
    record_stop,
)
from icore.integrations.ag2._tool_results import (
    Result,
    blocked,
    entering,
    given_args,
    invalid,
    model_args,
    never,
    run_args,
    run_body,
    said,
    setup_error,
    stopped_message,
    with_args,
)
from icore.integrations.ag2._wrap_checks import as_tool, check_agent, normalizer
from icore.workspace import (
    APPROVAL_CHANGED,
    REJECTED,
    ApprovalRequest,
    CallRefused,
    UserReplanner,
    running_call,
)
from icore.workspace import Agent as TeamAgent

INVALID_ARGUMENTS = FENCE_INVALID_ARGUMENTS
"""The reason of a fenced call refused for arguments that do not fit the tool's schema
(:data:`icore.fence.INVALID_ARGUMENTS`, the one name every path writes)."""
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


class FencedTool(FunctionTool):
    """An ag2 ``FunctionTool`` whose calls pass the PlanFence gate (:func:`fenced_tool`).

    Registered for an agent's turn, it makes the turn's AG2 conversation current
    (:mod:`~icore.integrations.ag2._conversation`: the workspace scope of the reads and
    calls made in it) and listens to its model responses (calls of one response are one
    turn: they share the reads the response was produced from; in the high-level API a
    call's
    dynamic ``depends_on`` is checked there, so a setup mistake leaves ``agent.ask``
    before any tool runs), and its outermost execution layer (:class:`Watch`, outside
    the agent's middleware) notes the human questions put for each call.
    """

    precheck: Callable[[ToolCallEvent], None] | None = None
    watch: Watch = Watch()

    def register(self, stack: Any, context: Any, *, middleware: Any = ()) -> None:
        """AG2's registration, plus the model-response listener and the watch layer."""
        precheck, name = self.precheck, self.name
        conv = enter_for_turn(stack, context)  # the turn's conversation, current

        async def note(event: ModelResponse, context: Context) -> None:
            if conv is not None:
                conv.note(event)
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


def fenced_tool(tool: FunctionTool | Callable[..., Any], *,
                agent: TeamAgent | str | None = None, depends_on: _Scope,
                fence: Fence | None = None, roots: ContextRoots = "plan_roots",
                replan: AnyReplanner | UserReplanner | None = None,
                recorder: RunRecorder | None = None,
                state_update: StateUpdate | None = None,
                replicator: Replicator | None = None,
                writes: Writes | None = None) -> FunctionTool:
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
        writes: the keys the tool's effect writes (keys, or a function of the call's
            arguments): a sibling call of one model message whose ``depends_on`` holds
            one waits until this call ends, then is validated against the new head (a
            read-modify-write tool never acts twice on one version; docs/workspace.md).

    Returns:
        A :class:`FencedTool` with the same name, description and JSON schema; its
        middleware runs the tool's own hooks first (approvals among them) and the gate
        last, right before the function body.

    Raises:
        IntegrationError: ``tool`` is neither an AG2 ``FunctionTool`` nor a function (a
            class, a ``functools.partial``, a callable object) or is fenced already; it
            takes ``*args`` / ``**kwargs`` / positional-only parameters; ``agent`` is not
            a workspace agent and no ``fence`` is given, or (with ``fence``) neither a
            workspace agent nor an agent id (one message; AG2's own ``Agent`` gets a hint
            naming ``ws.agent('<name>')``); ``recorder`` is not a
            :class:`~icore.integrations.RunRecorder` (a path: the fix names
            ``rec.write(path)``); ``depends_on`` is a str, empty or names facts no owner is
            declared for (each error names the fix). High-level, a dynamic ``depends_on``
            that fails on the model's (valid) arguments, returns a str or names undeclared
            facts raises a :class:`~icore.workspace.WorkspaceError` out of ``agent.ask``
            when the model response naming the call arrives, before any tool runs.
    """
    if isinstance(tool, FencedTool):
        raise IntegrationError("the tool is fenced already: a second gate would validate "
                               "a second action record for one call", framework="ag2",
                               tool=tool.name, fix="wrap the original tool once")
    tool = as_tool(tool)
    name = tool.name
    norm, injected = normalizer(tool)
    team = check_agent(agent, name, fence)
    guard = FenceGuard(agent=team if team is not None else (agent or "executor"),
                       fence=fence, depends_on=depends_on, writes=writes,
                       replan=replan, recorder=recorder)  # checked when wrapped
    guard.claim(name)
    hooks = [d.middleware for d in tool.middleware]
    ptool = ProtectedTool(never, depends_on=guard.depends_on, name=name)
    if team is not None:  # reads and calls: of their AG2 conversation, stamped by turn
        stamp_reads(team)

    def precheck(event: ToolCallEvent) -> None:
        args, _why = run_args(event)
        if not isinstance(args, dict):
            return  # the model's mistake: the gate tells the model
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

    def caller() -> str:
        """The agent whose turn calls the tool (as :func:`record_agents` sees it)."""
        return CALLING_AGENT.get() or (team.name if team is not None else
                                       agent if isinstance(agent, str) else "executor")

    def unfit(event: ToolCallEvent, error: ToolErrorEvent,
              yes: dict[str, Any] | None = None) -> ToolErrorEvent:
        """Arguments that do not fit the schema: a call refused before the gate.

        Recorded as a blocked protected action (policy ``before the gate``), whether or
        not the tool's calls were gated before (QA r8-ag2mcp D6); ``error`` goes on. A
        human's recorded "yes" (``yes``) names the refused action's task.
        """
        rec = _run_recorder(recorder, name)
        if rec is not None:
            text = said(error)
            task = refused_call(rec, caller(), name, given_args(event),
                                f"BLOCKED: {INVALID_ARGUMENTS}: {text}",
                                reason=INVALID_ARGUMENTS, detail=text)
            if yes is not None:
                with rec._lock:
                    yes["task"] = task
        return error

    def approved(event: ToolCallEvent, context: Any) -> dict[str, Any] | None:
        """A human approved the call before the gate: a "yes", recorded.

        AG2's approval request naming it (``approval_required()``), recorded as the
        other integrations record it (``a human answered approve ...``), with the
        model's arguments as given, also when they are no JSON object (``{"raw": ...}``;
        the call is then refused ``invalid_arguments``: QA qa-new10 S3). Another
        question is no approval (#28).
        """
        rec = _run_recorder(recorder, name)
        if rec is not None and approval_asked(context, event):
            return record_approval(rec, caller(), name, given_args(event))
        return None

    async def team_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        reached_gate()
        yes = approved(event, context)  # the human's "yes", whatever the arguments
        args = model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return unfit(event, args, yes)
        try:
            norm_args = norm(args)
        except IntegrationError as exc:
            return unfit(event, invalid(event, name, norm, args, exc), yes)
        conv = CONVERSATION.get()
        turn = conv.turn_of(event.id) if conv is not None else event.id
        wanted = asked_request(team, guard, name, context, event, norm_args, turn)

        def approve(req: ApprovalRequest) -> bool:
            if wanted is NOT_ASKED or (wanted is not None and wanted.id == req.id):
                return True
            raise CallRefused(APPROVAL_CHANGED, changed(
                name, wanted.args if wanted is not None else norm_args, req, wanted))

        async def call(**a: Any) -> Any:
            rc = running_call() if injected else None
            after = recheck(guard.fence, ptool, rc.record.id, a) if rc is not None else None
            return await run_body(call_next, with_args(event, a, args),
                                  gated_context(context, after))

        g = caller_guard()
        rec = _run_recorder(recorder, name)
        asked_as(rec or guard.recorder, event.id, norm)  # the model's call as the tool reads it
        try:
            gated = await g.arun(name, call, norm_args, recorder=rec, turn=turn,
                                 normalize=norm, approve=approve, call_id=event.id or None,
                                 durable=event.id or None)  # kept across a restart
        except StoppedAfterHuman as stop:
            record_stop(rec, g.agent, name, guard.fence, stop)
            fresh = hand_over(team, stop.decision)
            return blocked(event, stopped_message(name, stop.decision, fresh), name,
                            stop.decision.reason.value)
        except IntegrationError as exc:
            return setup_error(event, name, exc)
        if not gated.executed:
            return blocked(event, gated.model_message, name, gated.reason)
        return gated.value.event

    async def fence_gate(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        reached_gate()
        yes = approved(event, context)  # the human's "yes", whatever the arguments
        args = model_args(event, name)
        if isinstance(args, ToolErrorEvent):
            return unfit(event, args, yes)
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
            after = recheck(guard.fence, per_call._tools.get(name), used[0], a) \
                if injected and isinstance(used, list | tuple) and len(used) == 1 else None
            return await run_body(call_next, with_args(event, a, args),
                                  gated_context(context, after))

        rec = _run_recorder(recorder, name)
        per_call = FenceGuard(fence=guard.fence, depends_on=guard.depends_on,
                              replan=_noting(replan, fresh),  # type: ignore[arg-type]
                              recorder=rec, agent=agent or CALLING_AGENT.get() or "executor",
                              replicator=replicator, writes=guard.writes)
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
            return blocked(event, message, name, APPROVAL_CHANGED)
        except StoppedAfterHuman as stop:
            record_stop(rec, per_call.agent, name, guard.fence, stop)
            return blocked(event, stopped_message(name, stop.decision, {}), name,
                            stop.decision.reason.value)
        if not gated.executed:
            return blocked(event, gated.message, name, gated.reason)
        write_back(where, roots, gated, state_update)
        return gated.value.event

    gate = team_gate if team is not None else fence_gate
    model = copy(tool.model)  # its body notes that it was entered (an error before it:
    model.call = entering(model.call)  # the call did not run)
    wrapped = FencedTool(model, name=name, description=tool.schema.function.description,
                         schema=tool.schema.function.parameters, middleware=[*hooks, gate])

    def unreached(event: ToolCallEvent, context: Any, result: Any) -> None:
        """A human was asked and the call never reached the gate: a refused call."""
        rec = _run_recorder(recorder, name)
        if rec is None:
            return
        refused_call(rec, caller(), name, given_args(event),
                     f"BLOCKED: {REJECTED}: {Result(result).content}", reason=REJECTED,
                     policy="approval", ran=False, answered_by="human", decision="reject")

    wrapped.watch = Watch(unreached)
    if team is not None and callable(guard.depends_on):
        wrapped.precheck = precheck
    return wrapped

