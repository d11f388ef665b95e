"""A POST that is no single JSON-RPC message answered with a short JSON-RPC error (#29).

The SDK's streamable-HTTP transport answered a JSON-RPC batch (``[{...}]``), a body that
is a JSON number, string or null, or an object that is no JSON-RPC message with a
``-32602`` whose message was pydantic's whole validation dump (four union branches, the
input echoed, documentation links), and a wrong ``Content-Type`` or an oversized body
with a plain-text line. :class:`MessageShape` sits in front of it: each of those is
answered here, as JSON-RPC 2.0 specifies, with ``{"jsonrpc": "2.0", "id": null,
"error": {"code": -32600 | -32700, "message": ...}}``: one sentence naming what was sent
and what is expected (HTTP 400, 413 or 415); a 400's id is the message's own when it can
be read (a request holding a bare NaN: :func:`readable_id`). A well-formed message goes
on to the SDK unchanged (its body replayed); GET, DELETE and other paths are not touched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from icore.mcp._client_reach import GetStreams
from icore.mcp._gateway_asks import CLIENT_GONE, ClientLink
from icore.mcp._stdio_lines import nonstandard_number

INVALID_REQUEST = -32600
PARSE_ERROR = -32700
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest POST body read by default (the SDK's own default bound); the gateway
passes its manifest's ``max_message_mb`` (to the SDK's app too)."""
DRAIN_BYTES = 64 * 1024 * 1024
"""A longer body is read and dropped up to this many bytes (or the cap, if larger)
before the 413 answer."""

_KINDS = {list: "a JSON array (a batch)", str: "a JSON string", int: "a JSON number",
          float: "a JSON number", bool: "a JSON boolean", type(None): "JSON null"}


