"""An HTTP upstream's SSE answer to a request, handed to the SDK as the JSON it carries.

An SDK server (``MCPServer`` over streamable HTTP, by default) answers every POST with an
SSE stream, even when that stream holds nothing but the JSON-RPC response. The SDK's
client then parses it as SSE (a line decoder, an event parser, a text decoder), which was
a tenth of the gateway's CPU per forwarded ``tools/call`` over HTTP (#25 item 7). When the
stream's first event is the response itself (no ``id``, no ``retry``, event ``message``:
so nothing before it to deliver, and no resumption to keep), the answer is handed to the
SDK as ``application/json`` with that event's data, which it reads on its JSON path (one
validation). Any other first event (a notification, a progress message, a request to the
client, a priming event) leaves the stream as it was: the bytes already read are
replayed before the rest, so the SDK sees exactly what the upstream sent. Only the first
event is awaited, never the stream's end (a request to the client cannot wait on it).

Either way, closing the answer first reads what is left of the stream (at most
``drain_s``), so the HTTP/1.1 connection goes back to the pool.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import anyio
import httpx2

FIRST_EVENT_MAX = 1 << 20
"""Longest first event looked at, bytes; a longer one is left to the SDK's SSE parser."""

_RESPONSE = re.compile(rb'\{"jsonrpc":\s*"2\.0",\s*"id":\s*(?:"[^"\\]*"|-?\d+),\s*'
                       rb'"(?:result|error)":')
"""The head of a JSON-RPC response as the SDK serializes it (id before result/error)."""


def first_answer(buffer: bytes) -> tuple[bytes | None, bool]:
    """The JSON-RPC response that is the SSE stream's first event, if it is one.

    Args:
        buffer: the stream's first bytes.

    Returns:
        ``(data, complete)``: ``complete`` is False while the first event has not ended
        in ``buffer``; ``data`` is the event's data when it is a response in an event
        the SDK would parse with nothing else to do (event ``message``, no ``id``, no
        ``retry``), else None.
    """
    text = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    end = text.find(b"\n\n")
    if end < 0:
        return None, False
    data: list[bytes] = []
    for line in text[:end].split(b"\n"):
        field, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field == b"data":
            data.append(value)
        elif field == b"event":
            if value != b"message":
                return None, True
        elif field in (b"id", b"retry") or field != b"":
            return None, True  # resumption, reconnection, or a field we do not know
    body = b"\n".join(data)
    if not data or not _RESPONSE.match(body):
        return None, True
    return body, True


class Answer(httpx2.AsyncByteStream):
    """The response's stream: ``head`` first, then (``rest``: True) the inner stream's rest."""

    def __init__(self, head: bytes, it: Any, inner: Any, drain_s: float, *, rest: bool
                 ) -> None:
        self.head, self.it, self.inner, self.drain_s, self.rest = head, it, inner, drain_s, rest

    async def __aiter__(self) -> Any:
        """``head``, then (``rest``) the inner stream's remaining bytes."""
        if self.head:
            yield self.head
        if self.rest:
            async for part in self.it:
                yield part

    async def aclose(self) -> None:
        """Read what is left of the stream (at most ``drain_s`` s), then close it."""
        with contextlib.suppress(Exception), anyio.move_on_after(self.drain_s):
            async for _ in self.it:
                pass
        await self.inner.aclose()


async def as_answer(resp: Any, drain_s: float) -> Any:
    """``resp`` (an SSE answer to a POST) made JSON when it holds only the response.

    Mutates ``resp`` (its stream, and its content type when made JSON) and returns it.
    """
    inner = resp.stream
    it = inner.__aiter__()
    buffer = b""
    while True:
        try:
            part = await it.__anext__()
        except StopAsyncIteration:
            break
        buffer += part
        data, complete = first_answer(buffer)
        if complete or len(buffer) > FIRST_EVENT_MAX:
            if data is not None:
                resp.headers["content-type"] = "application/json"
                resp.stream = Answer(data, it, inner, drain_s, rest=False)
                return resp
            break
    resp.stream = Answer(buffer, it, inner, drain_s, rest=True)
    return resp
