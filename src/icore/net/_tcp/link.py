"""One client connection to an owner as an asyncio protocol (issue 27).

:class:`OwnerLink` is what :class:`icore.net.OwnerClient` keeps per owner: requests get
increasing ids, are written at once (those issued in the same event-loop iteration share
one TLS record and one socket write) and are matched to replies by id. The loop calls
:meth:`~OwnerLink.data_received` with the ciphertext it read; the link decrypts it
(:class:`~icore.net._tcp.tls.TlsSession`, every byte counted), decodes the frames and
resolves each waiting request's future there: no reader task and no awaited read per
reply. An optional :class:`~icore.net.Shaper` applies the network model: outgoing
ciphertext is written when the uplink says it arrives, incoming ciphertext is handed to
TLS when the downlink says it arrives, each direction in order.

Every request has a deadline, swept by one timer per connection. When the connection
fails, every request still waiting gets the typed error; a future whose caller already
left has its exception marked retrieved (asyncio reports nothing).
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import ssl
from collections.abc import Callable
from typing import cast

from icore.net._commitwire import decode_reply
from icore.net._errors import ConnectionClosed, ProtocolError, TransportError
from icore.net._frames import FrameDecoder, encode_frame
from icore.net._protocol import ErrorReply, Message
from icore.net._stats import TrafficStats
from icore.net._tcp.channel import Shaper
from icore.net._tcp.tls import TlsSession


class OwnerLink(asyncio.Protocol):
    """A client's connection to one owner (see the module docstring).

    Args:
        owner: the owner this connection serves (named in errors).
        ctx: a context from :func:`icore.net.client_context`.
        stats: the client's traffic counters.
        max_frame_bytes: largest accepted frame body.
        shaper: network model applied to this connection, or None.

    Attributes:
        handshake_done: resolves to the owner's agent id once TLS is established, or to
            the error that ended the handshake.
        dead: the error that ended the connection, or None while it lives.
        loop: the event loop it was made in (kept: on Python 3.11 every
            ``asyncio.get_running_loop()`` is a ``getpid()`` system call).
    """

    def __init__(self, owner: str, ctx: ssl.SSLContext, stats: TrafficStats, *,
                 max_frame_bytes: int, shaper: Shaper | None = None) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self.owner = owner
        self.stats = stats
        self.tls = TlsSession(ctx, server_side=False, stats=stats)
        self.dec = FrameDecoder(max_frame_bytes=max_frame_bytes)
        self.rids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Message]] = {}
        self.dead: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self.handshake_done: asyncio.Future[str] = loop.create_future()
        self._lost: asyncio.Future[None] = loop.create_future()
        self._shaper = shaper
        self._outq: collections.deque[tuple[float, bytes]] = collections.deque()
        self._inq: collections.deque[tuple[float, bytes]] = collections.deque()
        self._out_timer: asyncio.TimerHandle | None = None
        self._in_timer: asyncio.TimerHandle | None = None
        self.wbuf: list[bytes] = []
        self.flush_scheduled = False
        self._paused = False
        self._drained: asyncio.Future[None] | None = None
        self._deadlines: list[tuple[float, int]] = []
        """Heap of (loop-time deadline, request id) of requests on this connection."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    # -- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the ClientHello."""
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self.tls.handshake()
        self._write(self.tls.outgoing())

    def data_received(self, data: bytes) -> None:
        """Hand ciphertext to TLS now, or when the shaper's downlink delivers it."""
        sh = self._shaper
        if sh is None:
            self._incoming(data)
            return
        arrive = sh.at(sh.down.deliver(sh.now_ms(), len(data)))
        if not self._inq and arrive <= asyncio.get_running_loop().time():
            self._incoming(data)
            return
        self._inq.append((arrive, data))
        if self._in_timer is None:
            self._in_timer = asyncio.get_running_loop().call_at(self._inq[0][0],
                                                                self._pump_in)

    def eof_received(self) -> bool:
        """The owner closed its side: fail what waits, close ours."""
        self.fail(ConnectionClosed("peer closed the connection", owner=self.owner))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail every waiting request; wake a caller waiting to write."""
        if exc is None:
            err = ConnectionClosed("peer closed the connection", owner=self.owner)
        else:
            err = ConnectionClosed(f"connection lost: {exc}", owner=self.owner)
        self.fail(err)
        for t in (self._in_timer, self._out_timer):
            if t is not None:
                t.cancel()
        self._in_timer = self._out_timer = None
        if not self._lost.done():
            self._lost.set_result(None)
        self._wake_drain()

    def pause_writing(self) -> None:
        """The socket's write buffer is full: callers wait in :meth:`drain`."""
        self._paused = True

    def resume_writing(self) -> None:
        """The write buffer drained."""
        self._paused = False
        self._wake_drain()

    # -- incoming -------------------------------------------------------------------
    def _pump_in(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._inq and self._inq[0][0] <= now + 1e-6:
            self._incoming(self._inq.popleft()[1])
        self._in_timer = loop.call_at(self._inq[0][0], self._pump_in) if self._inq else None

    def _incoming(self, data: bytes) -> None:
        if self.dead is not None:
            return
        tls = self.tls
        try:
            if not tls.established:
                done = tls.handshake(data)
                self._write(tls.outgoing())
                if not done:
                    return
                if not self.handshake_done.done():
                    self.handshake_done.set_result(tls.peer)
                data = b""  # replies may follow the handshake in the same read
            plain = tls.receive(data)
            if plain:
                self._replies(self._decode(plain))
            if tls.closed:
                self.dec.eof()
                raise ConnectionClosed("owner closed the connection", owner=self.owner)
        except TransportError as exc:  # TLS, protocol, or the owner's closing error
            if not tls.established:
                self._write(tls.outgoing())  # the handshake's alert
            self._abort(exc)
        except Exception as exc:  # never leave callers waiting
            self._abort(ConnectionClosed(f"connection failed: {exc}", owner=self.owner))

    def _decode(self, plain: bytes) -> list[Message]:
        """:meth:`FrameDecoder.feed` with the client's dispatch (:func:`decode_reply`).

        Raises:
            ProtocolError: a frame does not decode; the decoder is broken.
        """
        dec = self.dec
        try:
            return [decode_reply(body) for body in dec.bodies(plain)]
        except ProtocolError as exc:
            raise dec.fail(exc) from None

    def _replies(self, msgs: list[Message]) -> None:
        pending = self.pending
        self.stats.frames_in += len(msgs)
        for msg in msgs:
            fut = pending.pop(msg.rid, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg)
            elif isinstance(msg, ErrorReply) and msg.rid == 0:
                raise ConnectionClosed(f"owner closed the connection: {msg.message}",
                                       owner=self.owner, remote_code=msg.code)

    def _abort(self, err: BaseException) -> None:
        self.fail(err)
        if self.transport is not None:
            self.transport.close()

    # -- requests -------------------------------------------------------------------
    def request(self, build: Callable[[int], Message | bytes]
                ) -> tuple[int, asyncio.Future[Message]]:
        """Allocate the next request id and queue its frame; return it and the future.

        ``build`` returns the message for the id, or its encoded frame. There is no await
        in between, so request ids reach the wire in increasing order.

        Raises:
            TransportError: the connection is dead (the error that ended it).
        """
        if self.dead is not None:
            raise self.dead
        rid = next(self.rids)
        msg = build(rid)
        loop = self.loop
        fut: asyncio.Future[Message] = loop.create_future()
        self.pending[rid] = fut
        # frames of requests issued in the same loop iteration share one TLS record and
        # one socket write (concurrent executors on one connection)
        self.wbuf.append(msg if isinstance(msg, bytes) else encode_frame(msg))
        self.stats.frames_out += 1
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
            self._timer = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self.loop.time()
        dl, pending = self._deadlines, self.pending
        while dl and (dl[0][0] <= now or dl[0][1] not in pending):
            deadline, rid = heapq.heappop(dl)
            if deadline <= now and (fut := pending.pop(rid, None)) is not None \
                    and not fut.done():
                fut.set_exception(TimeoutError())
        if dl:
            self._timer_at = dl[0][0]
            self._timer = self.loop.call_at(self._timer_at, self._expire)

    def _flush_writes(self) -> None:
        self.flush_scheduled = False
        if not self.wbuf or self.dead is not None:
            self.wbuf.clear()
            return
        data = self.wbuf[0] if len(self.wbuf) == 1 else b"".join(self.wbuf)
        self.wbuf.clear()
        try:
            self._write(self.tls.seal(data))
        except Exception as exc:  # the connection is gone: fail every waiting request
            self.fail(exc if isinstance(exc, TransportError)
                      else ConnectionClosed(f"write failed: {exc}", owner=self.owner))

    # -- outgoing -------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        t = self.transport
        if not data or t is None or t.is_closing():
            return
        sh = self._shaper
        if sh is None:
            t.write(data)
            return
        # a FIFO per connection: timers with equal deadlines may run in any order, and
        # TLS records must reach the peer in order
        self._outq.append((sh.at(sh.up.deliver(sh.now_ms(), len(data))), data))
        if self._out_timer is None:
            self._out_timer = asyncio.get_running_loop().call_at(self._outq[0][0],
                                                                 self._pump_out)

    def _pump_out(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        t = self.transport
        while self._outq and self._outq[0][0] <= now + 1e-6:
            data = self._outq.popleft()[1]
            if t is not None and not t.is_closing():
                t.write(data)
        self._out_timer = (loop.call_at(self._outq[0][0], self._pump_out) if self._outq
                           else None)

    def backlogged(self) -> bool:
        """True when writes are paused (or the connection is closing): drain may wait."""
        t = self.transport
        return self._paused or t is None or t.is_closing()

    async def drain(self) -> None:
        """Wait until the socket's write buffer drained below its high-water mark.

        Raises:
            ConnectionClosed: the connection is closing or closed.
        """
        t = self.transport
        if t is None or t.is_closing() or self.dead is not None:
            raise ConnectionClosed("connection lost", owner=self.owner)
        if not self._paused:
            return
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)
        if self.dead is not None or t.is_closing():
            raise ConnectionClosed("connection lost", owner=self.owner)

    def _wake_drain(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- failing and closing --------------------------------------------------------
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
        if not self.handshake_done.done():
            self.handshake_done.set_exception(err)
            self.handshake_done.exception()  # retrieved: the connector awaits it
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: awaiting it still raises ``err``

    async def close(self) -> None:
        """Fail every pending request, send close_notify (counted) and close."""
        self.fail(ConnectionClosed("connection closed locally", owner=self.owner))
        t = self.transport
        if t is None:
            return
        if not t.is_closing():
            if self.tls.established and not self.tls.closed:
                data = self.tls.close()
                if data:
                    t.write(data)  # not shaped: the close is not a modelled message
            t.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._lost), 1.0)
        except Exception:  # the peer may already be gone
            pass

    def abort(self) -> None:
        """Close the socket immediately without close_notify."""
        self.fail(ConnectionClosed("connection aborted locally", owner=self.owner))
        if self.transport is not None:
            self.transport.abort()


__all__ = ["OwnerLink"]
