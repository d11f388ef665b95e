"""A TLS 1.3 channel over asyncio streams that counts every byte it moves.

TLS runs in memory (``ssl.MemoryBIO`` + ``SSLObject``) above a plain asyncio stream, so
the channel sees the exact ciphertext: handshake flights, record headers and tags,
session tickets and close alerts are all counted in :class:`TrafficStats` (design.md 3.4:
"traffic counts every byte a transport puts on the wire"). An optional :class:`Shaper`
applies the network model to a real connection from the client side: outgoing bytes are
written when the uplink model says they arrive, incoming bytes are released to the
protocol when the downlink model says they arrive.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from typing import TYPE_CHECKING

from icore.net._errors import AuthenticationError, ConnectionClosed
from icore.net._pki import identity_of_cert
from icore.net._stats import TrafficStats

if TYPE_CHECKING:  # the lab's link model, a type only (net never imports the lab)
    from icore_lab.net import Link, LinkPair

_READ = 65536


class Shaper:
    """Applies a :class:`LinkPair` to real traffic; link time 0 is the shaper's creation.

    Args:
        path: the links (``up`` for client writes, ``down`` for client reads).
    """

    def __init__(self, path: LinkPair) -> None:
        self.up: Link = path.up
        self.down: Link = path.down
        self._epoch = asyncio.get_running_loop().time()

    def now_ms(self) -> float:
        """Link time now, in ms."""
        return (asyncio.get_running_loop().time() - self._epoch) * 1000.0

    def at(self, t_ms: float) -> float:
        """Loop time (s) of link time ``t_ms``."""
        return self._epoch + t_ms / 1000.0


class SecureChannel:
    """Mutually authenticated TLS over one TCP connection.

    Args:
        reader: the stream reader of a connected socket.
        writer: its stream writer.
        ctx: a context from :func:`server_context` or :func:`client_context`.
        server_side: True on the owner side.
        stats: counters to add every byte to.
        shaper: network model to apply (client side only), or None.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 ctx: ssl.SSLContext, *, server_side: bool, stats: TrafficStats,
                 shaper: Shaper | None = None) -> None:
        self._r = reader
        self._w = writer
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=server_side)
        self.stats = stats
        self._shaper = shaper
        self.peer: str = ""
        self.closed = False
        self._queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    # -- raw byte movement ------------------------------------------------------------
    def _flush(self, *, handshake: bool = False) -> None:
        data = self._out.read()
        if not data:
            return
        self.stats.bytes_out += len(data)
        if handshake:
            self.stats.handshake_bytes += len(data)
        if self._w.is_closing():
            return
        if self._shaper is None:
            self._w.write(data)
            return
        arrive = self._shaper.up.deliver(self._shaper.now_ms(), len(data))
        # a FIFO per connection: timers with equal deadlines may run in any order, and
        # TLS records must reach the peer in order
        self._queue.append((self._shaper.at(arrive), data))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_at(self._queue[0][0], self._pump)

    def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._queue and self._queue[0][0] <= now + 1e-6:
            _, data = self._queue.popleft()
            if not self._w.is_closing():
                self._w.write(data)
        self._timer = loop.call_at(self._queue[0][0], self._pump) if self._queue else None

    async def _pull(self, *, handshake: bool = False) -> None:
        data = await self._r.read(_READ)
        if not data:
            raise ConnectionClosed("peer closed the connection", peer=self.peer or None)
        self.stats.bytes_in += len(data)
        if handshake:
            self.stats.handshake_bytes += len(data)
        if self._shaper is not None:
            arrive = self._shaper.down.deliver(self._shaper.now_ms(), len(data))
            delay = self._shaper.at(arrive) - asyncio.get_running_loop().time()
            if delay > 0:
                await asyncio.sleep(delay)
        self._in.write(data)

    # -- TLS ---------------------------------------------------------------------------
    async def handshake(self) -> str:
        """Run the TLS 1.3 handshake and return the peer's agent id.

        Raises:
            AuthenticationError: the handshake failed (no certificate, another CA, ...) or
                the certificate carries no agent id.
            ConnectionClosed: the peer went away during the handshake.
        """
        while True:
            try:
                self._obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush(handshake=True)
                await self._w.drain()
                await self._pull(handshake=True)
            except ssl.SSLError as exc:
                self._flush(handshake=True)
                raise AuthenticationError(f"TLS handshake failed: {exc.reason or exc}",
                                          reason=str(exc.reason)) from exc
        self._flush(handshake=True)
        self.peer = identity_of_cert(self._obj.getpeercert())
        return self.peer

    def send(self, data: bytes) -> None:
        """Encrypt and write ``data`` (buffered; call :meth:`drain` for back-pressure)."""
        if self.closed:
            raise ConnectionClosed("channel is closed", peer=self.peer or None)
        self._obj.write(data)
        self._flush()

    def backlogged(self) -> bool:
        """True when a write is queued in the transport (or it is closing): drain may wait."""
        t = self._w.transport
        return bool(t.get_write_buffer_size()) or t.is_closing()

    async def drain(self) -> None:
        """Wait until the write buffer is below its high-water mark."""
        if not self.backlogged():
            return  # nothing queued (the usual case): no await, no wake-up
        try:
            await self._w.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosed(f"connection lost: {exc}", peer=self.peer or None) from exc

    async def recv(self) -> bytes:
        """Return the next decrypted bytes; ``b""`` on a clean close.

        Raises:
            AuthenticationError: a TLS alert (e.g. the server refused our certificate).
            ConnectionClosed: the connection dropped without close_notify.
        """
        while True:
            if not self._in.pending and not self._obj.pending():
                # nothing buffered, so a read would only raise SSLWantReadError: read the
                # socket first (one exception less per message on the hot path)
                try:
                    await self._pull()
                except (ConnectionError, OSError) as exc:
                    raise ConnectionClosed(f"connection lost: {exc}",
                                           peer=self.peer or None) from exc
            try:
                data = self._obj.read(_READ)
            except ssl.SSLWantReadError:
                try:
                    await self._pull()
                except (ConnectionError, OSError) as exc:
                    raise ConnectionClosed(f"connection lost: {exc}",
                                           peer=self.peer or None) from exc
                continue
            except ssl.SSLZeroReturnError:
                return b""
            except ssl.SSLError as exc:
                raise AuthenticationError(f"TLS error: {exc.reason or exc}",
                                          reason=str(exc.reason), peer=self.peer or None
                                          ) from exc
            self._flush()  # key updates / post-handshake messages
            if data:
                return data
            return b""

    async def close(self) -> None:
        """Send close_notify (counted) and close the socket. Idempotent, never raises."""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:  # shaped bytes still in flight are dropped
            self._timer.cancel()
            self._timer = None
        try:
            self._obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        try:
            self._flush()
        except Exception:  # closing must not fail
            pass
        try:
            self._w.close()
            await asyncio.wait_for(self._w.wait_closed(), 1.0)
        except Exception:  # the peer may already be gone
            pass

    def abort(self) -> None:
        """Close the socket immediately without close_notify."""
        self.closed = True
        self._w.transport.abort()
