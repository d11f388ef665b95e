"""Owner memory on NATS JetStream (planfence Sec. 3.1, Alg. 1, App. A; design.md 2, 3.1).

Layout, in three JetStream key-value buckets (``<prefix>-heads``, ``-records``,
``-owners``; every key starts with the owner's agent id, so subject permissions give each
agent's NATS user write access to its own keys only, see :mod:`icore.net.nats`):

* ``records``: ``<owner>.<record id>`` -> the record's canonical encoding (with content).
  Written once with ``create`` (content addressed, so immutable); any agent reads exact
  versions. Readers verify the id against the content, so the engine is not trusted for
  integrity, only for availability and for who may write.
* ``owners``: ``<owner>`` -> ``[seq, record id, key, record]``: the owner sequence and the
  owner's *last commit intent*. A commit is decided by one compare-and-set of this entry
  (``update(owner, value, last=revision)``): that serializes every commit of one owner
  across keys, so the App. A rules (writer is the owner, the sequence increases, the same
  sequence with another id is a conflict, an identical record is a no-op) hold even with
  several writer processes.
* ``heads``: ``<owner>.<encoded key>`` -> ``[record id, seq]``: H(x). After the owner CAS the
  writer stores the record and moves the head with a revision CAS, only forwards in
  sequence. A writer that crashed in between leaves an intent that the owner's next
  commit (or :meth:`NatsStore.owner_seq`) rolls forward before deciding anything; the
  commit is acknowledged only after its head moved (a retried commit that finds its
  record stored is an idempotent replay, acknowledged only after that roll-forward), so
  a reader never misses an acknowledged write and never sees a head whose record is not
  stored.
* ``heads``: ``<owner>`` -> the owner's head digest (#27, :mod:`._digest`): every head of
  the owner in one entry, moved (CAS, forward only) with the head before the commit is
  acknowledged, so the gate reads d heads of an owner as one message. Owner entries of
  digest-aware writers carry a fifth element (intent layout 1) that writers from before
  digests cannot parse, so they cannot commit past a digest.

Records, owner entries and single heads are read from the stream leader (``allow_direct``
off, or a leader get on the heads bucket). The heads bucket allows direct gets for the
gate's batched read only, which proves its freshness against a quorum barrier
(:class:`NatsOwnerAccess`): without a quorum the gate blocks (fail closed) instead of
authorizing against a stale leader or follower.

The gate reaches owners through :class:`NatsOwnerAccess` (async) or
:class:`SyncNatsOwnerAccess` (sync): per owner, the heads of D(a) in one batched direct
get (``multi_last``, nats-server 2.11+; the owner's digest for d >= 2) concurrent with
the barrier (all owners at once; why an answer from any replica is fresh:
:mod:`icore.memory.nats._access`),
then exact fetches of changed records; a timeout or any engine error raises
:class:`~icore.net.OwnerUnreachable`, which the gate turns into *blocked*.
:meth:`NatsStore.watch_heads` installs every owner's new heads into the local replica
cache through a KV watcher (metadata sync with K = 1 on the same engine).
"""


from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import nats.errors

from icore._threads import LoopThread
from icore.errors import CommitConflict, OwnershipError, OwnerUnreachable, StoreError
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    FROM_PARENTS,
    CommitResult,
    ExpectedHead,
    HeadEntry,
    OwnershipMap,
    Store,
)
from icore.memory.nats._access import (
    CrossLoopNatsAccess,
    NatsOwnerAccess,
    SyncNatsOwnerAccess,
)
from icore.memory.nats._codec import MAX_COMMIT_RETRIES, _OwnerRaced, _unreachable
from icore.memory.nats._engine import NatsMemory
from icore.memory.nats._names import DEFAULT_PREFIX, check_nats_agent
from icore.records import Record, RecordId, is_record_id

T = TypeVar("T")


