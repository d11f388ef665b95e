"""A small HTTP/1.1 client for one upstream origin: pooled keep-alive connections.

The gateway's lean ``tools/call`` path (:mod:`icore.mcp._upstream_lean`) posts through it
instead of the SDK's client stack (``httpx2``/``httpcore2`` with the pure-Python ``h11``
parser, which was about a quarter of the gateway's CPU per forwarded call, #25 item 7).
Each connection is an asyncio protocol fed to ``httptools``' C parser; one request at a
time per connection, so concurrent calls take one connection each. A connection goes back
to the pool only once its response has ended (an SSE answer's end is read after the
caller has its result, at most ``drain_s``) and the server keeps it alive; idle ones are
dropped after ``keepalive_s`` (below the servers' own idle timeouts) or when the server
closes them (seen at once: ``connection_lost``).

Plain ``http://`` only, no proxy: :func:`lean_origin` says which upstream URLs qualify;
any other stays on the SDK's client. A request may go to another target of the same
origin (a redirect the caller follows: :meth:`LeanHttp.within_origin`).
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
import urllib.request
from typing import Any

PER_REQUEST = frozenset({"accept", "content-type", "content-length", "transfer-encoding",
                         "connection", "mcp-session-id", "mcp-protocol-version",
                         "last-event-id", "host"})
"""Headers a request sets itself: a same-named header of the manifest is not sent."""


MAX_IDLE = 20
"""Most idle connections kept per origin (as the SDK's client's keep-alive limit)."""

_PATH_SAFE = "!$&'()*+,;=:@/%"
"""Characters of a URL's path left as they are (unreserved ones too; ``%`` keeps an
escape already there), as ``httpx`` quotes a path; any other is percent-encoded."""


class LeanHttpError(Exception):
    """The exchange failed at the HTTP level (connect, lost connection, bad response).

    ``sent``: False when nothing of the request left (no connection, a bad header);
    True when it may have reached the server.
    """

    def __init__(self, text: str, *, sent: bool = True) -> None:
        super().__init__(text)
        self.sent = sent


def lean_origin(url: str) -> tuple[str, int, str] | None:
    """``(host, port, target)`` of a plain-HTTP URL with no proxy for it, else None.

    ``target`` is the path with its query (``/mcp``). An ``https://`` URL, one with
    credentials in it, or a host the environment routes through a proxy (``HTTP_PROXY``
    / ``ALL_PROXY`` without ``NO_PROXY`` covering it, as ``httpx2`` reads them) is None.
    """
    try:
        u = urllib.parse.urlsplit(url)
        port = 80 if u.port is None else u.port
    except ValueError:
        return None
    if u.scheme != "http" or not u.hostname or u.username or u.password:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get("http") or proxies.get("all")) and not urllib.request.proxy_bypass(
            u.hostname):
        return None
    path = urllib.parse.quote(u.path or "/", safe=_PATH_SAFE)
    query = urllib.parse.quote(u.query, safe=_PATH_SAFE + "?")
    return u.hostname, port, path + (f"?{query}" if query else "")


class Conn(asyncio.Protocol):
    """One connection: the request written, the response parsed as it arrives.

    Attributes (of the current response): ``status``, ``headers`` (lower-case names),
    ``body`` (bytes not yet taken by the reader), ``done`` (the response ended),
    ``closed`` (the connection is gone), ``cap`` (set by a reader: the most bytes
    ``body`` may hold; past it the body is dropped, ``over`` set and the connection
    closed, so a body over the cap is never held: #29).
    """

    def __init__(self, pool: LeanHttp) -> None:
        import httptools
        self.pool = pool
        self._new_parser = httptools.HttpResponseParser
        self.parser: Any = None
        self.transport: Any = None
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.head_done = False
        self.keep_alive = False
        self.done = False
        self.closed = False
        self.error: str | None = None
        self.cap: int | None = None
        self.over = False
        self.released = True
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        """asyncio: the connection is open."""
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        """asyncio: bytes of the response, fed to the parser (none is expected when idle)."""
        if (self.released and self.done) or self.parser is None:  # nothing was asked
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except Exception as exc:  # a malformed response: this connection is done
            self.error = f"{type(exc).__name__}: {exc}"
            self.close()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        """asyncio: the connection is gone (a response not ended is an error).

        A response whose body the server delimits by closing the connection (no
        ``content-length``, not chunked: HTTP/1.0 style) ends here, complete.
        """
        self.closed = True
        if exc is None and not self.done and self.error is None and self._close_delimited():
            self.done = True
        if not self.done and self.error is None:
            self.error = (f"{type(exc).__name__}: {exc}" if exc is not None else
                          "the server closed the connection before the response ended")
        self._wake()

    def _close_delimited(self) -> bool:
        """Whether the current response's body ends with the connection (RFC 9112 6.3)."""
        h, status = self.headers, self.status
        return (self.head_done and "content-length" not in h
                and "chunked" not in h.get("transfer-encoding", "").lower()
                and status >= 200 and status not in (204, 304))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        """httptools: one response header."""
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        """httptools: the response's head ended (status, keep-alive known)."""
        self.status = self.parser.get_status_code()
        self.keep_alive = bool(self.parser.should_keep_alive())  # not valid once ended
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        """httptools: bytes of the body (chunked encoding removed)."""
        if self.over:
            return
        self.body += body
        if self.cap is not None and len(self.body) > self.cap:
            self.over = True
            self.body.clear()
            self.close()

    def on_message_complete(self) -> None:
        """httptools: the response ended; pooled now if its reader is done."""
        self.done = True
        if self.released:
            self._settle()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Until more of the response arrived, it ended, or the connection is gone.

        Raises:
            LeanHttpError: the connection is gone before the response ended.
        """
        if self.error is not None:
            raise LeanHttpError(self.error)
        w = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await w
        finally:
            self._waiter = None
        if self.error is not None and not self.done:
            raise LeanHttpError(self.error)

    async def settle(self, within_s: float) -> None:
        """Wait (at most ``within_s``) for the response's end when it is not there yet.

        An SSE answer's end follows its last event at once; read here, the connection
        is idle for the next call instead of a new one being opened beside it.
        """
        if self.done or self.closed:
            return
        loop = asyncio.get_running_loop()
        w = self._waiter = loop.create_future()
        timer = loop.call_later(within_s, self._wake)
        try:
            await w
        finally:
            timer.cancel()
            self._waiter = None

    def send(self, head: bytes, body: bytes) -> None:
        """Write one request; its response is parsed from now on."""
        self.parser = self._new_parser(self)
        self.status, self.headers, self.body = 0, {}, bytearray()
        self.head_done = self.done = self.released = self.keep_alive = False
        self.error, self.cap, self.over = None, None, False
        self.transport.write(head + body)

    def release(self) -> None:
        """The reader is done: pooled once the response ended, else closed after drain_s."""
        if self.released:
            return
        self.released = True
        if self.done:
            self._settle()
        elif not self.closed:
            self._timer = asyncio.get_running_loop().call_later(self.pool.drain_s, self.close)

    def _settle(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.closed or self.error is not None or not self.keep_alive:
            self.close()
            return
        if len(self.pool.idle) >= MAX_IDLE:
            self.close()
            return
        self.idle_since = time.monotonic()
        self.pool.idle.append(self)

    def close(self) -> None:
        """Close the connection (a response still arriving is abandoned)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()


class LeanHttp:
    """Keep-alive connections to one origin (:func:`lean_origin`).

    Args:
        host, port, target: where requests go.
        headers: sent with every request (the manifest's ``headers``, e.g. a token).
        keepalive_s: how long an idle connection is kept, seconds.
        drain_s: how long the rest of a response may take after its reader is done.
    """

    def __init__(self, host: str, port: int, target: str, headers: dict[str, str],
                 *, keepalive_s: float, drain_s: float) -> None:
        self.host, self.port, self.target = host, port, target
        self.keepalive_s, self.drain_s = keepalive_s, drain_s
        authority = host if ":" not in host else f"[{host}]"
        fixed = {"user-agent": "icore-mcp", **{k.lower(): v for k, v in headers.items()}}
        for k in PER_REQUEST:  # set by each request (the SDK's own win over the client's)
            fixed.pop(k, None)
        fixed["host"] = self._fixed_host = authority if port == 80 else f"{authority}:{port}"
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self.idle: list[Conn] = []

    async def _conn(self) -> Conn:
        now = time.monotonic()
        while self.idle:
            c = self.idle.pop()
            if not c.closed and now - c.idle_since < self.keepalive_s:
                return c
            c.close()
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(lambda: Conn(self), self.host, self.port)
        except OSError as exc:
            raise LeanHttpError(f"{type(exc).__name__}: {exc}", sent=False) from None
        return conn

    def within_origin(self, location: str, target: str) -> str | None:
        """The request target a redirect's ``location`` names on this origin, else None.

        ``location`` is read relative to ``target`` (the request it answered); it is on
        this origin when its scheme is ``http``, its host and port are this pool's (the
        default port 80 written or not) and it carries no credentials: then its path and
        query, quoted as :func:`lean_origin` quotes them. Anything else (another host or
        port, ``https``, a proxied host) is None.
        """
        base = f"http://{self._fixed_host}{target}"
        got = lean_origin(urllib.parse.urljoin(base, location.strip()))
        if got is None or got[0].lower() != self.host.lower() or got[1] != self.port:
            return None
        return got[2]

    async def request(self, method: str, headers: dict[str, str], body: bytes = b"",
                      target: str | None = None) -> Conn:
        """Send one request; the connection once the response's head has arrived.

        ``target``: the path and query asked for (default: the origin's own, ``target``
        of the constructor). The caller reads ``conn.body`` (waiting with ``conn.wait()``
        until ``conn.done``) and then calls ``conn.release()``; on any exception it calls
        ``conn.close()``.

        Raises:
            LeanHttpError: a header that is not a plain latin-1 value (nothing sent), no
                connection, or it was lost before the response's head.
        """
        lines = f"{self._fixed}" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if any(c in "\r\n\0" for c in "".join(f"{k}{v}" for k, v in headers.items())):
            raise LeanHttpError("a request header has a line break or NUL (not sent)",
                                sent=False)
        try:
            head = (f"{method} {target or self.target} HTTP/1.1\r\n{lines}"
                    f"content-length: {len(body)}\r\n\r\n").encode("latin-1")
        except UnicodeEncodeError as exc:
            raise LeanHttpError(f"a request header is not latin-1 (not sent): {exc}",
                                sent=False) from None
        conn = await self._conn()
        try:
            conn.send(head, body)
            while not conn.head_done:
                await conn.wait()
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close the idle connections (those in use close when their reader is done)."""
        while self.idle:
            self.idle.pop().close()
