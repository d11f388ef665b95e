"""One protected call of a workspace agent: its outcome, its context, its trampolines.

What :meth:`~icore.workspace.Agent.execute` returns (:class:`Call`, with the reason a
refused call gives the model), what a user replanner gets (:class:`Stale`), and the
per-call context the tool function runs in (:func:`running_call`): the fence runs a
trampoline that looks the call's function and authorizing root up in a context variable,
so one :class:`~icore.fence.ProtectedTool` per tool serves every call (planfence App. A.3).
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from icore.errors import brief, visible
from icore.fence import INVALID_ARGUMENTS, ActionResult, Reason
from icore.records import JSONValue, Record
from icore.workspace._approval import ApprovalRequest
from icore.workspace._keys import bad_args_hint, unwritten_hint

Scope: TypeAlias = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]
"""D(a): keys, or a function of the call's (normalised) arguments returning them."""

NOT_READ = "not_read"
"""Call reason: the agent had not read a fact of D(a); its current value was handed over."""
REJECTED = "approval_rejected"
"""Call reason: the human did not approve this exact call."""
APPROVAL_CHANGED = "approval_changed"
"""Call reason: the call is not the request the human approved (other arguments, or the
same arguments derived from other versions); an approver refuses it with
:class:`CallRefused`."""
ARGS_NOT_JSON = "args_not_json"
"""Call reason: an argument has no JSON form (normalise the arguments first)."""
ARGS_TOO_LARGE = "args_too_large"
"""Call reason: the arguments are too large to record as the call's action record
(over :data:`icore.records.MAX_CONTENT_BYTES` as canonical JSON)."""


@dataclass(frozen=True, slots=True)
class Stale:
    """What a user replanner gets: the refused call and the facts that changed.

    Attributes:
        action: the tool's name.
        args: the refused call's (normalised) arguments.
        fresh: key -> current value of every changed fact of D(a).
        records: key -> the verified current record of each changed fact.
    """

    action: str
    args: Mapping[str, JSONValue]
    fresh: Mapping[str, JSONValue]
    records: Mapping[str, Record]


class _Decline:
    """The type of :data:`DECLINE`."""

    def __repr__(self) -> str:
        return "DECLINE"


DECLINE: Final = _Decline()
"""What a user replanner returns to decline: the call is refused and the fresh values go
to the model (the default hand-over; the model's next call is the one replan). ``None``
is not a way to decline: a replanner returning None (a forgotten ``return``) fails
(:class:`~icore.workspace.ReplanFailed`)."""

UserReplanner: TypeAlias = Callable[[Stale], Mapping[str, Any] | _Decline]
"""Returns the new call's arguments (a mapping that fits the tool's schema) from the
fresh values, or :data:`DECLINE`. Anything else, or an exception, is an application
error: the call does not run and :class:`~icore.workspace.ReplanFailed` is raised."""
AsyncUserReplanner: TypeAlias = Callable[[Stale], Awaitable[Mapping[str, Any] | _Decline]]
"""An ``async def`` :data:`UserReplanner` (for :meth:`Agent.aexecute`)."""
Approver: TypeAlias = Callable[[ApprovalRequest], bool]
"""Called once the gate authorized a call, before it runs: True lets it run. May raise
to suspend the run (LangGraph ``interrupt``); it is then asked again on the replay."""