def shape_problem(body: bytes) -> tuple[int, str] | None:
    """``(code, message)`` when ``body`` is no single JSON-RPC 2.0 message, else None.

    A batch is refused (MCP 2025-06-18 dropped JSON-RPC batching); so is anything that
    is not an object, an object whose ``jsonrpc`` is not ``"2.0"``, an ``id`` that is not
    a string or an integer, a ``method`` that is not a non-empty string, ``params`` that
    are not an object, a bare NaN or Infinity (not RFC 8259 JSON), and anything else
    the SDK's message model refuses (its first
    error, one sentence).
    """
    try:
        msg = json.loads(body)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:120]
        return PARSE_ERROR, f"Parse error: the body is not JSON ({why})"
    if (odd := nonstandard_number(body)) is not None:
        return PARSE_ERROR, f"Parse error: {odd}"
    if _SURROGATE_ESCAPE.search(body) is not None and (odd := _lone_surrogate(body)):
        return PARSE_ERROR, odd
    if isinstance(msg, list):
        return INVALID_REQUEST, ("Invalid Request: a JSON-RPC batch (a JSON array) is not "
                                 "supported; send one JSON-RPC object per POST")
    if not isinstance(msg, dict):
        kind = _KINDS.get(type(msg), "no object")
        return INVALID_REQUEST, (f"Invalid Request: the body is {kind}; a JSON-RPC message "
                                 "is a JSON object")
    if msg.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, (f"Invalid Request: jsonrpc must be \"2.0\", not "
                                 f"{json.dumps(msg.get('jsonrpc'))[:40]}")
    if "id" in msg and (isinstance(msg["id"], bool) or
                        not isinstance(msg["id"], (str, int))):
        return INVALID_REQUEST, (f"Invalid Request: id must be a string or an integer, not "
                                 f"{json.dumps(msg['id'])[:40]}")
    if "method" in msg and (not isinstance(msg["method"], str) or not msg["method"]):
        return INVALID_REQUEST, "Invalid Request: method must be a non-empty string"
    if "method" not in msg and not ("result" in msg or "error" in msg):
        return INVALID_REQUEST, ("Invalid Request: a JSON-RPC message has a method (a request "
                                 "or a notification), a result or an error")
    if "params" in msg and not isinstance(msg["params"], dict):
        return INVALID_REQUEST, ("Invalid Request: params must be a JSON object, not "
                                 f"{_KINDS.get(type(msg['params']), 'that')}")
    return _sdk_problem(msg)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A ``\\uD800``-``\\uDFFF`` escape: a surrogate, valid only as a high-low pair."""


def _lone_surrogate(body: bytes) -> str | None:
    r"""Why ``body`` holds a lone UTF-16 surrogate escape (``"\ud800"``), else None.

    Python's json takes it, but no UTF-8 text has it: the call could be neither recorded
    nor sent upstream (the SDK's HTTP client to the upstream died on it). Refused as
    the stdio path refuses it (the SDK's parser there), a parse error (QA qa-new10c S4).
    """
    from pydantic_core import from_json
    try:
        from_json(body)
    except ValueError as exc:
        return (f"Parse error: {str(exc)[:120]} (a lone UTF-16 surrogate escape has no "
                "UTF-8 form: the message cannot be recorded or forwarded)")
    return None


def _sdk_problem(msg: dict[str, Any]) -> tuple[int, str] | None:
    """What the SDK's own message validation refuses, in one sentence (first error)."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError
    try:
        jsonrpc_message_adapter.validate_python(msg, by_name=False)
    except ValidationError as exc:
        errs = exc.errors()
        # a union: the deepest error says the most; a wrong value before a missing field
        best = max(errs, key=lambda e: (len(e.get("loc", ())), e.get("type") != "missing"))
        loc = ".".join(str(p) for p in best.get("loc", ())[1:]) or "the message"
        return INVALID_REQUEST, f"Invalid Request: {loc}: {best.get('msg', 'invalid')}"[:300]
    return None


def readable_id(body: bytes) -> str | int | None:
    """The id of the message in ``body`` when one can be read, else None (JSON-RPC: null).

    Python's parser reads what RFC 8259 JSON refuses (a bare NaN, a lone surrogate
    escape), so a request refused for such a value is still answered under its own id
    (the stdio path does the same); a string or an integer only (not a bool).
    """
    try:
        msg = json.loads(body)
    except (ValueError, RecursionError):
        return None
    rid = msg.get("id") if isinstance(msg, dict) else None
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _stand_in(body: bytes) -> bytes | None:
    """The JSON-RPC error standing in for ``body``, a client's malformed response, or None.

    See :mod:`icore.mcp._client_answers`.
    """
    from icore.mcp._client_answers import stand_in
    try:
        error = stand_in(json.loads(body))
    except (ValueError, RecursionError):
        return None
    return None if error is None else json.dumps(error).encode()


def _replayer(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives ``body`` (already read) first, then ``receive``'s."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


async def _answer(send: Any, status: int, code: int, message: str,
                  rid: str | int | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": rid,
                       "error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class MessageShape:
    """ASGI middleware: a POST must carry one JSON-RPC message (see the module docstring).

    Args:
        app: the ASGI app behind it (the SDK's streamable-HTTP app).
        max_body: the largest body kept, bytes (a longer one: HTTP 413, after reading
            and dropping up to :data:`DRAIN_BYTES` of it).
        verifier: the gateway's bearer-token verifier (``http.clients``), or None: a
            request without a valid token goes to ``app`` unread (its 401), so nobody
            unauthenticated has a body read or parsed here.
        streams: where each session's open GET stream is counted (a request to an
            HTTP client can only go on it: :mod:`icore.mcp._client_reach`), or None.
    """

    def __init__(self, app: Any, max_body: int = MAX_BODY_BYTES, verifier: Any = None,
                 streams: GetStreams | None = None) -> None:
        self.app, self.max_body, self.verifier = app, max_body, verifier
        self.streams = streams

    async def _fail_answered(self, scope: Any, receive: Any, send: Any, error: bytes,
                             problem: tuple[int, str]) -> None:
        """A client's malformed response: ``error`` (its stand-in) to the SDK, 400 to it.

        The SDK's transport takes the stand-in as the session's answer to its request
        (which then fails at once, instead of waiting for ``ask_timeout_s``); the client
        is told its message was malformed (HTTP 400), unless the SDK refuses the POST
        itself (an unknown session: its 404 goes back as it is).
        """
        sent: list[Any] = []

        async def keep(message: Any) -> None:
            sent.append(message)

        headers = [(k, v) for k, v in scope.get("headers", [])
                   if k.lower() != b"content-length"]
        scope = {**scope, "headers": [*headers, (b"content-length", str(len(error)).encode())]}
        await self.app(scope, _replayer(error, receive), keep)
        status = next((m.get("status") for m in sent
                       if m.get("type") == "http.response.start"), None)
        if status is not None and status != 202:
            for m in sent:
                await send(m)
            return
        code, message = problem
        await _answer(send, 400, code, f"{message}; the request it answers failed")

    async def _unauthorized(self, headers: dict[bytes, bytes]) -> bool:
        if self.verifier is None:
            return False
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return True
        return await self.verifier.verify_token(token.strip()) is None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer a malformed POST here; pass everything else on (a GET stream counted)."""
        if scope.get("type") != "http" or scope.get("method") != "POST" or \
                scope.get("path", "").rstrip("/") != "/mcp":
            if self.streams is not None and scope.get("type") == "http" and \
                    scope.get("method") == "GET" and scope.get("path", "").rstrip("/") == "/mcp":
                await self.streams.serve(self.app, scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if await self._unauthorized(headers):
            await self.app(scope, receive, send)
            return
        ctype = headers.get(b"content-type", b"").decode("latin-1").strip()
        if not ctype.lower().startswith("application/json"):
            await _answer(send, 415, INVALID_REQUEST, "Unsupported Media Type: Content-Type "
                          f"must be application/json, not {ctype[:60] or 'missing'!r}")
            return
        declared = headers.get(b"content-length", b"")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= self.max_body:
                chunks.append(chunk)
            else:
                chunks = []  # over the limit: read on (bounded) and drop, then answer
            if not message.get("more_body") or size > max(self.max_body, DRAIN_BYTES):
                break  # (a cap over DRAIN_BYTES: a body under it is read whole)
        if size > self.max_body:
            # the body was read up to DRAIN_BYTES before answering: a client still sending
            # would otherwise meet a reset connection instead of this answer
            shown = f" of {int(declared)} bytes" if declared.isdigit() else ""
            await _answer(send, 413, INVALID_REQUEST, f"Request body{shown} is over the "
                          f"gateway's max_message_mb ({self.max_body / 2**20:g} MiB = "
                          f"{self.max_body} bytes, manifest); it was dropped unparsed: send less "
                          "(e.g. a reference to the data)")
            return
        body = b"".join(chunks)
        problem = shape_problem(body)
        if problem is not None:
            if (error := _stand_in(body)) is not None:  # a response: its request fails now
                await self._fail_answered(scope, receive, send, error, problem)
                return
            # a request: refused under its own id when it can be read (QA qa-new13c)
            await _answer(send, 400, *problem, readable_id(body))
            return
        replay = _replayer(body, receive)

        # the request's client connection, for its handler: an upstream's question to
        # a client gone fails at once (#29); nothing runs for it unless one is asked
        token = CLIENT_GONE.set(ClientLink(receive))
        try:
            await self.app(scope, replay, send)
        finally:
            CLIENT_GONE.reset(token)


__all__ = ["MAX_BODY_BYTES", "MessageShape", "readable_id", "shape_problem"]
