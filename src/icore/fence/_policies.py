"""Validation policies (planfence Sec. 5.1, design.md 3.3) on one code path.

A policy is a :class:`Validator`: given an action's roots and D(a) it returns a
:class:`~icore.fence.GateDecision`. Safe policies are the gate run against different
sources of heads; unsafe baselines skip lineage:

========================  ====================================================
policy                    validator
========================  ====================================================
PlanFence                 :class:`GateValidator` over the owners of D(a)
centralized lineage       :class:`GateValidator` over one central store
metadata sync K           :class:`GateValidator` over :class:`InstalledHeads`
                          (heads announced to this replica every K updates)
owner-head freshness      :class:`OwnerHeadFreshness` (reads owner heads, no lineage)
local replica             :class:`LocalReplica` (acts from installed state)
========================  ====================================================

Batched/per-key all-key and replica-quorum controls are built by the replay harness on
the same gate with another head source (``icore.bench``).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

from icore._clock import Clock
from icore.errors import AsyncRequired
from icore.fence._decision import GateDecision, Outcome, Reason
from icore.fence._gate import PointCounter, avalidate, validate
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    HeadReply,
    OwnerAccess,
    OwnershipMap,
    OwnerUnavailable,
    Store,
)
from icore.records import Lookup, Record, RecordId, TraversalMode


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


class Validator(Protocol):
    """Decides whether an action may run (one validation, no replan)."""

    name: str

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Return the decision for one validation."""
        ...


