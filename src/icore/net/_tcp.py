"""asyncio TCP transport with mutual TLS 1.3: owner server and clients (planfence App. A).

:class:`OwnerServer` serves one agent's store; :class:`OwnerClient` implements
:class:`icore.memory.AsyncOwnerAccess` and :class:`SyncOwnerClient` wraps it as
:class:`icore.memory.OwnerAccess` for plain scripts. So the gate runs unchanged over
either transport.

Connections are reused by default (one per owner, requests pipelined and matched to
replies by request id; requests issued in the same event-loop iteration share one TLS
record and one socket write, and so do the replies to one read);
``new_connection_per_rpc=True`` opens, authenticates and closes a connection for every
RPC, paying the TCP and TLS handshakes as in the paper's setting. Every RPC has a
timeout (default 2 s, design.md 3.2).

Security behaviour of the server (each case is logged on ``icore.net`` and recorded in
:attr:`OwnerServer.events`; the server keeps serving other connections):

* no client certificate, or one from another CA: the TLS handshake fails;
* a writer committing a key it does not own: typed :class:`ErrorReply` (``ownership``);
* a record whose content does not hash to its id: ``InvalidRecord``, connection closed;
* a replayed or reordered request id: ``SequenceViolation``, connection closed;
* any undecodable frame: a typed :class:`ProtocolError`, connection closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply, Store
from icore.net._channel import SecureChannel, Shaper
from icore.net._errors import (
    AuthenticationError,
    ConnectionClosed,
    MalformedMessage,
    OwnerUnreachable,
    ProtocolError,
    RpcTimeout,
    TransportError,
)
from icore.net._handler import DEFAULT_INLINE_CAP_BYTES, OwnerHandler
from icore.net._links import LinkPair
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
    RequestSequence,
    encode_frame,
)
from icore.net._stats import TrafficStats, error_code_of, raise_for_error, to_head_reply
from icore.records import Record, RecordId

log = logging.getLogger("icore.net")
T = TypeVar("T")

DEFAULT_HANDSHAKE_TIMEOUT_S = 5.0
"""How long a server waits for a client to finish the TLS handshake."""


@dataclass(frozen=True, slots=True)
class SecurityEvent:
    """A refused connection or request, as logged by the server.

    Attributes:
        kind: ``handshake``, ``protocol`` or ``request``.
        code: stable error code (``transport``, ``ownership``, ...).
        error: the error class name.
        peer: the authenticated peer id ('' before authentication).
        detail: the error message.
    """

    kind: str
    code: str
    error: str
    peer: str
    detail: str


def check_port(port: object) -> int:
    """Return ``port`` if it is an ``int`` TCP port in 0..65535 (0 = ephemeral).

    Raises:
        ValueError: ``port`` is not an ``int`` (``bool`` included) or is outside
            0..65535.
    """
    if isinstance(port, bool) or not isinstance(port, int):
        raise ValueError(f"port must be an int in 0..65535, got {type(port).__name__} "
                         f"{port!r}")
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535 (0 = ephemeral), got {port}")
    return port


class GroupCommitter:
    """Group commit for one owner service (issue 17): commits that arrive while a write
    transaction is in flight - from any connection - share the next transaction and its
    one fsync, and each is acknowledged only after that transaction committed.

    Every owner rule still applies per record, in arrival order
    (:meth:`OwnerHandler.handle_commits`). With a store whose commits wait for the disk
    (``Store.blocking_writes``: SQLite) the transaction runs in a worker thread, so the
    event loop keeps answering head queries - from the exclusive store's in-memory head
    table - and gathers the next group meanwhile.

    Args:
        handler: the owner's request handler.
        max_group: most commits in one transaction.
    """

    def __init__(self, handler: OwnerHandler, *, max_group: int = 256) -> None:
        self.handler = handler
        self.max_group = max_group
        self.in_thread = handler.store.blocking_writes
        self._queue: list[tuple[Commit, str, asyncio.Future[Message]]] = []
        self._task: asyncio.Task[None] | None = None
        self.groups = 0
        """Transactions run so far."""
        self.commits = 0
        """Commits answered so far."""

    def submit(self, msg: Commit, peer: str) -> asyncio.Future[Message]:
        """Queue one commit; the future resolves to its reply once its group is durable."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message] = loop.create_future()
        self._queue.append((msg, peer, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return fut

    async def _run(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let every connection readable now join this group
            group, self._queue = (self._queue[:self.max_group],
                                  self._queue[self.max_group:])
            items = [(m, p) for m, p, _f in group]
            try:
                if self.in_thread:
                    replies = await asyncio.to_thread(self.handler.handle_commits, items)
                else:
                    replies = self.handler.handle_commits(items)
            except BaseException as exc:  # nothing of the group was written: fail them all
                for _m, _p, fut in group:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, Exception)
                                          else ConnectionClosed("owner shut down"))
                        fut.exception()
                if not isinstance(exc, Exception):
                    raise
                continue
            self.groups += 1
            self.commits += len(group)
            for (_m, _p, fut), reply in zip(group, replies, strict=True):
                if not fut.done():
                    fut.set_result(reply)


class OwnerServer:
    """Serve one agent's store over mutually authenticated TCP.

    Args:
        store: the agent's store.
        agent: the agent id (must equal the identity in its certificate).
        ssl_context: from :func:`icore.net.server_context`.
        host: bind address (default ``127.0.0.1``).
        port: TCP port (0 = ephemeral; see :attr:`port` after :meth:`start`).
        max_frame_bytes: largest accepted frame body.
        inline_cap_bytes: largest record inlined into head replies.
        handshake_timeout_s: time a client has to complete the TLS handshake.

    Raises:
        ValueError: ``port`` is not an ``int`` in 0..65535 (checked before anything
            is bound).
    """

    def __init__(self, store: Store, *, agent: str, ssl_context: ssl.SSLContext,
                 host: str = "127.0.0.1", port: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES,
                 inline_cap_bytes: int = DEFAULT_INLINE_CAP_BYTES,
                 handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> None:
        check_port(port)
        self.handler = OwnerHandler(store, agent=agent, inline_cap_bytes=inline_cap_bytes)
        self.agent = agent
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.stats = TrafficStats()
        self.events: list[SecurityEvent] = []
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._group = GroupCommitter(self.handler)

    @property
    def group_commits(self) -> tuple[int, int]:
        """(write transactions, commits answered) of the group committer so far."""
        return self._group.groups, self._group.commits

    async def start(self) -> int:
        """Bind and start accepting; return the bound port."""
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("owner %s serving on %s:%d", self.agent, self.host, self.port)
        return self.port

    async def serve_forever(self) -> None:
        """Serve until cancelled (start first if needed)."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, close every connection. Idempotent."""
        if self._server is not None:
            self._server.close()
            for t in list(self._conns):
                t.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    def _event(self, kind: str, exc: BaseException, peer: str) -> None:
        code = exc.code if isinstance(exc, _Remote) else error_code_of(exc)
        name = "ErrorReply" if isinstance(exc, _Remote) else type(exc).__name__
        ev = SecurityEvent(kind, code, name, peer, str(exc)[:500])
        if len(self.events) < 10_000:
            self.events.append(ev)
        if isinstance(exc, _Remote):
            return  # OwnerHandler already logged the refused request
        log.warning("owner %s refused %s from peer=%r: %s: %s [%s]", self.agent, kind,
                    peer, ev.error, ev.detail, ev.code)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        ch = SecureChannel(reader, writer, self.ssl_context, server_side=True,
                           stats=self.stats)
        try:
            await self._serve(ch)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a connection must never take the server down
            self._event("connection", exc, ch.peer)
        finally:
            await ch.close()
            self._conns.discard(task)

    async def _serve(self, ch: SecureChannel) -> None:
        try:
            await asyncio.wait_for(ch.handshake(), self.handshake_timeout_s)
        except (TransportError, TimeoutError, OSError) as exc:
            self._event("handshake", exc, "")
            return
        self.stats.connections += 1
        peer = ch.peer
        dec = FrameDecoder(max_frame_bytes=self.max_frame_bytes)
        seq = RequestSequence()
        out: list[bytes] = []
        while True:
            try:
                data = await ch.recv()
            except TransportError as exc:
                if not isinstance(exc, ConnectionClosed):
                    self._event("protocol", exc, peer)
                return
            try:
                if not data:
                    dec.eof()
                    return
                out = []
                msgs = dec.feed(data)
                # replies to the requests of one read go out in one TLS record and one
                # write (pipelined clients), in request order; commits join the group
                # commit, and a later request of the same read waits for them (it must
                # see its own writes)
                slots: list[Message | asyncio.Future[Message]] = []
                for msg in msgs:
                    seq.check(msg.rid)
                    self.stats.frames_in += 1
                    if isinstance(msg, Commit):
                        slots.append(self._group.submit(msg, peer))
                        continue
                    if any(isinstance(x, asyncio.Future) for x in slots):
                        await asyncio.wait([x for x in slots if isinstance(x, asyncio.Future)])
                    slots.append(self.handler.handle(msg, peer))
                for slot in slots:
                    reply = await slot if isinstance(slot, asyncio.Future) else slot
                    if isinstance(reply, ErrorReply):
                        self._event("request", _Remote(reply), peer)
                    out.append(encode_frame(reply, max_frame_bytes=self.max_frame_bytes))
                    self.stats.frames_out += 1
                    self.stats.rpcs += 1
                if out:
                    ch.send(b"".join(out))
            except ProtocolError as exc:
                self._event("protocol", exc, peer)
                with contextlib.suppress(Exception):
                    out.append(encode_frame(ErrorReply(0, error_code_of(exc), str(exc)[:1000])))
                    ch.send(b"".join(out))
                return
            await ch.drain()


class _Remote(Exception):
    """Adapter so an error reply can be logged like an exception."""

    def __init__(self, reply: ErrorReply) -> None:
        super().__init__(reply.message)
        self.code = reply.code


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

    def start(self) -> None:
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
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: awaiting it still raises ``err``

    def request(self, build: Callable[[int], Message]) -> tuple[int, asyncio.Future[Message]]:
        """Allocate the next request id and write the frame now (no await in between, so
        request ids reach the wire in increasing order); return it and the reply future."""
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
        self.fail(ConnectionClosed("connection closed locally", owner=self.owner))
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        await self.ch.close()


def _abandon(fut: asyncio.Future[Message]) -> None:
    """The caller of ``fut`` is leaving (reply, error, timeout or cancellation): make sure
    nothing can report ``fut`` later (cancel it if pending, retrieve its exception)."""
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
            async with asyncio.timeout(timeout_s):  # no extra task per RPC (unlike wait_for)
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


class _LoopThread:
    """A private event loop running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError as exc:
            fut.cancel()
            raise RpcTimeout("the client loop did not answer in time",
                             timeout_s=timeout_s) from exc

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5.0)
        if not self.thread.is_alive():
            self.loop.close()


class SyncOwnerClient:
    """Synchronous :class:`icore.memory.OwnerAccess` over :class:`OwnerClient`.

    Runs the async client on a private event loop in a background thread; safe to call
    from many threads at once (each call is one coroutine on that loop). Same arguments
    as :class:`OwnerClient`. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, addresses: Mapping[str, tuple[str, int]], *, identity: str,
                 ssl_context: ssl.SSLContext, new_connection_per_rpc: bool = False,
                 path: LinkPair | None = None, inline_max_bytes: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._lt = _LoopThread(f"icore-client-{identity}")
        path_ = path

        async def make() -> OwnerClient:
            return OwnerClient(addresses, identity=identity, ssl_context=ssl_context,
                               new_connection_per_rpc=new_connection_per_rpc, path=path_,
                               inline_max_bytes=inline_max_bytes,
                               max_frame_bytes=max_frame_bytes)

        self.client = self._lt.run(make(), 5.0)

    @property
    def stats(self) -> TrafficStats:
        """Traffic counters of the underlying client."""
        return self.client.stats

    def _call(self, fn: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        async def go() -> T:
            return await fn()
        return self._lt.run(go(), timeout_s + 5.0)

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`OwnerClient.query_heads`."""
        return self._call(lambda: self.client.query_heads(owner, keys, known=known,
                                                          timeout_s=timeout_s), timeout_s)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`OwnerClient.fetch`."""
        return self._call(lambda: self.client.fetch(owner, ids, timeout_s=timeout_s),
                          timeout_s)

    def commit(self, owner: str, record: Record, *,
               expected_head: ExpectedHead = FROM_PARENTS,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """See :meth:`OwnerClient.commit`."""
        return self._call(lambda: self.client.commit(owner, record,
                                                     expected_head=expected_head,
                                                     timeout_s=timeout_s), timeout_s)

    def announce(self, to: str, records: Sequence[Record], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """See :meth:`OwnerClient.announce`."""
        return self._call(lambda: self.client.announce(to, records, timeout_s=timeout_s),
                          timeout_s)

    def replicate(self, to: str, records: Sequence[Record], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """See :meth:`OwnerClient.replicate`."""
        return self._call(lambda: self.client.replicate(to, records, timeout_s=timeout_s),
                          timeout_s)

    def ping(self, owner: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """See :meth:`OwnerClient.ping`."""
        return self._call(lambda: self.client.ping(owner, timeout_s=timeout_s), timeout_s)

    def close(self) -> None:
        """Close connections and stop the loop thread. Idempotent."""
        if self._lt.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._lt.run(self.client.close(), 5.0)
        self._lt.stop()

    def __enter__(self) -> SyncOwnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerThread:
    """Run an :class:`OwnerServer` on its own event loop in a background thread.

    For tests, benchmarks and scripts that want an owner in-process. Same arguments as
    :class:`OwnerServer`; use as a context manager.

    Raises:
        ValueError: ``port`` is not an ``int`` in 0..65535 (before the thread starts).
    """

    def __init__(self, store: Store, *, agent: str, ssl_context: ssl.SSLContext,
                 host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> None:
        check_port(port)
        self._lt = _LoopThread(f"icore-owner-{agent}")

        async def make() -> OwnerServer:
            srv = OwnerServer(store, agent=agent, ssl_context=ssl_context, host=host,
                              port=port, **kwargs)
            await srv.start()
            return srv

        self.server = self._lt.run(make(), 10.0)
        self.port = self.server.port
        self.address = (host, self.port)

    def close(self) -> None:
        """Stop the server and its thread. Idempotent."""
        if self._lt.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._lt.run(self.server.close(), 10.0)
        self._lt.stop()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
