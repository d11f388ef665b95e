"""Head sources of the coordination policies (planfence Sec. 5.1, design.md 3.3).

Every safe policy runs the same gate (Alg. 1); they differ only in where the gate's heads
come from. Each head source here wraps the executor's access to the owners (an
:class:`~icore.memory.AsyncOwnerAccess`, or a sync :class:`~icore.memory.OwnerAccess`) and
is itself an owner access, so the gate cannot tell them apart:

========================  =====================================================
source                    heads from
========================  =====================================================
:class:`InstalledHeads`   a replica's installed view (sync; content from it too)
:class:`AnnouncedHeads`   a replica's installed view, content from the owner
                          (metadata sync: heads announced every K updates)
:class:`AllKeyHeads`      the owners, for *every* shared key (all-key controls)
:class:`QuorumHeads`      the highest owner sequence over a read quorum of replica
                          views (majority / all replica)
:class:`CentralHeads`     one central lineage service answering for every owner
========================  =====================================================

:class:`ThreadedOwners` and :class:`LoopOwners` bridge sync and async access. Pure: no
I/O and no clock; the wrapped access does the I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    HeadEntry,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnerAccess,
    OwnershipMap,
    OwnerUnavailable,
    Store,
)
from icore.records import Record, RecordId

_T = TypeVar("_T")

REPLICA_PREFIX = "replica-"
"""Service names of replica views (quorum controls) start with this prefix."""


def replica_service(agent: str) -> str:
    """Return the service name of ``agent``'s replica view (quorum controls).

    Args:
        agent: the agent whose installed view the service answers from.

    Returns:
        ``replica-<agent>``.
    """
    return f"{REPLICA_PREFIX}{agent}"


def installed_heads(store: Store, keys: Iterable[str]) -> dict[str, HeadEntry]:
    """Return ``store``'s installed view of ``keys`` (no inlined records).

    Args:
        store: a replica (own heads for own keys, installed heads for others').
        keys: semantic keys; keys without an installed head are left out.

    Returns:
        key -> :class:`~icore.memory.HeadEntry` (key, record id, owner sequence).
    """
    out: dict[str, HeadEntry] = {}
    for k in keys:
        h = store.installed_head(k)
        if h is not None:
            out[k] = HeadEntry(h.key, h.record_id, h.seq)
    return out


class InstalledHeads:
    """Sync :class:`~icore.memory.OwnerAccess` answered from a replica's installed heads.

    What metadata sync compares plans against when every announced record's content is
    installed too: the heads owners announced to this replica, not their current heads.

    Args:
        store: the replica.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Return the installed heads of ``keys`` (no network).

        Args:
            owner: the owner asked (named in the reply).
            keys: keys of D(a) that ``owner`` owns.
            known: unused (nothing is inlined).
            timeout_s: unused.

        Returns:
            The reply.
        """
        return HeadReply(owner, installed_heads(self.store, keys))

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Return installed records with these ids.

        Args:
            owner: the owner asked.
            ids: record ids.
            timeout_s: unused.

        Returns:
            The records, in order.

        Raises:
            OwnerUnavailable: some record's content is not installed.
        """
        recs = self.store.fetch(ids)
        if len(recs) != len(ids):
            raise OwnerUnavailable("announced record content not installed", owner=owner)
        return recs


def nonblocking(owners: object) -> bool:
    """Whether a sync owner access answers without blocking, so it may run on an event loop.

    True for an access that says so itself (a ``nonblocking`` attribute that is True) and
    for :class:`~icore.memory.LocalOwners` whose every store is a plain
    :class:`~icore.memory.MemoryStore` (a dict read under a short lock: no I/O, no
    wait). Anything else (SQLite files, sockets, a store subclass that may do more) is
    treated as blocking and reached through :class:`ThreadedOwners`. An access declared
    non-blocking is called directly, so the owner-query timeout cannot interrupt it.
    """
    declared = getattr(owners, "nonblocking", None)
    if isinstance(declared, bool):
        return declared
    return type(owners) is LocalOwners and all(
        type(s) is MemoryStore for s in owners.stores.values())


class ThreadedOwners:
    """:class:`~icore.memory.AsyncOwnerAccess` over a sync one, each call in a worker thread.

    So the owners of D(a) are queried concurrently.

    Args:
        owners: the sync access.
    """

    def __init__(self, owners: OwnerAccess) -> None:
        self.owners = owners

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.OwnerAccess.query_heads`."""
        return await asyncio.to_thread(self.owners.query_heads, owner, keys, known=known,
                                       timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.OwnerAccess.fetch`."""
        return await asyncio.to_thread(self.owners.fetch, owner, ids, timeout_s=timeout_s)


class LoopOwners:
    """Sync :class:`~icore.memory.OwnerAccess` over an async one that lives on ``loop``.

    ``loop`` is another thread's running event loop: a fence running in a worker thread
    reaches the owners through the loop's client.

    Args:
        owners: the async access, bound to ``loop``.
        loop: the running loop (not this thread's).
    """

    def __init__(self, owners: AsyncOwnerAccess, loop: asyncio.AbstractEventLoop) -> None:
        self.owners, self.loop = owners, loop

    def _run(self, coro: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s + 1.0)

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.OwnerAccess.query_heads`."""
        return self._run(self.owners.query_heads(owner, keys, known=known,
                                                 timeout_s=timeout_s), timeout_s)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.OwnerAccess.fetch`."""
        return self._run(self.owners.fetch(owner, ids, timeout_s=timeout_s), timeout_s)


class AnnouncedHeads:
    """Metadata sync: heads from this replica's installed (announced) view.

    Content is fetched from the owner only after a mismatch (planfence App. A).

    Args:
        store: the executor's replica.
        owners: where record content is fetched.
    """

    def __init__(self, store: Store, owners: AsyncOwnerAccess) -> None:
        self.store, self.owners = store, owners

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Installed heads (no network).

        Arguments as in :meth:`icore.memory.OwnerAccess.query_heads`.
        """
        return HeadReply(owner, installed_heads(self.store, keys))

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch content from the owner."""
        return await self.owners.fetch(owner, ids, timeout_s=timeout_s)


class AllKeyHeads:
    """All-key validation: every validation queries the heads of *every* shared key.

    One request per owner (batched) or one request per key (per-key); the gate decides on
    D(a) (planfence Sec. 4.3: the all-key check serializes |X| heads).

    Call :meth:`begin` before each validation: the first head query of a validation
    starts the fan-out, the others share it.

    Args:
        owners: the executor's access to the owners.
        ownership: groups ``keys`` by owner.
        keys: every shared key.
        batched: one request per owner (True) or per key (False).

    Attributes:
        heads_queried: head items asked of owners so far (owner-side cost).
    """

    def __init__(self, owners: AsyncOwnerAccess, ownership: OwnershipMap,
                 keys: Sequence[str], *, batched: bool) -> None:
        self.owners, self.ownership, self.batched = owners, ownership, batched
        self.groups = ownership.group_by_owner(keys)
        self._task: asyncio.Future[dict[str, HeadReply | BaseException]] | None = None
        self.heads_queried = 0

    def begin(self) -> None:
        """Start a new validation (the next head query fans out again)."""
        self._task = None

    async def _fan_out(self, known: Mapping[str, RecordId], timeout_s: float
                       ) -> dict[str, HeadReply | BaseException]:
        jobs: list[tuple[str, list[str]]] = []
        for owner, group in self.groups.items():
            if self.batched:
                jobs.append((owner, group))
            else:
                jobs.extend((owner, [k]) for k in group)
        self.heads_queried += sum(len(group) for _, group in jobs)
        results = await asyncio.gather(*(self.owners.query_heads(o, group, known=known,
                                                                 timeout_s=timeout_s)
                                         for o, group in jobs), return_exceptions=True)
        merged: dict[str, HeadReply | BaseException] = {}
        for (owner, _), reply in zip(jobs, results, strict=True):
            if isinstance(reply, BaseException):
                merged[owner] = reply
                continue
            prev = merged.get(owner)
            if isinstance(prev, BaseException):
                continue
            heads = dict(prev.heads) if prev is not None else {}
            heads.update(reply.heads)
            merged[owner] = HeadReply(reply.owner, heads)
        return merged

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Return ``owner``'s heads of ``keys`` out of the all-key fan-out.

        Raises:
            Exception: whatever ``owner``'s request raised (the gate blocks).
        """
        if self._task is None:
            self._task = asyncio.ensure_future(self._fan_out(dict(known or {}), timeout_s))
        merged = await asyncio.shield(self._task)
        reply = merged.get(owner)
        if isinstance(reply, BaseException):
            raise reply
        if reply is None:
            return HeadReply(owner, {})
        return HeadReply(reply.owner, {k: v for k, v in reply.heads.items() if k in keys})

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch changed records from the owner."""
        return await self.owners.fetch(owner, ids, timeout_s=timeout_s)


class QuorumHeads:
    """Replica-quorum validation: the highest owner sequence among the replica views of a key.

    Reads the installed head of each key from the ``remote`` replica views (the executor's
    own replica is read locally), keeps the highest owner sequence; fetches content from the
    owner.

    Args:
        owners: the executor's access.
        local: the executor's replica.
        remote: the services of the replica views that form the read quorum (e.g.
            :func:`replica_service` names in the replay; in a live run every agent's
            owner service also answers from its installed view).
    """

    def __init__(self, owners: AsyncOwnerAccess, local: Store, remote: Sequence[str]) -> None:
        self.owners, self.local, self.remote = owners, local, list(remote)

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Highest-sequence head per key over the read quorum.

        Raises:
            Exception: a replica view did not answer (the gate blocks).
        """
        best = installed_heads(self.local, keys)
        replies = await asyncio.gather(*(self.owners.query_heads(
            r, keys, timeout_s=timeout_s) for r in self.remote))
        for rep in replies:
            for k, h in rep.heads.items():
                if k in keys and (k not in best or h.seq > best[k].seq):
                    best[k] = h
        return HeadReply(owner, best)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch changed records from the owner."""
        return await self.owners.fetch(owner, ids, timeout_s=timeout_s)


class CentralHeads:
    """Centralized lineage: one service answers for every owner.

    Replies are renamed to the owner asked, so the gate's owner check holds.

    Args:
        owners: the executor's access (reaches the service named ``central``).
        central: the central service's name.
    """

    def __init__(self, owners: AsyncOwnerAccess, central: str) -> None:
        self.owners, self.central = owners, central

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """One batched head query to the central service, named as ``owner``'s reply."""
        reply = await self.owners.query_heads(self.central, keys, known=known,
                                              timeout_s=timeout_s)
        return HeadReply(owner, reply.heads, reply.entries)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch exact records from the central service."""
        return await self.owners.fetch(self.central, ids, timeout_s=timeout_s)


__all__ = [
    "REPLICA_PREFIX",
    "AllKeyHeads",
    "AnnouncedHeads",
    "CentralHeads",
    "InstalledHeads",
    "LoopOwners",
    "QuorumHeads",
    "ThreadedOwners",
    "installed_heads",
    "nonblocking",
    "replica_service",
]
