"""An agent's handle: its reads of shared facts and its protected calls (issue 28 item 1).

The model's own tool call is the plan (planfence Sec. 4, App. A.3): when an agent calls a
protected tool, :meth:`Agent.execute` builds the call's *action record* itself - derived
from the versions of the tool's D(a) keys this agent read (its exact parents) and bound
to the call's arguments (:func:`~icore.fence.bind_action`) - and runs the protected action
through the agent's :class:`~icore.fence.Fence` (the gate, planfence Alg. 1). Every call's
action record is its own root, so calls validate independently (parallel calls).

The one replan (App. A.3 step 3): by default a stale call is refused and the fresh values
are handed to the agent (the framework's tool error); they become the agent's reads, and
its next call of that tool derived from them is the replan: if a fact changed again by
then, it is blocked ``second_change`` (fail closed). A user replanner (``replan=``) can
instead return new arguments from the fresh values; they run after revalidation.

Reads are per model turn: calls of one model message (one ``turn``) are validated against
the reads that message was produced from, even if a sibling call's refusal handed fresh
values to the agent meanwhile.
"""

from __future__ import annotations

import contextvars
import inspect
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from icore._clock import WallClock
from icore.errors import AsyncRequired, DeclarationError, MalformedRecord, OwnershipError
from icore.fence import (
    ACTION_FIELD,
    ActionResult,
    DecisionLog,
    Fence,
    GateContext,
    GateValidator,
    PointCounter,
    ProtectedTool,
    Reason,
    Replan,
    ReplanRequest,
    action_record,
)
from icore.memory import MemoryStore
from icore.records import JSONValue, Record, RecordId
from icore.workspace._approval import ApprovalBook, ApprovalRequest
from icore.workspace._errors import WorkspaceError

if TYPE_CHECKING:
    from icore.workspace._workspace import Workspace

ACTION_PREFIX = "planfence.act"
"""Action records are keyed ``planfence.act/<agent>/<tool>`` and owned by the agent."""

Scope: TypeAlias = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]
"""D(a): keys, or a function of the call's (normalised) arguments returning them."""

NOT_READ = "not_read"
"""Call reason: the agent had not read a fact of D(a); its current value was handed over."""
REJECTED = "approval_rejected"
"""Call reason: the human did not approve this exact call."""
ARGS_NOT_JSON = "args_not_json"
"""Call reason: an argument has no JSON form (normalise the arguments first)."""

_MAX_TURNS = 1024
_MAX_ACTIONS = 4096
_MAX_TICKETS = 1024
_MAX_HISTORY = 8


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


UserReplanner: TypeAlias = Callable[[Stale], Mapping[str, Any] | None]
"""Returns the new call's arguments from the fresh values, or None to decline."""
AsyncUserReplanner: TypeAlias = Callable[[Stale], Awaitable[Mapping[str, Any] | None]]
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
            :data:`REJECTED` or :data:`ARGS_NOT_JSON`.
        args: the arguments it ran (or was refused) with, normalised.
        record: the authorizing (or refused) action record, the call's root.
        result: the fence's :class:`~icore.fence.ActionResult` (None when refused
            before the gate).
        fresh: key -> value handed to the agent (stale call or unread fact).
        replanned: the user replanner's arguments ran (after revalidation).
        detail: the gate's detail text.
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

    @property
    def message(self) -> str:
        """A refused call's reason for the model: what, why, what to do (empty if run)."""
        if self.executed:
            return ""
        return _message(self)


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
    ARGS_NOT_JSON: "an argument has no JSON form (an application error); do not retry",
}


def _values(fresh: Mapping[str, JSONValue]) -> str:
    return json.dumps(dict(sorted(fresh.items())), ensure_ascii=False, default=str)


def _message(c: Call) -> str:
    head = f"PlanFence blocked {c.action} ({c.reason})"
    if c.reason == Reason.STALE.value and c.fresh:
        return (f"{head}: {', '.join(sorted(c.fresh))} changed after you read it. Current "
                f"values: {_values(c.fresh)}. Decide again from these values; your next "
                f"call counts as the one replan.")
    if c.reason == NOT_READ and c.fresh and all(v is None for v in c.fresh.values()):
        return (f"{head}: no value yet for {', '.join(sorted(c.fresh))}: the fact this "
                f"call depends on has not been written by its owner, so nothing can "
                f"authorize the call. Do not retry it until the fact exists; report it.")
    if c.reason == NOT_READ:
        return (f"{head}: this call depends on {', '.join(sorted(c.fresh))}, which you "
                f"had not read. Current values: {_values(c.fresh)}. Decide from these "
                f"values and call again.")
    hint = _HINTS.get(c.reason, "the call was refused")
    detail = f" Detail: {c.detail}" if c.detail else ""
    return f"{head}: {hint}.{detail}"


