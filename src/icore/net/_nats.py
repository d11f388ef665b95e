"""Owner memory on NATS JetStream (planfence Sec. 3.1, Alg. 1, App. A; design.md 2, 3.1).

Layout, in three JetStream key-value buckets (``<prefix>-heads``, ``-records``,
``-owners``; every key starts with the owner's agent id, so subject permissions give each
agent's NATS user write access to its own keys only, see :mod:`icore.net._nats_server`):

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
  commit is acknowledged only after its head moved, so a reader never misses an
  acknowledged write and never sees a head whose record is not stored.

Records, owner entries and single heads are read from the stream leader (``allow_direct``
off, or a leader get on the heads bucket). The heads bucket allows direct gets for the
gate's batched read only, which proves its freshness against a quorum barrier
(:class:`NatsOwnerAccess`): without a quorum the gate blocks (fail closed) instead of
authorizing against a stale leader or follower.

The gate reaches owners through :class:`NatsOwnerAccess` (async) or
:class:`SyncNatsOwnerAccess` (sync): per owner, the heads of D(a) in one batched direct
get (``multi_last``, nats-server 2.11+) concurrent with the barrier (all owners at once),
then exact fetches of changed records; a timeout or any engine error raises
:class:`~icore.net.OwnerUnreachable`, which the gate turns into *blocked*.
:meth:`NatsStore.watch_heads` installs every owner's new heads into the local replica
cache through a KV watcher (metadata sync with K = 1 on the same engine).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import ssl
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgpack
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

import nats
from icore.errors import CommitConflict, OwnershipError, RecordError, StoreError
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    FROM_PARENTS,
    CommitResult,
    ExpectedHead,
    HeadEntry,
    HeadReply,
    OwnershipMap,
    Store,
)
from icore.net._errors import OwnerUnreachable, RpcTimeout
from icore.net._manifest import MemorySpec
from icore.net._nats_server import (
    ADMIN_IDENTITY,
    DEFAULT_PREFIX,
    NatsCluster,
    bucket_names,
    check_nats_agent,
    nats_certs,
)
from icore.net._pki import client_context
from icore.net._tcp_sync import _LoopThread
from icore.records import Record, RecordId, decode_record, encode_record, is_record_id

log = logging.getLogger("icore.net.nats")
T = TypeVar("T")

_RAW_KEY = re.compile(r"[A-Za-z0-9][-/=A-Za-z0-9_]*")
MAX_COMMIT_RETRIES = 64
"""Bound on owner-CAS retries of one commit under contention by the same owner."""
STALE_REREADS = 4
"""Bound on re-reads of a gate's heads whose snapshot is behind its quorum barrier."""


def encode_key(key: str) -> str:
    """Map a semantic key to one NATS subject token (injective).

    Keys made of ``[A-Za-z0-9/_=-]`` starting alphanumeric stay as they are; any other key
    becomes ``_`` + unpadded base64url of its UTF-8 bytes (a raw key never starts with
    ``_``, so the two forms cannot collide).
    """
    if _RAW_KEY.fullmatch(key):
        return key
    return "_" + base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_key(token: str) -> str:
    """Inverse of :func:`encode_key`."""
    if not token.startswith("_"):
        return token
    b = token[1:]
    return base64.urlsafe_b64decode(b + "=" * (-len(b) % 4)).decode("utf-8")


def head_subject_key(owner: str, key: str) -> str:
    """The heads-bucket key of semantic key ``key`` owned by ``owner``."""
    return f"{owner}.{encode_key(key)}"


class _OwnerRaced(Exception):
    """Another writer of the same owner won the owner CAS: decide again."""


@dataclass(frozen=True, slots=True)
class _Intent:
    seq: int
    rid: RecordId
    key: str
    record: bytes


def _pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack_head(key: str, data: bytes) -> HeadEntry:
    try:
        rid, seq = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise StoreError("malformed head entry in the engine", key=key) from exc
    if not is_record_id(rid) or not isinstance(seq, int) or isinstance(seq, bool):
        raise StoreError("malformed head entry in the engine", key=key)
    return HeadEntry(key, rid, seq)


def _unpack_intent(owner: str, data: bytes) -> _Intent:
    try:
        seq, rid, key, rec = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise StoreError("malformed owner entry in the engine", owner=owner) from exc
    if not (isinstance(seq, int) and is_record_id(rid) and isinstance(key, str)
            and isinstance(rec, bytes)):
        raise StoreError("malformed owner entry in the engine", owner=owner)
    return _Intent(seq, rid, key, rec)


