"""An HTTP upstream's answers capped by ``max_message_mb``, as a stdio upstream's are (#29).

A JSON body or an SSE event over the cap is dropped as it is read (at most the cap of
it held, then only its first :data:`~icore.mcp._stdio_lines.KEPT` bytes and its size):
the request it answers fails at once with :data:`~icore.mcp._upstream_stdio.ANSWER_TOO_BIG`
naming the request, the size and the cap (the gateway traces such a call as one that
may have run: the upstream ran it). An oversized SSE event that is the upstream's own
request or notification (its head shows a ``method``) fails nothing: it is dropped with
a warning, and the stream goes on. Used by the SDK's client path
(:func:`~icore.mcp._upstream_http.keepalive_http_client`: :func:`capped_json`,
:class:`EventCap`) and the lean path (:mod:`icore.mcp._upstream_lean`: :func:`too_big`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from icore.mcp._stdio_lines import KEPT, head_members
from icore.mcp._upstream_stdio import ANSWER_INVALID, ANSWER_TOO_BIG, too_big_text

log = logging.getLogger("icore.mcp")


async def request_body(request: Any) -> bytes:
    """A POST's body (a redirected request's too, whose body is a stream), else b""."""
    try:
        return bytes(request.content)
    except RuntimeError:  # httpx2's RequestNotRead: a streamed body (a redirect's)
        try:
            return bytes(await request.aread())
        except Exception:  # not readable again: the error cannot name the request
            return b""


def asked(body: bytes) -> tuple[str, Any]:
    """``(what the request asks, its id)`` from a POST's JSON body (``tools/call NAME``)."""
    try:
        obj = json.loads(body)
    except (ValueError, TypeError, RecursionError):
        return "a request", None
    if not isinstance(obj, dict):
        return "a request", None
    method = obj.get("method")
    what = method if isinstance(method, str) else "a request"
    params = obj.get("params")
    if isinstance(params, dict) and isinstance(params.get("name"), str):
        what += f" {params['name'][:200]}"
    return what, obj.get("id")


def too_big(upstream: str, what: str, size: int | None, limit: int) -> Any:
    """The ``MCPError`` of a request whose answer was over ``limit`` bytes.

    ``size``: the answer's length; None when only "more than the cap" is known.
    """
    from mcp.shared.exceptions import MCPError
    text = too_big_text(upstream, what, size, limit)
    log.warning("%s", text)
    return MCPError(ANSWER_TOO_BIG, text, {"size": size, "limit": limit, "request": what})


def _error_body(rid: Any, exc: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": exc.error.code, "message": exc.error.message, "data": exc.error.data}},
        ensure_ascii=False).encode("utf-8")


async def capped_json(request: Any, body: bytes, resp: Any, limit: int, upstream: str
                      ) -> Any:
    """``resp`` (the JSON answer to a POST of ``body``) read whole when within ``limit``.

    Returns a response holding the body read, or, when it is over the cap (its
    ``content-length`` says so, or more than ``limit`` bytes came), a 200 response
    holding the JSON-RPC error :func:`too_big` of the request (the answer closed unread).
    """
    declared = resp.headers.get("content-length", "")
    size: int | None = int(declared) if declared.isdigit() else None
    chunks: list[bytes] = []
    got = 0
    if size is None or size <= limit:
        async for part in resp.aiter_raw():
            got += len(part)
            if got > limit:
                break
            chunks.append(part)
    if (size is not None and size > limit) or got > limit:
        await resp.aclose()
        what, rid = asked(body)
        return httpx2.Response(200, headers={"content-type": "application/json"},
                               content=_error_body(rid, too_big(upstream, what, size,
                                                                limit)),
                               request=request)
    headers = [(k, v) for k, v in resp.headers.multi_items()
               if k.lower() not in ("content-length", "transfer-encoding")]
    out = httpx2.Response(resp.status_code, headers=headers, content=b"".join(chunks),
                          request=request, extensions=resp.extensions)
    await resp.aclose()
    return out


IDENTITY = {"accept-encoding": "identity"}
"""The header every request to an HTTP upstream carries: answers not compressed.

``max_message_mb`` counts an answer's bytes as they arrive; a compressed answer's
decoded size is not its size on the wire (a 30 KiB gzip body decodes to 30 MiB, a
gzip bomb to gigabytes), and the SDK's client decoded it whole past the cap (sweep
round 8). An answer compressed all the same is refused (:func:`foreign_coding`)."""


def foreign_coding(headers: Any) -> str | None:
    """A response's ``content-encoding`` when it is one the gateway did not ask for.

    Args:
        headers: the response's headers (a mapping with ``get``, names lowercase).

    Returns:
        The coding as sent (cut to 40 characters), or None for none or ``identity``.
    """
    coding = str(headers.get("content-encoding", "") or "").strip()
    return None if coding.lower() in ("", "identity") else coding[:40]


