"""The SDK test upstream over streamable HTTP behind an ASGI middleware with HTTP quirks.

Run: python upstream_quirks.py PORT. The server is :mod:`upstream_server`'s real
``MCPServer`` app served by uvicorn; the middleware changes only the answer to a
``tools/call`` of ``echo`` whose ``text`` names a quirk (every other request passes
through untouched):

- ``away:<url>``: answered ``307`` to ``<url>`` (the tool does not run);
- ``bom``: the real answer (an SSE stream), a UTF-8 byte order mark before its first byte
  and its first event's ``event: message`` line left out (the default type), so the
  stream starts with the BOM and then its ``data:`` line;
- ``cut``: the tool runs, then the connection is dropped after the answer's first bytes
  (an SSE comment), before the response event.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import uvicorn
from upstream_server import mcp


def _quirk(body: bytes) -> str | None:
    try:
        msg = json.loads(body)
    except ValueError:
        return None
    params = msg.get("params") if isinstance(msg, dict) else None
    if msg.get("method") != "tools/call" or not isinstance(params, dict) \
            or params.get("name") != "echo":
        return None
    text = (params.get("arguments") or {}).get("text")
    return text if isinstance(text, str) and text.split(":")[0] in (
        "away", "bom", "cut") else None


class Quirks:
    """ASGI middleware: the quirks above, on ``tools/call`` of ``echo`` only."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            m = await receive()
            chunks.append(m.get("body", b""))
            more = m.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        quirk = _quirk(body)
        if quirk is None:
            await self.app(scope, replay, send)
        elif quirk.startswith("away:"):
            await send({"type": "http.response.start", "status": 307,
                        "headers": [(b"location", quirk[5:].encode()),
                                    (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
        elif quirk == "bom":
            first = True

            async def with_bom(m: Any) -> None:
                nonlocal first
                if m["type"] == "http.response.body" and first and m.get("body"):
                    first = False
                    # the same event, its first line its data: a BOM misread would
                    # hide the data line (event "message" is the default type)
                    lines = m["body"].replace(b"\r\n", b"\n").split(b"\n")
                    lines = [x for x in lines if x != b"event: message"]
                    m = {**m, "body": b"\xef\xbb\xbf" + b"\n".join(lines)}
                await send(m)
            await self.app(scope, replay, with_bom)
        else:  # cut: the tool runs; its answer's head and a comment, then the drop
            answered = anyio.Event()

            async def cut(m: Any) -> None:
                if m["type"] == "http.response.start":
                    await send(m)
                    await send({"type": "http.response.body", "body": b": begun\n\n",
                                "more_body": True})
                elif m["type"] == "http.response.body" and m.get("body"):
                    answered.set()  # the response event: never sent
                    await anyio.sleep_forever()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.app, scope, replay, cut)
                await answered.wait()
                tg.cancel_scope.cancel()
            # an app that fails mid-response: uvicorn drops the connection unended
            raise ConnectionAbortedError("dropped mid-answer (test quirk)")

if __name__ == "__main__":
    uvicorn.run(Quirks(mcp.streamable_http_app()), host="127.0.0.1", port=int(sys.argv[1]),
                log_level="warning")
