"""Owner access over JetStream for the gate: quorum-barrier head reads (planfence Alg. 1).

Why a head read through any replica is fresh (the safety argument, #27). Claim: every
head :meth:`NatsOwnerAccess.query_heads` returns is at least as new as every head
acknowledged before the query began (PlanFence Sec. 3.1: no authorized action with a
stale frontier).

1. Sequences. The heads stream is one Raft log; stream sequences follow log order, and
   a replica stores only committed entries, in order, under the stream lock. A commit is
   acknowledged only after its head and its owner's digest were written, each with a
   PubAck (committed) sequence; a replayed commit too (:meth:`NatsStore.commit` rolls
   the intent forward before acknowledging a replay).
2. Barrier. A put on the heads stream sent after the query began (never one already in
   flight). Its sequence S is assigned after it reached the leader, so every write
   acknowledged before the query began has a sequence <= S - 1. Without a quorum it does
   not commit and the query fails (blocked).
3. Read. A ``multi_last`` direct get is answered by any replica: a follower arbitrarily
   behind, or a deposed leader. The server takes, under the stream's read lock, its
   store's last sequence U and the last message <= U of each subject, and reports U
   (``Nats-UpTo-Sequence``, nats-server ``getDirectMulti``): the answer is the state of
   the committed prefix 1..U.
4. Check. The answer is used only when U >= S - 1: then 1..U holds every acknowledged
   write, so each answered head is that write or a later one. The order of the read and
   the barrier does not matter (an answer given before the barrier was even proposed
   passes only if U already covered S - 1). An answer behind is read again after the
   barrier committed (bounded, :data:`STALE_REREADS`), then refused (blocked). So a
   lagging replica never makes the gate authorize while the barrier succeeds: its U is
   below S - 1. Tested on a real 3-node cluster with a follower paused by SIGSTOP that
   answers as it wakes (``tests/nats/test_nats_cluster.py``): tens of answers per run are
   behind and read again; with the check removed the test fails.
5. Not pinned with ``up_to_seq``: a replica behind a requested ``up_to_seq`` answers
   its own state and echoes the requested value as ``Nats-UpTo-Sequence``, which would
   defeat step 4. (``min_last_seq``, nats-server 2.12+, makes the same comparison on the
   server.)
6. When no subject asked for has a message (404, no U), the heads are read from the
   stream leader after the barrier committed.

Assumed of the engine: the answering replica's store is the committed stream's prefix
through U (Raft apply order; NATS's own read-after-write rests on it too). A replica
rebuilding from a stream snapshot while it serves direct gets (the catch-up skips
messages the leader has since replaced, history 1) could break it; closing that would
need a leader-checked condition on what was read (e.g. the barrier published with
``Nats-Expected-Last-Subject-Sequence`` of the owner's digest), one more round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import nats.errors

from icore._threads import LoopThread
from icore.errors import OwnerUnreachable, RecordError, StoreError
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, HeadReply
from icore.memory.nats._codec import BARRIER_TOKEN, STALE_REREADS, _unreachable
from icore.memory.nats._engine import NatsMemory
from icore.records import Record, RecordId


class NatsOwnerAccess:
    """:class:`~icore.memory.AsyncOwnerAccess` over JetStream (planfence Alg. 1 lines 5-8).

    Args:
        memory: the connected :class:`NatsMemory` (any agent's identity: reads are open).
        identity: the connection's agent id, which names its barrier key (it may write
            only its own keys).
        barrier: with every head query, also require a tiny write to the heads stream
            (the reader's own key) that was sent after the query began and committed;
            fail unless it did.

    ``query_heads`` reads the d heads with one batched direct get
    (:meth:`NatsMemory.last_heads`, nats-server 2.11+), concurrently with the barrier;
    ``fetch`` gets exact records. Any failure raises OwnerUnreachable (the gate blocks).

    Why the barrier: a JetStream stream leader keeps answering reads for a while after it
    lost its quorum (until it steps down), and a direct get may be answered by a follower
    that is behind, so reads alone could let a gate authorize against stale heads. The
    barrier goes through Raft like any commit; without a quorum it does not commit, and
    the gate blocks (fail closed). Its stream sequence S was assigned after the query
    began, so every write acknowledged before then has a sequence <= S - 1; the batched
    read's snapshot sequence (a replica stores only committed entries, in order) must be
    >= S - 1, else the heads are read again after the barrier, and the query blocks if
    the answer is still behind.

    Amortized barrier: at most one barrier of this access is in flight. A query that
    begins while one is in flight does not join it (it was sent before the query began);
    it joins the *next* barrier, sent as soon as the in-flight one completes and shared
    by every query that began meanwhile (group commit). A failed or timed-out barrier
    fails every query sharing it.

    Every call ends within the ``timeout_s`` it is given (``bounds_timeouts``), raising
    OwnerUnreachable or RpcTimeout, so the gate sets no timer of its own.
    """

    bounds_timeouts = True

    def __init__(self, memory: NatsMemory, *, identity: str | None = None,
                 barrier: bool = True) -> None:
        self.memory = memory
        self.identity = identity
        self.barrier = barrier and identity is not None
        self._key = f"{BARRIER_TOKEN}.{identity}"
        self._inflight: asyncio.Future[int] | None = None
        self._next: asyncio.Future[int] | None = None
        self._next_timeout_s = 0.0
        self._tasks: set[asyncio.Future[None]] = set()

    def _barrier_after_now(self, timeout_s: float) -> tuple[asyncio.Future[int], bool]:
        """A barrier sent after this call: (its future, whether the caller must send it).

        The future's result is the barrier's stream sequence. Sent by the caller when no
        barrier is in flight (:meth:`_send`); else the next barrier, queued now and sent
        when the in-flight one completes (so after this call), shared by every query
        that asks before it is sent.
        """
        if self._next is not None:
            return self._next, False  # queued, not sent yet: it will be sent after now
        cur = self._inflight
        loop = asyncio.get_running_loop()
        if cur is not None and not cur.done():
            nxt = self._next = loop.create_future()
            self._next_timeout_s = timeout_s
            cur.add_done_callback(self._send_next)
            return nxt, False
        # every waiter may have timed out first: NatsMemory.barrier marks a failure
        # retrieved (no done callback per barrier)
        fut = self._inflight = loop.create_future()
        return fut, True

    def _send_next(self, _done: asyncio.Future[int]) -> None:
        nxt, self._next = self._next, None
        if nxt is None:
            return
        self._inflight = nxt
        # sent from a callback: a task awaits the publish (only when queries overlap)
        task = asyncio.ensure_future(self._send(nxt, self._next_timeout_s))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, fut: asyncio.Future[int], timeout_s: float) -> None:
        """Publish the barrier ``fut`` waits for (settled by the ack, an error or timeout)."""
        await self.memory.barrier(self._key, fut, timeout_s=timeout_s)

    async def _read(self, owner: str, keys: Sequence[str], timeout_s: float
                    ) -> dict[str, HeadEntry]:
        mem = self.memory
        if not self.barrier:
            return await mem.heads(owner, keys, timeout_s=timeout_s)  # leader reads
        # the barrier's publish is queued before the read's and both leave in one flush;
        # the read is awaited, then the (possibly shared) barrier
        bar, send = self._barrier_after_now(timeout_s)
        if send:
            await self._send(bar, timeout_s)
        if not mem.heads_direct:
            heads = await mem.heads(owner, keys, timeout_s=timeout_s)
            await asyncio.shield(bar)  # shared by other queries: never cancelled by this one
            return heads
        # bounded by query_heads' own timeout (one timer per query besides the barrier's)
        got = await mem.last_heads(owner, keys, timeout_s=timeout_s, bounded=True)
        # shared by other queries: never cancelled by this one (no shield once settled)
        seq = bar.result() if bar.done() else await asyncio.shield(bar)
        if got is None:  # no snapshot sequence (no key has a head): leader reads
            return await mem.heads(owner, keys, timeout_s=timeout_s)
        if got[1] >= seq - 1:
            return got[0]
        # the answer's snapshot predates the barrier's predecessor (a lagging replica,
        # or writes raced the read): read again, now that the barrier committed (a few
        # times: a replica may apply it a moment later)
        snapshot = got[1]
        for attempt in range(STALE_REREADS):
            mem.stats.rereads += 1
            if attempt:
                await asyncio.sleep(0.002 * attempt)
            got = await mem.last_heads(owner, keys, timeout_s=timeout_s, bounded=True)
            if got is None:
                return await mem.heads(owner, keys, timeout_s=timeout_s)  # leader reads
            if got[1] >= seq - 1:
                return got[0]
            snapshot = got[1]
        raise OwnerUnreachable("the engine's answer is behind the quorum barrier",
                               owner=owner, snapshot=snapshot, barrier=seq)

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.AsyncOwnerAccess.query_heads`.

        Raises:
            OwnerUnreachable: timeout (RpcTimeout), engine error, a barrier that did not
                commit, an answer behind the barrier, or malformed entries.
        """
        try:
            async with asyncio.timeout(timeout_s):
                heads = await self._read(owner, keys, timeout_s)
        except OwnerUnreachable:
            raise
        except (TimeoutError, nats.errors.Error, StoreError, OSError) as exc:
            raise _unreachable(owner, exc) from exc
        return HeadReply(owner, heads)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.AsyncOwnerAccess.fetch` (records verified on arrival).

        Raises:
            OwnerUnreachable: timeout (RpcTimeout), engine error or invalid records.
        """
        try:
            return await asyncio.wait_for(self.memory.records(owner, ids,
                                                              timeout_s=timeout_s), timeout_s)
        except (TimeoutError, nats.errors.Error, StoreError, RecordError, OSError) as exc:
            raise _unreachable(owner, exc) from exc


class SyncNatsOwnerAccess:
    """:class:`~icore.memory.OwnerAccess` over a :class:`NatsOwnerAccess` on a loop thread."""

    def __init__(self, access: NatsOwnerAccess, loop: LoopThread) -> None:
        self.access, self._lt = access, loop

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`NatsOwnerAccess.query_heads`."""
        return self._lt.run(self.access.query_heads(owner, keys, known=known,
                                                    timeout_s=timeout_s), timeout_s + 2.0)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`NatsOwnerAccess.fetch`."""
        return self._lt.run(self.access.fetch(owner, ids, timeout_s=timeout_s),
                            timeout_s + 2.0)


class CrossLoopNatsAccess:
    """:class:`~icore.memory.AsyncOwnerAccess` for any loop over another loop's engine.

    The :class:`NatsOwnerAccess` runs on another loop (a :class:`NatsStore`'s thread):
    each call is scheduled there and awaited here, bounded by the same timeout.
    """

    def __init__(self, access: NatsOwnerAccess, loop: asyncio.AbstractEventLoop) -> None:
        self.access, self.loop = access, loop

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`NatsOwnerAccess.query_heads`."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            self.access.query_heads(owner, keys, known=known, timeout_s=timeout_s),
            self.loop))

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`NatsOwnerAccess.fetch`."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            self.access.fetch(owner, ids, timeout_s=timeout_s), self.loop))