def coded_error(upstream: str, what: str, coding: str) -> Any:
    """The JSON-RPC error of a request answered compressed (``ANSWER_INVALID``: it ran)."""
    from mcp.shared.exceptions import MCPError
    text = (f"upstream {upstream} answered {what} with content-encoding {coding!r} "
            "although the gateway asks for none (accept-encoding: identity): a compressed "
            "answer cannot be held to max_message_mb before it is decoded, so it was "
            "dropped unread. The upstream ran the request")
    log.warning("%s", text)
    return MCPError(ANSWER_INVALID, text, {"request": what, "content_encoding": coding})


async def refuse_coded(request: Any, body: bytes, resp: Any, upstream: str, coding: str
                       ) -> Any:
    """A 200 response holding :func:`coded_error` of the request; ``resp`` closed unread."""
    await resp.aclose()
    what, rid = asked(body)
    return httpx2.Response(200, headers={"content-type": "application/json"},
                           content=_error_body(rid, coded_error(upstream, what, coding)),
                           request=request)


def _boundary(buf: bytes | bytearray, start: int) -> tuple[int, int]:
    """``(index, length)`` of the first blank line (an SSE event's end) from ``start``."""
    i, j = buf.find(b"\n\n", start), buf.find(b"\r\n\r\n", start)
    if j >= 0 and (i < 0 or j < i):
        return j, 4
    return i, 2


def event_data_head(head: bytes) -> str:
    """The start of an SSE event's ``data`` (its lines joined), as text."""
    text = head.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return "\n".join(line[5:].removeprefix(" ") for line in text.split("\n")
                     if line.startswith("data:"))


class EventCap(httpx2.AsyncByteStream):
    """An SSE stream's events passed on whole, one over ``limit`` bytes dropped.

    Args:
        inner: the response's byte stream.
        limit: the longest event kept, bytes.
        on_over: called with an oversized event's first bytes and its size; returns
            what replaces it (an event failing the request; the stream then ends) or
            None (it is dropped, the stream goes on).
    """

    def __init__(self, inner: Any, limit: int,
                 on_over: Callable[[bytes, int], bytes | None]) -> None:
        self.inner, self.limit, self.on_over = inner, limit, on_over

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The inner stream's bytes, event by event (a partial last one at its end)."""
        buf = bytearray()
        scanned = 0
        skip: list[Any] | None = None  # [head, size, tail] of an event over the cap
        async for chunk in self.inner:
            if skip is not None:
                data = skip[2] + chunk
                end, sep = _boundary(data, 0)
                if end < 0:
                    skip[1] += len(chunk)
                    skip[2] = data[-3:]
                    continue
                size = skip[1] + end - len(skip[2])
                out = self.on_over(skip[0], size)
                skip = None
                if out is not None:
                    yield out
                    return
                chunk = data[end + sep:]
            buf += chunk
            while True:
                end, sep = _boundary(buf, max(scanned - 3, 0))
                if end < 0:
                    scanned = len(buf)
                    break
                event = bytes(buf[:end + sep])
                del buf[:end + sep]
                scanned = 0
                if end > self.limit:  # a whole event over the cap, in one read
                    out = self.on_over(event[:KEPT], end)
                    if out is not None:
                        yield out
                        return
                    continue
                yield event
            if len(buf) > self.limit + 3:  # (3: the start of its end, maybe)
                skip = [bytes(buf[:KEPT]), len(buf), bytes(buf[-3:])]
                buf.clear()
                scanned = 0
        if skip is not None:
            out = self.on_over(skip[0], skip[1])
            if out is not None:
                yield out
            return
        if buf:
            yield bytes(buf)

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self.inner.aclose()


def sse_cap(body: bytes | None, limit: int, upstream: str
            ) -> Callable[[bytes, int], bytes | None]:
    """:class:`EventCap`'s ``on_over`` for the SSE answer to a POST of ``body`` (None: a GET).

    An event whose data shows a ``method`` (the upstream's own request or notification)
    is dropped with a warning; any other fails the POST's request with the JSON-RPC error
    :func:`too_big` (a GET's stream answers no request: dropped with a warning).
    """
    def on_over(head: bytes, size: int) -> bytes | None:
        what, rid = asked(body) if body is not None else ("", None)
        members = head_members(event_data_head(head))
        if "method" in members or rid is None:
            log.warning("upstream %s: dropped a %d-byte SSE event over max_message_mb "
                        "(%g MiB) that answers no request", upstream, size, limit / 2**20)
            return None
        return b"event: message\ndata: " + _error_body(rid, too_big(
            upstream, what, size, limit)) + b"\n\n"
    return on_over
