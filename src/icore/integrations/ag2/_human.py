"""Human waits around a fenced AG2 tool (issue 28 item 5; planfence App. A.3).

The gate is the innermost tool middleware, so every human answer put before the tool
runs (AG2's ``approval_required()``, a user's own approval middleware, an agent
middleware asking with ``context.input``) comes before the validation: a fact that
changed while the human decided makes the call stale, and it never runs.

Two things remain, and this module covers them:

* **which calls a human was asked about**: the fenced tool's outermost execution layer
  (:class:`Watch`, outside every agent and tool middleware) hands the call a
  :class:`GatedContext` that notes each question put through it (``context.ask`` /
  ``context.input``: AG2's ``approval_required()`` and any hook of the user's). A call a
  human was asked about is bound to the arguments that reached the gate: a replan that
  changes them does not run (``approval_changed``);
* **a question the tool body itself asks** (``await context.input(...)`` inside the
  fenced function): the body gets a :class:`GatedContext` whose ``ask`` validates the call
  again (Alg. 1 on the same action record) after the human answered; if a fact changed
  meanwhile, ``ask`` raises :class:`StoppedAfterHuman` (a ``BaseException``, so a tool's
  ``except Exception`` cannot swallow it), the body stops there, and the fenced tool
  turns it into the stale block the model reads.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from ag2.context import ConversationContext
from ag2.events import HumanInputRequest, ToolApprovalRequest
from ag2.middleware.builtin.tools.approval import BYPASS_KEY

from icore.fence import ActionResult, GateDecision, Outcome
from icore.records import RecordId

AfterHuman = Callable[[], Awaitable[None]]
"""Called after a human answered a question the tool body asked (raises to stop it)."""


class StoppedAfterHuman(BaseException):
    """The call, validated again after a human answered inside the tool, was refused.

    A ``BaseException`` (like ``asyncio.CancelledError``): the tool body must not go on,
    whatever it catches; the fenced tool catches it and tells the model.

    Attributes:
        decision: the validation after the human's answer (not authorized).
        root: the action record id that had authorized the call.
        call_args: the arguments the call ran with (normal form).
    """

    def __init__(self, decision: GateDecision, root: RecordId, args: dict[str, Any]) -> None:
        super().__init__(f"refused after the human's answer ({decision.reason.value})")
        self.decision = decision
        self.root = root
        self.call_args = args

    def result(self, first: GateDecision | None) -> ActionResult:
        """The call as the recorder sees it: authorized, then refused (not executed)."""
        decisions = (first, self.decision) if first is not None else (self.decision,)
        return ActionResult(Outcome.BLOCKED, False, None, decisions, False, (self.root,),
                            dict(self.call_args), self.decision.detail)


@dataclasses.dataclass(slots=True)
class GatedContext(ConversationContext):
    """AG2's context of one fenced call: notes human questions, checks after them.

    Attributes:
        icore_asked: one entry per question a human answered through this context (and
            its copies) for this call.
        icore_after_human: awaited after every answer (the tool body's context: it
            raises :class:`StoppedAfterHuman` when the call is no longer authorized).
    """

    icore_asked: list[str] | None = dataclasses.field(default=None, repr=False)
    icore_after_human: AfterHuman | None = dataclasses.field(default=None, repr=False)
    icore_approvals: list[str] | None = dataclasses.field(default=None, repr=False)

    async def ask(self, request: HumanInputRequest) -> str:
        """AG2's ``ask``, noted; then the check (raises :class:`StoppedAfterHuman`).

        An approval request (AG2's ``ToolApprovalRequest``, as ``approval_required()``
        asks it) is noted with the tool-call id it names too (:func:`approval_asked`).
        """
        answer = await ConversationContext.ask(self, request)
        if self.icore_asked is not None:
            self.icore_asked.append(request.id)
        if self.icore_approvals is not None and isinstance(request, ToolApprovalRequest):
            self.icore_approvals.append(str(request.tool_call_id))
        if self.icore_after_human is not None:
            await self.icore_after_human()
        return answer


def _fields(context: ConversationContext) -> dict[str, Any]:
    return {f.name: getattr(context, f.name)
            for f in dataclasses.fields(ConversationContext) if f.init}


def watching(context: Any) -> Any:
    """A fresh :class:`GatedContext` for one call (AG2's context; else ``context``)."""
    if type(context) is not ConversationContext:
        return context
    return GatedContext(**_fields(context), icore_asked=[], icore_approvals=[])


def approval_asked(context: Any, event: Any) -> bool:
    """Whether a human answered an approval request naming this call (``event.id``).

    AG2's ``ToolApprovalRequest`` (``approval_required()``) through the call's context;
    any other question is no approval (#28).
    """
    return isinstance(context, GatedContext) and event.id in (context.icore_approvals or ())


def was_asked(context: Any) -> bool:
    """Whether a human answered a question put through this call's context."""
    return isinstance(context, GatedContext) and bool(context.icore_asked)


def gated_context(context: Any, after_human: AfterHuman | None) -> Any:
    """The tool body's context: ``context`` whose answers are followed by ``after_human``.

    Same stream, variables and dependencies; any object that is not AG2's
    ``ConversationContext`` is returned as it is.
    """
    if after_human is None or not isinstance(context, ConversationContext) or type(
            context) not in (ConversationContext, GatedContext):
        return context
    asked = context.icore_asked if isinstance(context, GatedContext) else None
    approvals = context.icore_approvals if isinstance(context, GatedContext) else None
    return GatedContext(**_fields(context), icore_asked=asked, icore_after_human=after_human,
                        icore_approvals=approvals)


Unreached = Callable[[Any, Any, Any], None]
"""Told ``(event, context, result)`` when a human was asked and the call never reached
the gate (the human said no, or a hook answered in the tool's place)."""


@dataclasses.dataclass(slots=True)
class WatchedCall:
    """One call of a fenced tool, as its :class:`Watch` sees it.

    Attributes:
        name: the tool's name.
        context: the call's :class:`GatedContext`.
        unreached: told about a call a human was asked about that never reached the gate.
        reached: the call reached the gate.
        told: ``unreached`` was told (once per call).
    """

    name: str
    context: Any
    unreached: Unreached | None
    reached: bool = False
    told: bool = False

    def settle(self, event: Any, result: Any) -> bool:
        """Whether the call was refused by a human before the gate (told once)."""
        if self.reached or not was_asked(self.context):
            return False
        if not self.told and self.unreached is not None:
            self.told = True
            self.unreached(event, self.context, result)
        return True


WATCHED: contextvars.ContextVar[WatchedCall | None] = contextvars.ContextVar(
    "icore_ag2_watched_call", default=None)
"""The fenced call running (set by :class:`Watch`; the gate and the recording read it)."""


def reached_gate() -> None:
    """The gate notes that this call reached it (see :class:`Watch`)."""
    w = WATCHED.get()
    if w is not None:
        w.reached = True


class Watch:
    """The outermost layer of a fenced tool's execution (after every agent middleware).

    It gives the call a :func:`watching` context, so the questions every middleware
    inside puts to a human are known at the gate (:func:`was_asked`), and tells
    ``unreached`` about a call a human was asked about that never reached the gate (a
    rejection: nothing ran).

    Args:
        unreached: called with ``(event, context, result)`` for such a call.
    """

    def __init__(self, unreached: Unreached | None = None) -> None:
        self.unreached = unreached

    async def on_tool_execution(self, call_next: Any, event: Any, context: Any) -> Any:
        """Run the call with a context that notes human questions."""
        watched = watching(context)
        w = WatchedCall(getattr(event, "name", ""), watched, self.unreached)
        token = WATCHED.set(w)
        try:
            result = await call_next(event, watched)
        finally:
            WATCHED.reset(token)
        w.settle(event, result)
        return result


def always_granted(context: Any, event: Any) -> bool:
    """Whether the human answered "always" for this tool (AG2's ``approval_required``)."""
    variables = getattr(context, "variables", None)
    if not isinstance(variables, dict):
        return False
    grants = variables.get(BYPASS_KEY) or {}
    return bool(isinstance(grants, dict) and grants.get(getattr(event, "source", None)
                                                         or event.name))
