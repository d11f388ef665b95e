"""Validation policies (planfence Sec. 5.1, design.md 3.3): one strategy per policy.

A policy is a :class:`GateCheck`: given an action's roots and D(a) it returns a
:class:`~icore.fence.GateDecision`. Safe policies are the gate run against different
sources of heads (:mod:`icore.fence._owner_queries`); unsafe baselines skip lineage:

========================  ====================================================
policy                    gate check
========================  ====================================================
PlanFence                 :class:`PlanFenceCheck` over the owners of D(a)
centralized lineage       :class:`PlanFenceCheck` over one central store
metadata sync K           :class:`PlanFenceCheck` over :class:`AnnouncedHeads`
                          (heads announced to this replica every K updates)
per-key / batched         :class:`AllKeyCheck` over :class:`AllKeyHeads`
all-key                   (every shared key, per key or per owner)
majority / all replica    :class:`PlanFenceCheck` over :class:`QuorumHeads`
owner-head freshness      :class:`OwnerHeadFreshness` (reads owner heads, no lineage)
local replica             :class:`LocalReplica` (acts from installed state)
========================  ====================================================

Which gate check a policy gets is decided in one place, :func:`make_check` (through
the policy's :class:`PolicyStrategy`, :func:`strategy`); a harness or a live run names
the policy and gives a :class:`~icore.fence.GateContext` and a :class:`TeamContext`.
Each strategy also states how an owner's update reaches other replicas
(:class:`Propagation`), which the harness that moves records carries out.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, cast

from icore.errors import AsyncRequired, FenceError
from icore.fence._decision import GateDecision, Outcome, Reason
from icore.fence._gate import GateContext, PointCounter, arun_gate, run_gate
from icore.fence._owner_queries import (
    AllKeyHeads,
    AnnouncedHeads,
    CentralHeads,
    QuorumHeads,
    ThreadedOwners,
    nonblocking,
)
from icore.memory import AsyncOwnerAccess, OwnerAccess, Store
from icore.records import RecordId


class PolicyError(FenceError, ValueError):
    """A policy cannot be built: an unknown name, or a missing owner access or replica.

    ``fields['policy']`` names the policy.
    """


class Policy(enum.StrEnum):
    """Coordination policies compared under identical schedules (design.md 3.3)."""

    LOCAL_REPLICA = "local_replica"
    OWNER_HEAD_FRESHNESS = "owner_head_freshness"
    CENTRALIZED_LINEAGE = "centralized_lineage"
    METADATA_SYNC = "metadata_sync"
    PER_KEY_ALL_KEY = "per_key_all_key"
    BATCHED_ALL_KEY = "batched_all_key"
    PLANFENCE = "planfence"
    MAJORITY_REPLICA = "majority_replica"
    ALL_REPLICA = "all_replica"

    @property
    def safe(self) -> bool:
        """True for policies that bind plans to exact lineage (metadata sync: only K=1)."""
        return self not in (Policy.LOCAL_REPLICA, Policy.OWNER_HEAD_FRESHNESS)


class GateCheck(Protocol):
    """Decides whether an action may run (one validation, no replan)."""

    name: str

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Return the decision for one validation."""
        ...


class PolicyCheck(GateCheck, Protocol):
    """A gate check built by :func:`make_check`: it also counts its owner-side cost.

    Attributes:
        name: policy name written into decisions.
        heads_queried: head items asked of owners (or read locally) by every validation
            so far; all-key counts every shared key it asked for, the others the heads
            their decisions checked.
    """

    heads_queried: int


def _is_async_access(owners: object) -> bool:
    return inspect.iscoroutinefunction(getattr(owners, "query_heads", None))


def _with_points(context: GateContext) -> GateContext:
    return context if context.points is not None else replace(context,
                                                              points=PointCounter())


