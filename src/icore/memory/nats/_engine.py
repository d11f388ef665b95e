"""The NATS JetStream engine client: connections, buckets, :class:`NatsMemory`.

See :mod:`icore.memory.nats` for the layout in the engine and the commit protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

import nats
from icore._tls import client_context
from icore.errors import OwnershipError, OwnerUnreachable, RecordError, StoreError
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, OwnershipMap
from icore.memory.nats._codec import (
    BARRIER_TOKEN,
    MAX_COMMIT_RETRIES,
    NatsStats,
    _Intent,
    _OwnerRaced,
    _pack,
    _pack_intent,
    _record_from,
    _unpack_head,
    _unpack_intent,
    decode_key,
    head_subject_key,
)
from icore.memory.nats._digest import (
    INTENT_LAYOUT,
    decode_digest,
    encode_digest,
    with_head,
)
from icore.memory.nats._names import DEFAULT_PREFIX, bucket_names
from icore.memory.nats._reads import BatchedHeadReads, LaneClient
from icore.records import Record, RecordId, encode_record, is_record_id

log = logging.getLogger("icore.net.nats")


async def connect_nats(servers: Sequence[str], *, certs_dir: str | Path, identity: str,
                       timeout_s: float = DEFAULT_TIMEOUT_S,
                       ssl_context: ssl.SSLContext | None = None,
                       stats: NatsStats | None = None) -> NatsClient:
    """Open a TLS connection to the NATS servers as ``identity`` (its team certificate).

    The client reconnects to any listed server without limit (cluster fail-over); every
    operation is still bounded by its own timeout.

    Raises:
        OwnerUnreachable: no server accepted the connection within ``timeout_s``.
    """
    st = stats if stats is not None else NatsStats()

    async def on_error(exc: Exception) -> None:
        if "permissions violation" in str(exc).lower():
            st.permission_denied += 1
            st.violations[:] = [*st.violations[-99:], str(exc)]
        log.debug("nats client %s: %s", identity, exc)

    ctx = ssl_context or client_context(certs_dir, identity)
    try:
        nc = LaneClient()  # the gate's reads and barriers skip nats-py's message path
        opts: dict[str, Any] = {"connect_timeout": timeout_s, "reconnect_time_wait": 0.2}
        await asyncio.wait_for(nc.connect(
            list(servers), tls=ctx, name=identity, max_reconnect_attempts=-1,
            allow_reconnect=True, error_cb=on_error, ping_interval=5,
            max_outstanding_pings=2, **opts), timeout_s * max(1, len(servers)) + 1.0)
        return nc
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        # a timeout's message is empty: say which kind of failure it was
        why = str(exc) or f"{type(exc).__name__} after {timeout_s:g} s per server"
        raise OwnerUnreachable(f"cannot connect to NATS: {why}", servers=list(servers),
                               identity=identity) from exc


async def create_buckets(nc: NatsClient, *, replicas: int = 1,
                         prefix: str = DEFAULT_PREFIX) -> None:
    """Create the heads, records and owners buckets (idempotent; admin credentials).

    ``replicas`` Raft replicas (1 or 3). The heads bucket allows direct gets (the gate's
    batched head read, :meth:`NatsMemory.last_heads`); records and owners are read from
    the stream leader only (``direct=False``).
    """
    js = nc.jetstream()
    heads = bucket_names(prefix)[0]
    for b in bucket_names(prefix):
        for attempt in range(50):
            try:
                await js.create_key_value(bucket=b, history=1, replicas=replicas,
                                          direct=b == heads)
                break
            except nats.js.errors.BadRequestError:
                with contextlib.suppress(nats.js.errors.Error):
                    await js.key_value(b)  # exists already with the same settings
                    break
                raise
            except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError,
                    nats.js.errors.ServerError):
                if attempt == 49:
                    raise
                await asyncio.sleep(0.2)  # no meta leader yet (cluster forming)
    # a new replicated bucket answers only once its stream has elected a leader: wait for
    # that here, so the first commit does not meet "no responders" (cluster forming)
    for b in bucket_names(prefix):
        kv = await js.key_value(b)
        for attempt in range(100):
            try:
                await kv.get("icore-ready")
                break
            except nats.js.errors.KeyNotFoundError:
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError,
                    nats.js.errors.NoStreamResponseError,
                    nats.js.errors.ServiceUnavailableError, nats.js.errors.ServerError):
                if attempt == 99:
                    raise
                await asyncio.sleep(0.1)


class NatsMemory:
    """Async access to owner memory in JetStream (see the module docstring).

    Args:
        nc: a connected client (see :func:`connect_nats`).
        ownership: the team's ownership map.
        prefix: bucket name prefix.
        timeout_s: default bound of every engine operation, seconds.
        stats: counters shared with the connection's error callback.
        gate_link: (server URLs, TLS context, name) of the gate's own connection for the
            batched reads and barriers (:meth:`BatchedHeadReads.with_link`); None: ``nc``.
    """

    def __init__(self, nc: NatsClient, ownership: OwnershipMap, *,
                 prefix: str = DEFAULT_PREFIX, timeout_s: float = DEFAULT_TIMEOUT_S,
                 stats: NatsStats | None = None,
                 gate_link: tuple[Sequence[str], ssl.SSLContext | None, str] | None = None
                 ) -> None:
        self.nc, self.gate_link = nc, gate_link
        self.js = nc.jetstream(timeout=timeout_s)
        self.ownership, self.prefix, self.timeout_s = ownership, prefix, timeout_s
        self.stats = stats if stats is not None else NatsStats()
        self._kv: dict[str, KeyValue] = {}
        self.heads_direct = False
        self._reads: BatchedHeadReads
        # owner -> this writer's last digest of that owner, and its revision
        self._digests: dict[str, tuple[dict[str, HeadEntry] | None, int]] = {}

    @classmethod
    async def connect(cls, servers: Sequence[str], *, certs_dir: str | Path, identity: str,
                      ownership: OwnershipMap, prefix: str = DEFAULT_PREFIX,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> NatsMemory:
        """Connect as ``identity`` and open the buckets.

        Raises:
            OwnerUnreachable: no server reachable, or the buckets are not there.
        """
        stats = NatsStats()
        ctx = client_context(certs_dir, identity)
        nc = await connect_nats(servers, certs_dir=certs_dir, identity=identity,
                                timeout_s=timeout_s, stats=stats, ssl_context=ctx)
        mem = cls(nc, ownership, prefix=prefix, timeout_s=timeout_s, stats=stats,
                  gate_link=(servers, ctx, identity))
        try:
            await mem.open()
        except BaseException:
            await nc.close()
            raise
        return mem

    async def open(self) -> None:
        """Bind the three buckets.

        Raises:
            OwnerUnreachable: a bucket is missing or the engine does not answer.
        """
        heads, records, owners = bucket_names(self.prefix)
        try:
            for name in (heads, records, owners):
                self._kv[name] = await asyncio.wait_for(self.js.key_value(name),
                                                        self.timeout_s)
        except (TimeoutError, nats.errors.Error) as exc:
            raise OwnerUnreachable(f"cannot open the owner-memory buckets: {exc!r}",
                                   prefix=self.prefix) from exc
        # direct gets may be answered by any replica: single-key reads (commit CAS loop,
        # Store.heads, pull) stay leader reads; the gate's batched read checks freshness
        self.heads_stream = f"KV_{heads}"
        try:
            si = await asyncio.wait_for(self.js.stream_info(self.heads_stream),
                                        self.timeout_s)
        except (TimeoutError, nats.errors.Error) as exc:
            raise OwnerUnreachable(f"cannot open the owner-memory buckets: {exc!r}",
                                   prefix=self.prefix) from exc
        self.heads_direct = bool(si.config.allow_direct)
        self._heads_pre = f"$KV.{heads}."
        self.heads_kv = KeyValue(name=heads, stream=self.heads_stream,
                                 pre=self._heads_pre, js=self.js, direct=False)
        self._reads = BatchedHeadReads(self.nc, self.heads_stream, self._heads_pre,
                                       self.stats, self.timeout_s)
        if self.gate_link is not None:
            self._reads.with_link(*self.gate_link)
        self.records_kv, self.owners_kv = self._kv[records], self._kv[owners]

    async def close(self) -> None:
        """Drain and close the connection (and the gate's own, when open)."""
        await self._reads.close() if hasattr(self, "_reads") else None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.nc.close(), 5.0)

    # -- primitives -----------------------------------------------------------------
    async def _get(self, kv: KeyValue, key: str, timeout_s: float | None
                   ) -> tuple[bytes, int] | None:
        self.stats.gets += 1
        try:
            e = await asyncio.wait_for(kv.get(key), timeout_s or self.timeout_s)
        except nats.js.errors.KeyNotFoundError:
            return None
        return (e.value or b""), int(e.revision or 0)

    async def _write(self, kv: KeyValue, key: str, value: bytes, last: int | None,
                     timeout_s: float | None) -> int:
        """Create (``last`` None) or CAS update; wrong revision -> KeyWrongLastSequence."""
        self.stats.puts += 1
        denied_before = self.stats.permission_denied
        try:
            if last is None or last == 0:
                return await asyncio.wait_for(kv.create(key, value),
                                              timeout_s or self.timeout_s)
            return await asyncio.wait_for(kv.update(key, value, last=last),
                                          timeout_s or self.timeout_s)
        except (TimeoutError, nats.errors.TimeoutError):
            if self.stats.permission_denied > denied_before:
                raise OwnershipError("the engine refused the write (subject permissions)",
                                     key=key) from None
            raise

    async def head(self, owner: str, key: str, *, timeout_s: float | None = None
                   ) -> tuple[HeadEntry | None, int]:
        """Return (H(key), its revision) from ``owner``'s heads; (None, 0) when absent."""
        got = await self._get(self.heads_kv, head_subject_key(owner, key), timeout_s)
        if got is None:
            return None, 0
        return _unpack_head(key, got[0]), got[1]

    async def heads(self, owner: str, keys: Sequence[str], *, timeout_s: float | None = None
                    ) -> dict[str, HeadEntry]:
        """The heads of ``keys`` in one round of concurrent gets (absent keys omitted)."""
        got = await asyncio.gather(*(self.head(owner, k, timeout_s=timeout_s) for k in keys))
        return {k: h for k, (h, _rev) in zip(keys, got, strict=True) if h is not None}

    async def last_heads(self, owner: str, keys: Sequence[str], *,
                         timeout_s: float | None = None, bounded: bool = False
                         ) -> tuple[dict[str, HeadEntry], int] | None:
        """The heads of ``keys`` in one batched direct get (``multi_last``, nats-server 2.11+).

        For d >= 2 distinct keys the request names the owner's digest subject
        (:mod:`icore.memory.nats._digest`: all the owner's heads in one message) unless
        that digest is known to be much larger than d per-key messages; else, or when the
        owner has no digest (yet) or it overflowed, it names the d head subjects. The
        server answers the last entry of each subject that exists, then an end-of-batch
        status carrying the sequence its snapshot is up to (``Nats-UpTo-Sequence``). Any
        replica may answer: the caller proves freshness by comparing that sequence with a
        quorum barrier's (see :class:`NatsOwnerAccess`).

        Returns:
            (heads of the present keys, the responder's up-to stream sequence), or None
            when the heads bucket does not allow direct gets (buckets made before it did)
            or no subject asked for has an entry (the answer then carries no sequence):
            use :meth:`heads`.

        Raises:
            StoreError: a malformed head or digest (or of a newer layout), an entry for
                a subject not asked for or asked twice, or an error status.
            TimeoutError: no complete answer within ``timeout_s`` (``bounded``: the
                caller's own timeout bounds the wait; the read sets no timer).
        """
        if not self.heads_direct:
            return None
        return await self._reads.last_heads(owner, keys, timeout_s=timeout_s, bounded=bounded)

    async def barrier(self, key: str, fut: asyncio.Future[int], *,
                      timeout_s: float | None = None) -> None:
        """Write an empty value to ``key`` of the heads bucket; ``fut`` gets its sequence.

        Returns once the write is sent; ``fut`` is settled with the write's stream
        sequence once the engine committed it, or with the error (a refusal, no
        responders, or :class:`TimeoutError` after ``timeout_s``), marked retrieved.
        See :meth:`icore.memory.nats._reads.BatchedHeadReads.barrier`.
        """
        await self._reads.barrier(key, fut, timeout_s or self.timeout_s)

    async def record(self, owner: str, rid: RecordId, *, timeout_s: float | None = None
                     ) -> Record | None:
        """The verified record ``rid`` written by ``owner``, or None."""
        if not is_record_id(rid):
            raise StoreError("not a record id", record=str(rid)[:80])
        got = await self._get(self.records_kv, f"{owner}.{rid}", timeout_s)
        if got is None:
            return None
        rec = _record_from(got[0], rid)
        # only the record's own owner can have committed it: a copy under another
        # agent's prefix proves nothing (e.g. that the owner's commit happened)
        return rec if rec.owner == owner else None

    async def records(self, owner: str, ids: Sequence[RecordId], *,
                      timeout_s: float | None = None) -> list[Record]:
        """The verified records among ``ids`` that ``owner`` stored, in order."""
        got = await asyncio.gather(*(self.record(owner, r, timeout_s=timeout_s) for r in ids))
        return [r for r in got if r is not None]

    async def find(self, rid: RecordId, owners: Iterable[str]) -> Record | None:
        """Look ``rid`` up under each of ``owners`` in one concurrent round.

        An entry that does not verify under some agent's prefix is skipped (that agent
        can only spoil its own keys); engine errors and timeouts propagate.
        """
        ows = sorted(set(owners))
        got = await asyncio.gather(*(self.record(o, rid) for o in ows),
                                   return_exceptions=True)
        for o, r in zip(ows, got, strict=True):
            if isinstance(r, RecordError | StoreError):
                log.warning("skipping an invalid record entry %s under %s: %s", rid, o, r)
            elif isinstance(r, BaseException):
                raise r
        return next((r for r in got if isinstance(r, Record)), None)

    async def intent(self, owner: str) -> tuple[_Intent | None, int]:
        """The owner's last commit intent and its revision ((None, 0) before any)."""
        got = await self._get(self.owners_kv, owner, None)
        if got is None:
            return None, 0
        return _unpack_intent(owner, got[0]), got[1]

    async def _store_record(self, owner: str, it: _Intent) -> None:
        try:
            await self._write(self.records_kv, f"{owner}.{it.rid}", it.record, None, None)
        except nats.js.errors.KeyWrongLastSequenceError:
            pass  # stored already (content addressed: same bytes)

    async def roll_forward(self, owner: str, it: _Intent, *, fresh: bool = False) -> None:
        """Make sure the intent's record is stored and its key's head is at least it.

        The record is stored before the head (and, for a digest-aware intent, the owner's
        digest) can move, so neither ever names a record that is not there.

        Args:
            owner: the intent's owner.
            it: the owner's last commit intent.
            fresh: the intent is the owner's first (no digest to build from its heads).
        """
        _stored, (cur, rev) = await asyncio.gather(self._store_record(owner, it),
                                                   self.head(owner, it.key))
        if it.layout >= INTENT_LAYOUT:
            await asyncio.gather(self._move_head(owner, it, cur, rev),
                                 self._note_digest(owner, it, fresh))
        else:
            await self._move_head(owner, it, cur, rev)

    async def _move_head(self, owner: str, it: _Intent, cur: HeadEntry | None,
                         rev: int) -> None:
        for attempt in range(MAX_COMMIT_RETRIES):
            if attempt:
                cur, rev = await self.head(owner, it.key)
            if cur is not None and cur.seq >= it.seq:
                return
            try:
                await self._write(self.heads_kv, head_subject_key(owner, it.key),
                                  _pack([it.rid, it.seq]), rev, None)
                return
            except nats.js.errors.KeyWrongLastSequenceError:
                self.stats.cas_conflicts += 1
        raise StoreError("could not move the head under contention", key=it.key,
                         owner=owner)

    async def digest(self, owner: str, *, timeout_s: float | None = None
                     ) -> tuple[dict[str, HeadEntry] | None, int] | None:
        """The owner's head digest, read from the stream leader.

        Returns:
            (heads, or None when overflowed; the entry's revision), or None when the
            owner has no digest.

        Raises:
            StoreError: a malformed digest or one of a newer layout.
        """
        got = await self._get(self.heads_kv, owner, timeout_s)
        return None if got is None else (decode_digest(owner, got[0]), got[1])

    async def _note_digest(self, owner: str, it: _Intent, fresh: bool) -> None:
        """Put the intent's head into the owner's digest (compare-and-set, forward only).

        A missing digest is built from the owner's heads (none when ``fresh``): every
        earlier intent was rolled forward before this one was decided.
        """
        head = HeadEntry(it.key, it.rid, it.seq)
        cached = self._digests.get(owner)
        for _ in range(MAX_COMMIT_RETRIES):
            if cached is None:
                got = await self.digest(owner)
                if got is None:
                    cached = ({} if fresh else
                              await self.heads(owner, await self.head_keys(owner)), 0)
                else:
                    cached = got
            heads, rev = cached
            if rev and (heads is None or (heads.get(it.key) is not None
                                          and heads[it.key].seq >= it.seq)):
                self._digests[owner] = cached
                return  # overflowed (readers use the per-key heads), or there already
            new = with_head(heads, head)
            try:
                rev = await self._write(self.heads_kv, owner, encode_digest(new), rev or None,
                                        None)
            except nats.js.errors.KeyWrongLastSequenceError:
                self.stats.cas_conflicts += 1
                cached = None
                continue
            self._digests[owner] = (new, rev)
            return
        raise StoreError("could not update the owner's head digest under contention",
                         owner=owner, key=it.key)

    async def settle(self, owner: str) -> tuple[_Intent | None, int]:
        """Roll the owner's last intent forward and return it with its revision."""
        it, rev = await self.intent(owner)
        if it is not None:
            await self.roll_forward(owner, it)
        return it, rev

    async def decide(self, owner: str, rec: Record, last_rev: int) -> None:
        """The commit point: CAS the owner entry from ``last_rev`` to ``rec``'s intent.

        Raises:
            _OwnerRaced: another writer of ``owner`` committed first.
        """
        it = _Intent(rec.seq, rec.id, rec.key, encode_record(rec), INTENT_LAYOUT)
        try:
            await self._write(self.owners_kv, owner, _pack_intent(it), last_rev or None, None)
        except nats.js.errors.KeyWrongLastSequenceError:
            self.stats.cas_conflicts += 1
            raise _OwnerRaced() from None
        await self.roll_forward(owner, it, fresh=not last_rev)

    async def head_keys(self, owner: str | None) -> list[str]:
        """Semantic keys with a head (``owner``'s, or every owner's when None)."""
        async def scan() -> list[str]:
            w = await self.heads_kv.watch(f"{owner}.>" if owner else ">",
                                          ignore_deletes=True, meta_only=True)
            toks: list[str] = []
            late_s = 0.2
            try:
                # the client's end-of-initial-values marker (None) can come before
                # entries already delivered (its consumer-info check races them), so
                # after it wait briefly for late entries; an entry with nothing pending
                # behind it (delta 0, from the server) ends the scan
                saw_end = False
                while True:
                    try:
                        e = await w.updates(  # type: ignore[no-untyped-call]
                            timeout=late_s if saw_end else self.timeout_s)
                    except nats.errors.TimeoutError:
                        break
                    if e is None:
                        saw_end = True
                        continue
                    toks.append(e.key)
                    if not e.delta:
                        break
            finally:
                await w.stop()  # type: ignore[no-untyped-call]
            return toks
        toks = await asyncio.wait_for(scan(), self.timeout_s)
        return sorted(decode_key(t.split(".", 1)[1]) for t in toks
                      if "." in t and t.split(".", 1)[0] != BARRIER_TOKEN)

    async def watch_heads(self, on_head: Callable[[str, HeadEntry, bool], Awaitable[None]],
                          owners: Collection[str] | None = None) -> asyncio.Task[None]:
        """Start KV watchers over the heads bucket, calling ``on_head`` per update.

        ``on_head(owner, head, initial)`` gets each update's owner and head id, and
        whether it came from the initial scan.

        One watcher per owner in ``owners`` (subject ``<owner>.>``, so other owners'
        moves and readers' barriers are never delivered), or one over every key when
        None. Each first replays the current heads (``initial`` True), then every later
        move (``initial`` False).

        Returns:
            The task running the watchers (cancel it to stop them).
        """
        filters = [f"{o}.>" for o in sorted(owners)] if owners is not None else [">"]
        watchers = [await self.heads_kv.watch(f) for f in filters]

        async def pump(watcher: KeyValue.KeyWatcher) -> None:
            initial = True
            try:
                async for e in watcher:
                    if e is None:  # end of the initial replay
                        initial = False
                        continue
                    if e.value is None or "." not in e.key:
                        continue
                    owner, tok = e.key.split(".", 1)
                    if owner == BARRIER_TOKEN:
                        continue
                    try:
                        head = _unpack_head(decode_key(tok), e.value)
                        await on_head(owner, head, initial)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("head watcher: update for %s failed", e.key)
            finally:
                with contextlib.suppress(Exception):
                    await watcher.stop()  # type: ignore[no-untyped-call]

        async def run_all() -> None:
            await asyncio.gather(*(pump(w) for w in watchers))

        return asyncio.create_task(run_all(), name="icore-nats-head-watchers")