def _record_from(data: bytes, rid: RecordId) -> Record:
    rec = decode_record(data)
    if rec.id != rid:
        raise StoreError("the engine returned another record than asked", record=rid,
                         got=rec.id)
    return rec


def _json_req(subjects: list[str], batch: int) -> bytes:
    import json
    return json.dumps({"multi_last": subjects, "batch": batch},
                      separators=(",", ":")).encode()


class _BatchReply:
    """Collects one batched direct get's messages (see :meth:`NatsMemory.last_heads`)."""

    def __init__(self, subjects: dict[str, str],
                 done: asyncio.Future[tuple[dict[str, HeadEntry], int]]) -> None:
        self.subjects, self.done = subjects, done
        self.heads: dict[str, HeadEntry] = {}

    def add(self, msg: Any) -> None:
        try:
            got = self._add(msg.headers or {}, msg.data or b"")
        except StoreError as exc:
            self.done.set_exception(exc)
            return
        if got is not None:
            self.done.set_result((self.heads, got))

    def _add(self, hdr: Mapping[str, str], data: bytes) -> int | None:
        status = hdr.get("Status")
        if status == "404" and not self.heads:
            return -1  # none of the keys has a head: no snapshot sequence to check
        if status is not None:
            if status != "204":
                raise StoreError("the engine refused the batched head read", status=status,
                                 description=str(hdr.get("Description", ""))[:200])
            upto = hdr.get("Nats-UpTo-Sequence", "")
            if not upto.isdigit():
                raise StoreError("end of batch without its snapshot sequence")
            return int(upto)
        key = self.subjects.get(hdr.get("Nats-Subject", ""))
        if key is None or key in self.heads:
            raise StoreError("the engine answered a head not asked for",
                             subject=str(hdr.get("Nats-Subject", ""))[:200])
        if hdr.get("KV-Operation") in ("DEL", "PURGE"):
            raise StoreError("a head was deleted in the engine", key=key)
        self.heads[key] = _unpack_head(key, data)
        return None


