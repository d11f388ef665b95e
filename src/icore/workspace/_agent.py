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

Reads are per run scope (#28): one agent handle serving several conversations keeps each
conversation's reads apart. A read is recorded under the scope current where it happens
(:meth:`Agent.scope`, else the agent's ``scope_source``, else what an integration detects:
the Agents SDK run's trace, the LangGraph thread), and a call derives only from reads of
its own scope: a read in another conversation never authorizes it.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from icore._clock import WallClock
from icore.errors import OwnershipError
from icore.fence import (
    ACTION_FIELD,
    DecisionLog,
    Fence,
    GateContext,
    GateValidator,
    PointCounter,
    action_record,
)
from icore.memory import MemoryStore, OwnerAccess, OwnershipMap, Store
from icore.records import JSONValue, Record, RecordId
from icore.workspace._agent_exec import _Execution
from icore.workspace._approval import (
    AnsweredFirst,
    ApprovalBook,
    ApprovalRequest,
    AskThenValidate,
)
from icore.workspace._call import (
    Approver,
    AsyncUserReplanner,
    Call,
    Scope,
    UserReplanner,
)
from icore.workspace._call_checks import check_basis_args, checked_args, checked_rid
from icore.workspace._durable_calls import claimer
from icore.workspace._errors import WorkspaceError
from icore.workspace._keys import MISSING, _Missing, detached
from icore.workspace._scopes import RunScopes, ScopeSource
from icore.workspace._unknown import Spent

ACTION_PREFIX = "planfence.act"
"""Action records are keyed ``planfence.act/<agent>/<tool>`` and owned by the agent."""



class _Team(Protocol):
    """What an agent reads of its :class:`~icore.workspace.Workspace` (a Workspace is one).

    The shared facts' ownership map o(k), the owner access their heads come from, the
    stores hosted in this process, and the key checks the integrations run.
    """

    @property
    def ownership(self) -> OwnershipMap:
        """The ownership map o(k)."""
        ...

    @property
    def owners(self) -> OwnerAccess:
        """Owner access: heads and records of every owner (local or remote)."""
        ...

    @property
    def stores(self) -> Mapping[str, Store]:
        """Owner -> the store hosted in this process."""
        ...

    @property
    def timeout_s(self) -> float:
        """Owner query timeout in seconds."""
        ...

    def owner_of(self, key: str) -> str:
        """o(key); raises WorkspaceError when no owner is declared."""
        ...

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key`` (None when it has none)."""
        ...

    def check_keys(self, keys: Iterable[str], *, where: str,
                   args: Mapping[str, Any] | None = None) -> frozenset[str]:
        """The keys, each checked against the ownership map."""
        ...

    def check_written(self, keys: Iterable[str], *, where: str) -> None:
        """Refuse a never-written key when a written key is close (a typo)."""
        ...

    def not_written(self, key: str) -> Exception:
        """The error for a read of ``key``, which has no version yet."""
        ...


_MAX_TURNS = 1024
_MAX_ACTIONS = 4096
_MAX_HISTORY = 8
_MAX_SCOPES = 4096


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



def _turn_of(src: Callable[[], Hashable | None] | None) -> Hashable | None:
    """The model turn ``src`` names now (None: none known, or ``src`` raised)."""
    if src is None:
        return None
    try:
        return src()
    except Exception:  # an unknown turn: the read counts everywhere
        return None


def _forget_keys(keys: Any, agent: str) -> frozenset[str] | None:
    """The keys :meth:`Agent.forget` was given (None: all).

    Raises:
        WorkspaceError: a str (read as its characters, it would forget nothing), not an
            iterable, or items that are not str.
    """
    if keys is None:
        return None
    if isinstance(keys, str | bytes):
        raise WorkspaceError("forget takes a collection of keys, not one key (a str would "
                             "be read as its characters)", agent=agent,
                             fix=f"agent.forget([{keys!r}])")
    try:
        wanted = frozenset(keys)
    except TypeError:
        raise WorkspaceError("forget takes an iterable of fact keys, or None for all",
                             agent=agent, got=type(keys).__name__) from None
    bad = sorted(type(k).__name__ for k in wanted if not isinstance(k, str))
    if bad:
        raise WorkspaceError("fact keys are str", agent=agent, got=bad)
    return wanted


class Agent(RunScopes):
    """One agent of a :class:`~icore.workspace.Workspace`: its reads and protected calls.

    Get it with :meth:`Workspace.agent`. Thread-safe (parallel tool calls).

    Attributes:
        name: the agent id.
        workspace: its workspace (typed by what the agent reads of it, :class:`_Team`).
        replica: its replica (the records it read and their ancestors).
        fence: its :class:`~icore.fence.Fence` (PlanFence over the facts' owners).
        log: every gate decision of its calls.
        approvals: the :class:`~icore.workspace.ApprovalBook` of its calls.
    """

    def __init__(self, workspace: _Team, name: str) -> None:
        self.workspace = workspace
        self.name = name
        self.replica = MemoryStore(workspace.ownership, name)
        self._seen: OrderedDict[Hashable | None,
                                dict[str, list[tuple[Record, Hashable | None]]]] = OrderedDict()
        """Run scope -> key -> the versions read in it (with their turn stamps)."""
        self.scope_source: ScopeSource | None = None
        """The application's run scope (``ws.agent(name, scope=f)``), after :meth:`scope`."""
        self._detectors = ()
        self.turn_source: Callable[[], Hashable | None] | None = None
        """Where a read happens: a function returning the current model turn (or None).

        Integrations set it (LangGraph: the graph's superstep): a read of the same model
        message as a protected call never counts for it."""
        self._turns: OrderedDict[tuple[Hashable | None, Hashable], dict[str, Record]] = \
            OrderedDict()
        self._actions: OrderedDict[RecordId, Record] = OrderedDict()
        self._seq = itertools.count(1)
        self._lock = threading.RLock()
        self.log = DecisionLog()
        self.approvals = ApprovalBook()
        ctx = GateContext(lookup=self._lookup, ownership=workspace.ownership,
                          owners=workspace.owners, timeout_s=workspace.timeout_s,
                          clock=WallClock(), points=PointCounter())
        self.fence = Fence(validator=GateValidator(ctx), install=self.replica, log=self.log,
                           lookup=self._lookup)
        self._exec = _Execution(self.fence, basis=self._basis, read_in=self._read_in,
                                new_action=self._new_action, note=self._note,
                                lock=self._lock, lookup=self._lookup, scope=self.call_scope,
                                spent=Spent(self._seen, self._turns, self._lock),
                                claims=claimer(workspace, name))

    def __repr__(self) -> str:
        try:
            read = sorted(self.seen())
        except WorkspaceError:  # its scope function fails: a repr never raises
            return f"Agent({self.name!r}, read=<scope unknown>)"
        return f"Agent({self.name!r}, read={read})"

    def _note(self, records: Mapping[str, Record], stamp: Hashable | None,
              scope: Hashable | None) -> None:
        self.note_scope(scope)
        with self._lock:
            seen = self._seen.get(scope)
            if seen is None:
                seen = self._seen[scope] = {}
                while len(self._seen) > _MAX_SCOPES:  # the oldest conversation: not_read
                    self._seen.popitem(last=False)
            else:
                self._seen.move_to_end(scope)
            self._exec.spent.read(scope, records)
            for key, rec in records.items():
                hist = seen.setdefault(key, [])
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

    def _read(self, key: str, stamp: Hashable | None,
              scope: Hashable | _Missing | None = MISSING) -> Record | None:
        """Read ``key``'s head as this agent; the stored record.

        Recorded as seen in ``scope`` (default: the current one).
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
        self._note({key: rec}, stamp if stamp is not None else _turn_of(self.turn_source),
                   self.current_scope() if isinstance(scope, _Missing) else scope)
        return rec

    def read_record(self, key: str, *, stamp: Hashable | None = None) -> Record | None:
        """Read the owner's current version of ``key`` and record it as seen.

        ``stamp`` is the model turn the read belongs to (default: :attr:`turn_source`).

        Returns:
            The verified record, its content a copy (None when the fact has no version
            yet; nothing is recorded then).

        Raises:
            WorkspaceError: ``key`` is not a fact key or no owner is declared for it.
            OwnerUnavailable: the owner did not answer.
        """
        rec = self._read(key, stamp)
        return None if rec is None else dataclasses.replace(rec, content=detached(rec.content))

    def _read_in(self, key: str, turn: Hashable | None, scope: Hashable | None) -> Record | None:
        """Read ``key`` as part of ``turn`` of ``scope`` (a value handed over)."""
        return self._read(key, turn, scope)

    def read(self, key: str, default: JSONValue | _Missing = MISSING) -> JSONValue:
        """Read the current value of fact ``key``, recording the version seen.

        A protected call that depends on ``key`` derives from this version: it runs only
        if it is still the owner's head when the call is validated. The value is a copy.
        A fact never written raises unless ``default`` is given (then returned; nothing
        is recorded).

        Raises:
            FactNotWritten: the fact has no version yet and no ``default`` was given (the
                fix names a written key close to ``key``, a likely typo).
            WorkspaceError: ``key`` is not a fact key or no owner is declared for it.
            OwnerUnavailable: the owner did not answer.
        """
        rec = self._read(key, None)
        if rec is None:
            if isinstance(default, _Missing):
                raise self.workspace.not_written(key)
            return default
        return detached(rec.content)

    def seen(self) -> dict[str, Record]:
        """Key -> the version this agent read last in the current run scope.

        What its next turn in this scope derives from (:meth:`current_scope`).
        """
        scope = self.current_scope()
        with self._lock:
            return {k: h[-1][0] for k, h in self._seen.get(scope, {}).items() if h}

    def record(self, rid: RecordId) -> Record | None:
        """The record ``rid`` as this agent knows it, or None (no str: WorkspaceError)."""
        return self._lookup(checked_rid(rid, self.name))

    def forget(self, keys: Iterable[str] | None = None, *,
               why: tuple[str, str] | None = None) -> None:
        """Forget the reads of ``keys`` (all when None), in every run scope.

        Dropped from every scope, every turn's snapshot and the one-replan tickets: calls
        depending on them are refused ``not_read`` until the agent reads them again.
        ``why``: ``(tool, error)`` of a call whose outcome is unknown that spent them,
        quoted by those refusals (``keys`` given; :mod:`._unknown`).

        Raises:
            WorkspaceError: ``keys`` is a str or not an iterable of str.
        """
        wanted = _forget_keys(keys, self.name)
        with self._lock:
            reads: list[dict[str, Any]] = [*self._seen.values(), *self._turns.values()]
            for r in reads:  # a turn's snapshot: the basis its calls share
                for k in list(r) if wanted is None else wanted:
                    r.pop(k, None)
            self._exec.forget(wanted, why)

    def _basis(self, turn: Hashable | None, scope: Hashable | None) -> dict[str, Record]:
        """The reads a call of ``turn`` in ``scope`` derives from.

        Fixed at the turn's first call; only reads of the call's own run scope count.

        Reads stamped with ``turn`` itself (a sibling tool of the same model message, a
        sibling call's hand-over) are not among them: the message was produced before.
        A ``turn`` with a ``counts(stamp) -> bool`` method decides itself which reads
        count (the MCP gateway's causal order: a read counts only if its answer left
        before the call arrived).
        """
        with self._lock:
            seen = self._seen.get(scope, {})
            if turn is None:
                return {k: h[-1][0] for k, h in seen.items() if h}
            snap = self._turns.get((scope, turn))
            if snap is None:
                snap = {}
                counts = getattr(turn, "counts", None)
                for k, hist in seen.items():
                    for rec, stamp in reversed(hist):
                        if counts(stamp) if callable(counts) else \
                                (stamp is None or stamp != turn):
                            snap[k] = rec
                            break
                self._turns[(scope, turn)] = snap
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
            WorkspaceError: the agent has not read some key (named), a wrong type, or the
                call has no scope on a handle that has seen scoped use (:meth:`call_scope`).
            MalformedRecord: an argument is not JSON (normalise the arguments first).
        """
        wanted = check_basis_args(action, args, keys, turn)
        basis = self._basis(turn, self.call_scope())
        missing = sorted(k for k in wanted if k not in basis)
        if missing:
            raise WorkspaceError("the agent has not read facts the action depends on",
                                 agent=self.name, action=action, keys=missing,
                                 fix=f"agent.read({missing[0]!r}) first")
        return self._new_action(action, args, [basis[k] for k in wanted])

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

    def request_for(self, action: str, args: Mapping[str, Any], keys: Iterable[str], *,
                    turn: Hashable | None = None) -> ApprovalRequest | None:
        """The :class:`ApprovalRequest` a call of ``action(args)`` of ``turn`` is now.

        Bound to ``args`` and to the versions of ``keys`` (D(a)) this agent read for
        ``turn``, the ones the call derives from; nothing is built or validated. For a
        framework that asks its human before the call reaches the gate (the Agents SDK's
        ``needs_approval``): the call later runs only as this exact request.

        Returns:
            The request; None when a key was not read (the call would be refused
            :data:`~icore.workspace.NOT_READ`).

        Raises:
            WorkspaceError / MalformedRecord: a wrong type / an argument is not JSON; or
                the call has no scope on a handle that has seen scoped use
                (:meth:`call_scope`: the human is never asked about shared reads).
        """
        wanted = check_basis_args(action, args, keys, turn)
        basis = self._basis(turn, self.call_scope())
        if any(k not in basis for k in wanted):
            return None
        return ApprovalRequest.of(action, args, [basis[k] for k in wanted])

    # -- protected calls ----------------------------------------------------------------
    def execute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any], *,
                depends_on: Scope, replan: UserReplanner | None = None,
                turn: Hashable | None = None,
                normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                approve: Approver | None = None, check: Approver | None = None,
                call_id: str | None = None) -> Call:
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
            replan: a user replanner (see :data:`UserReplanner`): the new arguments, or
                :data:`~icore.workspace.DECLINE`.
            turn: the model message the call came from (calls of one message share it),
                or an object with ``counts(stamp) -> bool`` saying which reads (by their
                stamp, ``read_record(stamp=)``) the call may derive from.
            normalize: puts a replanner's arguments into the same normal form.
            approve: a human's decision (:class:`AskThenValidate`): asked once the gate
                authorized the call; the gate then validates the call again, so it runs
                only if still authorized and exactly the request approved (a change
                while the human decided blocks it ``stale``, fresh values handed over).
            check: a check without a human (e.g. the call is still the one a framework's
                own approval covered), asked once the gate authorized the call, right
                before it runs; anything but ``True`` refuses it :data:`REJECTED` (a truthy
                ``"no"``, ``1`` or array-like object too: fail closed). No second validation.
            call_id: the call's identity across a restart (a tool-call id): on a
                ``Workspace.sqlite`` folder the same call never runs twice, in any
                process (:data:`EARLIER_UNKNOWN`; docs/workspace.md#restarts).

        Returns:
            :class:`Call`.

        Raises:
            WorkspaceError: ``action`` is not a non-empty str, ``fn``, ``replan``,
                ``approve`` or ``check`` not callable, ``args`` not a mapping of names,
                ``turn`` unhashable, or no scope on a handle that has seen scoped use
                (:meth:`call_scope`, fail closed); nothing was asked or run.
            AsyncRequired: ``fn`` or ``replan`` is ``async def`` (use :meth:`aexecute`).
            DeclarationError: ``depends_on`` empty, or no collection of keys nor function.
            ReplanFailed: ``replan`` raised (its ``__cause__``) or returned neither
                arguments that fit (``normalize``, ``depends_on``, JSON) nor ``DECLINE``;
                the call did not run and the agent was handed nothing (``.call`` is the
                blocked :class:`Call`).
            Exception: whatever ``fn`` or ``approve`` raises (``fn``: reads spent).
        """
        args = checked_args(action, args)  # read once: both passes see the same call
        kw: dict[str, Any] = {"depends_on": depends_on, "replan": replan, "turn": turn,
                              "normalize": normalize, "call_id": call_id}
        if approve is None:
            return self._exec.execute(action, fn, args, approve=check, **kw)
        human = AskThenValidate(approve, check)  # validated again after the answer
        try:
            return self._exec.execute(action, fn, args, approve=human.ask, **kw)
        except AnsweredFirst:
            return self._exec.execute(action, fn, args, approve=human.approved, **kw)

    async def aexecute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                       *, depends_on: Scope,
                       replan: UserReplanner | AsyncUserReplanner | None = None,
                       turn: Hashable | None = None,
                       normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                       = None, approve: Approver | None = None,
                       check: Approver | None = None, call_id: str | None = None) -> Call:
        """Async :meth:`execute`: ``fn`` and ``replan`` may be ``async def``.

        Raises:
            WorkspaceError, DeclarationError, ReplanFailed: as for :meth:`execute`.
            Exception: whatever ``fn`` or ``approve`` raises once authorized.
        """
        args = checked_args(action, args)
        kw: dict[str, Any] = {"depends_on": depends_on, "replan": replan, "turn": turn,
                              "normalize": normalize, "call_id": call_id}
        if approve is None:
            return await self._exec.aexecute(action, fn, args, approve=check, **kw)
        human = AskThenValidate(approve, check)
        try:
            return await self._exec.aexecute(action, fn, args, approve=human.ask, **kw)
        except AnsweredFirst:
            return await self._exec.aexecute(action, fn, args, approve=human.approved, **kw)