class PlanFenceCheck:
    """planfence Alg. 1 against the head source ``context.owners``.

    The head source: owners, central store, installed heads, a quorum.

    Args:
        context: the gate context; ``context.owners`` is a sync
            :class:`~icore.memory.OwnerAccess` (usable by both :meth:`validate` and
            :meth:`avalidate`) or an async :class:`~icore.memory.AsyncOwnerAccess`
            (:meth:`avalidate`, or :meth:`validate` when ``loop`` is given). Without a
            point counter the validator gets its own.
        loop: an event loop that this thread drives: :meth:`validate` runs the async gate
            on it to completion (the replay's virtual-time loop), so queries to several
            owners overlap in time.
    """

    def __init__(self, context: GateContext, *,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.context = _with_points(context)
        self.loop = loop
        self.name = self.context.policy
        self.heads_queried = 0

    @property
    def points(self) -> PointCounter:
        """The validation-point counter."""
        return cast(PointCounter, self.context.points)

    def _count(self, decision: GateDecision) -> GateDecision:
        self.heads_queried += decision.heads_checked
        return decision

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Run the gate once (see :func:`icore.fence.validate`).

        Args:
            action: action name for the log.
            roots: L(a).
            deps: D(a).
            replanned: True for the validation after the one replan.

        Returns:
            The decision.

        Raises:
            AsyncRequired: the owners are reached through an async access and no loop
                was given.
        """
        if self.loop is not None:
            return self.loop.run_until_complete(self.avalidate(
                action=action, roots=roots, deps=deps, replanned=replanned))
        if _is_async_access(self.context.owners):
            raise AsyncRequired("this validator's owners are async; use avalidate()",
                                action=action)
        return self._count(run_gate(self.context, action=action, roots=roots, deps=deps,
                                    replanned=replanned))

    async def avalidate(self, *, action: str, roots: Sequence[RecordId],
                        deps: Collection[str], replanned: bool) -> GateDecision:
        """Run the gate with every owner of D(a) queried concurrently.

        Sync owners each run in a worker thread; see :func:`icore.fence.avalidate`.
        Sync in-process owners that cannot block (:func:`nonblocking`: in-memory stores)
        are read directly on the loop instead, as :meth:`validate` reads them: the same
        gate and decision, without a thread hop per owner (issue 28).

        Args:
            action: action name for the log.
            roots: L(a).
            deps: D(a).
            replanned: True for the validation after the one replan.

        Returns:
            The decision.
        """
        context = self.context
        if self.loop is None and not _is_async_access(context.owners) and nonblocking(
                context.owners):
            return self._count(run_gate(context, action=action, roots=roots, deps=deps,
                                        replanned=replanned))
        if not _is_async_access(context.owners):
            context = replace(context, owners=ThreadedOwners(
                cast(OwnerAccess, context.owners)))
        return self._count(await arun_gate(context, action=action, roots=roots, deps=deps,
                                           replanned=replanned))


class AllKeyCheck(PlanFenceCheck):
    """The all-key controls: the gate over :class:`AllKeyHeads`.

    Every validation asks for every shared key; the decision is on D(a).

    Args:
        context: the gate context; ``context.owners`` is the executor's async access.
        heads: the all-key head source over ``context.owners``.
        loop: as in :class:`PlanFenceCheck`.
    """

    def __init__(self, context: GateContext, heads: AllKeyHeads, *,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(replace(context, owners=heads), loop=loop)
        self.heads = heads

    def _count(self, decision: GateDecision) -> GateDecision:
        self.heads_queried = self.heads.heads_queried
        return decision

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Fan out to every shared key, then decide on D(a).

        See :meth:`PlanFenceCheck.validate`.
        """
        self.heads.begin()
        return super().validate(action=action, roots=roots, deps=deps, replanned=replanned)

    async def avalidate(self, *, action: str, roots: Sequence[RecordId],
                        deps: Collection[str], replanned: bool) -> GateDecision:
        """Async form of :meth:`validate`."""
        if self.loop is None:  # validate() already began this validation
            self.heads.begin()
        return await super().avalidate(action=action, roots=roots, deps=deps,
                                       replanned=replanned)


class OwnerHeadFreshness:
    """Unsafe baseline: never checks the plan's lineage (planfence Sec. 5.2, Table 2).

    It reads the owners' current records of D(a) but not the plan's lineage, so it acts on
    an obsolete plan while holding fresh facts.

    Args:
        context: the gate context; ``context.owners`` is a sync
            :class:`~icore.memory.OwnerAccess` (read one owner after another).
        install: where fresh records are installed (None: not kept).
    """

    def __init__(self, context: GateContext, *, install: Store | None) -> None:
        self.context = _with_points(context)
        self.install = install
        self.name = self.context.policy
        self.heads_queried = 0

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Refresh D(a) from the owners, then authorize without a lineage check.

        Args:
            action: action name for the log.
            roots: L(a) (not checked).
            deps: D(a).
            replanned: True for the validation after a replan.

        Returns:
            An authorized, not-validated decision (also when the read failed).
        """
        ctx = self.context
        owners = cast(OwnerAccess, ctx.owners)
        heads: dict[str, RecordId] = {}
        for owner, keys in ctx.ownership.group_by_owner(sorted(deps)).items():
            try:
                reply = owners.query_heads(owner, keys, timeout_s=ctx.timeout_s)
                for k, h in reply.heads.items():
                    heads[k] = h.record_id
                missing = [h.record_id for h in reply.heads.values()
                           if self.install is not None and self.install.get(h.record_id) is None]
                if missing and self.install is not None:
                    for rec in owners.fetch(owner, missing, timeout_s=ctx.timeout_s):
                        self.install.install(rec)
            except Exception as exc:  # the freshness read failed; it acts anyway
                return self._count(_plain(ctx, action, roots, deps, replanned, heads,
                                          f"freshness read failed: {exc}"))
        return self._count(_plain(ctx, action, roots, deps, replanned, heads,
                                  "read current owner heads; plan lineage not checked"))

    def _count(self, decision: GateDecision) -> GateDecision:
        self.heads_queried += decision.heads_checked
        return decision


class LocalReplica:
    """Unsafe baseline: acts from installed local state with no validation.

    Args:
        context: the gate context (only its clock, point counter and policy name are
            used).
    """

    def __init__(self, context: GateContext) -> None:
        self.context = _with_points(context)
        self.name = self.context.policy
        self.heads_queried = 0

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Authorize without any check.

        Args:
            action: action name for the log.
            roots: L(a) (not checked).
            deps: D(a) (not checked).
            replanned: True for the validation after a replan.

        Returns:
            An authorized, not-validated decision.
        """
        return _plain(self.context, action, roots, deps, replanned, {},
                      "acted from local replica")


def _plain(context: GateContext, action: str, roots: Iterable[RecordId],
           deps: Collection[str], replanned: bool, heads: Mapping[str, RecordId],
           detail: str) -> GateDecision:
    points = cast(PointCounter, context.points)
    return GateDecision(
        outcome=Outcome.AUTHORIZED, reason=Reason.NOT_VALIDATED, action=action,
        roots=tuple(roots), deps=tuple(sorted(deps)), heads=dict(heads), replanned=replanned,
        point=points.next(),
        at_ms=context.clock.now_ms() if context.clock is not None else 0.0,
        policy=context.policy, detail=detail, heads_checked=len(heads))


# --- strategies ---------------------------------------------------------------------------
class Propagation(enum.StrEnum):
    """How an owner's committed update reaches the other replicas under a policy."""

    NONE = "none"
    """Nothing proactive: validators read the owners (or act on what they hold)."""
    BACKGROUND = "background"
    """Asynchronous replication of the record to every other agent; nobody waits."""
    CENTRAL_COMMIT = "central_commit"
    """A blocking commit at the central lineage service."""
    ANNOUNCE_EVERY_K = "announce_every_k"
    """Blocking announcement of the owner's dirty heads after every K updates."""
    WRITE_QUORUM = "write_quorum"
    """Blocking announcement to floor(N/2) replicas (the executor's first)."""


class Reads(enum.StrEnum):
    """Which access to the owners a policy's validator needs."""

    NOTHING = "nothing"
    """No owner access (local replica)."""
    SYNC = "sync"
    """A sync :class:`~icore.memory.OwnerAccess`, owners read one after another."""
    ASYNC = "async"
    """An async :class:`~icore.memory.AsyncOwnerAccess`, owners queried concurrently."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamContext:
    """What a policy needs to know about the team beyond the gate context.

    Attributes:
        install: the executor's replica (installed heads; where fresh records go).
        keys: every shared key (all-key controls).
        replicas: the services of the other agents' replica views, in the order they are
            read (quorum controls; the majority reads the first half).
        central: name of the central lineage service when the team reaches it under its
            own name (a live run); None when owner names already resolve to it.
        loop: an event loop this thread drives; sync :meth:`GateCheck.validate` of the
            gate policies runs the async gate on it (see :class:`PlanFenceCheck`).
    """

    install: Store | None = None
    keys: tuple[str, ...] = ()
    replicas: tuple[str, ...] = ()
    central: str | None = None
    loop: asyncio.AbstractEventLoop | None = None


@dataclass(frozen=True, slots=True)
class PolicyStrategy:
    """One policy: the facts a harness needs and how its validator is built.

    Attributes:
        policy: the policy.
        reads: which owner access its validator needs (:class:`Reads`).
        propagation: how owners' updates reach other replicas (:class:`Propagation`).
        replicated_setup: every agent's replica starts with every shared record
            installed (otherwise only the planner's and the executor's).
        central: records are also committed at one central lineage service, which
            answers for every owner.
        replica_views: agents serve their installed view as a replica service
            (:func:`~icore.fence.replica_service`).
    """

    policy: Policy
    reads: Reads = Reads.ASYNC
    propagation: Propagation = Propagation.NONE
    replicated_setup: bool = False
    central: bool = False
    replica_views: bool = False

    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return this policy's gate check (see :func:`make_check`)."""
        return PlanFenceCheck(context, loop=team.loop)


@dataclass(frozen=True, slots=True)
class _LocalReplica(PolicyStrategy):
    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return a :class:`LocalReplica` validator over ``context`` (no owner access)."""
        return LocalReplica(context)


@dataclass(frozen=True, slots=True)
class _OwnerHeadFreshness(PolicyStrategy):
    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return an :class:`OwnerHeadFreshness` validator; fresh records go to ``team.install``."""
        return OwnerHeadFreshness(context, install=team.install)


@dataclass(frozen=True, slots=True)
class _Centralized(PolicyStrategy):
    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return the gate against the central lineage service.

        When ``team.central`` names the service (a live run), head queries go to it through
        :class:`CentralHeads`; otherwise owner names already resolve to it.

        Raises:
            PolicyError: ``team.central`` is set and ``context.owners`` is None.
        """
        if team.central is not None:
            context = replace(context, owners=CentralHeads(_async(context), team.central))
        return PlanFenceCheck(context, loop=team.loop)


@dataclass(frozen=True, slots=True)
class _MetadataSync(PolicyStrategy):
    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return the gate over :class:`AnnouncedHeads`: installed heads, content from owners.

        Raises:
            PolicyError: ``team.install`` or ``context.owners`` is None.
        """
        heads = AnnouncedHeads(_installed(team, self.policy), _async(context))
        return PlanFenceCheck(replace(context, owners=heads), loop=team.loop)


@dataclass(frozen=True, slots=True)
class _AllKey(PolicyStrategy):
    batched: bool = False

    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return the all-key control: an :class:`AllKeyCheck` over every key of ``team.keys``.

        One request per owner when ``batched``, else one per key.

        Raises:
            PolicyError: ``context.owners`` is None.
        """
        heads = AllKeyHeads(_async(context), context.ownership, team.keys,
                            batched=self.batched)
        return AllKeyCheck(context, heads, loop=team.loop)


@dataclass(frozen=True, slots=True)
class _Quorum(PolicyStrategy):
    majority: bool = False

    def validator(self, context: GateContext, team: TeamContext) -> PolicyCheck:
        """Return the gate over :class:`QuorumHeads` of the replica views ``team.replicas``.

        With ``majority`` only the first half of them is read: with the executor's own replica,
        floor(N/2) + 1 of N.

        Raises:
            PolicyError: ``team.install`` or ``context.owners`` is None.
        """
        remote = team.replicas
        if self.majority:  # with the executor's own replica: floor(N/2) + 1 of N
            remote = remote[: (len(remote) + 1) // 2]
        heads = QuorumHeads(_async(context), _installed(team, self.policy), remote)
        return PlanFenceCheck(replace(context, owners=heads), loop=team.loop)


def _async(context: GateContext) -> AsyncOwnerAccess:
    owners = context.owners
    if owners is None:
        raise PolicyError(f"policy {context.policy} needs an owner access",
                          policy=context.policy)
    if _is_async_access(owners):
        return cast(AsyncOwnerAccess, owners)
    return ThreadedOwners(cast(OwnerAccess, owners))


def _installed(team: TeamContext, policy: Policy) -> Store:
    if team.install is None:
        raise PolicyError(f"policy {policy.value} reads the executor's replica; give "
                          "TeamContext(install=...)", policy=policy.value)
    return team.install


STRATEGIES: Mapping[Policy, PolicyStrategy] = {
    Policy.LOCAL_REPLICA: _LocalReplica(
        Policy.LOCAL_REPLICA, reads=Reads.NOTHING, propagation=Propagation.BACKGROUND,
        replicated_setup=True),
    Policy.OWNER_HEAD_FRESHNESS: _OwnerHeadFreshness(
        Policy.OWNER_HEAD_FRESHNESS, reads=Reads.SYNC),
    Policy.CENTRALIZED_LINEAGE: _Centralized(
        Policy.CENTRALIZED_LINEAGE, propagation=Propagation.CENTRAL_COMMIT, central=True),
    Policy.METADATA_SYNC: _MetadataSync(
        Policy.METADATA_SYNC, propagation=Propagation.ANNOUNCE_EVERY_K,
        replicated_setup=True),
    Policy.PER_KEY_ALL_KEY: _AllKey(Policy.PER_KEY_ALL_KEY, batched=False),
    Policy.BATCHED_ALL_KEY: _AllKey(Policy.BATCHED_ALL_KEY, batched=True),
    Policy.PLANFENCE: PolicyStrategy(Policy.PLANFENCE),
    Policy.MAJORITY_REPLICA: _Quorum(
        Policy.MAJORITY_REPLICA, propagation=Propagation.WRITE_QUORUM,
        replicated_setup=True, replica_views=True, majority=True),
    Policy.ALL_REPLICA: _Quorum(
        Policy.ALL_REPLICA, replicated_setup=True, replica_views=True),
}
"""Every policy's strategy (the one place that decides what a policy does)."""


def strategy(policy: Policy | str) -> PolicyStrategy:
    """Return the strategy of ``policy`` (a :class:`Policy` or its name).

    Args:
        policy: e.g. ``Policy.PLANFENCE`` or ``"metadata_sync"``.

    Returns:
        The :class:`PolicyStrategy`.

    Raises:
        PolicyError: ``policy`` names no policy (``fields['policy']``).
    """
    try:
        return STRATEGIES[Policy(policy)]
    except ValueError:
        raise PolicyError(f"unknown policy {policy!r}; expected one of "
                          f"{', '.join(p.value for p in Policy)}", policy=str(policy)) from None


def make_check(policy: Policy | str, context: GateContext,
               team: TeamContext | None = None) -> PolicyCheck:
    """Build ``policy``'s gate check for one executor.

    Args:
        policy: the policy (or its name).
        context: the gate context: lookup, ownership, the executor's owner access (the
            kind :attr:`PolicyStrategy.reads` names), timeout, mode, clock, points and
            the name written into decisions (a harness may label variants, e.g.
            ``metadata_sync_k4``).
        team: the executor's replica, the shared keys, the replica order, the central
            service and the loop (default: none of them).

    Returns:
        The gate check (it counts :attr:`PolicyCheck.heads_queried`).

    Raises:
        PolicyError: an unknown policy, or one that needs an owner access or the
            executor's replica that was not given.
    """
    return strategy(policy).validator(context, team or TeamContext())


__all__ = [
    "STRATEGIES",
    "AllKeyCheck",
    "GateCheck",
    "LocalReplica",
    "OwnerHeadFreshness",
    "PlanFenceCheck",
    "Policy",
    "PolicyCheck",
    "PolicyError",
    "PolicyStrategy",
    "Propagation",
    "Reads",
    "TeamContext",
    "make_check",
    "strategy",
]
