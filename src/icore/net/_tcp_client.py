"""asyncio TCP owner client with mutual TLS 1.3 (planfence App. A).

:class:`OwnerClient` implements :class:`icore.memory.AsyncOwnerAccess` over the owner
servers of :mod:`icore.net._tcp_server`, so the gate runs unchanged over either transport
(the synchronous wrapper is :class:`icore.net.SyncOwnerClient`).

Connections are reused by default (one per owner, requests pipelined and matched to
replies by request id; requests issued in the same event-loop iteration share one TLS
record and one socket write, and so do the replies to one read);
``new_connection_per_rpc=True`` opens, authenticates and closes a connection for every
RPC, paying the TCP and TLS handshakes as in the paper's setting. Every RPC has a
timeout (default 2 s, design.md 3.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply
from icore.net._channel import SecureChannel, Shaper
from icore.net._errors import (
    AuthenticationError,
    ConnectionClosed,
    MalformedMessage,
    OwnerUnreachable,
    RpcTimeout,
    TransportError,
)
from icore.net._protocol import (
    MAX_FRAME_BYTES,
    Announce,
    Commit,
    CommitAck,
    ErrorReply,
    FetchReply,
    FetchRequest,
    FrameDecoder,
    HeadQuery,
    Message,
    Ping,
    Pong,
    Replicate,
    encode_frame,
)
from icore.net._stats import TrafficStats, raise_for_error, to_head_reply
from icore.records import Record, RecordId

if TYPE_CHECKING:  # the lab's link model, a type only (net never imports the lab)
    from icore_lab.net import LinkPair


class _Conn:
    """One client connection to an owner: request ids, pending replies, reader task."""

    def __init__(self, ch: SecureChannel, owner: str, max_frame_bytes: int) -> None:
        self.ch = ch
        self.owner = owner
        self.dec = FrameDecoder(max_frame_bytes=max_frame_bytes)
        self.rids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Message]] = {}
        self.dead: BaseException | None = None
        self.reader: asyncio.Task[None] | None = None
        self.wbuf: list[bytes] = []
        self.flush_scheduled = False
        self._deadlines: list[tuple[float, int]] = []
        """Heap of (loop-time deadline, request id) of requests on this connection."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def start(self) -> None:
        """Start the reader task that matches replies to requests (on the running loop)."""
        self.reader = asyncio.get_running_loop().create_task(self._read_loop())

    async def _read_loop(self) -> None:
        err: BaseException
        try:
            while True:
                data = await self.ch.recv()
                if not data:
                    self.dec.eof()
                    err = ConnectionClosed("owner closed the connection", owner=self.owner)
                    break
                for msg in self.dec.feed(data):
                    self.ch.stats.frames_in += 1
                    fut = self.pending.pop(msg.rid, None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    elif isinstance(msg, ErrorReply) and msg.rid == 0:
                        err = ConnectionClosed(f"owner closed the connection: {msg.message}",
                                               owner=self.owner, remote_code=msg.code)
                        raise _Stop(err)
        except _Stop as stop:
            err = stop.err
        except asyncio.CancelledError:
            err = ConnectionClosed("connection closed locally", owner=self.owner)
        except TransportError as exc:
            err = exc
        except Exception as exc:  # never leave callers waiting
            err = ConnectionClosed(f"connection failed: {exc}", owner=self.owner)
        self.fail(err)

    def fail(self, err: BaseException) -> None:
        """Mark the connection dead and fail every pending request with ``err``.

        A caller still awaiting its reply gets ``err``. One that already gave up (timed
        out or cancelled while its request was being written, or failed in ``drain()``
        because the same drop broke the write) never awaits its future again: its
        exception is marked retrieved here, so asyncio does not log "Future exception
        was never retrieved" when the future is collected.
        """
        if self.dead is None:
            self.dead = err
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: awaiting it still raises ``err``

    def request(self, build: Callable[[int], Message]) -> tuple[int, asyncio.Future[Message]]:
        """Allocate the next request id and write the frame now; return it and the future.

        There is no await in between, so request ids reach the wire in increasing order.
        """
        if self.dead is not None:
            raise self.dead
        rid = next(self.rids)
        msg = build(rid)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message] = loop.create_future()
        self.pending[rid] = fut
        # frames of requests issued in the same loop iteration share one TLS record and
        # one socket write (concurrent executors on one connection)
        self.wbuf.append(encode_frame(msg))
        self.ch.stats.frames_out += 1
        if not self.flush_scheduled:
            self.flush_scheduled = True
            loop.call_soon(self._flush_writes)
        return rid, fut

    def expire_at(self, rid: int, deadline: float) -> None:
        """Fail request ``rid`` with :class:`TimeoutError` if it is unanswered at ``deadline``.

        One timer per connection, armed at the earliest live deadline, instead of one
        timer per request: a reply only leaves a stale heap entry, dropped when the timer
        next fires (about once per timeout period while requests keep flowing).
        """
        heapq.heappush(self._deadlines, (deadline, rid))
        if self._timer is None or deadline < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = deadline
            self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        dl, pending = self._deadlines, self.pending
        while dl and (dl[0][0] <= now or dl[0][1] not in pending):
            deadline, rid = heapq.heappop(dl)
            if deadline <= now and (fut := pending.pop(rid, None)) is not None \
                    and not fut.done():
                fut.set_exception(TimeoutError())
        if dl:
            self._timer_at = dl[0][0]
            self._timer = asyncio.get_running_loop().call_at(self._timer_at, self._expire)

    def _flush_writes(self) -> None:
        self.flush_scheduled = False
        if not self.wbuf:
            return
        data = b"".join(self.wbuf)
        self.wbuf.clear()
        try:
            self.ch.send(data)
        except Exception as exc:  # the connection is gone: fail every waiting request
            self.fail(exc if isinstance(exc, TransportError)
                      else ConnectionClosed(f"write failed: {exc}", owner=self.owner))

    async def close(self) -> None:
        """Fail every pending request, stop the reader and close the channel."""
        self.fail(ConnectionClosed("connection closed locally", owner=self.owner))
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        await self.ch.close()


