"""An agent process's owner-memory backend, chosen once from its config (a strategy).

:class:`TcpBackend`: the agent's durable SQLite memory behind its own owner service
(mutual TLS on 127.0.0.1), an owner client to the other agents, replication of each
commit to the roles that read it (and the central service's copy under a central
policy). :class:`NatsBackend`: the agent's memory in the team's NATS JetStream engine
(no owner service of its own; the engine holds every head, KV watchers fill the replica
cache, the commit is the publication). :class:`~icore.live._agent_proc.LiveAgentProcess`
talks to either through :class:`AgentBackend` and never asks which one it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from icore.fence import LoopOwners, installed_heads, strategy
from icore.live._replies import StatsReply
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    HeadReply,
    OwnerAccess,
    OwnershipMap,
    SQLiteStore,
    Store,
)
from icore.net import (
    HeadQuery,
    HeadReplyMsg,
    Message,
    OwnerClient,
    OwnerHandler,
    OwnerServer,
    client_context,
    server_context,
)
from icore.records import Record, RecordId


class _ReplicaView(OwnerHandler):
    """This agent's owner service, also serving its installed view of other owners' keys.

    Quorum policies read a quorum of replica views (planfence Sec. 5.1). Own keys are
    answered as the owner answers them.
    """

    answers_foreign_keys = True  # others' keys: the installed view, never a refusal

    def handle(self, msg: Message, peer: str) -> Message:
        """Answer as the owner; add installed heads of asked keys owned by others."""
        reply = super().handle(msg, peer)
        if isinstance(msg, HeadQuery) and isinstance(reply, HeadReplyMsg):
            ownership = self.store.ownership
            others = [k for k in msg.keys if ownership.owner_of(k) != self.agent]
            extra = installed_heads(self.store, others)
            if extra:
                reply = HeadReplyMsg(reply.rid, reply.owner,
                                     reply.heads + tuple(extra.values()), reply.same)
        return reply


class AgentBackend(Protocol):
    """What an agent process needs from its owner memory (planfence App. A.2).

    Attributes:
        store: the agent's own store (commits, heads, replica cache).
        central_service: whether a central policy reaches the central service under its
            own name (False when the engine itself is the one shared service).
    """

    store: Store
    central_service: bool

    async def start(self) -> int:
        """Start serving; return the owner service's TCP port (0: none)."""
        ...

    def connect(self, addresses: Mapping[str, tuple[str, int]]) -> None:
        """Learn the team's owner addresses (``agent -> (host, port)``)."""
        ...

    def pull(self, key: str) -> Record | None:
        """``key``'s head record read from its owner when nothing local has it, or None."""
        ...

    def owner_access(self) -> OwnerAccess:
        """A sync owner access for the fence (called from the fence's worker thread)."""
        ...

    def async_owner_access(self) -> AsyncOwnerAccess:
        """The gate's async owner access on the agent's loop."""
        ...

    async def propagate(self, rec: Record, base: RecordId | None,
                        to_agents: Sequence[str]) -> list[str]:
        """Publish an own record already committed locally; return the agents it missed."""
        ...

    async def query_heads(self, owner: str, keys: Sequence[str]) -> HeadReply:
        """The owner's current heads of ``keys`` (the auditor's read)."""
        ...

    async def fetch(self, owner: str, ids: Sequence[RecordId]) -> list[Record]:
        """Exact records from their owner (the auditor's read)."""
        ...

    def stats(self, reply: StatsReply) -> StatsReply:
        """``reply`` (a ``stats`` answer) with this backend's counters added."""
        ...

    async def close(self) -> None:
        """Stop serving and close the store (bounded; errors are swallowed)."""
        ...