class NatsStore(Store):
    """One agent's owner memory on JetStream, under the :class:`~icore.memory.Store` API.

    Own records, heads and the owner sequence live in the engine (shared, replicated);
    the replica cache (:meth:`install`, :meth:`installed_head`) and lineage-completeness
    marks are this process's. The owner rules run inside the owner CAS (module
    docstring), so several processes of one owner may commit concurrently.

    Args:
        servers: NATS URLs (``tls://127.0.0.1:4222``, ...).
        certs_dir: team certs folder; the connection presents ``identity``'s certificate.
        ownership: the team's ownership map.
        agent: the agent whose keys this store writes (None: a central store, which needs
            an identity allowed to write every owner's keys, e.g. the admin).
        identity: certificate to connect with (default: ``agent``).
        prefix: bucket name prefix.
        timeout_s: bound of each engine operation, seconds.

    Raises:
        OwnerUnreachable: the engine is unreachable or the buckets are missing.
        ValueError: ``agent`` cannot name a subject token.
    """

    def __init__(self, servers: Sequence[str], *, certs_dir: str | Path,
                 ownership: OwnershipMap, agent: str | None,
                 identity: str | None = None, prefix: str = DEFAULT_PREFIX,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(ownership, agent)
        if agent is not None:
            check_nats_agent(agent)
        who = identity or agent
        if who is None:
            raise OwnershipError("a central NATS store needs an identity")
        self.timeout_s = timeout_s
        self.identity = who
        self._lt = LoopThread(f"icore-nats-{who}")
        try:
            self.memory: NatsMemory = self._lt.run(NatsMemory.connect(
                servers, certs_dir=certs_dir, identity=who, ownership=ownership,
                prefix=prefix, timeout_s=timeout_s), timeout_s * (len(servers) + 2) + 5)
        except BaseException:
            self._lt.stop()
            raise
        # _lock guards the dicts only (never held across an engine call, and taken on the
        # loop thread by the watcher); _crit is the commit/install critical section
        self._lock = threading.RLock()
        self._crit = threading.RLock()
        self._records: dict[RecordId, Record] = {}
        self._installed: dict[str, HeadEntry] = {}
        self._incomplete: set[RecordId] = set()
        self._revs = threading.local()
        self._watchers: list[asyncio.Task[None]] = []

    def _run(self, coro: Awaitable[T], timeout_s: float | None = None) -> T:
        async def go() -> T:
            return await coro
        try:
            return self._lt.run(go(), (timeout_s or self.timeout_s) * 4 + 2.0)
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            raise _unreachable(self.agent or "*", exc) from exc

    def lookup(self, rid: RecordId) -> Record | None:
        """See :meth:`icore.memory.Store.lookup`.

        An engine that does not answer gives None, so the gate's walk blocks (fail
        closed).
        """
        try:
            return super().lookup(rid)
        except OwnerUnreachable:
            return None

    def owner_access(self, *, barrier: bool = True) -> SyncNatsOwnerAccess:
        """A sync owner access for the gate sharing this store's connection.

        Args:
            barrier: see :class:`NatsOwnerAccess` (needs the store's agent identity).
        """
        return SyncNatsOwnerAccess(NatsOwnerAccess(self.memory, identity=self.identity,
                                                   barrier=barrier), self._lt)

    def async_owner_access(self, *, barrier: bool = True) -> CrossLoopNatsAccess:
        """An async owner access, usable from any event loop, sharing this connection.

        Args:
            barrier: see :class:`NatsOwnerAccess`.
        """
        return CrossLoopNatsAccess(NatsOwnerAccess(self.memory, identity=self.identity,
                                                   barrier=barrier), self._lt.loop)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the connection runs on (for :class:`NatsOwnerAccess` users)."""
        return self._lt.loop

    def _hosts(self, key: str) -> str | None:
        owner = self.ownership.owner_of(key)
        if owner is None or (self.agent is not None and owner != self.agent):
            return None
        return owner

    # -- engine-backed primitives ---------------------------------------------------
    def _get_raw(self, rid: RecordId) -> Record | None:
        with self._lock:
            rec = self._records.get(rid)
        if rec is not None:
            return rec
        if not is_record_id(rid):
            return None
        hint = getattr(self._revs, "owner_of", None)
        if hint is not None and hint[0] == rid:
            # the record being committed: it can only be under its owner's prefix
            found = self._run(self.memory.record(hint[1], rid))
        else:
            found = self._run(self.memory.find(rid, self.ownership.owners()))
        if found is not None:
            with self._lock:
                self._records[rid] = found
        return found

    def _head_raw(self, key: str) -> HeadEntry | None:
        owner = self._hosts(key)
        if owner is None:
            return None
        return self._run(self.memory.head(owner, key))[0]

    def heads(self, keys: Iterable[str], *, known: dict[str, RecordId] | None = None,
              inline_max_bytes: int = 0) -> dict[str, HeadEntry]:
        """See :meth:`icore.memory.Store.heads`; one round of concurrent gets per owner."""
        self._check_open()
        by_owner: dict[str, list[str]] = {}
        for k in keys:
            o = self._hosts(k)
            if o is not None:
                by_owner.setdefault(o, []).append(k)

        async def all_heads() -> dict[str, HeadEntry]:
            parts = await asyncio.gather(*(self.memory.heads(o, ks)
                                           for o, ks in by_owner.items()))
            return {k: h for p in parts for k, h in p.items()}

        out = self._run(all_heads())
        if inline_max_bytes and known is not None:
            for k, h in list(out.items()):
                if known.get(k) != h.record_id:
                    rec = self._get_raw(h.record_id)
                    if rec is not None and rec.size <= inline_max_bytes:
                        out[k] = HeadEntry(h.key, h.record_id, h.seq, rec)
        return out

    def _owner_seq(self, owner: str) -> tuple[int, RecordId | None]:
        it, rev = self._run(self.memory.settle(owner))
        self._revs.last = (owner, rev)
        return (0, None) if it is None else (it.seq, it.rid)

    def _critical(self) -> contextlib.AbstractContextManager[Any]:
        # process-local; across processes the owner CAS in _write_commit decides
        return self._crit

    def commit(self, record: Record, *, writer: str,
               expected_head: ExpectedHead = FROM_PARENTS) -> CommitResult:
        """See :meth:`icore.memory.Store.commit`; decided by the owner CAS in the engine.

        Acknowledged only once the record's head and its owner's digest hold it, also for
        an idempotent replay (``created`` False) of an attempt that failed after storing
        the record.

        Raises:
            OwnershipError: as for every store, and also when the engine refuses the write
                (the connection's user may not write that owner's keys).
            StoreError: the owner CAS kept losing races (over
                :data:`MAX_COMMIT_RETRIES`).
            OwnerUnreachable: the engine did not answer in time; the write may or may not
                have been decided (retry the identical record: it is idempotent).
        """
        return self._commit(record, writer, expected_head, False)

    def _commit(self, record: Record, writer: str, expected_head: ExpectedHead,
                verified: bool, encoded: bytes | None = None) -> CommitResult:
        """:meth:`commit` for one record, also each op of ``commit_many``.

        ``encoded`` is not used: this store hands the record itself to its NATS memory.

        The owner service's group commits go through here too: the owner-CAS retries, the
        replay settle and the typed refusals apply to them alike.
        """
        self._revs.owner_of = (getattr(record, "id", None), getattr(record, "owner", None))
        for _ in range(MAX_COMMIT_RETRIES):
            try:
                res = super()._commit(record, writer, expected_head, verified)
                if not res.created:
                    # a replay found the record stored, but the attempt that stored it may
                    # have failed before moving its head and digest (the record is stored
                    # first): roll the owner's last intent forward before acknowledging.
                    # A later intent was decided only after this one was rolled forward.
                    self._run(self.memory.settle(record.owner))
                return res
            except _OwnerRaced:
                continue
            except CommitConflict:
                # decided earlier, acknowledgement lost (the writer crashed after the
                # owner CAS, or a timeout): the settle before the checks stored it, so
                # the retry is an idempotent replay, not a conflict
                if self._run(self.memory.record(record.owner, record.id)) != record:
                    raise
                with self._lock:
                    self._records[record.id] = record
                return CommitResult(record, created=False,
                                    lineage_complete=record.id not in self._incomplete)
            except (TimeoutError, nats.errors.Error) as exc:
                raise _unreachable(record.owner, exc) from exc
        raise StoreError("owner CAS contention: commit not decided", key=record.key,
                         owner=record.owner, record=record.id)

    def _write_commit(self, rec: Record, complete: bool, encoded: bytes | None = None
                      ) -> None:
        last = getattr(self._revs, "last", None)
        rev = last[1] if last is not None and last[0] == rec.owner else 0
        self._run(self.memory.decide(rec.owner, rec, rev))
        with self._lock:
            self._records[rec.id] = rec
            if not complete:
                self._incomplete.add(rec.id)

    def _head_keys(self) -> list[str]:
        return self._run(self.memory.head_keys(self.agent))

    # -- the replica cache (this process) -------------------------------------------
    def _write_install(self, rec: Record, complete: bool, move_installed: bool) -> None:
        with self._lock:
            cur = self._records.get(rec.id)
            if cur is None or (rec.has_content and not cur.has_content):
                self._records[rec.id] = rec
            if move_installed:
                self._installed[rec.key] = HeadEntry(rec.key, rec.id, rec.seq)
            if not complete:
                self._incomplete.add(rec.id)

    def _installed_raw(self, key: str) -> HeadEntry | None:
        with self._lock:
            return self._installed.get(key)

    def _incomplete_ids(self) -> set[RecordId]:
        return self._incomplete

    def _mark_complete(self, rid: RecordId) -> None:
        with self._lock:
            self._incomplete.discard(rid)

    def _has_content(self, rid: RecordId) -> bool:
        rec = self._get_raw(rid)
        return rec is not None and rec.has_content

    def _store_content(self, rec: Record) -> None:
        with self._lock:
            self._records[rec.id] = rec

    def _close(self) -> None:
        async def shut() -> None:
            for t in self._watchers:
                t.cancel()
            await asyncio.gather(*self._watchers, return_exceptions=True)
            await self.memory.close()
        with contextlib.suppress(Exception):
            self._lt.run(shut(), 10.0)
        self._lt.stop()

    def pull(self, key: str) -> Record | None:
        """Read ``key``'s current head record from its owner in the engine.

        Another owner's record is installed into the replica cache (as a watcher would).

        Returns:
            The verified head record, or None when the key has no owner or no head.

        Raises:
            OwnerUnreachable: the engine did not answer in time.
        """
        self._check_open()
        owner = self.ownership.owner_of(key)
        if owner is None:
            return None
        try:
            h, _rev = self._run(self.memory.head(owner, key))
            rec = None if h is None else self._run(self.memory.record(owner, h.record_id))
        except (TimeoutError, nats.errors.Error) as exc:
            raise _unreachable(owner, exc) from exc
        if rec is not None and owner != self.agent:
            self.install(rec)
        return rec

    # -- metadata sync ----------------------------------------------------------------
    def watch_heads(self, owners: Collection[str] | None = None, *, k: int = 1,
                    on_install: Callable[[Record], None] | None = None) -> None:
        """Install other owners' new heads through KV watchers (metadata sync K).

        This is planfence Sec. 5.1's announcement, run on the engine.

        The current heads are installed at once; after that an owner's moves are
        installed in batches, after every ``k`` dirty updates of that owner (K = 1: each
        move as it happens; K > 1 is the safety-cost sensitivity: a replica may act on
        heads up to K-1 updates old). Each installed record is fetched exactly and
        verified. Validate against the installed heads with
        ``GateValidator(GateContext(owners=InstalledHeads(store), ...))``.

        Args:
            owners: whose heads to follow (default: every owner but this agent).
            k: dirty updates per owner between installs (>= 1).
            on_install: optional callback per installed record (runs on the connection's
                loop thread: it must not call this store).

        Raises:
            ValueError: ``k`` < 1.
        """
        self._check_open()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        wanted = set(owners) if owners is not None else (
            self.ownership.owners() - ({self.agent} if self.agent else set()))
        pending: dict[str, dict[str, tuple[str, HeadEntry]]] = {}
        dirty: dict[str, int] = {}

        async def install(owner: str, head: HeadEntry) -> None:
            with self._lock:
                inst = self._installed.get(head.key)
            if inst is not None and inst.seq >= head.seq:
                return
            rec = await self.memory.record(owner, head.record_id)
            if rec is None:
                return
            await asyncio.to_thread(self.install, rec)
            if on_install is not None:
                on_install(rec)

        async def on_head(owner: str, head: HeadEntry, initial: bool) -> None:
            if initial or k == 1:
                await install(owner, head)
                return
            pending.setdefault(owner, {})[head.key] = (owner, head)
            dirty[owner] = dirty.get(owner, 0) + 1
            if dirty[owner] >= k:
                batch, pending[owner], dirty[owner] = pending[owner], {}, 0
                for o, h in batch.values():
                    await install(o, h)

        task = self._run(self.memory.watch_heads(on_head, wanted))
        self._watchers.append(task)
