"""A forwarded ``tools/call`` posted to a streamable-HTTP upstream directly (#25 item 7).

The SDK's client sends a request through its dispatcher, two memory streams, a task per
POST and ``httpx2`` (with the pure-Python ``h11`` parser); that was about 40% of the
gateway's CPU per forwarded call over HTTP. Here the gateway writes the same POST itself
(:class:`~icore.mcp._lean_http.LeanHttp`: one pooled keep-alive connection, ``httptools``)
in the MCP session the SDK initialised (its ``Mcp-Session-Id`` and the negotiated
``MCP-Protocol-Version``, the headers the SDK sends with a ``tools/call``) and reads the
answer itself: JSON, or an SSE stream. Everything else (``initialize``, listing,
resources, notifications, the GET stream) stays on the SDK's session.

What the SDK does with the answer is kept:

- the result is checked against the negotiated protocol version (``mcp_types.methods``),
  a JSON-RPC error is an :class:`~mcp.shared.exceptions.MCPError`, as
  ``ClientSession.send_request`` raises it;
- an SSE event before the response (a notification, a request to the client such as
  ``ping``) is handed to the SDK's session as if its transport had read it (its handlers
  answer and route it); an event with an ``id`` is remembered, and a stream that ends
  without the response is resumed with ``Last-Event-ID`` (GET) as the SDK does, else the
  call fails with the SDK's "SSE stream ended without a response";
- HTTP 404 to the POST with our session id marks the session lost and is an error
  marked "not taken" (:func:`not_taken`: the upstream never ran it, the caller
  reconnects and sends it again); a 404 to a resumption GET also marks the session lost
  but fails the call unmarked (it may have run); another 4xx/5xx is the JSON-RPC error in
  its body, else the SDK's stand-in;
- a call abandoned (its timeout, the client gone) closes its connection and sends the
  upstream ``notifications/cancelled`` through the SDK's session, as the SDK would;
- a connection that fails is that call's error (code ``TRANSPORT_FAILED``), never the
  session's.

Redirects are followed as the SDK's client follows them (``stream_within_origin``): a
307 or 308 to the POST (the server did not take it: the same request goes to the new
target), any redirect of a resumption GET, within the upstream's origin only (same
``http`` host and port, no credentials), at most :data:`MAX_REDIRECTS` times. Any other
is that call's error, never sent again: a 301/302/303 to the POST (it may come after
the server ran the call), or a location on another origin, ``https`` included (the
error names it: ``Redirect to ... not followed: ...``).

A stream's leading UTF-8 byte order mark is dropped (the SSE standard's decoding). A
connection lost once the answer began (mid-stream) fails the call with an error saying
the upstream may have run it; it is never sent again (only a stream that ended cleanly
after an event ``id`` is resumed, by GET, which runs nothing).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio

from icore.mcp._lean_answers import (
    checked_result,
    error_of,
    response_result,
    result_checks,
    sse_fields,
)
from icore.mcp._lean_http import LeanHttp, LeanHttpError
from icore.mcp._upstream_cap import IDENTITY, coded_error, foreign_coding
from icore.mcp._upstream_status import status_text, with_status

log = logging.getLogger("icore.mcp")

RESUME_ATTEMPTS = 2
"""Resumptions (GET with ``Last-Event-ID``) of a stream that ended without the response."""
RESUME_DELAY_MS = 1000
"""Wait before a resumption when the server gave no ``retry``, ms (the SDK's default)."""

MAX_REDIRECTS = 20
"""Most redirects followed for one request (``httpx``'s default, which the SDK keeps)."""
REDIRECT_BODY_MAX = 64 * 1024
"""Bytes of a redirect's body read to reuse its connection; a longer one (or one of
unknown length) closes it instead."""
BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark an SSE stream may start with (dropped)."""
_BOM_HEADS = (b"", BOM[:1], BOM[:2])
"""A stream's first bytes that may still become a BOM."""
MID_STREAM = ("the connection was lost mid-answer: the upstream may have run the call, "
              "so it is not sent again")
"""What a call's error says when its answer had begun before the connection was lost."""

SETTLE_S = 0.005
"""How long the end of an SSE answer is awaited after its response event, seconds (it
follows at once; the connection is then reused rather than another opened)."""

_ids = itertools.count(1)

NOT_TAKEN = "icore_not_taken"
"""Key of an ``MCPError``'s ``data`` (value True) that says the upstream certainly did
not take the request (HTTP 404 to the POST carrying our session id): it may be resent."""


def not_taken_error() -> Exception:
    """The ``MCPError`` of a POST answered 404 to our session id (marked :data:`NOT_TAKEN`)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_REQUEST
    return MCPError(INVALID_REQUEST, "Session terminated", {NOT_TAKEN: True})


async def not_taken_response(request: Any, resp: Any, rid: Any) -> Any:
    """The SDK path: a POST's 404 to our session id as the marked "not taken" JSON-RPC error.

    The upstream does not know the session, so it never ran the request: the error
    carries :data:`NOT_TAKEN` and the request is resent in a
    new session (``rid``: the request's JSON-RPC id). A 404 to a resumption GET stays
    unmarked (the call may have run).
    """
    import httpx2
    from mcp_types import INVALID_REQUEST

    await resp.aclose()
    return httpx2.Response(404, json={"jsonrpc": "2.0", "id": rid, "error": {
        "code": INVALID_REQUEST, "message": "Session terminated",
        "data": {NOT_TAKEN: True}}}, request=request)


def not_taken(exc: BaseException) -> bool:
    """Whether ``exc`` is an error marked :data:`NOT_TAKEN` (the request may be resent)."""
    error = getattr(exc, "error", None)
    data = getattr(error, "data", None)
    return isinstance(data, dict) and data.get(NOT_TAKEN) is True


class LeanCalls:
    """``tools/call`` over :class:`LeanHttp` in the SDK session's MCP session.

    Args:
        http: the pooled client of the upstream's origin.
        transport: the SDK's ``StreamableHTTPTransport`` of the session (its
            ``session_id``).
        inject: awaited with each message of a call's SSE stream that is not its response
            (the SDK's read stream: its session handles it).
        on_lost: called when the upstream answers 404 to the session id.
        transport_failed: ``(code, text)`` of a failed exchange's error.
        spawn: runs a coroutine function outside the caller's cancel scope (the
            cancellation notice of an abandoned call).
        limit: the longest JSON answer or SSE event read, bytes (``max_message_mb``): a
            longer answer fails the call (:func:`~icore.mcp._upstream_cap.too_big`).
        upstream: the upstream's name (in that error).
    """

    def __init__(self, http: LeanHttp, transport: Any,
                 inject: Callable[[Any], Any], on_lost: Callable[[], None],
                 transport_failed: tuple[int, str],
                 spawn: Callable[..., Any], *, limit: int = 16 << 20,
                 upstream: str = "") -> None:
        self.http, self.transport, self.inject = http, transport, inject
        self.on_lost, self.transport_failed, self.spawn = on_lost, transport_failed, spawn
        self.limit, self.upstream = limit, upstream

    def _headers(self, version: str) -> dict[str, str]:
        h = {"accept": "application/json, text/event-stream",
             "content-type": "application/json", **IDENTITY}
        sid = self.transport.session_id
        if sid:
            h["mcp-session-id"] = sid
        h["mcp-protocol-version"] = version
        return h

    @staticmethod
    def usable(session: Any, transport: Any, headers: Mapping[str, str]) -> bool:
        """Whether a call in this session can go the lean way.

        The session negotiated with ``initialize`` (not the 2026 ``server/discover``
        era, whose requests carry more headers and ``_meta``), and its session id,
        version and the manifest's ``headers`` are plain header values.
        """
        version = session.protocol_version
        sid = transport.session_id or ""
        return (session.discover_result is None and isinstance(version, str)
                and _plain(version) and _plain(sid)
                and all(_plain(k) and _plain(v) for k, v in headers.items()))

    async def call(self, session: Any, name: str, args: Mapping[str, Any], meta: Any
                   ) -> dict[str, Any]:
        """``tools/call`` ``name`` at the upstream; its result as the wire dict.

        Raises:
            MCPError: the upstream's JSON-RPC error, a failed exchange
                (``TRANSPORT_FAILED``), a lost session (after ``on_lost()``; marked
                :func:`not_taken` when it was the POST's answer), an answer
                that is not one (the SDK's codes and texts).
            pydantic.ValidationError: the result does not fit the protocol version.
        """
        version = session.protocol_version
        checks = result_checks()  # before sending: an ImportError now fails nothing that ran
        rid = f"icore-{next(_ids)}"
        params: dict[str, Any] = {"name": name, "arguments": dict(args)}
        if meta:
            params["_meta"] = meta
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                           "params": params}, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode("utf-8")
        try:
            raw = await self._exchange("POST", self._headers(version), body, rid,
                                       f"tools/call {name[:200]}")
        except anyio.get_cancelled_exc_class():  # its timeout, or the client gone
            self._abandoned(session, rid)
            raise
        return checked_result(raw, version, checks)

    def _abandoned(self, session: Any, rid: str) -> None:
        """The call was abandoned before its answer: tell the upstream (as the SDK)."""
        from mcp_types import CancelledNotification, CancelledNotificationParams
        note = CancelledNotification(params=CancelledNotificationParams(
            request_id=rid, reason="the gateway abandoned the call"))

        async def send() -> None:
            try:
                with anyio.fail_after(5):
                    await session.send_notification(note)
            except Exception:  # the session is gone: nothing left to cancel
                log.debug("upstream: cancelling %s failed", rid, exc_info=True)
        try:
            self.spawn(send)
        except RuntimeError:  # the gateway is stopping: its upstreams close anyway
            log.debug("upstream: not cancelling %s (stopping)", rid)

    async def _exchange(self, method: str, headers: dict[str, str], body: bytes,
                        rid: str, what: str = "a request") -> Any:
        """One request and its answer; resumed by GET while the SSE stream allows."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        attempt = redirects = 0
        target: str | None = None
        while True:
            try:
                conn = await self.http.request(method, headers, body, target)
            except LeanHttpError as exc:
                raise self._failed(exc) from None
            try:
                out, last_id, retry_ms = await self._answer(
                    conn, rid, method == "POST", followed=target is not None, what=what)
            except _Follow as f:  # the server did not take it: the same request, there
                target = self._follow(conn, f.location, target, method, redirects)
                redirects += 1
                await self._skip_body(conn)
                continue
            except LeanHttpError as exc:
                conn.close()
                raise self._failed(exc, MID_STREAM) from None
            except BaseException:
                conn.close()
                raise
            try:
                if out is not None and not conn.done:
                    # shielded (bounded): a timeout now must not drop the result read
                    with anyio.CancelScope(shield=True):
                        await conn.settle(SETTLE_S)
            except BaseException:
                conn.close()
                raise
            conn.release()
            if out is not None:
                return out
            if last_id is None or attempt >= RESUME_ATTEMPTS:
                raise MCPError(CONNECTION_CLOSED, "SSE stream ended without a response"
                               if last_id is None else "SSE stream ended and reconnection "
                               "attempts were exhausted")
            attempt += 1
            await anyio.sleep((retry_ms if retry_ms is not None else RESUME_DELAY_MS) / 1000)
            method, body = "GET", b""
            headers = {k: v for k, v in headers.items() if k != "content-type"}
            headers["last-event-id"] = last_id

    async def _skip_body(self, conn: Any) -> None:
        """Drop a redirect's body: the connection is reused when it is small and whole.

        A body over :data:`REDIRECT_BODY_MAX` bytes is not read (the connection is
        closed); a failure while reading it closes the connection and is the call's
        transport error (the request was not taken: nothing ran).
        """
        size = conn.headers.get("content-length", "")
        if not size.isdigit() or int(size) > REDIRECT_BODY_MAX:
            conn.close()
            return
        try:
            await _whole(conn)
        except LeanHttpError as exc:
            conn.close()
            raise self._failed(exc) from None
        except BaseException:
            conn.close()
            raise
        conn.release()

    def _failed(self, exc: LeanHttpError, why: str = "") -> Exception:
        from mcp.shared.exceptions import MCPError
        code, text = self.transport_failed
        return MCPError(code, f"{text} ({exc})" + (f": {why}" if why else ""),
                        {"cause": str(exc), **({} if exc.sent else {"sent": False})})

    def _follow(self, conn: Any, location: str, target: str | None, method: str,
                redirects: int) -> str:
        """The target a redirect of ``method`` goes to, or the call's error (not sent).

        Raises:
            MCPError: the location leaves the upstream's origin, or more than
                :data:`MAX_REDIRECTS` redirects (the connection is closed).
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_REQUEST
        there = self.http.within_origin(location, target or self.http.target)
        if there is not None and redirects < MAX_REDIRECTS:
            return there
        conn.close()
        origin = f"http://{self.http.host}:{self.http.port}"
        why = (f"it leaves the upstream's origin {origin} (the gateway follows a "
               "redirect only within it; nothing was sent there)" if there is None else
               f"more than {MAX_REDIRECTS} redirects")
        raise MCPError(INVALID_REQUEST, f"Redirect to {_shown(location)} not followed: "
                       f"{why}; use that URL as the endpoint if it is the intended server")

    async def _answer(self, conn: Any, rid: str, post: bool, *, followed: bool = False,
                      what: str = "a request") -> tuple[Any, str | None, int | None]:
        """The response to ``rid`` read from ``conn``, or None with the resumption point.

        ``followed``: the request went to a redirect's target, where a 404 says that
        target has no endpoint, not that the upstream lost the session.
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND
        status = conn.status
        ctype = conn.headers.get("content-type", "").lower()
        if (coding := foreign_coding(conn.headers)) is not None:  # not asked for: unread
            raise coded_error(self.upstream, what, coding)
        if 300 <= status < 400:
            where = conn.headers.get("location", "")
            if where and status in ((301, 302, 303, 307, 308) if not post else (307, 308)):
                raise _Follow(where)  # not taken: sent there (within the origin only)
            # not followed (nor resent: a POST's 301/302/303 may come after it ran)
            raise MCPError(INVALID_REQUEST, f"Redirect to {_shown(where)} not followed "
                           f"(HTTP {status} to a POST may come after the server ran it; "
                           "not sent again); use that URL as the endpoint if it is the "
                           "intended server")
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if status >= 400 or (not post and status != 200):
            if status == 404 and self.transport.session_id and not followed:
                self.on_lost()
                if post:  # the upstream does not know the session: it never ran this
                    raise not_taken_error()
            if ctype.startswith("application/json"):
                err = error_of(await self._whole(conn, what))
                if isinstance(err, MCPError):  # the upstream's own, at its status (#29)
                    raise err if status == 404 else MCPError(
                        err.code, with_status(err.message, status), err.error.data)
            if status == 404:
                raise (MCPError(INVALID_REQUEST, "Session terminated") if
                       self.transport.session_id and not followed
                       else MCPError(METHOD_NOT_FOUND, "Not Found"))
            raise MCPError(INTERNAL_ERROR, status_text(status, ctype))
        if ctype.startswith("application/json") and post:
            return response_result(await self._whole(conn, what), rid), None, None
        if ctype.startswith("text/event-stream"):
            return await self._events(conn, rid, what)
        raise MCPError(INVALID_REQUEST, f"Unexpected content type: {ctype}")

    async def _whole(self, conn: Any, what: str) -> bytes:
        """A JSON answer's body, read whole when within the cap (else the call's error)."""
        from icore.mcp._upstream_cap import too_big
        declared = conn.headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else None
        if size is not None and size > self.limit:
            raise too_big(self.upstream, what, size, self.limit)
        conn.cap = self.limit  # past it the body is dropped as it arrives
        try:
            while not conn.done and not conn.over:
                await conn.wait()
        except LeanHttpError:
            if not conn.over:
                raise
        if conn.over:
            raise too_big(self.upstream, what, None, self.limit)
        out = bytes(conn.body)
        conn.body.clear()
        return out

    def _over(self, event: bytes, size: int | None, what: str) -> None:
        """An event over the cap: dropped when it shows a ``method``, else raises.

        ``size``: its length (None: more than the cap, still arriving).

        Raises:
            MCPError: the call's :func:`~icore.mcp._upstream_cap.too_big` error.
        """
        from icore.mcp._stdio_lines import head_members
        from icore.mcp._upstream_cap import event_data_head, too_big
        if "method" in head_members(event_data_head(event[:4096])):
            log.warning("upstream %s: dropped an SSE event over max_message_mb (%g MiB) "
                        "that answers no request", self.upstream, self.limit / 2**20)
            return
        raise too_big(self.upstream, what, size, self.limit)

    async def _events(self, conn: Any, rid: str, what: str = "a request"
                      ) -> tuple[Any, str | None, int | None]:
        """Read SSE events until the response to ``rid`` (or the stream's end)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import PARSE_ERROR
        last_id: str | None = None
        retry: int | None = None
        buf = bytearray()  # line ends made "\n"
        scanned = 0  # bytes of buf searched for an event's end already
        skipped: int | None = None  # bytes dropped of an event over the cap
        held = b""  # a trailing "\r" whose "\n" may be in the next chunk
        start = True  # a leading BOM not ruled out yet
        while True:
            if conn.body or (held and conn.done):
                raw = held + bytes(conn.body)
                conn.body.clear()
                held = raw[-1:] if raw.endswith(b"\r") and not conn.done else b""
                raw = raw[:len(raw) - len(held)]
                buf += raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if start:  # (no function call on the common path: a per-call cost)
                head = buf[:3]
                if head == BOM:
                    del buf[:3]
                    start = False
                elif head not in _BOM_HEADS or conn.done:
                    start = False
                else:  # only the first bytes of what may be a BOM arrived
                    await conn.wait()
                    continue
            end = buf.find(b"\n\n", max(scanned - 1, 0))
            if end < 0:
                scanned = len(buf)
                if skipped is None and len(buf) > self.limit + 1:  # (+1: "\n" of its end)
                    self._over(bytes(buf[:4096]), None, what)  # raises but for a method
                    skipped = 0
                if skipped is not None and len(buf) > 1:
                    skipped += len(buf) - 1
                    del buf[:-1]  # its last byte: the first "\n" of its end, maybe
                    scanned = 0
                if conn.done and not conn.body:
                    return None, last_id, retry
                await conn.wait()
                continue
            event = bytes(buf[:end])
            del buf[:end + 2]
            scanned = 0
            if skipped is not None or len(event) > self.limit:
                if skipped is None:
                    self._over(event[:4096], len(event), what)
                skipped = None
                continue
            kind, data, eid, r = sse_fields(event)
            if eid is not None:
                last_id = eid
            if r is not None:
                retry = r
            if kind != "message" or not data:
                continue  # the SDK ignores other events; an empty one primes resumption
            try:
                obj = json.loads(data)
            except ValueError as exc:
                raise MCPError(PARSE_ERROR, f"Failed to parse SSE message: {exc}") from None
            if isinstance(obj, dict) and "method" not in obj and (
                    "result" in obj or "error" in obj):
                # as the SDK: the response on a request's stream is that request's
                return response_result({**obj, "id": rid}, rid), last_id, retry
            await self._inject(obj)

    async def _inject(self, obj: Any) -> None:
        """Hand a message of the call's stream to the SDK's session."""
        from mcp.shared.exceptions import MCPError
        from mcp.shared.message import SessionMessage
        from mcp_types import PARSE_ERROR, jsonrpc_message_adapter
        from pydantic import ValidationError
        try:
            msg = jsonrpc_message_adapter.validate_python(obj, by_name=False)
        except ValidationError as exc:
            raise MCPError(PARSE_ERROR, f"Failed to parse SSE message: {exc}") from None
        await self.inject(SessionMessage(msg))


class _Follow(Exception):
    """A redirect the call follows (:meth:`LeanCalls._follow` checks the location)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def _shown(location: str) -> str:
    """A redirect's location for a message: no credentials, query or fragment."""
    try:
        u = urllib.parse.urlsplit(location.strip())
        host = u.hostname or ""
        netloc = host if u.port is None else f"{host}:{u.port}"
        return urllib.parse.urlunsplit((u.scheme, netloc, u.path, "", "")) or "''"
    except ValueError:
        return "(an invalid URL)"


def _plain(value: str) -> bool:
    """Printable ASCII with no line break: safe as an HTTP header value."""
    return value.isascii() and value.isprintable()


async def _whole(conn: Any) -> bytes:
    while not conn.done:
        await conn.wait()
    out = bytes(conn.body)
    conn.body.clear()
    return out


POST_WRITER_PARAMS = ("self", "client", "write_stream_reader", "read_stream_writer",
                      "write_stream", "start_get_stream", "tg")
"""The parameters of the SDK's ``StreamableHTTPTransport.post_writer`` :func:`http_streams`
passes (positionally)."""

_unsupported: list[str] = []


def lean_wanted(url: str) -> bool:
    """Whether the calls to the HTTP upstream at ``url`` may go the lean way.

    False when ``ICORE_MCP_LEAN=0`` (then nothing private of the SDK is used: its plain
    ``streamable_http_client``), httptools is not installed, ``url`` is not plain
    ``http://`` without a proxy (:func:`~icore.mcp._lean_http.lean_origin`), or this SDK
    lacks what the lean path uses (:func:`lean_support`).
    """
    import importlib.util
    import os

    from icore.mcp._lean_http import lean_origin
    return (os.environ.get("ICORE_MCP_LEAN", "1") != "0" and lean_origin(url) is not None
            and importlib.util.find_spec("httptools") is not None and lean_support())


def lean_support() -> bool:
    """Whether the SDK's private parts the lean path uses are there, as it uses them.

    :func:`http_streams` and :func:`checked_result` rely on names the SDK does not export
    (``_context_streams``, ``_compat.resync_tracer``, ``_clamp_inbound_ttl``,
    ``_later_revision_fields``) and on ``post_writer``'s parameters; another SDK version
    may lack them. False then (logged once): the upstream goes through the SDK's plain
    ``streamable_http_client``, and no call fails for it after the upstream ran it.
    """
    if _unsupported:
        return False
    try:
        import inspect

        from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields  # noqa: F401
        from mcp.client.streamable_http import StreamableHTTPTransport
        from mcp.shared._compat import resync_tracer  # noqa: F401
        from mcp.shared._context_streams import create_context_streams  # noqa: F401
        params = tuple(inspect.signature(StreamableHTTPTransport.post_writer).parameters)
        if params != POST_WRITER_PARAMS:
            raise ImportError(f"StreamableHTTPTransport.post_writer{params}")
    except ImportError as exc:
        _unsupported.append(str(exc))
        log.warning("the lean HTTP path is off: this MCP SDK lacks what it uses (%s); "
                    "upstream calls go through the SDK's client", exc)
        return False
    return True


@contextlib.asynccontextmanager
async def http_streams(url: str, client: Any, max_event: int | None = 1 << 20
                       ) -> AsyncIterator[tuple[Any, Any, Any, Any]]:
    """The SDK's ``streamable_http_client(url, http_client=client)``, its parts in view.

    The same transport, streams and tasks, with the same closing (the session deleted
    at the upstream); yields ``(transport, read_stream_writer, read_stream,
    write_stream)``: the lean path needs the transport's session id and the writer that
    hands a message to the SDK's session as if the transport had read it.
    """
    from mcp.client.streamable_http import StreamableHTTPTransport
    from mcp.shared._compat import resync_tracer
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    transport = StreamableHTTPTransport(url, max_sse_event_size=max_event)
    reader_w, reader = create_context_streams[SessionMessage | Exception](0)
    writer, writer_r = create_context_streams[SessionMessage](0)
    async with reader_w, reader, writer, writer_r, anyio.create_task_group() as tg:

        def start_get_stream() -> None:
            tg.start_soon(transport.handle_get_stream, client, reader_w)

        tg.start_soon(transport.post_writer, client, writer_r, reader_w, writer,
                      start_get_stream, tg)
        try:
            yield transport, reader_w, reader, writer
        finally:
            if transport.session_id:
                await transport.terminate_session(client)
            tg.cancel_scope.cancel()
    await resync_tracer()