@dataclass(frozen=True, slots=True)
class Call:
    """What one protected call did.

    Attributes:
        action: the tool's name.
        executed: whether the tool ran.
        value: what it returned (None when it did not run).
        reason: ``valid``, a gate :class:`~icore.fence.Reason` value (``stale``,
            ``second_change``, ``owner_unavailable``, ...), :data:`NOT_READ`,
            :data:`REJECTED`, :data:`ARGS_NOT_JSON`, :data:`ARGS_TOO_LARGE`, or (the
            same call kept on disk, ``call_id=``) ``earlier_outcome_unknown``,
            ``call_running``, ``already_ran``.
        args: the arguments it ran (or was refused) with, normalised.
        record: the authorizing (or refused) action record, the call's root.
        result: the fence's :class:`~icore.fence.ActionResult` (None when refused
            before the gate).
        fresh: key -> value handed to the agent (stale call or unread fact).
        replanned: the user replanner's arguments ran (after revalidation).
        detail: the gate's detail text (keys and versions named, never record ids).
        unwritten: keys of D(a) that have never been written (a refused call's
            :data:`NOT_READ` cannot be authorized until they exist).
        turn: the model turn (message) the call came from, as the framework names it
            (None: no turn given). Calls of one turn are siblings: planned from the same
            reads, none is another's replan.
        bad_args: argument path -> value, for the arguments whose text made a key of
            D(a) that names no fact (``sku="*"`` in ``stock/{sku}``: glob characters
            are literal; a NUL cannot be stored). Such a call is refused
            :data:`NOT_READ` with those keys in ``unwritten`` (the model's argument,
            not the application's setup; nothing ran).
        same_value: keys of ``fresh`` whose new version holds the value the agent had
            read (written again, e.g. by :meth:`~icore.workspace.Workspace.commit`, or by
            another process): a stale refusal does not call them changed.
        spent: keys of D(a) whose reads an earlier call with an unknown outcome consumed
            (its started body raised, not ``NoEffect``): the call is refused
            :data:`NOT_READ`, its detail names that call, no value is handed over; a
            read of those keys made after it lets a call run (QA qa-new14 S2).
        key_args: argument path -> value, for the arguments the ``unwritten`` keys are
            made from (a ``depends_on`` function of the arguments:
            :func:`~icore.workspace.key_args`): the model named a fact that does not
            exist (a wrong id) and may call again with a corrected argument (QA
            qa-new15a S3).
    """

    action: str
    executed: bool
    value: Any = None
    reason: str = Reason.VALID.value
    args: Mapping[str, JSONValue] = field(default_factory=dict)
    record: Record | None = None
    result: ActionResult | None = None
    fresh: Mapping[str, JSONValue] = field(default_factory=dict)
    replanned: bool = False
    detail: str = ""
    unwritten: tuple[str, ...] = ()
    turn: Hashable | None = None
    bad_args: Mapping[str, str] = field(default_factory=dict)
    same_value: tuple[str, ...] = ()
    spent: tuple[str, ...] = ()
    key_args: Mapping[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """A refused call's reason for the model: what, why, what to do (empty if run).

        Control, format and bidi characters (a key the model made up holding U+202E) are
        shown escaped, as the audit shows them (:func:`icore.errors.visible`).
        """
        if self.executed:
            return ""
        return visible(_message(self))


_HINTS: dict[str, str] = {
    Reason.STALE.value: "the facts it depends on changed since they were read and the "
    "replan was declined; read them again before calling",
    Reason.SECOND_CHANGE.value: "its facts changed again after the one replan; do not "
    "retry this plan: report it (or read the facts again to start a new plan)",
    Reason.LINEAGE_INCOMPLETE.value: "a version this call derives from is missing from "
    "this agent's memory; it must be replicated here first",
    Reason.MISSING_BOUNDARY.value: "the call does not derive from a version of every fact "
    "the tool depends on; read them and call again",
    Reason.FRONTIER_CONFLICT.value: "the call derives from two versions of one fact; read "
    "it again and call again",
    Reason.OWNER_UNAVAILABLE.value: "an owner of the call's facts did not answer; try "
    "again later",
    Reason.INCOMPLETE_DECLARATION.value: "the tool's dependency declaration is incomplete "
    "(an application error); do not retry",
    Reason.ARGS_MISMATCH.value: "the call is not the one its action record binds",
    REJECTED: "a human did not approve this exact call; do not retry it unchanged",
    APPROVAL_CHANGED: "the call is not the one the human approved; call again to ask "
    "the human again",
    ARGS_NOT_JSON: "an argument has no JSON form or is too large (see the detail); do not "
    "retry it unchanged: a corrected call may be retried",
    INVALID_ARGUMENTS: "an argument does not fit the tool's schema or is no finite number "
    "(named in the detail); nothing ran: call again with the argument corrected",
    ARGS_TOO_LARGE: "the arguments are too large to record (see the detail); do not retry "
    "it unchanged: send less, e.g. a reference to the data instead of the data",
}


_ONCE = frozenset({"earlier_outcome_unknown", "call_running", "already_ran"})
"""Reasons of a call refused because the same call ran, runs or may have run
(:mod:`~._durable_calls`): the detail says it all."""

MAX_HANDOVER_CHARS = 8_000
"""Most characters of fresh values a refusal's model-facing message carries (~2k tokens).

Longer values are cut with a note: the whole value is the agent's read all the same, and
the model can fetch it with the app's own read tool (which may show less of it)."""


def _values(fresh: Mapping[str, JSONValue]) -> str:
    text = json.dumps(dict(sorted(fresh.items())), ensure_ascii=False, default=str)
    if len(text) <= MAX_HANDOVER_CHARS:
        return text
    return (f"{text[:MAX_HANDOVER_CHARS]} ... [cut: {len(text) - MAX_HANDOVER_CHARS:,} "
            f"more characters; read {', '.join(sorted(fresh))} again for the whole value]")


def _message(c: Call) -> str:
    head = f"PlanFence blocked {c.action} ({c.reason})"
    if c.reason == Reason.STALE.value and c.fresh:
        changed = sorted(k for k in c.fresh if k not in c.same_value)
        what = [f"{', '.join(changed)} changed after you read it"] if changed else []
        if c.same_value:
            what.append(f"{', '.join(sorted(c.same_value))} was written again after you "
                        "read it, with the same value (a new version)")
        return (f"{head}: {'; '.join(what)}. Current values: {_values(c.fresh)}. Decide "
                f"again from these values; your next call counts as the one replan.")
    if (c.reason == NOT_READ and c.spent) or c.reason in _ONCE:
        return f"{head}: {c.detail}. Nothing ran now."
    if c.reason == NOT_READ and c.bad_args:
        return f"{head}: {_bad_args(c)}"
    if c.reason == NOT_READ and c.unwritten:
        return f"{head}: {unwritten_hint(c.unwritten, c.action, c.key_args)}."
    if c.reason == NOT_READ:  # no doc path for the model: the detail names it
        return (f"{head}: this call depends on {', '.join(sorted(c.fresh))}, which this "
                f"agent holds no read of (not read yet, read before a restart: reads "
                f"are kept in memory, or read in another run or conversation: reads count "
                f"only in the run or conversation that made them). "
                f"Current values: {_values(c.fresh)}. Decide from "
                f"these values and call again.")
    hint = _HINTS.get(c.reason, "the call was refused")
    detail = f" Detail: {c.detail}" if c.detail else ""
    return f"{head}: {hint}.{detail}"



def _bad_args(c: Call) -> str:
    """Why a model's argument value names no fact, and what to do instead."""
    return bad_args_hint(c.bad_args, c.action, c.unwritten) + "."


class CallRefused(Exception):
    """An approver's refusal with its own reason (instead of :data:`REJECTED`).

    Raised by ``Agent.execute``'s ``check`` / ``approve``.

    Args:
        reason: the refused :class:`Call`'s ``reason`` (e.g. :data:`APPROVAL_CHANGED`).
        detail: its ``detail`` (what differs, for the agent and the trace).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason, self.detail = reason, detail


class _Rejected(Exception):
    def __init__(self, reason: str, code: str = REJECTED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass
class _Run:
    """Per-call context the trampoline reads: the function, the authorizing root."""

    fn: Callable[..., Any]
    root: Record
    basis: dict[str, Record]
    approve: Approver | None
    action: str = ""
    claim: Any = None  # the call's durable claim (:class:`~._durable_calls.Claim`), if kept
    started: bool = False  # the tool function was called


_CURRENT: contextvars.ContextVar[_Run] = contextvars.ContextVar("icore_workspace_run")


@dataclass(frozen=True, slots=True)
class RunningCall:
    """The protected call running in this context (inside the tool function).

    Attributes:
        action: the tool's name.
        record: the action record that authorized it (after a replan: the fresh one).
        basis: key -> the version of each fact of D(a) the call derives from.
    """

    action: str
    record: Record
    basis: Mapping[str, Record]

    def request(self, args: Mapping[str, Any]) -> ApprovalRequest:
        """The :class:`ApprovalRequest` of this call with ``args`` (normalised)."""
        return ApprovalRequest.of(self.action, args, [self.basis[k] for k in sorted(self.basis)])


def running_call() -> RunningCall | None:
    """The protected call whose tool function is running in this context, else None.

    For integrations that must know, inside the tool, which action record authorized the
    call (e.g. to bind a question the tool body puts to a human).
    """
    cur = _CURRENT.get(None)
    if cur is None:
        return None
    return RunningCall(cur.action, cur.root, dict(cur.basis))


def _check(run: _Run, action: str, args: Mapping[str, Any]) -> None:
    if run.approve is not None:
        req = ApprovalRequest.of(action, args, [run.basis[k] for k in sorted(run.basis)])
        try:
            ok = run.approve(req)
        except CallRefused as exc:
            raise _Rejected(exc.detail or exc.reason, exc.reason) from None
        if ok is not True:  # only a real yes: "no", 1, [0], an array are no approval
            raise _Rejected("not approved" if ok is False or ok is None else
                            f"not approved: the check returned {brief(ok, 60)} "
                            f"({type(ok).__name__}), not True")


def _begin(cur: _Run) -> None:
    """Right before the body: claim the call on disk (refused: ``_Rejected``), mark it."""
    if cur.claim is not None:
        cur.claim.take()
    cur.started = True


def _trampoline_for(action: str) -> Callable[..., Any]:
    def run(**args: Any) -> Any:
        cur = _CURRENT.get()
        _check(cur, action, args)
        _begin(cur)
        try:
            out = cur.fn(**args)
        except BaseException as exc:
            if cur.claim is not None:
                cur.claim.raised(exc)
            raise
        if cur.claim is not None:
            cur.claim.returned(out)
        return out

    run.__name__ = action
    return run


def _atrampoline_for(action: str) -> Callable[..., Awaitable[Any]]:
    async def run(**args: Any) -> Any:
        cur = _CURRENT.get()
        _check(cur, action, args)
        _begin(cur)
        try:
            out = cur.fn(**args)
            if inspect.isawaitable(out):
                out = await out
        except BaseException as exc:
            if cur.claim is not None:
                cur.claim.raised(exc)
            raise
        if cur.claim is not None:
            cur.claim.returned(out)
        return out

    run.__name__ = action
    return run


@dataclass
class _Plan:
    action: str
    deps: frozenset[str]
    basis: dict[str, Record]
    record: Record
    args: dict[str, JSONValue]
    replan_call: bool
    run: _Run
    handed: dict[str, Record] = field(default_factory=dict)
    replanned_args: dict[str, JSONValue] | None = None
    turn: Hashable | None = None
    scope: Hashable | None = None  # the run scope the call was made in
    failure: Any = None  # the ReplanFailed of a broken user replanner
    declined: bool = False  # the user replanner returned DECLINE
    unread: tuple[str, ...] = ()  # keys the replanned call depends on, never read