class _ThreadedOwners:
    """:class:`~icore.memory.AsyncOwnerAccess` over a sync one: each call runs in a worker
    thread, so the owners of D(a) are queried concurrently."""

    def __init__(self, owners: OwnerAccess) -> None:
        self.owners = owners

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        return await asyncio.to_thread(self.owners.query_heads, owner, keys, known=known,
                                       timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        return await asyncio.to_thread(self.owners.fetch, owner, ids, timeout_s=timeout_s)


def _is_async_access(owners: object) -> bool:
    return inspect.iscoroutinefunction(getattr(owners, "query_heads", None))


class GateValidator:
    """planfence Alg. 1 against a head source (owners, central store, installed heads).

    Args:
        lookup: local lineage lookup.
        ownership: the ownership map used to group queries.
        owners: where heads come from: sync :class:`~icore.memory.OwnerAccess` (usable
            by both :meth:`validate` and :meth:`avalidate`) or async
            :class:`~icore.memory.AsyncOwnerAccess` (only :meth:`avalidate`).
        name: policy name for logs.
        clock / points: validation-point time and counter.
        timeout_s: per-RPC timeout in seconds.
        mode: traversal mode (DIRECT only for the App. C ablation).
    """

    def __init__(self, *, lookup: Lookup, ownership: OwnershipMap,
                 owners: OwnerAccess | AsyncOwnerAccess,
                 name: str = Policy.PLANFENCE.value, clock: Clock | None = None,
                 points: PointCounter | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 mode: TraversalMode = TraversalMode.FULL) -> None:
        self.lookup, self.ownership, self.owners = lookup, ownership, owners
        self.name, self.clock, self.timeout_s, self.mode = name, clock, timeout_s, mode
        self.points = points or PointCounter()

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Run the gate (see :func:`icore.fence.validate`).

        Raises:
            AsyncRequired: the owners are reached through an async access.
        """
        if _is_async_access(self.owners):
            raise AsyncRequired("this validator's owners are async; use avalidate()",
                                action=action)
        owners: OwnerAccess = self.owners  # type: ignore[assignment]
        return validate(roots=roots, deps=deps, lookup=self.lookup, ownership=self.ownership,
                        owners=owners, replanned=replanned, action=action,
                        timeout_s=self.timeout_s, mode=self.mode, clock=self.clock,
                        points=self.points, policy=self.name)

    async def avalidate(self, *, action: str, roots: Sequence[RecordId],
                        deps: Collection[str], replanned: bool) -> GateDecision:
        """Run the gate with every owner of D(a) queried concurrently (sync owners each
        in a worker thread); see :func:`icore.fence.avalidate`."""
        owners: AsyncOwnerAccess
        if _is_async_access(self.owners):
            owners = self.owners  # type: ignore[assignment]
        else:
            owners = _ThreadedOwners(self.owners)  # type: ignore[arg-type]
        return await avalidate(roots=roots, deps=deps, lookup=self.lookup,
                               ownership=self.ownership, owners=owners, replanned=replanned,
                               action=action, timeout_s=self.timeout_s, mode=self.mode,
                               clock=self.clock, points=self.points, policy=self.name)


class InstalledHeads:
    """:class:`~icore.memory.OwnerAccess` answered from a replica's installed heads.

    This is what metadata sync compares plans against: the heads owners announced to this
    replica (every K dirty updates), not the owners' current heads.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Return the installed heads of ``keys``."""
        out = {}
        for k in keys:
            h = self.store.installed_head(k)
            if h is not None:
                out[k] = h
        return HeadReply(owner, out)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Return installed records with these ids."""
        recs = self.store.fetch(ids)
        if len(recs) != len(ids):
            raise OwnerUnavailable("announced record content not installed", owner=owner)
        return recs


class OwnerHeadFreshness:
    """Unsafe baseline: reads the owners' current records of D(a) but never checks the
    plan's lineage, so it acts on an obsolete plan while holding fresh facts
    (planfence Sec. 5.2, Table 2)."""

    def __init__(self, *, ownership: OwnershipMap, owners: OwnerAccess, install: Store | None,
                 clock: Clock | None = None, points: PointCounter | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.ownership, self.owners, self.install = ownership, owners, install
        self.clock, self.timeout_s = clock, timeout_s
        self.points = points or PointCounter()
        self.name = Policy.OWNER_HEAD_FRESHNESS.value

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Refresh D(a) from the owners, then authorize without a lineage check."""
        heads: dict[str, RecordId] = {}
        for owner, keys in self.ownership.group_by_owner(sorted(deps)).items():
            try:
                reply = self.owners.query_heads(owner, keys, timeout_s=self.timeout_s)
                for k, h in reply.heads.items():
                    heads[k] = h.record_id
                missing = [h.record_id for h in reply.heads.values()
                           if self.install is not None and self.install.get(h.record_id) is None]
                if missing and self.install is not None:
                    for rec in self.owners.fetch(owner, missing, timeout_s=self.timeout_s):
                        self.install.install(rec)
            except Exception as exc:  # the freshness read failed; it acts anyway
                return _plain(self, action, roots, deps, replanned, heads,
                              f"freshness read failed: {exc}")
        return _plain(self, action, roots, deps, replanned, heads,
                      "read current owner heads; plan lineage not checked")


class LocalReplica:
    """Unsafe baseline: acts from installed local state with no validation."""

    def __init__(self, *, clock: Clock | None = None, points: PointCounter | None = None
                 ) -> None:
        self.clock = clock
        self.points = points or PointCounter()
        self.name = Policy.LOCAL_REPLICA.value

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Authorize without any check."""
        return _plain(self, action, roots, deps, replanned, {}, "acted from local replica")


def _plain(v: OwnerHeadFreshness | LocalReplica, action: str, roots: Iterable[RecordId],
           deps: Collection[str], replanned: bool, heads: Mapping[str, RecordId],
           detail: str) -> GateDecision:
    return GateDecision(
        outcome=Outcome.AUTHORIZED, reason=Reason.NOT_VALIDATED, action=action,
        roots=tuple(roots), deps=tuple(sorted(deps)), heads=dict(heads), replanned=replanned,
        point=v.points.next(), at_ms=v.clock.now_ms() if v.clock is not None else 0.0,
        policy=v.name, detail=detail, heads_checked=len(heads))