@dataclass
class NatsStats:
    """Client-side operation counters of one :class:`NatsMemory` connection.

    Attributes:
        gets: key-value gets issued.
        puts: key-value writes issued (create/update, barriers).
        cas_conflicts: owner or head CAS attempts that lost a race and were retried.
        rereads: gate head reads repeated because their snapshot was behind the
            quorum barrier.
        permission_denied: publishes the server refused (subject permissions).
        violations: the server's last permission-violation messages (at most 100).
    """

    gets: int = 0
    puts: int = 0
    cas_conflicts: int = 0
    rereads: int = 0
    permission_denied: int = 0
    violations: list[str] = field(default_factory=list)


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
        return await asyncio.wait_for(nats.connect(
            list(servers), tls=ctx, name=identity, connect_timeout=timeout_s,
            max_reconnect_attempts=-1, reconnect_time_wait=0.2, allow_reconnect=True,
            error_cb=on_error, ping_interval=5, max_outstanding_pings=2),
            timeout_s * max(1, len(servers)) + 1.0)
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
    """

    def __init__(self, nc: NatsClient, ownership: OwnershipMap, *,
                 prefix: str = DEFAULT_PREFIX, timeout_s: float = DEFAULT_TIMEOUT_S,
                 stats: NatsStats | None = None) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=timeout_s)
        self.ownership = ownership
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.stats = stats if stats is not None else NatsStats()
        self._kv: dict[str, KeyValue] = {}
        self.heads_direct = False
        self._batch_sub: Any = None
        self._batch_inbox = ""
        self._batch_next = 0
        self._batches: dict[str, _BatchReply] = {}

    @classmethod
    async def connect(cls, servers: Sequence[str], *, certs_dir: str | Path, identity: str,
                      ownership: OwnershipMap, prefix: str = DEFAULT_PREFIX,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> NatsMemory:
        """Connect as ``identity`` and open the buckets.

        Raises:
            OwnerUnreachable: no server reachable, or the buckets are not there.
        """
        stats = NatsStats()
        nc = await connect_nats(servers, certs_dir=certs_dir, identity=identity,
                                timeout_s=timeout_s, stats=stats)
        mem = cls(nc, ownership, prefix=prefix, timeout_s=timeout_s, stats=stats)
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
        self.records_kv, self.owners_kv = self._kv[records], self._kv[owners]

    async def close(self) -> None:
        """Drain and close the connection."""
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

    async def _on_batch_msg(self, msg: Any) -> None:
        b = self._batches.get(msg.subject.rsplit(".", 1)[-1])
        if b is not None and not b.done.done():
            b.add(msg)

    async def last_heads(self, owner: str, keys: Sequence[str], *,
                         timeout_s: float | None = None
                         ) -> tuple[dict[str, HeadEntry], int] | None:
        """The heads of ``keys`` in one batched direct get (``multi_last``, nats-server 2.11+).

        One request names the d head subjects; the server answers the last entry of each
        that exists, then an end-of-batch status carrying the sequence its snapshot is up
        to (``Nats-UpTo-Sequence``). Any replica may answer: the caller proves freshness
        by comparing that sequence with a quorum barrier's (see :class:`NatsOwnerAccess`).

        Returns:
            (heads of the present keys, the responder's up-to stream sequence), or None
            when the heads bucket does not allow direct gets (buckets made before it did)
            or none of ``keys`` has a head (the answer then carries no sequence): use
            :meth:`heads`.

        Raises:
            StoreError: a malformed head, an entry for a subject not asked for or asked
                twice, or an error status from the server.
            TimeoutError: no complete answer within ``timeout_s``.
        """
        if not self.heads_direct:
            return None
        if self._batch_sub is None:
            self._batch_inbox = self.nc.new_inbox()
            self._batch_sub = await self.nc.subscribe(self._batch_inbox + ".*",
                                                      cb=self._on_batch_msg)
        subjects = {self._heads_pre + head_subject_key(owner, k): k for k in dict.fromkeys(keys)}
        self._batch_next += 1
        token = str(self._batch_next)
        b = _BatchReply(subjects, asyncio.get_running_loop().create_future())
        self._batches[token] = b
        self.stats.gets += 1
        try:
            await self.nc.publish(f"$JS.API.DIRECT.GET.{self.heads_stream}",
                                  _json_req(list(subjects), len(subjects)),
                                  reply=f"{self._batch_inbox}.{token}")
            heads, upto = await asyncio.wait_for(asyncio.shield(b.done),
                                                 timeout_s or self.timeout_s)
        finally:
            del self._batches[token]
            if not b.done.done():
                b.done.cancel()
        return None if upto < 0 else (heads, upto)

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

    async def roll_forward(self, owner: str, it: _Intent) -> None:
        """Make sure the intent's record is stored and its key's head is at least it.

        The record is stored before the head can move (the head CAS waits for it), so a
        head never names a record that is not there.
        """
        _stored, (cur, rev) = await asyncio.gather(self._store_record(owner, it),
                                                   self.head(owner, it.key))
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
        it = _Intent(rec.seq, rec.id, rec.key, encode_record(rec))
        try:
            await self._write(self.owners_kv, owner, _pack([it.seq, it.rid, it.key, it.record]),
                              last_rev or None, None)
        except nats.js.errors.KeyWrongLastSequenceError:
            self.stats.cas_conflicts += 1
            raise _OwnerRaced() from None
        await self.roll_forward(owner, it)

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


def _unreachable(owner: str, exc: BaseException) -> OwnerUnreachable:
    if isinstance(exc, TimeoutError | nats.errors.TimeoutError):
        return RpcTimeout("the engine did not answer in time", owner=owner)
    return OwnerUnreachable(f"the engine failed: {type(exc).__name__}: {exc}", owner=owner)


BARRIER_TOKEN = "=barrier"
"""First token of a reader's quorum-barrier key in the heads bucket,
``=barrier.<reader>`` (no agent id starts with ``=``, so no owner's watcher sees it)."""


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
    """

    def __init__(self, memory: NatsMemory, *, identity: str | None = None,
                 barrier: bool = True) -> None:
        self.memory = memory
        self.identity = identity
        self.barrier = barrier and identity is not None
        self._inflight: asyncio.Future[int] | None = None
        self._next: asyncio.Future[int] | None = None
        self._tasks: set[asyncio.Future[None]] = set()

    def _barrier_after_now(self, timeout_s: float) -> asyncio.Future[int]:
        """A barrier sent after this call; its result is its stream sequence."""
        if self._next is not None:
            return self._next  # queued, not sent yet: it will be sent after now
        cur = self._inflight
        if cur is not None and not cur.done():
            nxt = self._next = asyncio.get_running_loop().create_future()
            cur.add_done_callback(lambda _f: self._send_next(timeout_s))
            return nxt
        return self._send(asyncio.get_running_loop().create_future(), timeout_s)

    def _send_next(self, timeout_s: float) -> None:
        nxt, self._next = self._next, None
        if nxt is not None:
            self._send(nxt, timeout_s)

    def _send(self, fut: asyncio.Future[int], timeout_s: float) -> asyncio.Future[int]:
        key = f"{BARRIER_TOKEN}.{self.identity}"
        self._inflight = fut
        # every waiter may have timed out first: the outcome is still retrieved
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def go() -> None:
            self.memory.stats.puts += 1
            try:
                seq = await asyncio.wait_for(self.memory.heads_kv.put(key, b""), timeout_s)
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except Exception as exc:  # handed to every waiter: each fails closed
                if not fut.done():
                    fut.set_exception(exc)
                return
            if not fut.done():
                fut.set_result(int(seq))
        task = asyncio.ensure_future(go())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return fut

    async def _read(self, owner: str, keys: Sequence[str], timeout_s: float
                    ) -> dict[str, HeadEntry]:
        mem = self.memory
        if not self.barrier:
            return await mem.heads(owner, keys, timeout_s=timeout_s)  # leader reads
        bar = self._barrier_after_now(timeout_s)
        if not mem.heads_direct:
            heads, _ = await asyncio.gather(mem.heads(owner, keys, timeout_s=timeout_s),
                                            asyncio.shield(bar))
            return heads
        got, seq = await asyncio.gather(mem.last_heads(owner, keys, timeout_s=timeout_s),
                                        asyncio.shield(bar))
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
            got = await mem.last_heads(owner, keys, timeout_s=timeout_s)
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
            heads = await asyncio.wait_for(self._read(owner, keys, timeout_s), timeout_s)
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

    def __init__(self, access: NatsOwnerAccess, loop: _LoopThread) -> None:
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
        self._lt = _LoopThread(f"icore-nats-{who}")
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

        Raises:
            OwnershipError: as for every store, and also when the engine refuses the write
                (the connection's user may not write that owner's keys).
            StoreError: the owner CAS kept losing races (over
                :data:`MAX_COMMIT_RETRIES`).
            OwnerUnreachable: the engine did not answer in time; the write may or may not
                have been decided (retry the identical record: it is idempotent).
        """
        self._revs.owner_of = (getattr(record, "id", None), getattr(record, "owner", None))
        for _ in range(MAX_COMMIT_RETRIES):
            try:
                return super().commit(record, writer=writer, expected_head=expected_head)
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

    def _write_commit(self, rec: Record, complete: bool) -> None:
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


class TeamEngine:
    """A team's NATS engine: its servers (external, or local dev ones) and buckets.

    Args:
        spec: the manifest's ``memory`` section (backend ``nats``).
        folder: working folder of local dev servers (configs, logs, storage).
        certs_dir: team certs folder; completed with the server and admin pairs.
        agents: the team's agents (one NATS user each).
        team: team name of the certificates.

    :meth:`start` starts ``spec.nodes`` local servers when ``spec.servers`` is empty,
    then creates the buckets as the admin (replicas = 3 on a 3-node cluster).
    """

    def __init__(self, spec: MemorySpec, *, folder: str | Path, certs_dir: str | Path,
                 agents: Sequence[str], team: str) -> None:
        self.spec = spec
        self.folder = Path(folder)
        self.certs_dir = Path(certs_dir)
        self.agents = list(agents)
        self.team = team
        self.cluster: NatsCluster | None = None
        self.urls: list[str] = list(spec.servers)

    def start(self, *, timeout_s: float = 10.0) -> list[str]:
        """Start local servers if needed and create the buckets; return the URLs.

        Raises:
            NatsServerError: a local server did not start.
            OwnerUnreachable: the engine is unreachable with the admin certificate.
        """
        nats_certs(self.certs_dir, self.agents, team=self.team)
        replicas = 3 if self.spec.nodes == 3 else 1
        if not self.urls:
            self.cluster = NatsCluster(self.folder, self.certs_dir, self.agents,
                                       team=self.team, nodes=self.spec.nodes,
                                       prefix=self.spec.prefix).start()
            self.urls = self.cluster.urls
            replicas = self.cluster.replicas

        async def make() -> None:
            nc = await connect_nats(self.urls, certs_dir=self.certs_dir,
                                    identity=ADMIN_IDENTITY, timeout_s=timeout_s)
            try:
                await create_buckets(nc, replicas=replicas, prefix=self.spec.prefix)
            finally:
                await nc.close()
        try:
            asyncio.run(make())
        except BaseException:
            self.stop()
            raise
        return self.urls

    def stop(self) -> None:
        """Stop the local servers this engine started (external ones are left alone)."""
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    def __enter__(self) -> TeamEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
