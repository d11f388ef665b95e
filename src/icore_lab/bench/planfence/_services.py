"""What both transports of the PlanFence replay serve (planfence Sec. 5.1, App. A, C).

The owner services of an episode's world and each agent's access path.

:class:`ReplayWorld` holds the episode's stores and the policy's strategy; it answers
which services exist (one per owner, the central service, replica views) and which CPU
serves each. :class:`FaultyHandler` injects App. C's malformed heads,
:class:`ReplicaHandler` serves a replica view. The transports
(:mod:`icore_lab.bench.planfence._inproc`, :mod:`icore_lab.bench.planfence._tcp`) carry the
requests.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from icore._clock import ManualClock
from icore.fence import PolicyStrategy, installed_heads, replica_service
from icore.memory import HeadEntry, MemoryStore, OwnershipMap
from icore.net import HeadQuery, HeadReplyMsg, Message, OwnerHandler
from icore_lab.bench.planfence._spec import CENTRAL, NetSpec
from icore_lab.net import HostCpu, LinkPair, Loopback, path_by_name


class ReplicaHandler(OwnerHandler):
    """Answers head queries from this replica's *installed* view (quorum controls).

    The service is named :func:`~icore.fence.replica_service` of the agent.
    """

    answers_foreign_keys = True  # its view of every owner's keys (never a refusal)

    def handle(self, msg: Message, peer: str) -> Message:
        """Serve head queries from installed heads; everything else as an owner."""
        if isinstance(msg, HeadQuery):
            self.requests += 1
            heads = installed_heads(self.store, msg.keys)
            return HeadReplyMsg(msg.rid, self.agent, tuple(heads.values()))
        return super().handle(msg, peer)


class FaultyHandler(OwnerHandler):
    """An owner whose head replies for ``corrupt`` keys are malformed (sequence 0).

    The malformed-head fault of planfence App. C.

    Args:
        store: the owner's store.
        agent: the owner's id.
    """

    def __init__(self, store: MemoryStore, *, agent: str) -> None:
        super().__init__(store, agent=agent)
        self.corrupt: set[str] = set()

    def handle(self, msg: Message, peer: str) -> Message:
        """Answer, then corrupt the head entries of :attr:`corrupt` keys."""
        reply = super().handle(msg, peer)
        if self.corrupt and isinstance(reply, HeadReplyMsg) and isinstance(msg, HeadQuery):
            heads = tuple(HeadEntry(h.key, h.record_id, 0) if h.key in self.corrupt else h
                          for h in reply.heads)
            # an unchanged head (answered "same") is corrupted into a full entry too
            heads += tuple(HeadEntry(k, msg.known[k], 0) for k, _q in reply.same
                           if k in self.corrupt)
            same = tuple(e for e in reply.same if e[0] not in self.corrupt)
            return HeadReplyMsg(reply.rid, reply.owner, heads, same)
        return reply


_PROTO_PATHS: dict[tuple[str, str, str, float, float], LinkPair] = {}


def make_path(net: NetSpec) -> LinkPair:
    """Return a fresh access path for one agent under ``net``.

    Trace links are built once per process and copied (a copy shares the immutable
    opportunity table and starts with an empty queue): building a
    :class:`~icore.net.TraceLink` re-checks every trace line, ~0.2 s each.
    """
    if net.link == "loopback":
        pair = LinkPair(Loopback(), Loopback(), "loopback")
    else:
        # the trace folder is named by the environment; re-resolve only when it changes
        key = (os.environ.get("ICORE_TRACES", ""), os.environ.get("ICORE_SHARED_DATA", ""),
               net.link, net.offset_ms, net.base_delay_ms)
        proto = _PROTO_PATHS.get(key)
        if proto is None:
            proto = path_by_name(net.link, offset_ms=net.offset_ms,
                                 base_delay_ms=net.base_delay_ms)
            _PROTO_PATHS[key] = proto
        pair = LinkPair(copy.copy(proto.up), copy.copy(proto.down), proto.name)
    return pair


@dataclass
class ReplayWorld:
    """The owners' side of one episode: stores, the central store, the policy, CPUs.

    Attributes:
        net: the network.
        strategy: the policy's :class:`~icore.fence.PolicyStrategy`.
        ownership: the ownership map.
        stores: agent -> its store.
        central: the centralized-lineage store (used when ``strategy.central``).
        agent_cpus: agent -> the CPU of its agent process (clients).
        memory_cpus: agent (and :data:`CENTRAL`) -> the CPU of its memory process.
        faulty: agent -> its owner handler (shared by every client).
    """

    net: NetSpec
    strategy: PolicyStrategy
    ownership: OwnershipMap
    stores: dict[str, MemoryStore]
    central: MemoryStore
    agent_cpus: dict[str, HostCpu]
    memory_cpus: dict[str, HostCpu]
    faulty: dict[str, FaultyHandler] = field(default_factory=dict)

    def owner_handler(self, agent: str) -> FaultyHandler:
        """Return ``agent``'s owner handler (made once, shared by every client)."""
        if agent not in self.faulty:
            self.faulty[agent] = FaultyHandler(self.stores[agent], agent=agent)
        return self.faulty[agent]

    def handlers(self, agent: str) -> dict[str, OwnerHandler]:
        """Service name -> handler, as ``agent``'s client sees the team.

        Centralized lineage: one shared service answers for every owner (replies name
        that owner) and as :data:`CENTRAL`. Otherwise every other agent's owner service
        and, with replica views, its ``replica-<agent>`` view.
        """
        hs: dict[str, OwnerHandler] = {}
        if self.strategy.central:
            for o in self.ownership.owners():
                hs[o] = OwnerHandler(self.central, agent=o)
            hs[CENTRAL] = OwnerHandler(self.central, agent=CENTRAL)
            return hs
        for a, st in self.stores.items():
            if a == agent:
                continue
            hs[a] = self.owner_handler(a)
            if self.strategy.replica_views:
                hs[replica_service(a)] = ReplicaHandler(st, agent=a)
        return hs

    def owner_cpus(self, handlers: Mapping[str, OwnerHandler]) -> dict[str, HostCpu]:
        """Service name -> the CPU of the memory process that serves it."""
        if self.strategy.central:
            return {name: self.memory_cpus[CENTRAL] for name in handlers}
        return {name: self.memory_cpus[h.agent or CENTRAL] for name, h in handlers.items()}


