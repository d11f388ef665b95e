"""The dependency-scoped gate, planfence Alg. 1, as a sans-io state machine plus drivers.

:class:`GateRun` holds no I/O: it is fed owner replies and returns the next step, so the
same code runs over local stores, the virtual-time transport and authenticated TCP::

    run = GateRun(action=..., roots=..., deps=..., lookup=..., ownership=...)
    step = run.start()                      # Alg. 1 lines 1-4
    if isinstance(step, HeadQueries):       # line 5: one batched request per owner
        step = run.on_heads(replies)        # lines 6-8
    if isinstance(step, RecordFetches):     # line 8: fetch + verify changed records
        step = run.on_records(fetched)      # lines 9-13
    decision = step

:func:`validate` (sync, :class:`~icore.memory.OwnerAccess`) and :func:`avalidate`
(async, all owners concurrently, each with a timeout) drive it.

Not atomic (planfence Sec. 6): an owner may revise a dependency after the validation
point and before the external call, and owners are queried at slightly different
moments. The decision records the validation point so the window is visible in the log;
applications that need atomicity across owners or with the tool need a transaction that
spans that boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from icore._clock import Clock
from icore._frozen import positional
from icore.errors import (
    FrontierConflict,
    LineageError,
    LineageTooLarge,
    MissingBoundary,
    RecordError,
)
from icore.fence._decision import INFRASTRUCTURE_REASONS, GateDecision, Outcome, Reason
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    HeadEntry,
    HeadReply,
    OwnerAccess,
    OwnershipMap,
)
from icore.records import Lookup, Record, RecordId, TraversalMode, frontier, is_record_id


@dataclass(frozen=True, slots=True)
class HeadQueries:
    """Step: ask each owner for its heads of these keys (Alg. 1 line 5).

    Attributes:
        per_owner: owner -> keys of D(a) it owns.
        known: the frontier F_a (lets owners inline small changed records).
    """

    per_owner: Mapping[str, tuple[str, ...]]
    known: Mapping[str, RecordId]


@dataclass(frozen=True, slots=True)
class RecordFetches:
    """Step: fetch and verify these exact records (Alg. 1 line 8).

    Attributes:
        per_owner: owner -> record ids to fetch.
    """

    per_owner: Mapping[str, tuple[RecordId, ...]]


Step = GateDecision | HeadQueries | RecordFetches
DecisionSink = Callable[[GateDecision], None]

_decision = positional(GateDecision)  # every field; no per-field setattr (#27)


class PointCounter:
    """Monotone validation-point counter shared by the gates of one executor."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        """Return the next validation point number."""
        self.value += 1
        return self.value


@dataclass(slots=True)
class GateRun:
    """One execution of planfence Alg. 1 (sans-io).

    Args:
        action: action name (for the log).
        roots: L(a), the plan root record ids.
        deps: D(a), the declared dependency scope.
        lookup: local lineage lookup (store + replica cache; returns None for a missing
            or lineage-incomplete record).
        ownership: the team's ownership map.
        replanned: True on the validation after the one replan (Alg. 1 line 10).
        mode: lineage traversal mode (FULL; DIRECT only for the App. C ablation).
        clock: gives the validation-point time (optional).
        points: validation-point counter (optional).
        policy: policy name written into decisions.
    """

    action: str
    roots: tuple[RecordId, ...]
    deps: frozenset[str]
    lookup: Lookup
    ownership: OwnershipMap
    replanned: bool = False
    mode: TraversalMode = TraversalMode.FULL
    clock: Clock | None = None
    points: PointCounter | None = None
    policy: str = "planfence"
    _frontier: dict[str, RecordId] = field(default_factory=dict)
    _heads: dict[str, RecordId] = field(default_factory=dict)
    _fresh: dict[str, Record] = field(default_factory=dict)
    _owner_of: dict[str, str] = field(default_factory=dict)
    _changed: dict[str, RecordId] = field(default_factory=dict)
    _owners_contacted: int = 0
    _sorted_deps: tuple[str, ...] | None = None
    _asked: dict[str, tuple[str, ...]] = field(default_factory=dict)

    # -- decisions --------------------------------------------------------------------
    def _deps(self) -> tuple[str, ...]:
        """D(a) sorted (computed once per run)."""
        if self._sorted_deps is None:
            self._sorted_deps = tuple(sorted(self.deps))
        return self._sorted_deps

    def _decide(self, outcome: Outcome, reason: Reason, detail: str = "") -> GateDecision:
        # every field, in GateDecision's field order (issue 27: no per-field setattr)
        return _decision(
            outcome, reason, self.action, self.roots, self._deps(),
            dict(self._frontier), dict(self._heads), dict(self._fresh), self.replanned,
            self.points.next() if self.points is not None else 0,
            self.clock.now_ms() if self.clock is not None else 0.0,
            self.policy, detail, self._owners_contacted, len(self._heads))

    def _block(self, reason: Reason, detail: str) -> GateDecision:
        return self._decide(Outcome.BLOCKED, reason, detail)

    # -- Alg. 1 lines 1-4 ---------------------------------------------------------------
    def start(self) -> Step:
        """Traverse lineage from L(a) to D(a) and plan the head queries.

        Returns:
            A blocked :class:`GateDecision`, or the :class:`HeadQueries` to send.
        """
        if not self.deps:
            return self._block(Reason.INCOMPLETE_DECLARATION, "D(a) is empty")
        try:
            fr = frontier(self.roots, self.deps, self.lookup, mode=self.mode)
        except FrontierConflict as exc:
            return self._block(Reason.FRONTIER_CONFLICT, str(exc))
        except MissingBoundary as exc:
            return self._block(Reason.MISSING_BOUNDARY, str(exc))
        except LineageTooLarge as exc:
            return self._block(Reason.LINEAGE_INCOMPLETE, str(exc))
        except LineageError as exc:
            return self._block(Reason.LINEAGE_INCOMPLETE, str(exc))
        self._frontier = cast(dict[str, RecordId], fr.versions)  # frontier() built it anew
        per_owner: dict[str, list[str]] = {}
        owner_of = self.ownership.owner_of
        for key in self._deps():
            owner = owner_of(key)
            if owner is None:
                return self._block(Reason.NO_OWNER, f"no owner mapping for key {key!r}")
            self._owner_of[key] = owner
            per_owner.setdefault(owner, []).append(key)
        self._owners_contacted = len(per_owner)
        self._asked = {o: tuple(ks) for o, ks in per_owner.items()}
        return HeadQueries(dict(self._asked), dict(self._frontier))

    # -- Alg. 1 lines 5-8 ---------------------------------------------------------------
    def on_heads(self, replies: Mapping[str, HeadReply | BaseException]) -> Step:
        """Check every owner reply; plan fetches of changed records.

        Args:
            replies: owner -> its :class:`HeadReply`, or the exception the request raised.

        Returns:
            A decision, or the :class:`RecordFetches` still needed.
        """
        # the keys asked of each owner, in D(a) order (``start`` grouped them)
        for owner, keys in self._asked.items():
            reply = replies.get(owner)
            if reply is None:
                return self._block(Reason.OWNER_UNAVAILABLE, f"no reply from owner {owner!r}")
            if isinstance(reply, BaseException):
                return self._block(Reason.OWNER_UNAVAILABLE,
                                   f"owner {owner!r}: {type(reply).__name__}: {reply}")
            if not isinstance(reply, HeadReply) or not isinstance(reply.heads, Mapping):
                return self._block(Reason.MALFORMED_HEAD, f"owner {owner!r}: malformed reply")
            if reply.owner != owner:
                return self._block(Reason.CONFLICTING_OWNER,
                                   f"asked {owner!r}, reply names {reply.owner!r}")
            dup = _duplicate_entry(reply)
            if dup is not None:
                return self._block(Reason.CONFLICTING_REPLY,
                                   f"owner {owner!r} sent several entries for {dup!r}")
            heads = reply.heads
            extra = heads.keys() - keys
            if extra:
                return self._block(Reason.WRONG_KEY,
                                   f"owner {owner!r} answered for unasked keys {sorted(extra)}")
            for key in keys:
                entry = heads.get(key)
                if entry is None:
                    return self._block(Reason.WRONG_KEY,
                                       f"owner {owner!r} has no head for {key!r}")
                bad = self._check_entry(key, owner, entry)
                if bad is not None:
                    return bad
        changed = {k: h for k, h in self._heads.items() if self._frontier.get(k) != h}
        self._changed = changed
        if not changed:
            return self._finish()
        need: dict[str, list[RecordId]] = {}
        for key, hid in changed.items():
            if key not in self._fresh:
                need.setdefault(self._owner_of[key], []).append(hid)
        if not need:
            return self._finish()
        return RecordFetches({o: tuple(ids) for o, ids in need.items()})

    def _check_entry(self, key: str, owner: str, entry: Any) -> GateDecision | None:
        if not isinstance(entry, HeadEntry):
            return self._block(Reason.MALFORMED_HEAD, f"head for {key!r} is not a HeadEntry")
        if entry.key != key:
            return self._block(Reason.WRONG_KEY,
                               f"head asked for {key!r} identifies {entry.key!r}")
        # only an id other than the very frontier id object sent as known (#27) is checked
        if (rid := entry.record_id) is not self._frontier.get(key) and not is_record_id(rid):
            return self._block(Reason.MALFORMED_HEAD,
                               f"head for {key!r} is not a record id: {entry.record_id!r}")
        if isinstance(entry.seq, bool) or not isinstance(entry.seq, int) or entry.seq < 1:
            return self._block(Reason.MALFORMED_HEAD, f"head for {key!r} has a bad sequence")
        self._heads[key] = rid
        if entry.record is not None and rid != self._frontier.get(key):
            err = self._verify_fresh(key, owner, rid, entry.record)
            if err is not None:
                return self._block(Reason.MALFORMED_HEAD, err)
            self._fresh[key] = entry.record
        return None

    def _verify_fresh(self, key: str, owner: str, hid: RecordId, rec: Any) -> str | None:
        if not isinstance(rec, Record):
            return f"record for {key!r} is not a Record"
        try:
            rec.verify()
        except RecordError as exc:
            return f"record for {key!r} does not verify: {exc}"
        if rec.id != hid or rec.key != key or rec.owner != owner or not rec.has_content:
            return f"record for {key!r} is not the reported head {hid[:12]}"
        return None

    # -- Alg. 1 lines 8-13 --------------------------------------------------------------
    def on_records(self, fetched: Mapping[str, Iterable[Record] | BaseException]) -> GateDecision:
        """Verify fetched records (id = hash of content) and decide.

        Args:
            fetched: owner -> the records it returned, or the exception raised.
        """
        by_id: dict[RecordId, tuple[str, Record]] = {}
        for owner, recs in fetched.items():
            if isinstance(recs, BaseException):
                return self._block(Reason.FETCH_FAILED,
                                   f"fetch from {owner!r} failed: {type(recs).__name__}: {recs}")
            for r in recs:
                if isinstance(r, Record):
                    by_id[r.id] = (owner, r)
        for key, hid in self._changed.items():
            if key in self._fresh:
                continue
            owner = self._owner_of[key]
            got = by_id.get(hid)
            if got is None:
                return self._block(Reason.FETCH_FAILED, f"head {hid[:12]} of {key!r} not returned")
            err = self._verify_fresh(key, owner, hid, got[1])
            if err is not None:
                return self._block(Reason.FETCH_FAILED, err)
            self._fresh[key] = got[1]
        return self._finish()

    def _finish(self) -> GateDecision:
        if self._changed:
            stale = ", ".join(sorted(self._changed))
            if self.replanned:
                return self._block(Reason.SECOND_CHANGE, f"changed again after replan: {stale}")
            return self._decide(Outcome.REPLAN_REQUIRED, Reason.STALE, f"changed: {stale}")
        return self._decide(Outcome.AUTHORIZED, Reason.VALID)


def _duplicate_entry(reply: HeadReply) -> str | None:
    """Return a key a reply lists more than once (or whose list and map disagree)."""
    entries = getattr(reply, "entries", ())
    if not entries:
        return None
    seen: set[str] = set()
    for e in entries:
        key = getattr(e, "key", None)
        if not isinstance(key, str) or key in seen or reply.heads.get(key) is not e:
            return str(key)
        seen.add(key)
    return None if len(seen) == len(reply.heads) else "?"


def apply_fail_open(decision: GateDecision) -> GateDecision:
    """ABLATION ONLY (planfence App. C): turn a blocked decision into an authorization.

    Used by the fail-open ablation to measure what fail-closed prevents. Never use it to
    protect real tools.
    """
    if decision.outcome is not Outcome.BLOCKED:
        return decision
    from dataclasses import replace

    return replace(decision, outcome=Outcome.AUTHORIZED, reason=Reason.FAIL_OPEN,
                   detail=f"FAIL-OPEN ABLATION overrode {decision.reason.value}: "
                          f"{decision.detail}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GateContext:
    """What one executor's gate is run with: everything but the action (Alg. 1 inputs).

    One frozen object instead of the same eight values in every signature; the per-call
    inputs (action, L(a), D(a), replanned) stay arguments.

    Attributes:
        lookup: local lineage lookup (store + replica cache; returns None for a missing
            or lineage-incomplete record).
        ownership: the team's ownership map (groups head queries per owner).
        owners: where heads and fresh records come from: a sync
            :class:`~icore.memory.OwnerAccess` or an async
            :class:`~icore.memory.AsyncOwnerAccess` (None: a policy that reads nothing).
        timeout_s: per-owner RPC timeout, in seconds.
        mode: lineage traversal mode (DIRECT only for the App. C ablation).
        clock: gives the validation-point time (None: 0.0).
        points: validation-point counter shared by the executor's gates (None: 0).
        policy: policy name written into decisions.
    """

    lookup: Lookup
    ownership: OwnershipMap
    owners: OwnerAccess | AsyncOwnerAccess | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    mode: TraversalMode = TraversalMode.FULL
    clock: Clock | None = None
    points: PointCounter | None = None
    policy: str = "planfence"

    def start(self, *, action: str, roots: Iterable[RecordId], deps: Collection[str],
              replanned: bool) -> GateRun:
        """Return a new sans-io :class:`GateRun` of one validation in this context.

        Args:
            action: action name for the log.
            roots: L(a).
            deps: D(a).
            replanned: True for the validation after the one replan.

        Returns:
            The run, not started yet.
        """
        return GateRun(action=action, roots=tuple(roots), deps=frozenset(deps),
                       lookup=self.lookup, ownership=self.ownership, replanned=replanned,
                       mode=self.mode, clock=self.clock, points=self.points,
                       policy=self.policy)


async def _guarded(coro: Any, timeout_s: float) -> Any:
    """Await ``coro`` within ``timeout_s``; any exception (a timeout too) is returned."""
    try:
        async with asyncio.timeout(timeout_s):  # no extra task (unlike wait_for)
            return await coro
    except Exception as exc:
        return exc


async def _caught(coro: Any) -> Any:
    """Await ``coro`` (an access that bounds its own time); any exception is returned."""
    try:
        return await coro
    except Exception as exc:
        return exc


async def _per_owner(calls: dict[str, Any], timeout_s: float, *,
                     bounded: bool = False, inline: bool = False) -> dict[str, Any]:
    """Await one call per owner, all concurrently; one owner needs no gather or task.

    ``bounded``: the access ends every call within ``timeout_s`` itself
    (``bounds_timeouts``, :class:`~icore.memory.AsyncOwnerAccess`): no second timer.
    ``inline``: its calls never suspend (``answers_inline``): awaited one after another,
    no task per owner.
    """
    if inline:
        return {o: await _caught(c) for o, c in calls.items()}
    if len(calls) == 1:
        ((owner, coro),) = calls.items()
        return {owner: await (_caught(coro) if bounded else _guarded(coro, timeout_s))}
    names = list(calls)
    results = await asyncio.gather(*(_caught(calls[o]) if bounded
                                     else _guarded(calls[o], timeout_s) for o in names))
    return dict(zip(names, results, strict=True))


def run_gate(context: GateContext, *, action: str, roots: Iterable[RecordId],
             deps: Collection[str], replanned: bool) -> GateDecision:
    """Run planfence Alg. 1 synchronously in ``context`` over its sync ``owners``.

    Owners are queried one after another; any exception an owner raises becomes a
    blocked decision (fail closed).

    Args:
        context: the gate context; ``context.owners`` is an
            :class:`~icore.memory.OwnerAccess`.
        action: action name for the log.
        roots: L(a).
        deps: D(a).
        replanned: True for the validation after the one replan.

    Returns:
        The :class:`GateDecision`.
    """
    owners = cast(OwnerAccess, context.owners)
    run = context.start(action=action, roots=roots, deps=deps, replanned=replanned)
    timeout_s = context.timeout_s
    step: Step = run.start()
    if isinstance(step, HeadQueries):
        replies: dict[str, HeadReply | BaseException] = {}
        for owner, keys in step.per_owner.items():
            try:
                replies[owner] = owners.query_heads(owner, keys, known=step.known,
                                                    timeout_s=timeout_s)
            except Exception as exc:  # fail closed on anything an owner does
                replies[owner] = exc
        step = run.on_heads(replies)
    if isinstance(step, RecordFetches):
        fetched: dict[str, Iterable[Record] | BaseException] = {}
        for owner, ids in step.per_owner.items():
            try:
                fetched[owner] = owners.fetch(owner, ids, timeout_s=timeout_s)
            except Exception as exc:
                fetched[owner] = exc
        step = run.on_records(fetched)
    assert isinstance(step, GateDecision)
    return step


async def arun_gate(context: GateContext, *, action: str, roots: Iterable[RecordId],
                    deps: Collection[str], replanned: bool) -> GateDecision:
    """Run planfence Alg. 1 in ``context`` over its async ``owners``.

    All owners are queried concurrently, each bounded by ``context.timeout_s`` (by the
    gate's own timer, or by the access itself when its class says ``bounds_timeouts =
    True``); a timeout or any exception blocks (fail closed).

    Args:
        context: the gate context; ``context.owners`` is an
            :class:`~icore.memory.AsyncOwnerAccess`.
        action: action name for the log.
        roots: L(a).
        deps: D(a).
        replanned: True for the validation after the one replan.

    Returns:
        The :class:`GateDecision`.
    """
    return await _arun(context.start(action=action, roots=roots, deps=deps,
                                     replanned=replanned),
                       cast(AsyncOwnerAccess, context.owners), context.timeout_s)


async def _arun(run: GateRun, owners: AsyncOwnerAccess, timeout_s: float) -> GateDecision:
    """Drive ``run`` over ``owners``: head queries, then any fetches (see :func:`arun_gate`)."""
    bounded = getattr(type(owners), "bounds_timeouts", False) is True
    inline = bounded and getattr(type(owners), "answers_inline", False) is True
    step: Step = run.start()
    if isinstance(step, HeadQueries):
        if bounded and len(step.per_owner) == 1:
            # one self-bounded owner: _per_owner's work without two coroutines (#27)
            ((o, keys),) = step.per_owner.items()
            got: HeadReply | BaseException
            try:
                got = await owners.query_heads(o, keys, known=step.known,
                                               timeout_s=timeout_s)
            except Exception as exc:  # fail closed on anything the owner access raises
                got = exc
            step = run.on_heads({o: got})
        else:
            step = run.on_heads(await _per_owner(
                {o: owners.query_heads(o, keys, known=step.known, timeout_s=timeout_s)
                 for o, keys in step.per_owner.items()}, timeout_s, bounded=bounded,
                inline=inline))
    if isinstance(step, RecordFetches):
        step = run.on_records(await _per_owner(
            {o: owners.fetch(o, ids, timeout_s=timeout_s)
             for o, ids in step.per_owner.items()}, timeout_s, bounded=bounded,
            inline=inline))
    assert isinstance(step, GateDecision)
    return step


def validate(
    *,
    roots: Iterable[RecordId],
    deps: Collection[str],
    lookup: Lookup,
    ownership: OwnershipMap,
    owners: OwnerAccess,
    replanned: bool = False,
    action: str = "action",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mode: TraversalMode = TraversalMode.FULL,
    clock: Clock | None = None,
    points: PointCounter | None = None,
    policy: str = "planfence",
) -> GateDecision:
    """Run planfence Alg. 1 synchronously over an :class:`~icore.memory.OwnerAccess`.

    Owners are queried one after another (local stores answer at once); use
    :func:`avalidate` to query network owners concurrently. Any exception raised by an
    owner becomes a blocked decision (fail closed).

    Args:
        roots: L(a).
        deps: D(a).
        lookup: local lineage lookup.
        ownership: the ownership map.
        owners: how owners are reached.
        replanned: True for the validation after the one replan.
        action: action name for the log.
        timeout_s: per-owner RPC timeout in seconds.
        mode: traversal mode.
        clock: clock for the validation point time.
        points: validation point counter.
        policy: policy name written into the decision.

    Returns:
        The :class:`GateDecision`.
    """
    context = GateContext(lookup=lookup, ownership=ownership, owners=owners,
                          timeout_s=timeout_s, mode=mode, clock=clock, points=points,
                          policy=policy)
    return run_gate(context, action=action, roots=roots, deps=deps,
                    replanned=replanned)


async def avalidate(
    *,
    roots: Iterable[RecordId],
    deps: Collection[str],
    lookup: Lookup,
    ownership: OwnershipMap,
    owners: AsyncOwnerAccess,
    replanned: bool = False,
    action: str = "action",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mode: TraversalMode = TraversalMode.FULL,
    clock: Clock | None = None,
    points: PointCounter | None = None,
    policy: str = "planfence",
) -> GateDecision:
    """Run planfence Alg. 1 over an :class:`~icore.memory.AsyncOwnerAccess`.

    All owners are queried concurrently, each bounded by ``timeout_s`` seconds; a timeout
    or any exception blocks (fail closed). Arguments as in :func:`validate`.
    """
    # the run GateContext.start would make, without a context per call
    run = GateRun(action=action, roots=tuple(roots), deps=frozenset(deps), lookup=lookup,
                  ownership=ownership, replanned=replanned, mode=mode, clock=clock,
                  points=points, policy=policy)
    return await _arun(run, owners, timeout_s)


__all__ = [
    "INFRASTRUCTURE_REASONS",
    "GateContext",
    "GateRun",
    "HeadQueries",
    "PointCounter",
    "RecordFetches",
    "apply_fail_open",
    "arun_gate",
    "avalidate",
    "run_gate",
    "validate",
]
