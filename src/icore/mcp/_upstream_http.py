"""An HTTP upstream's client: one kept-alive connection, each POST's failure its own.

:func:`keepalive_http_client` is the ``httpx2`` client the SDK's streamable-HTTP
transport talks to an upstream through (:class:`~icore.mcp._upstream.Upstream`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import anyio

from icore.errors import redact
from icore.mcp._upstream_failed import READ_ONLY

log = logging.getLogger("icore.mcp")


DRAIN_S = 1.0
"""How long closing an upstream's SSE response may wait for the rest of it, seconds."""


def keepalive_http_client(headers: dict[str, str] | None = None,
                          on_listen: Callable[[bool], None] | None = None,
                          on_lost: Callable[[], None] | None = None,
                          on_session: Callable[[bool], None] | None = None, *,
                          limit: int | None = None, upstream: str = "") -> Any:
    """The SDK's HTTP client for an upstream, keeping its connection across SSE answers.

    An upstream that answers a POST with an SSE stream ends that stream right after the
    JSON-RPC response; the SDK's client closes the response as soon as it has the result,
    before reading the stream's end, so the HTTP/1.1 connection cannot be reused and every
    ``tools/call`` opened a new TCP connection. Here closing such a response first reads
    what is left of it (the end of the stream, already on its way; at most ``DRAIN_S`` in
    the SDK's background request task, never in the caller's path), so the connection
    goes back to the pool. Timeouts, headers and redirects are the SDK's defaults
    (``create_mcp_http_client``); nothing of the exchange changes.

    ``on_listen(True)`` is called when the standalone GET stream (where the upstream sends
    notifications not tied to a request, such as ``notifications/resources/updated``)
    opens, ``on_listen(False)`` when it ends or fails (the SDK reconnects it, but what
    was sent in between is lost). ``on_lost()`` is called when the upstream answers 404
    to a request carrying an ``Mcp-Session-Id``: it no longer knows the session (it
    restarted), and the MCP spec asks the client to start a new one. ``on_session(given)``
    is called with the answer to each POST sent without a session id (``initialize``):
    whether it gave one (a stateless server does not, and opens no GET stream).

    ``limit`` (bytes; the manifest's ``max_message_mb``; None: none): a POST's JSON
    answer or an SSE event over it is dropped as it is read, and the request it answers
    fails with :func:`~icore.mcp._upstream_cap.too_big` (``upstream`` names it; #29).
    """
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    from icore.mcp._upstream_cap import (
        IDENTITY,
        EventCap,
        capped_json,
        foreign_coding,
        refuse_coded,
        request_body,
        sse_cap,
    )
    from icore.mcp._upstream_lean import not_taken_response
    from icore.mcp._upstream_sse import Answer, as_answer
    from icore.mcp._upstream_status import status_named

    class Listening(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> Any:
            try:
                async for part in self.inner:
                    yield part
            finally:
                if on_listen is not None:
                    on_listen(False)

        async def aclose(self) -> None:
            if on_listen is not None:
                on_listen(False)
            await self.inner.aclose()

    class DrainOnClose(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> Any:
            async for part in self.inner:
                yield part

        async def aclose(self) -> None:
            with contextlib.suppress(Exception), anyio.move_on_after(DRAIN_S):
                async for _ in self.inner:
                    pass
            await self.inner.aclose()

    class KeepAlive(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(
                max_connections=100, max_keepalive_connections=20,
                keepalive_expiry=KEEPALIVE_EXPIRY_S))

        async def __aenter__(self) -> Any:
            await self.inner.__aenter__()
            return self

        async def __aexit__(self, *exc: Any) -> None:
            await self.inner.__aexit__(*exc)

        async def handle_async_request(self, request: Any) -> Any:
            request.headers.update(IDENTITY)  # never compressed: the cap counts its bytes
            if request.method != "POST":
                resp = await self.inner.handle_async_request(request)
                if (coding := foreign_coding(resp.headers)) is not None:
                    await resp.aclose()
                    log.warning("upstream %s answered its GET stream with content-encoding "
                                "%r (not asked for): refused", upstream, coding)
                    return httpx2.Response(502, request=request)
            else:
                resp = await self._post(request)
            if request.headers.get("mcp-session-id"):
                if resp.status_code == 404 and on_lost is not None:
                    on_lost()
                if resp.status_code == 404 and request.method == "POST":
                    resp = await not_taken_response(request, resp,
                                                    _method_and_id(request)[1])
            elif on_session is not None and request.method == "POST" \
                    and resp.status_code < 300:
                on_session(bool(resp.headers.get("mcp-session-id")))
            if request.method == "POST" and resp.headers.get(
                    "content-type", "").lower().startswith("text/event-stream"):
                if not isinstance(resp.stream, Answer):  # else read by _send already
                    resp.stream = DrainOnClose(resp.stream)
            elif request.method == "GET" and on_listen is not None \
                    and resp.status_code == 200 and resp.headers.get(
                        "content-type", "").lower().startswith("text/event-stream"):
                on_listen(True)
                resp.stream = Listening(resp.stream if limit is None else EventCap(
                    resp.stream, limit, sse_cap(None, limit, upstream)))
            return resp

        async def _post(self, request: Any) -> Any:
            """One POST; a transport failure is that request's error, never the session's.

            The SDK runs each POST in its transport's task group, so an exception here
            (a pooled connection the server closed: ``RemoteProtocolError: Server
            disconnected without sending a response``) would end the whole connection and
            fail every request in flight with "Connection closed" (QA r5-mcp D7). A
            read-only request is sent once more on a fresh connection; any other
            failure is answered as a JSON-RPC error of that request alone.
            """
            try:
                return await self._send(request)
            except httpx2.TransportError as exc:
                first: Exception = exc
            method, rid = _method_and_id(request)
            if method in READ_ONLY and not isinstance(first, httpx2.TimeoutException):
                try:
                    return await self._send(request)
                except httpx2.TransportError as exc:
                    first = exc
            cause = redact(f"{type(first).__name__}: {first or 'no detail'}")
            log.warning("upstream HTTP %s of %s failed: %s", method or "POST",
                        redact(str(request.url)), cause)
            return httpx2.Response(502, json={"jsonrpc": "2.0", "id": rid, "error": {
                "code": TRANSPORT_FAILED, "message": f"{TRANSPORT_FAILED_TEXT} ({cause})",
                "data": {"cause": cause}}}, request=request)

        async def _send(self, request: Any) -> Any:
            """One POST; an SSE answer holding only the response is made JSON.

            See :func:`~icore.mcp._upstream_sse.as_answer` (its first event read here). A
            request's 4xx/5xx answer (not 404) is a JSON-RPC error naming its HTTP status
            (:func:`~icore.mcp._upstream_status.status_named`).
            """
            resp = await self.inner.handle_async_request(request)
            if (coding := foreign_coding(resp.headers)) is not None:
                return await refuse_coded(request, await request_body(request), resp,
                                          upstream, coding)
            if resp.status_code >= 400 and resp.status_code != 404:  # its status named
                rid = _method_and_id(request)[1]
                if rid is not None:
                    return await status_named(request, resp, rid)
            ctype = resp.headers.get("content-type", "").lower()
            if limit is not None and ctype.startswith("application/json"):
                try:
                    return await capped_json(request, await request_body(request), resp,
                                             limit, upstream)
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await resp.aclose()
                    raise
            if resp.status_code != 200 or not ctype.startswith("text/event-stream"):
                return resp
            if limit is not None:
                resp.stream = EventCap(resp.stream, limit, sse_cap(
                    await request_body(request), limit, upstream))
            try:
                return await as_answer(resp, DRAIN_S)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await resp.aclose()
                raise

        async def aclose(self) -> None:
            await self.inner.aclose()

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        headers=headers, transport=KeepAlive())


TRANSPORT_FAILED = -32099
"""JSON-RPC code (implementation-defined server error range) of a request whose HTTP
exchange with the upstream failed (:func:`keepalive_http_client`): that request failed,
the MCP session goes on."""
TRANSPORT_FAILED_TEXT = "the HTTP request to the upstream failed"

KEEPALIVE_EXPIRY_S = 1.0
"""How long the gateway keeps an idle connection to an HTTP upstream, seconds: below the
servers' own idle timeouts (uvicorn's 5 s), so the gateway does not reuse a connection
at the moment the server closes it."""


def _method_and_id(request: Any) -> tuple[str | None, Any]:
    """The JSON-RPC ``method`` and ``id`` of a POST's body (``None`` when not a request)."""
    import json
    try:
        body = json.loads(request.content)
    except (ValueError, TypeError, RuntimeError):  # RuntimeError: a streamed body
        return None, None
    if not isinstance(body, dict):
        return None, None
    method = body.get("method")
    return (method if isinstance(method, str) else None), body.get("id")