def _abandon(fut: asyncio.Future[Message]) -> None:
    """Make sure nothing can report ``fut`` after its caller left.

    The caller leaves on a reply, an error, a timeout or a cancellation: cancel ``fut``
    if pending, else retrieve its exception.
    """
    if not fut.done():
        fut.cancel()
    elif not fut.cancelled():
        fut.exception()


class _Stop(Exception):
    def __init__(self, err: BaseException) -> None:
        super().__init__(str(err))
        self.err = err


class OwnerClient:
    """Async owner access over mutually authenticated TCP (:class:`AsyncOwnerAccess`).

    Safe to share between many concurrent executors (coroutines of one event loop).

    Args:
        addresses: owner id -> (host, port).
        identity: this client's agent id (must match its certificate; it is the writer
            of every commit it sends).
        ssl_context: from :func:`icore.net.client_context`.
        new_connection_per_rpc: open and authenticate a new connection for every RPC
            (paper setting) instead of reusing one per owner.
        path: network model to apply to this client's traffic (None: raw loopback).
        inline_max_bytes: ask owners to inline changed head records up to this size.
        max_frame_bytes: largest accepted frame.
    """

    def __init__(self, addresses: Mapping[str, tuple[str, int]], *, identity: str,
                 ssl_context: ssl.SSLContext, new_connection_per_rpc: bool = False,
                 path: LinkPair | None = None, inline_max_bytes: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.addresses = dict(addresses)
        self.identity = identity
        self.ssl_context = ssl_context
        self.new_connection_per_rpc = new_connection_per_rpc
        self.path = path
        self.inline_max_bytes = inline_max_bytes
        self.max_frame_bytes = max_frame_bytes
        self.stats = TrafficStats()
        self._conns: dict[str, _Conn] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._shaper: Shaper | None = None

    async def _connect(self, owner: str) -> _Conn:
        addr = self.addresses.get(owner)
        if addr is None:
            raise OwnerUnreachable("no address for this owner", owner=owner)
        if self.path is not None and self._shaper is None:
            self._shaper = Shaper(self.path)
        try:
            reader, writer = await asyncio.open_connection(addr[0], addr[1])
        except OSError as exc:
            raise OwnerUnreachable(f"cannot connect: {exc}", owner=owner,
                                   address=f"{addr[0]}:{addr[1]}") from exc
        ch = SecureChannel(reader, writer, self.ssl_context, server_side=False,
                           stats=self.stats, shaper=self._shaper)
        try:
            peer = await ch.handshake()
        except BaseException:
            ch.abort()
            raise
        if peer != owner:
            await ch.close()
            raise AuthenticationError("the server's certificate names another agent",
                                      owner=owner, peer=peer)
        self.stats.connections += 1
        conn = _Conn(ch, owner, self.max_frame_bytes)
        conn.start()
        return conn

    async def _conn(self, owner: str) -> _Conn:
        conn = self._conns.get(owner)
        if conn is not None and conn.dead is None:
            return conn
        lock = self._locks.setdefault(owner, asyncio.Lock())
        async with lock:
            conn = self._conns.get(owner)
            if conn is not None and conn.dead is None:
                return conn
            if conn is not None:
                await conn.close()
            conn = await self._connect(owner)
            self._conns[owner] = conn
            return conn

    async def _rpc_once(self, owner: str, build: Callable[[int], Message]) -> Message:
        if self.new_connection_per_rpc:
            conn = await self._connect(owner)
            try:
                return await conn.request(build)[1]
            finally:
                await conn.close()
        conn = await self._conn(owner)
        rid, fut = conn.request(build)
        try:
            await conn.ch.drain()
            return await fut
        finally:  # on timeout/cancellation, forget the request (a late reply is dropped)
            conn.pending.pop(rid, None)
            _abandon(fut)

    async def _rpc_live(self, conn: _Conn, build: Callable[[int], Message],
                        timeout_s: float) -> Message:
        """One RPC on an open connection, timed by the connection's deadline sweep."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        rid, fut = conn.request(build)
        conn.expire_at(rid, deadline)
        try:
            if conn.ch.backlogged():
                async with asyncio.timeout_at(deadline):
                    await conn.ch.drain()
            return await fut
        finally:  # on timeout/cancellation, forget the request (a late reply is dropped)
            conn.pending.pop(rid, None)
            _abandon(fut)

    async def rpc(self, owner: str, build: Callable[[int], Message], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> Message:
        """Send one request (built from its request id) and return the reply.

        Raises:
            RpcTimeout: no reply within ``timeout_s`` (connecting included).
            OwnerUnreachable: cannot connect, or the connection dropped.
            AuthenticationError: TLS failed or the server is not ``owner``.
            ProtocolError: the owner sent bytes that do not decode.
        """
        try:
            conn = self._conns.get(owner)
            if conn is not None and conn.dead is None and not self.new_connection_per_rpc:
                reply = await self._rpc_live(conn, build, timeout_s)
            else:
                async with asyncio.timeout(timeout_s):  # no extra task (unlike wait_for)
                    reply = await self._rpc_once(owner, build)
        except TimeoutError as exc:
            self.stats.failures += 1
            raise RpcTimeout("owner did not answer in time", owner=owner,
                             timeout_s=timeout_s) from exc
        except ConnectionClosed as exc:
            self.stats.failures += 1
            raise OwnerUnreachable(f"connection to owner lost: {exc.message}",
                                   **{**exc.fields, "owner": owner}) from exc
        except (ConnectionError, OSError) as exc:
            self.stats.failures += 1
            raise OwnerUnreachable(f"connection to owner failed: {exc}", owner=owner) from exc
        except TransportError:
            self.stats.failures += 1
            raise
        self.stats.rpcs += 1
        return reply

    # -- AsyncOwnerAccess ---------------------------------------------------------------
    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """One batched head query to ``owner`` (planfence Alg. 1 line 5)."""
        k = tuple(keys)
        kn = dict(known or {})
        reply = await self.rpc(owner, lambda rid: HeadQuery(rid, k, kn, self.inline_max_bytes),
                               timeout_s=timeout_s)
        return to_head_reply(reply, owner=owner, keys=k, known=kn)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch exact records from ``owner``; each was verified on decode (Alg. 1 line 8)."""
        t = tuple(ids)
        reply = await self.rpc(owner, lambda rid: FetchRequest(rid, t), timeout_s=timeout_s)
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, FetchReply):
            raise MalformedMessage("expected a fetch reply", owner=owner)
        return list(reply.records)

    # -- writes and replication -----------------------------------------------------------
    async def commit(self, owner: str, record: Record, *,
                     expected_head: ExpectedHead = FROM_PARENTS,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """Commit ``record`` at ``owner``; acknowledged only once durable.

        ``expected_head`` is the head the commit replaces, as in
        :meth:`icore.memory.Store.commit` (the owner checks it atomically).

        Raises:
            HeadConflict: the stated base is not the owner's current head (retryable:
                re-read the head, re-derive, commit again).
            RemoteError: the owner refused (``remote_code`` = ownership, sequence, ...).
        """
        reply = await self.rpc(owner, lambda rid: Commit(rid, record, expected_head),
                               timeout_s=timeout_s)
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, CommitAck):
            raise MalformedMessage("expected a commit ack", owner=owner)
        return reply

    async def announce(self, to: str, records: Sequence[Record], *,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """Announce heads (metadata envelopes only) of this identity's records to ``to``."""
        env = tuple(r.without_content() for r in records)
        reply = await self.rpc(to, lambda rid: Announce(rid, env), timeout_s=timeout_s)
        raise_for_error(reply, owner=to)
        return len(env)

    async def replicate(self, to: str, records: Sequence[Record], *,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """Push records with content into ``to``'s replica cache."""
        recs = tuple(records)
        reply = await self.rpc(to, lambda rid: Replicate(rid, recs), timeout_s=timeout_s)
        raise_for_error(reply, owner=to)
        return len(recs)

    async def ping(self, owner: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Round-trip a ping; return the answering agent id."""
        reply = await self.rpc(owner, lambda rid: Ping(rid), timeout_s=timeout_s)
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, Pong):
            raise MalformedMessage("expected a pong", owner=owner)
        return reply.agent

    async def close(self) -> None:
        """Close every connection. Idempotent."""
        conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            await c.close()

    async def __aenter__(self) -> OwnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