_SCALARS = (str, int, float, bool, type(None))


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is built of dicts with str keys, lists and JSON scalars only."""
    if isinstance(value, _SCALARS):
        return True
    if depth > 32:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v, depth + 1) for v in value)
    return False


class _Rejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Run:
    """Per-call context the trampoline reads: the function, the authorizing root."""

    fn: Callable[..., Any]
    root: Record
    basis: dict[str, Record]
    approve: Approver | None
    action: str = ""


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
        if not run.approve(req):
            raise _Rejected("not approved")


def _trampoline_for(action: str) -> Callable[..., Any]:
    def run(**args: Any) -> Any:
        cur = _CURRENT.get()
        _check(cur, action, args)
        return cur.fn(**args)

    run.__name__ = action
    return run


def _atrampoline_for(action: str) -> Callable[..., Awaitable[Any]]:
    async def run(**args: Any) -> Any:
        cur = _CURRENT.get()
        _check(cur, action, args)
        out = cur.fn(**args)
        if inspect.isawaitable(out):
            out = await out
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


class Agent:
    """One agent of a :class:`~icore.workspace.Workspace`: its reads and protected calls.

    Get it with :meth:`Workspace.agent`. Thread-safe (parallel tool calls).

    Attributes:
        name: the agent id.
        workspace: its workspace.
        replica: its replica (the records it read and their ancestors).
        fence: its :class:`~icore.fence.Fence` (PlanFence over the facts' owners).
        log: every gate decision of its calls.
        approvals: the :class:`~icore.workspace.ApprovalBook` of its calls.
    """

    def __init__(self, workspace: Workspace, name: str) -> None:
        self.workspace = workspace
        self.name = name
        self.replica = MemoryStore(workspace.ownership, name)
        self._seen: dict[str, list[tuple[Record, Hashable | None]]] = {}
        self.turn_source: Callable[[], Hashable | None] | None = None
        """Where a read happens: a function returning the current model turn (or None).

        Integrations set it (LangGraph: the graph's superstep), so a read made by a tool
        of the same model message as a protected call never counts for that call."""
        self._turns: OrderedDict[Hashable, dict[str, Record]] = OrderedDict()
        self._tickets: OrderedDict[tuple[str, frozenset[str]], dict[str, RecordId]] = \
            OrderedDict()
        self._actions: OrderedDict[RecordId, Record] = OrderedDict()
        self._tools: dict[tuple[str, bool], tuple[Any, ProtectedTool]] = {}
        self._static: dict[str, tuple[Any, frozenset[str]]] = {}
        self._seq = itertools.count(1)
        self._lock = threading.RLock()
        self.log = DecisionLog()
        self.approvals = ApprovalBook()
        ctx = GateContext(lookup=self._lookup, ownership=workspace.ownership,
                          owners=workspace.owners, timeout_s=workspace.timeout_s,
                          clock=WallClock(), points=PointCounter())
        self.fence = Fence(validator=GateValidator(ctx), install=self.replica, log=self.log,
                           lookup=self._lookup)

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, read={sorted(self._seen)})"

    def _turn_now(self) -> Hashable | None:
        src = self.turn_source
        if src is None:
            return None
        try:
            return src()
        except Exception:  # an unknown turn: the read counts everywhere
            return None

    def _note(self, records: Mapping[str, Record], stamp: Hashable | None) -> None:
        with self._lock:
            for key, rec in records.items():
                hist = self._seen.setdefault(key, [])
                hist.append((rec, stamp))
                if len(hist) > _MAX_HISTORY:
                    del hist[0]

    # -- reads ------------------------------------------------------------------------
    def _lookup(self, rid: RecordId) -> Record | None:
        rec = self._actions.get(rid)
        return rec if rec is not None else self.replica.lookup(rid)

    def _install(self, rec: Record, owner: str) -> None:
        if self.replica.lookup(rec.id) is not None:
            return
        ws = self.workspace
        found: list[Record] = [rec]
        wanted = [p for p in rec.parents if self.replica.lookup(p) is None]
        seen: set[RecordId] = set()
        others = [owner, *sorted((set(ws.stores) | ws.ownership.owners()) - {owner})]
        while wanted and len(found) < 10_000:
            pid = wanted.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for o in others:
                try:
                    got = [r for r in ws.owners.fetch(o, [pid], timeout_s=ws.timeout_s)
                           if r.id == pid and r.has_content]
                except Exception:
                    continue
                if got:
                    r = got[0].verify()
                    found.append(r)
                    wanted.extend(p for p in r.parents if self.replica.lookup(p) is None)
                    break
        for r in reversed(found):
            try:
                self.replica.install(r)
            except OwnershipError:
                continue  # a record under no declared key: the gate reports it missing

    def read_record(self, key: str, *, stamp: Hashable | None = None) -> Record | None:
        """Read the owner's current version of ``key`` and record it as seen.

        ``stamp`` is the model turn the read belongs to (default: :attr:`turn_source`).

        Returns:
            The verified record (None when the fact has no version yet; nothing is
            recorded then).

        Raises:
            WorkspaceError: no owner is declared for ``key``.
            OwnerUnavailable: the owner did not answer.
        """
        ws = self.workspace
        owner = ws.owner_of(key)
        reply = ws.owners.query_heads(owner, [key], timeout_s=ws.timeout_s)
        entry = reply.heads.get(key)
        if entry is None:
            return None
        rec = self.replica.get(entry.record_id)
        if rec is None or not rec.has_content:
            rec = ws.head(key)
            if rec is None:
                return None
        self._install(rec, owner)
        self._note({key: rec}, stamp if stamp is not None else self._turn_now())
        return rec

    def _read_in(self, key: str, turn: Hashable | None) -> JSONValue | None:
        """Read ``key`` as part of ``turn`` (a value handed over with a refusal)."""
        rec = self.read_record(key, stamp=turn)
        return None if rec is None else rec.content

    def read(self, key: str) -> JSONValue | None:
        """Read the current value of fact ``key``, recording the version seen.

        A protected call that depends on ``key`` derives from this version: it runs only
        if the version is still the owner's head when the call is validated.

        Raises:
            WorkspaceError: no owner is declared for ``key``.
            OwnerUnavailable: the owner did not answer.
        """
        rec = self.read_record(key)
        return None if rec is None else rec.content

    def seen(self) -> dict[str, Record]:
        """Key -> the version this agent read last (what its next turn derives from)."""
        with self._lock:
            return {k: h[-1][0] for k, h in self._seen.items() if h}

    def forget(self, keys: Iterable[str] | None = None) -> None:
        """Forget the reads of ``keys`` (all when None).

        Calls depending on them are refused ``not_read`` until the agent reads them again.
        """
        with self._lock:
            if keys is None:
                self._seen.clear()
                self._turns.clear()
            else:
                for k in keys:
                    self._seen.pop(k, None)

    def _basis(self, turn: Hashable | None) -> dict[str, Record]:
        """The reads a call of ``turn`` derives from (fixed at the turn's first call).

        Reads stamped with ``turn`` itself (a sibling tool of the same model message, a
        sibling call's hand-over) are not among them: the message was produced before.
        """
        with self._lock:
            if turn is None:
                return {k: h[-1][0] for k, h in self._seen.items() if h}
            snap = self._turns.get(turn)
            if snap is None:
                snap = {}
                for k, hist in self._seen.items():
                    for rec, stamp in reversed(hist):
                        if stamp is None or stamp != turn:
                            snap[k] = rec
                            break
                self._turns[turn] = snap
                while len(self._turns) > _MAX_TURNS:
                    self._turns.popitem(last=False)
            return snap

    # -- action records -----------------------------------------------------------------
    def action_record(self, action: str, args: Mapping[str, Any], keys: Iterable[str], *,
                      turn: Hashable | None = None) -> Record:
        """The action record of ``action(args)``: derived from this agent's reads of ``keys``.

        Its exact parents are the versions of ``keys`` the agent read (for ``turn``),
        its content binds the action and the arguments. The record is held in the
        agent's memory so its fence can validate it as a root.

        Raises:
            WorkspaceError: the agent has not read some key (named) - read it first.
            MalformedRecord: an argument is not JSON (normalise the arguments first).
        """
        basis = self._basis(turn)
        missing = sorted(k for k in keys if k not in basis)
        if missing:
            raise WorkspaceError("the agent has not read facts the action depends on",
                                 agent=self.name, action=action, keys=missing,
                                 fix=f"agent.read({missing[0]!r}) first")
        return self._new_action(action, args, [basis[k] for k in sorted(set(keys))])

    def _new_action(self, action: str, args: Mapping[str, Any],
                    parents: Sequence[Record]) -> Record:
        key, seq = f"{ACTION_PREFIX}/{self.name}/{action}", next(self._seq)
        if _plain_json(args):
            # normalised arguments are their own canonical form: bind them as they are
            # (what bind_action would write), validated once by Record.create
            rec = Record.create(key=key, owner=self.name, seq=seq, type="action",
                                content={ACTION_FIELD: {"name": action, "args": dict(args)}},
                                parents=[p.id for p in parents])
        else:
            rec = action_record(key=key, owner=self.name, seq=seq, action=action, args=args,
                                inputs=parents)
        with self._lock:
            self._actions[rec.id] = rec
            while len(self._actions) > _MAX_ACTIONS:
                self._actions.popitem(last=False)
        return rec

    def approval_request(self, call: Call) -> ApprovalRequest:
        """The :class:`ApprovalRequest` for a call (its action, arguments and basis).

        Raises:
            WorkspaceError: the call has no action record (refused before the gate).
        """
        if call.record is None:
            raise WorkspaceError("the call has no action record", action=call.action)
        basis = {r.key: r.id for r in (self._lookup(p) for p in call.record.parents)
                 if r is not None}
        return ApprovalRequest.of(call.action, call.args, basis)

    # -- protected calls ----------------------------------------------------------------
    def _tool(self, action: str, depends_on: Scope, is_async: bool) -> ProtectedTool:
        key = (action, is_async)
        got = self._tools.get(key)
        if got is not None and got[0] is depends_on:
            return got[1]
        fn = _atrampoline_for(action) if is_async else _trampoline_for(action)
        tool = ProtectedTool(fn, depends_on=depends_on, name=action)
        self._tools[key] = (depends_on, tool)
        return tool

    def _prepare(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                 depends_on: Scope, turn: Hashable | None, approve: Approver | None,
                 is_async: bool) -> tuple[ProtectedTool, _Plan] | Call:
        tool = self._tool(action, depends_on, is_async)
        static = self._static.get(action) if not callable(depends_on) else None
        if static is not None and static[0] is depends_on:
            deps = static[1]  # the fence checks the full declaration again
        else:
            try:
                deps = tool.scope(args)
            except DeclarationError as exc:
                return Call(action, False, reason=Reason.INCOMPLETE_DECLARATION.value,
                            args=dict(args), detail=str(exc))
            if not callable(depends_on):
                self._static[action] = (depends_on, deps)
        basis = self._basis(turn)
        missing = sorted(k for k in deps if k not in basis)
        if missing:
            got = {k: self._read_in(k, turn) for k in missing}
            return Call(action, False, reason=NOT_READ, args=dict(args), fresh=got,
                        detail=f"not read: {', '.join(missing)}")
        mine = {k: basis[k] for k in sorted(deps)}
        try:
            rec = self._new_action(action, args, list(mine.values()))
        except MalformedRecord as exc:
            return Call(action, False, reason=ARGS_NOT_JSON, args={}, detail=str(exc))
        with self._lock:
            ticket = self._tickets.get((action, deps))
        replan_call = ticket is not None and all(
            k in mine and mine[k].id == rid for k, rid in ticket.items())
        canon = rec.content[  # type: ignore[index, call-overload]
            "planfence.action"]["args"]
        plan = _Plan(action, deps, mine, rec, canon, replan_call,
                     _Run(fn, rec, mine, approve, action), turn=turn)
        return tool, plan

    def _hand_over(self, plan: _Plan) -> Callable[[ReplanRequest], Replan | None]:
        if plan.replan_call:
            # this call is the one replan: a stale decision now blocks (second_change)
            return lambda rq: Replan(roots=[plan.record.id])

        def hand_over(rq: ReplanRequest) -> None:
            plan.handed.update(rq.fresh)
            return None

        return hand_over

    def _replan_root(self, tool: ProtectedTool, plan: _Plan,
                     new: Mapping[str, Any] | None,
                     normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                     ) -> Replan | None:
        if new is None:
            return None
        if not isinstance(new, Mapping):
            raise WorkspaceError("a replanner returns the new call's arguments (a mapping) "
                                 "or None", got=type(new).__name__)
        args = dict(normalize(new) if normalize is not None else new)
        basis = {**plan.basis, **plan.handed}
        deps = tool.scope(args)
        mine = {k: basis[k] for k in sorted(deps) if k in basis}
        rec = self._new_action(plan.action, args, list(mine.values()))
        plan.run.root, plan.run.basis = rec, mine
        plan.replanned_args = args
        return Replan(roots=[rec.id])

    def _user_stale(self, plan: _Plan, rq: ReplanRequest) -> Stale:
        plan.handed.update(rq.fresh)
        self._note(rq.fresh, plan.turn)  # the replanner read them (in this turn)
        return Stale(plan.action, plan.args,
                     {k: r.content for k, r in rq.fresh.items()}, dict(rq.fresh))

    def _finish(self, plan: _Plan, res: ActionResult) -> Call:
        key = (plan.action, plan.deps)
        rec = plan.run.root
        if res.executed:
            if plan.replan_call:
                with self._lock:
                    self._tickets.pop(key, None)
            return Call(plan.action, True, res.value, res.final.reason.value,
                        dict(res.args), rec, res, {}, res.replanned, res.detail)
        reason = res.final.reason.value
        fresh: dict[str, JSONValue] = {}
        if (not plan.replan_call and plan.replanned_args is None and plan.handed
                and reason == Reason.STALE.value):
            # default replan: the fresh values go to the agent (it sees them in this turn's
            # answer, so they count from its next turn); its next call is the replan
            self._note(plan.handed, plan.turn)
            ticket = {k: (plan.handed.get(k) or plan.basis[k]).id for k in plan.deps}
            with self._lock:
                self._tickets[key] = ticket
                self._tickets.move_to_end(key)
                while len(self._tickets) > _MAX_TICKETS:
                    self._tickets.popitem(last=False)
            fresh = {k: r.content for k, r in plan.handed.items()}
        detail = res.detail or res.final.detail
        return Call(plan.action, False, None, reason, dict(res.args), rec, res, fresh,
                    res.replanned, detail)

    def execute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any], *,
                depends_on: Scope, replan: UserReplanner | None = None,
                turn: Hashable | None = None,
                normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                approve: Approver | None = None) -> Call:
        """Run ``fn(**args)`` as a protected call of this agent (planfence App. A.3).

        Builds the call's action record from this agent's reads of D(a), validates it
        (Alg. 1 against the owners' heads) and runs ``fn`` only when authorized. A fact
        of D(a) the agent never read: refused :data:`NOT_READ` with its current value
        (now read). A stale call: with ``replan`` the replanner's arguments run after
        revalidation; without it the call is refused ``stale`` with the fresh values
        (now the agent's reads) and the agent's next call of this tool derived from them
        is the one replan (a change before it is validated blocks ``second_change``).

        Args:
            action: the tool's name.
            fn: the tool function (sync), called with the arguments once authorized.
            args: the call's arguments, normalised to JSON (``normalize_args``).
            depends_on: D(a).
            replan: a user replanner (see :data:`UserReplanner`).
            turn: the model message the call came from (calls of one message share it).
            normalize: puts a replanner's arguments into the same normal form.
            approve: asked once the gate authorized the call, before it runs.

        Returns:
            :class:`Call`.

        Raises:
            AsyncRequired: ``fn`` or ``replan`` is ``async def`` (use :meth:`aexecute`).
            Exception: whatever ``fn`` or ``approve`` raises once authorized.
        """
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(replan):
            raise AsyncRequired("an async tool or replanner needs aexecute()", tool=action)
        prep = self._prepare(action, fn, args, depends_on, turn, approve, False)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        rp: Callable[[ReplanRequest], Replan | None]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            user = replan

            def rp(rq: ReplanRequest) -> Replan | None:
                return self._replan_root(tool, plan, user(self._user_stale(plan, rq)),
                                         normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = self.fence.execute(tool, roots=[plan.record.id], args=plan.args,
                                     replan=rp)
        except _Rejected as exc:
            return Call(action, False, None, REJECTED, plan.replanned_args or plan.args,
                        plan.run.root, None, {}, plan.replanned_args is not None,
                        exc.reason)
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)

    async def aexecute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                       *, depends_on: Scope,
                       replan: UserReplanner | AsyncUserReplanner | None = None,
                       turn: Hashable | None = None,
                       normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                       = None, approve: Approver | None = None) -> Call:
        """Async :meth:`execute`: ``fn`` and ``replan`` may be ``async def``."""
        prep = self._prepare(action, fn, args, depends_on, turn, approve, True)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        rp: Callable[[ReplanRequest], Any]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            user = replan

            async def rp(rq: ReplanRequest) -> Replan | None:
                new = user(self._user_stale(plan, rq))
                if inspect.isawaitable(new):
                    new = await new
                return self._replan_root(tool, plan, new, normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = await self.fence.aexecute(tool, roots=[plan.record.id], args=plan.args,
                                            replan=rp)
        except _Rejected as exc:
            return Call(action, False, None, REJECTED, plan.replanned_args or plan.args,
                        plan.run.root, None, {}, plan.replanned_args is not None,
                        exc.reason)
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)