class TcpBackend:
    """SQLite memory behind an own owner service; TCP owner client to the others.

    Args:
        cfg: the agent's config (``agent``, ``role``, ``db``, ``certs``, ``synchronous``).
        ownership: the team's ownership map.
        policy: the policy under test (central service, replica views).
        rpc_s: bound of each owner RPC, seconds.
    """

    central_service = True

    def __init__(self, cfg: Mapping[str, Any], ownership: OwnershipMap, *, policy: str,
                 rpc_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.id: str = cfg["agent"]
        self.certs = cfg["certs"]
        self.policy, self.rpc_s = policy, rpc_s
        central = cfg["role"] == "central"
        self.store: Store = SQLiteStore(cfg["db"], ownership, None if central else self.id,
                                        synchronous=cfg.get("synchronous", "NORMAL"))
        self.client: OwnerClient | None = None
        self.server: OwnerServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._central_lock = asyncio.Lock()

    async def start(self) -> int:
        """See :meth:`AgentBackend.start`."""
        self.loop = asyncio.get_running_loop()
        self.server = OwnerServer(self.store, agent=self.id,
                                  ssl_context=server_context(self.certs, self.id))
        if strategy(self.policy).replica_views:
            self.server.handler = _ReplicaView(self.store, agent=self.id)
        return await self.server.start()

    def connect(self, addresses: Mapping[str, tuple[str, int]]) -> None:
        """See :meth:`AgentBackend.connect`: opens the owner client."""
        self.client = OwnerClient(addresses, identity=self.id,
                                  ssl_context=client_context(self.certs, self.id))

    def pull(self, key: str) -> Record | None:
        """See :meth:`AgentBackend.pull`: replication delivers everything, so None."""
        return None

    def owner_access(self) -> OwnerAccess:
        """The owner client driven on the agent's loop from the fence's worker thread."""
        assert self.client is not None and self.loop is not None
        return LoopOwners(self.client, self.loop)

    def async_owner_access(self) -> AsyncOwnerAccess:
        """The owner client."""
        assert self.client is not None
        return self.client

    async def propagate(self, rec: Record, base: RecordId | None,
                        to_agents: Sequence[str]) -> list[str]:
        """Copy to the central service (central policies), then replicate to ``to_agents``."""
        assert self.client is not None
        if strategy(self.policy).central:
            # the central service serializes every commit: keep this owner's sequence
            # order (FIFO lock, taken right after the local commit)
            async with self._central_lock:
                await self.client.commit("central", rec, expected_head=base,
                                         timeout_s=self.rpc_s)
        targets = list(to_agents)
        results = await asyncio.gather(*(self.client.replicate(t, [rec], timeout_s=self.rpc_s)
                                         for t in targets), return_exceptions=True)
        return [t for t, r in zip(targets, results, strict=True) if isinstance(r, BaseException)]

    async def query_heads(self, owner: str, keys: Sequence[str]) -> HeadReply:
        """See :meth:`AgentBackend.query_heads`."""
        assert self.client is not None
        return await self.client.query_heads(owner, keys, timeout_s=self.rpc_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId]) -> list[Record]:
        """See :meth:`AgentBackend.fetch`."""
        assert self.client is not None
        return await self.client.fetch(owner, ids, timeout_s=self.rpc_s)

    def stats(self, reply: StatsReply) -> StatsReply:
        """Server and client traffic, and the number of stored records."""
        return replace(
            reply,
            server=None if self.server is None else self.server.stats.as_dict(),
            client=None if self.client is None else self.client.stats.as_dict(),
            records=self.store.record_count() if isinstance(self.store, SQLiteStore)
            else None)

    async def close(self) -> None:
        """Close the client, then the server, then the store."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.close(), 5)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.close(), 5)
        with contextlib.suppress(Exception):
            self.store.close()


class NatsBackend:
    """The agent's memory in the team's NATS JetStream engine (``icore.memory.nats``).

    Args:
        cfg: the agent's config (``agent``, ``certs``, ``memory`` with ``servers`` and
            ``prefix``).
        ownership: the team's ownership map.
        rpc_s: bound of each engine operation, seconds.
    """

    central_service = False

    def __init__(self, cfg: Mapping[str, Any], ownership: OwnershipMap, *,
                 rpc_s: float = DEFAULT_TIMEOUT_S) -> None:
        from icore.memory.nats import NatsStore

        memory = cfg["memory"]
        self.nats = NatsStore(memory["servers"], certs_dir=cfg["certs"], ownership=ownership,
                              agent=cfg["agent"], prefix=memory.get("prefix", "icore"),
                              timeout_s=rpc_s)
        self.store: Store = self.nats
        self.rpc_s = rpc_s

    async def start(self) -> int:
        """No owner service of its own: the engine holds the agent's heads.

        Metadata sync of every other owner's heads through a KV watcher fills the replica
        cache.
        """
        self.nats.watch_heads()
        return 0

    def connect(self, addresses: Mapping[str, tuple[str, int]]) -> None:
        """Nothing to open: every agent reaches the engine."""

    def pull(self, key: str) -> Record | None:
        """A key the watcher has not delivered yet, pulled from the engine once.

        The publisher's commit was acknowledged before the step was asked for.
        """
        return self.nats.pull(key)

    def owner_access(self) -> OwnerAccess:
        """The engine's sync owner access (quorum barrier)."""
        return self.nats.owner_access()

    def async_owner_access(self) -> AsyncOwnerAccess:
        """The engine's async owner access (its calls run on the store's loop)."""
        return self.nats.async_owner_access()

    async def propagate(self, rec: Record, base: RecordId | None,
                        to_agents: Sequence[str]) -> list[str]:
        """The commit is the publication: the engine's KV watchers deliver it."""
        return []

    async def query_heads(self, owner: str, keys: Sequence[str]) -> HeadReply:
        """See :meth:`AgentBackend.query_heads` (the sync access, off the loop)."""
        return await asyncio.to_thread(self.owner_access().query_heads, owner, keys,
                                       timeout_s=self.rpc_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId]) -> list[Record]:
        """See :meth:`AgentBackend.fetch` (the sync access, off the loop)."""
        return await asyncio.to_thread(self.owner_access().fetch, owner, ids,
                                       timeout_s=self.rpc_s)

    def stats(self, reply: StatsReply) -> StatsReply:
        """The engine client's counters."""
        st = self.nats.memory.stats
        return replace(reply, nats={"gets": st.gets, "puts": st.puts,
                                    "cas_conflicts": st.cas_conflicts,
                                    "permission_denied": st.permission_denied})

    async def close(self) -> None:
        """Close the store (and its engine connection)."""
        with contextlib.suppress(Exception):
            self.store.close()


def make_backend(cfg: Mapping[str, Any], ownership: OwnershipMap, *, policy: str,
                 rpc_s: float) -> AgentBackend:
    """The backend named by the config's ``memory.backend`` (``nats``; else TCP + SQLite)."""
    memory = cfg.get("memory") or {}
    if memory.get("backend") == "nats":
        return NatsBackend(cfg, ownership, rpc_s=rpc_s)
    return TcpBackend(cfg, ownership, policy=policy, rpc_s=rpc_s)
