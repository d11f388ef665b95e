"""The gate's own NATS connection: request/replies without nats-py's message path (#27).

:class:`GateLink` speaks the NATS client protocol itself over an ``asyncio.Protocol``
(frames parsed by :class:`icore.memory.nats._wire.WireParser` in ``data_received``, no
reader or flusher task, no message objects): ``CONNECT``/``PING``/``PONG``, one ``SUB``
of a reply inbox, ``PUB`` of requests, ``MSG``/``HMSG`` replies handed to one callback.
The gate's batched head reads and quorum barriers go over it
(:class:`icore.memory.nats._reads.BatchedHeadReads`); everything else (commits, record
gets, watchers) stays on the nats-py client of the same :class:`NatsMemory`.

Security: TLS with the same ``ssl.SSLContext`` as the nats-py connection (the team's
mutual-TLS certificate, which is the NATS user: ``verify_and_map``), upgraded after the
server's ``INFO`` as nats-py does. A server URL with user credentials is not handled
here (:func:`link_servers` returns None; the reads then stay on nats-py). Server URLs
in errors are redacted (:func:`icore.errors.redact`).

Failures: a dropped connection fails every request in flight at once with a
:class:`~icore.errors.StoreError` (the gate blocks: fail closed), and the next request
connects again (each listed server in turn, bounded by the caller's timeout). No
background task keeps it alive; a request that gets no reply times out.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from icore.errors import StoreError, redact
from icore.memory.nats._codec import NatsStats
from icore.memory.nats._wire import OnMsg, WireParser

CLIENT_VERSION = "icore-gate-1"
"""The ``version`` this connection gives in ``CONNECT`` (its ``lang`` is ``python``)."""


def link_servers(servers: Sequence[str]) -> list[tuple[str, int, str]] | None:
    """(host, port, redacted URL) of each server a :class:`GateLink` can reach, or None.

    None when any URL carries user credentials or a scheme other than ``nats``/``tls``
    (those connections stay on nats-py).
    """
    out = []
    for url in servers:
        u = urlsplit(url if "://" in url else f"nats://{url}")
        if u.scheme not in ("nats", "tls") or u.username or u.password or not u.hostname:
            return None
        try:
            port = u.port or 4222
        except ValueError:
            return None
        out.append((u.hostname, port, redact(url)))
    return out or None


class _Conn(asyncio.Protocol):
    """One TCP (then TLS) connection's protocol: frames to the link's callbacks."""

    def __init__(self, link: GateLink, where: str) -> None:
        self.link, self.where = link, where
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.info: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.pong: asyncio.Future[None] = loop.create_future()
        self.lost = False
        self.parser = WireParser(link.on_msg, on_ping=self._ping, on_pong=self._pong,
                                 on_ok=_ignore, on_err=self._err, on_info=self._info)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the TCP transport (replaced by the TLS one after ``start_tls``)."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; a protocol error or a failing handler drops the connection."""
        try:
            self.parser.feed(data)
        except Exception as exc:  # not NATS, or a handler failed: drop the connection
            self._fail(exc if isinstance(exc, StoreError) else StoreError(
                "NATS reply handling failed", error=f"{type(exc).__name__}: {exc}"))
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail the handshake if it is under way; tell the link (requests fail)."""
        self.lost = True
        self._fail(StoreError("the gate's NATS connection was lost", server=self.where,
                              error=redact(str(exc or "closed by the server"))))
        self.link.lost(self)

    def _fail(self, exc: Exception) -> None:
        for f in (self.info, self.pong):
            if not f.done():
                f.set_exception(exc)
                f.exception()  # retrieved: a handshake may not be waiting any more

    def _ping(self, _arg: bytes) -> None:
        if self.transport is not None:
            self.transport.write(b"PONG\r\n")

    def _pong(self, _arg: bytes) -> None:
        if not self.pong.done():
            self.pong.set_result(None)

    def _info(self, arg: bytes) -> None:
        if not self.info.done():
            try:
                info = json.loads(arg)
            except ValueError:
                info = None
            if isinstance(info, dict):
                self.info.set_result(info)
            else:
                self._fail(StoreError("malformed INFO from the NATS server",
                                      server=self.where))

    def _err(self, text: bytes) -> None:
        msg = text.decode("utf-8", "replace")[:300]
        self.link.server_error(msg)
        self._fail(StoreError("the NATS server refused the gate's connection",
                              server=self.where, error=redact(msg)))


def _ignore(_arg: bytes) -> None:
    return None


class GateLink:
    """The gate's request/reply connection to NATS (see the module docstring).

    Args:
        servers: from :func:`link_servers` (host, port, redacted URL), tried in turn.
        ssl_context: the client's TLS context (None: plain TCP, refused by a server that
            requires TLS).
        name: the connection's name on the server (the agent id).
        on_msg: called in ``data_received`` per message to :attr:`inbox` ``.*`` with
            (subject, header block or None, payload); must not raise.
        on_lost: called with the error when the connection drops (every request in
            flight is to fail with it).
        stats: counters (permission violations the server reports).
    """

    def __init__(self, servers: Sequence[tuple[str, int, str]], *,
                 ssl_context: ssl.SSLContext | None, name: str, on_msg: OnMsg,
                 on_lost: Callable[[Exception], None], stats: NatsStats) -> None:
        self.servers = list(servers)
        self.ssl_context, self.name = ssl_context, name
        self.on_msg, self.on_lost, self.stats = on_msg, on_lost, stats
        self.inbox = f"_INBOX.{secrets.token_hex(11)}"
        self._conn: _Conn | None = None
        self._connecting: asyncio.Task[_Conn] | None = None
        self._next_server = 0
        self._out: list[bytes] = []
        self._closed = False

    @property
    def connected(self) -> bool:
        """Whether a connection is up (a request sent now goes out without connecting)."""
        return self._conn is not None

    async def ready(self, timeout_s: float) -> None:
        """Connect unless connected (one attempt shared by concurrent callers).

        Raises:
            StoreError: closed, or no server accepted the connection (each tried within
                ``timeout_s``; the error names the last one, redacted).
            TimeoutError: the caller's own deadline passed first.
        """
        if self._conn is not None:
            return
        if self._closed:
            raise StoreError("the gate's NATS connection is closed")
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect(timeout_s))
            self._connecting.add_done_callback(self._connected)
        await asyncio.shield(self._connecting)

    def _connected(self, task: asyncio.Task[_Conn]) -> None:
        self._connecting = None
        if not task.cancelled() and task.exception() is None:
            conn = task.result()
            if conn.lost or self._closed:
                if self._closed and conn.transport is not None:
                    conn.transport.abort()
                return
            self._conn = conn

    async def _connect(self, timeout_s: float) -> _Conn:
        last: Exception | None = None
        for _ in range(len(self.servers)):
            host, port, where = self.servers[self._next_server]
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._handshake(host, port, where)
            except (OSError, TimeoutError, StoreError, ssl.SSLError) as exc:
                last = exc
                self._next_server = (self._next_server + 1) % len(self.servers)
        why = "timed out" if isinstance(last, TimeoutError) else redact(str(last))
        raise StoreError("cannot connect the gate to NATS", error=why,
                         servers=[s[2] for s in self.servers]) from last

    async def _handshake(self, host: str, port: int, where: str) -> _Conn:
        loop = asyncio.get_running_loop()
        conn = _Conn(self, where)
        transport, _ = await loop.create_connection(lambda: conn, host, port)
        try:
            info = await conn.info
            if self.ssl_context is not None:
                tls = await loop.start_tls(transport, conn, self.ssl_context,
                                           server_hostname=host)
                if tls is None:
                    raise StoreError("TLS upgrade failed", server=where)
                conn.transport = tls  # type: ignore[assignment]
            elif info.get("tls_required"):
                raise StoreError("the NATS server requires TLS", server=where)
            opts = {"verbose": False, "pedantic": False, "tls_required":
                    self.ssl_context is not None, "name": self.name, "lang": "python",
                    "version": CLIENT_VERSION, "protocol": 1, "headers": True,
                    "no_responders": True}
            assert conn.transport is not None
            conn.transport.write(b"CONNECT " + json.dumps(opts).encode() + b"\r\nSUB "
                                 + self.inbox.encode() + b".* 1\r\nPING\r\n")
            await conn.pong
            return conn
        except BaseException:
            (conn.transport or transport).abort()
            raise

    def publish(self, subject: str, payload: bytes, reply: str) -> None:
        """Queue ``PUB subject reply`` with ``payload``; sent with this loop turn's others.

        Call after :meth:`ready`. A connection lost before the send fails the request
        through ``on_lost`` (never silently).
        """
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(),
                                                     len(payload), payload))

    def _flush(self) -> None:
        out, self._out = self._out, []
        conn = self._conn
        if conn is None or conn.transport is None or conn.lost:
            self.on_lost(StoreError("the gate's NATS connection is down"))
            return
        conn.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def lost(self, conn: _Conn) -> None:
        """Called by a connection that dropped: forget it, fail what was in flight."""
        if self._conn is conn:
            self._conn = None
            self.on_lost(StoreError("the gate's NATS connection was lost",
                                    server=conn.where))

    def server_error(self, text: str) -> None:
        """Count a ``-ERR`` the server sent (permission violations as nats-py's callback)."""
        if "permissions violation" in text.lower():
            self.stats.permission_denied += 1
            self.stats.violations[:] = [*self.stats.violations[-99:], text]

    async def close(self) -> None:
        """Close the connection (requests in flight fail); later requests are refused."""
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.abort()  # no TLS close_notify wait: the socket closes now
            await asyncio.sleep(0)  # let the transport's close run on this loop