class ReplayTransport(Protocol):
    """How an episode's agents reach the owner services (passed to the replay).

    The in-process virtual-time transport
    (:class:`~icore_lab.bench.planfence._inproc.InprocTransport`) and real TCP with mutual
    TLS (:class:`~icore_lab.bench.planfence._tcp.TcpTransport`) implement it; the episode
    (:class:`~icore_lab.bench.planfence._episode.Episode`) is the same over both.

    Attributes:
        clock: the episode clock (virtual or wall), in ms.
        loop: the event loop the episode drives with ``run_until_complete``.
    """

    clock: ManualClock
    loop: asyncio.AbstractEventLoop

    def start(self, world: ReplayWorld) -> None:
        """Bring up the owner services of ``world`` (the stores are set up)."""
        ...

    def client(self, agent: str) -> Any:
        """A new async client of ``agent`` (query_heads, fetch, commit, announce)."""
        ...

    def background(self, agent: str) -> Any:
        """A new sync client of ``agent`` for background replication (``replicate``)."""
        ...

    def sync_client(self, agent: str) -> Any:
        """A new sync client of ``agent`` on the episode clock (owner-head freshness)."""
        ...

    def sync_background_clock(self) -> None:
        """Bring the background clock up to the episode clock (before replicating)."""
        ...

    def close(self) -> None:
        """Release clients, services and the loop."""
        ...


__all__ = ["FaultyHandler", "ReplayTransport", "ReplayWorld", "ReplicaHandler", "make_path"]
