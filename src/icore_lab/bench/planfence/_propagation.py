"""How an owner's update reaches the other agents during a replay (planfence Sec. 5.1).

The policy's :class:`~icore.fence.Propagation` decides: nothing, asynchronous background
replication (local replica), a synchronous central commit (centralized lineage),
announcements after every K dirty updates (metadata sync), or a write quorum of replicas.
:class:`_Propagation` holds that side of an :class:`~icore_lab.bench.planfence._episode.Episode`
(the episode owns the stores, the clients and the stall it blocks on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from icore.fence import PolicyStrategy, Propagation
from icore.memory import MemoryStore
from icore.net import TransportError
from icore.records import Record, RecordId, derive
from icore_lab.bench.planfence._services import ReplayTransport
from icore_lab.bench.planfence._spec import CENTRAL, NetSpec, VariantSpec
from icore_lab.workloads import Schedule, Update


class _EpisodeSide(Protocol):
    """What the propagation reads and calls on its episode."""

    schedule: Schedule
    spec: VariantSpec
    net: NetSpec
    strategy: PolicyStrategy
    transport: ReplayTransport
    stores: dict[str, MemoryStore]
    truth: dict[RecordId, Record]
    sync_failures: int

    def client(self, agent: str) -> Any: ...
    def _background(self, agent: str) -> Any: ...
    def _commit_local(self, rec: Record) -> None: ...
    def _block(self, make: Any, agent: str) -> None: ...


class _Propagation:
    """The propagation side of one episode: owner revisions and how they spread.

    Args:
        ep: the episode (stores, clients, the blocking step and its stall).
    """

    def __init__(self, ep: _EpisodeSide) -> None:
        self.ep = ep
        self.dirty: dict[str, dict[str, Record]] = {}
        self.dirty_count: dict[str, int] = {}
        self._by_kind: dict[Propagation, Callable[[Record, list[str]], None]] = {
            Propagation.NONE: lambda rec, others: None,
            Propagation.BACKGROUND: self._replicate_in_background,
            Propagation.CENTRAL_COMMIT: self._commit_centrally,
            Propagation.ANNOUNCE_EVERY_K: self._announce_every_k,
            Propagation.WRITE_QUORUM: self._write_quorum,
        }

    def revise(self, u: Update) -> Record:
        """Commit the owner's revision of ``u.key`` and propagate it; return the record."""
        store = self.ep.stores[u.owner]
        head = store.head(u.key)
        assert head is not None
        prev = self.ep.truth[head.record_id]
        rev = int(prev.content["rev"]) + 1
        rec = derive(key=u.key, owner=u.owner, seq=store.next_seq(), type=prev.type,
                     content={"value": u.value, "rev": rev}, inputs=[prev])
        self.ep._commit_local(rec)
        self.on_update(rec)
        return rec

    def on_update(self, rec: Record) -> None:
        """Propagate an owner's new head as the policy does (:class:`~icore.fence.Propagation`)."""
        others = [a for a in self.ep.schedule.agents if a != rec.owner]
        self._by_kind[self.ep.strategy.propagation](rec, others)

    def _replicate_in_background(self, rec: Record, others: list[str]) -> None:
        """Asynchronous background replication: bytes count, nobody waits."""
        bg = self.ep._background(rec.owner)
        self.ep.transport.sync_background_clock()
        for a in others:
            try:
                bg.replicate(a, [rec], timeout_s=self.ep.net.timeout_s)
            except TransportError:
                self.ep.sync_failures += 1  # background: the replica stays behind

    def _commit_centrally(self, rec: Record, others: list[str]) -> None:
        cl = self.ep.client(rec.owner)
        self.ep._block(lambda: cl.commit(CENTRAL, rec, timeout_s=self.ep.net.timeout_s),
                       rec.owner)

    def _announce_every_k(self, rec: Record, others: list[str]) -> None:
        dirty = self.dirty.setdefault(rec.owner, {})
        dirty[rec.key] = rec
        self.dirty_count[rec.owner] = self.dirty_count.get(rec.owner, 0) + 1
        if self.dirty_count[rec.owner] >= self.ep.spec.k:
            self._announce(rec.owner, list(dirty.values()), others)
            dirty.clear()
            self.dirty_count[rec.owner] = 0

    def _write_quorum(self, rec: Record, others: list[str]) -> None:
        """Write quorum: the owner plus floor(N/2) replicas hold the new head.

        The replicas are taken in ring order, the executor's first.
        """
        ring = sorted(others, key=lambda a: (a != self.ep.schedule.executor, a))
        self._announce(rec.owner, [rec], ring[: len(self.ep.schedule.agents) // 2])

    def _announce(self, owner: str, recs: list[Record], to: Sequence[str]) -> None:
        cl = self.ep.client(owner)
        envelopes = tuple(r.without_content() for r in recs)
        left = set(to)

        async def go() -> None:
            order = sorted(left)
            res = await asyncio.gather(*(self._announce_one(cl, a, envelopes)
                                         for a in order), return_exceptions=True)
            for a, r in zip(order, res, strict=True):
                if not isinstance(r, BaseException):
                    left.discard(a)
            failed = [r for r in res if isinstance(r, BaseException)]
            if failed:
                raise failed[0]

        self.ep._block(go, owner)

    async def _announce_one(self, cl: Any, to: str, envelopes: tuple[Record, ...]) -> None:
        await cl.announce(to, envelopes, timeout_s=self.ep.net.timeout_s)
