"""JSON-RPC lines over the gateway's stdio pipes, malformed messages answered (#25, QA U4).

The SDK's stdio transport drops a line it cannot validate (it hands the server an
exception, which is logged): the client that sent a request with a typo'd field, a
batch array or a lone surrogate escape waits for its own timeout. JSON-RPC 2.0 (Sec. 5.1)
answers those: ``-32700`` (parse error) for what is not JSON, ``-32600`` (invalid request)
for JSON that is no valid message. :func:`stdio_streams` is the transport the gateway
serves its stdio pipes with: each line is validated once, as in the SDK, and a line that
fails gets :func:`malformed_answers` on the wire before the next one is read; the
session goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio

from icore.mcp._gateway_order import StdioOrder, tick

log = logging.getLogger("icore.mcp")

PARSE_ERROR = -32700
"""JSON-RPC 2.0 code: the line is not JSON (or not valid Unicode text)."""
INVALID_REQUEST = -32600
"""JSON-RPC 2.0 code: JSON, but not a valid request or notification."""
INVALID_PARAMS = -32602
"""JSON-RPC 2.0 code: a request whose parameters cannot be read (an integer past 4300
digits)."""

_SHOWN = 200
"""Characters of a parser message quoted in an answer (never the whole input)."""


class LineOut(Protocol):
    """Where answers go: one JSON-RPC message per ``write`` call, then ``flush``."""

    async def write(self, text: str) -> None:
        """Queue ``text`` (one line, newline included)."""

    async def flush(self) -> None:
        """Wait until what was queued is taken."""


def _id_of(obj: dict[str, Any]) -> str | int | None:
    rid = obj.get("id")
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def _answer(rid: str | int | None, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid,
                       "error": {"code": code, "message": message[:_SHOWN + 80]}},
                      ensure_ascii=True, separators=(",", ":")) + "\n"


class _Digits(int):
    """An integer token too long for ``int()`` (its digit count, as an int)."""


def _big_int_request(line: str) -> str | None:
    """The answer to a request holding an integer past 4300 digits, else None.

    Such a line is JSON, but Python's ``int`` refuses the number: the request is answered
    under its own id (the client waits for it; a notification gets nothing), naming the
    number's size, instead of a parse error with id null (QA sweep round 7, #29).
    """
    longest: list[int] = []

    def digits(text: str) -> int:
        if len(text) <= 4300:
            return int(text)
        longest.append(len(text.lstrip("-")))
        return _Digits(0)

    try:
        obj = json.loads(line, parse_int=digits)
    except (ValueError, RecursionError):
        return None
    if not longest or not isinstance(obj, dict) or "method" not in obj or "id" not in obj:
        return None
    rid = obj.get("id")
    rid = None if isinstance(rid, _Digits) else _id_of(obj)
    return _answer(rid, INVALID_PARAMS, f"Invalid params: an integer of {max(longest)} "
                   "digits (over 4300 are refused; send such a number as a string)")


def _first_error(exc: Exception) -> tuple[str, str]:
    """``(pydantic error type, short message)`` of a validation error, else ``("", str)``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False, include_input=False)[0]
        except (TypeError, IndexError, ValueError):
            return "", str(exc)[:_SHOWN]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        msg = str(first.get("msg", ""))[:_SHOWN]
        return str(first.get("type", "")), f"{loc}: {msg}" if loc else msg
    return "", str(exc)[:_SHOWN]


def malformed_answers(line: str, exc: Exception | None = None) -> list[str]:
    r"""The JSON-RPC error lines that answer ``line``, a message that failed validation.

    Pure: no I/O. ``exc`` is the validator's error (pydantic's ``ValidationError``);
    its type ``json_invalid`` (e.g. a lone UTF-16 surrogate escape such as
    ``"\\ud800"``, which Python's json accepts) makes the answer a parse error too.

    Args:
        line: one line read from the client (any text; a blank line is ignored).
        exc: why the SDK's validator refused it, or None.

    Returns:
        Zero or more lines (each ``{"jsonrpc": "2.0", "id": ..., "error": {...}}`` and a
        newline): ``[]`` for a blank line or an invalid *response* (a response is never
        answered); one ``-32700`` for text that is not JSON; one ``-32600`` per request
        of a batch array (MCP has no batches since 2025-06-18) or one with id null when
        none of its items has an id; one ``-32600`` for any other JSON value that is not
        a valid message; one ``-32602`` under the request's id for a request holding an
        integer past Python's 4300 digits. The id is the message's own when it is a
        string or an integer (so the waiting request is answered), else null (JSON-RPC
        2.0 Sec. 5).
    """
    if not line.strip():
        return []
    etype, emsg = _first_error(exc) if exc is not None else ("", "")
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as err:
        big = _big_int_request(line)  # JSON, but an integer past Python's 4300 digits
        if big is not None:
            return [big]
        return [_answer(None, PARSE_ERROR, f"Parse error: not JSON ({str(err)[:_SHOWN]})")]
    if isinstance(obj, list):
        ids = [_id_of(x) for x in obj if isinstance(x, dict) and "method" in x]
        text = ("Invalid Request: a JSON-RPC batch (array) is not an MCP message; "
                "send one message per line")
        if not obj:
            text = "Invalid Request: an empty array is not a message"
        return [_answer(rid, INVALID_REQUEST, text) for rid in ids if rid is not None] \
            or [_answer(None, INVALID_REQUEST, text)]
    if not isinstance(obj, dict):
        return [_answer(None, INVALID_REQUEST,
                        f"Invalid Request: a JSON {type(obj).__name__}, not an object")]
    rid = _id_of(obj)
    if etype == "json_invalid":
        return [_answer(rid, PARSE_ERROR, f"Parse error: {emsg or 'invalid JSON text'}")]
    if "method" not in obj:
        if "result" in obj or "error" in obj:
            return []  # a malformed response: JSON-RPC never answers a response
        return [_answer(rid, INVALID_REQUEST, "Invalid Request: no method")]
    if "id" in obj and rid is None:
        return [_answer(None, INVALID_REQUEST,
                        "Invalid Request: id must be a string or an integer")]
    return [_answer(rid, INVALID_REQUEST, f"Invalid Request: {emsg or 'not a message'}")]


def _unreadable_answer(line: str) -> Any:
    """The ``JSONRPCError`` standing in for ``line``, a client's malformed response, or None.

    See :mod:`icore.mcp._client_answers`: the gateway's request that ``line`` answers
    fails at once instead of waiting for ``ask_timeout_s``.
    """
    import mcp_types as types

    from icore.mcp._client_answers import stand_in
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    error = stand_in(obj)
    return None if error is None else types.JSONRPCError.model_validate(error)


class Oversized(str):
    """A client line over the gateway's ``max_message_mb``, dropped as it was read (#29).

    The str is empty (nothing of it is parsed); :attr:`head` and :attr:`tail` are its
    first and last few KiB (where a top-level ``id`` is looked for), :attr:`size` its
    length in bytes.
    """

    head: str
    tail: str
    size: int

    def __new__(cls, head: str, tail: str, size: int) -> Oversized:
        """The dropped line's two ends and its size in bytes."""
        self = super().__new__(cls, "")
        self.head, self.tail, self.size = head, tail, size
        return self


KEPT = 4096
"""Bytes kept of each end of a line over the cap (where its id is looked for)."""


class LineSplitter:
    r"""Bytes in, lines out, each line's bytes joined once: linear in the input (#29).

    Pure. ``feed`` splits each chunk once; a line's pieces are kept in a list and
    joined when its newline arrives (never re-concatenated per chunk: the MCP SDK's
    stdio client did ``(buffer + chunk).split("\n")``, quadratic in a line's length). A
    line longer than ``limit`` bytes (newline excluded) stops being kept as soon as it
    passes the limit: only its first and last :data:`KEPT` bytes and its size are,
    yielded as an :class:`Oversized`. Memory: at most ``limit`` bytes plus one chunk.

    Args:
        limit: the longest line kept, bytes (> 0).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._drop: list[Any] | None = None  # [head, tail, size] of a line over the cap

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes (without their newline), in order."""
        out: list[bytes | Oversized] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:nl])
            out.append(self._take())
            start = nl + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return out

    def end(self) -> bytes | Oversized | None:
        """The last line when the input ended without its newline (None: nothing left)."""
        if self._drop is None and not self._parts:
            return None
        return self._take()

    def _add(self, piece: bytes) -> None:
        drop = self._drop
        if drop is not None:
            if len(drop[0]) < KEPT:  # a cap under KEPT: the head still fills up
                drop[0] = (drop[0] + piece[:KEPT])[:KEPT]
            drop[1] = (drop[1] + piece[-KEPT:])[-KEPT:]
            drop[2] += len(piece)
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self.limit:
            whole = b"".join(self._parts)
            self._drop = [whole[:KEPT], whole[-KEPT:], len(whole)]
            self._parts, self._size = [], 0

    def _take(self) -> bytes | Oversized:
        drop = self._drop
        if drop is not None:
            self._drop = None
            return Oversized(drop[0].decode("utf-8", errors="replace"),
                             drop[1].decode("utf-8", errors="replace"), drop[2])
        parts = self._parts
        line = parts[0] if len(parts) == 1 else b"".join(parts)
        self._parts, self._size = [], 0
        return line


_STR = r'"(?:[^"\\]|\\.){0,1200}"'
_TAIL_ID = re.compile(r'[{,]\s*(' + _STR + r')\s*:\s*(-?\d{1,18}|' + _STR + r')\s*(?:,\s*('
                      + _STR + r')\s*:\s*"2\.0"\s*)?\}\s*$')
"""The last member of a line (``jsonrpc`` after it allowed): any key, checked decoded."""
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]*")


def head_members(head: str) -> dict[str, Any]:
    r"""The top-level members a line's first bytes hold whole, keys and values decoded.

    Parsed as JSON from the opening brace, member by member, until one is cut off or
    the text is no JSON object: a key or value written with escapes (``"\u0031"``) is
    read as JSON reads it, and a key inside a value is never taken for a top-level one
    (each value is parsed whole). Empty when the text does not open an object.
    """
    out: dict[str, Any] = {}
    pos = _SPACE.match(head).end()  # type: ignore[union-attr]
    if not head.startswith("{", pos):
        return out
    pos += 1
    while True:
        pos = _SPACE.match(head, pos).end()  # type: ignore[union-attr]
        try:
            key, pos = _DECODER.raw_decode(head, pos)
            pos = _SPACE.match(head, pos).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or not head.startswith(":", pos):
                return out
            pos = _SPACE.match(head, pos + 1).end()  # type: ignore[union-attr]
            value, pos = _DECODER.raw_decode(head, pos)
        except (ValueError, RecursionError):  # cut off here (or no JSON)
            return out
        out.setdefault(key, value)
        pos = _SPACE.match(head, pos).end()  # type: ignore[union-attr]
        if not head.startswith(",", pos):
            return out
        pos += 1


def _an_id(value: Any) -> str | int | None:
    """``value`` when it can be a JSON-RPC id (a string, an integer not a bool)."""
    ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    return value if ok else None


def line_id(line: Oversized) -> str | int | None:
    r"""The top-level ``id`` of a line dropped over the cap, when its two ends show it.

    Read where it cannot be a nested key: among the members the head holds whole
    (:func:`head_members`), or as the last member before the closing brace (``jsonrpc``
    after it allowed); keys and values as JSON reads them, escapes included (``"\u0031"``
    is the id ``"1"``). None when neither end shows it.
    """
    got = _an_id(head_members(line.head).get("id"))
    if got is not None:
        return got
    m = _TAIL_ID.search(line.tail)
    if m is None:
        return None
    try:
        key, rid = json.loads(m.group(1)), json.loads(m.group(2))
        after = json.loads(m.group(3)) if m.group(3) else "jsonrpc"
    except (ValueError, RecursionError):
        return None
    return _an_id(rid) if key == "id" and after == "jsonrpc" else None


def names_a_method(line: Oversized) -> bool:
    """Whether a dropped line is a request or notification (``method`` in its head).

    Its ``method`` among the members the head holds whole (:func:`head_members`).
    """
    return "method" in head_members(line.head)


def oversized_answer(line: Oversized, limit: int) -> str:
    """The ``-32600`` answer to a line over ``limit`` bytes, with its id (:func:`line_id`)."""
    rid = line_id(line)
    return _answer(rid, INVALID_REQUEST,
                   f"Invalid Request: the message is {line.size:,} bytes, over the "
                   f"gateway's max_message_mb ({limit / 2**20:g} MiB, manifest); it was "
                   "dropped unread: send smaller arguments")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def nonstandard_number(text: str | bytes) -> str | None:
    """Why ``text`` is no standard JSON: a bare ``NaN``/``Infinity``; None otherwise.

    Python's and pydantic's parsers take them; a message holding one would be traced as
    non-standard JSON (#29, QA qa-new8 S4). Only a text that contains such a word is
    parsed again (a string value naming it is fine).
    """
    if isinstance(text, str):
        found = "NaN" in text or "Infinity" in text
    else:
        found = b"NaN" in text or b"Infinity" in text
    if not found:
        return None
    try:
        json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        return str(exc)[:_SHOWN] if "RFC 8259" in str(exc) else None
    except RecursionError:
        return None
    return None


def _notification_with_bad_id(line: str) -> bool:
    """A line the SDK took for a notification although it has an ``id`` (null, bool, float)."""
    if '"id"' not in line:
        return False
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "id" in obj


@contextlib.asynccontextmanager
async def stdio_streams(lines: AsyncIterator[str], out: LineOut, *,
                        order: StdioOrder | None = None, limit: int = 16 << 20
                        ) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for ``Server.run`` over ``lines`` and ``out``.

    As the SDK's ``stdio_server`` (one message per line, UTF-8), except that a line that
    is no valid message is answered with :func:`malformed_answers` (and logged) instead
    of dropped.

    Args:
        lines: the client's lines (an async iterator of str; ends at EOF).
        out: where messages are written, one JSON line each.
        limit: the line limit ``lines`` applied, bytes (named in the answer to an
            :class:`Oversized` line).
        order: stamped with each request's arrival (the tick its line was read) and the
            moment its response was written (the read/call order of QA r6-oa D1).
    """
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    read_w, read_r = anyio.create_memory_object_stream[Any](0)
    write_w, write_r = anyio.create_memory_object_stream[Any](0)
    adapter = types.jsonrpc_message_adapter
    notification = types.JSONRPCNotification
    request = types.JSONRPCRequest
    answers = (types.JSONRPCResponse, types.JSONRPCError)

    async def refuse(line: str, exc: Exception | None) -> None:
        if not line.strip():
            return  # a blank line between messages: nothing to answer
        answers = malformed_answers(line, exc)
        log.warning("malformed JSON-RPC line on stdin (%d characters): %s", len(line),
                    "; ".join(json.loads(a)["error"]["message"][:120] for a in answers)
                    or "an invalid response, dropped")
        for a in answers:
            await out.write(a)
        await out.flush()

    async def reader() -> None:
        async with read_w:
            async for line in lines:
                at = tick()  # before anything else: the request's arrival
                if isinstance(line, Oversized):
                    log.warning("dropped a %d-byte JSON-RPC line on stdin (over "
                                "max_message_mb)", line.size)
                    await out.write(oversized_answer(line, limit))
                    await out.flush()
                    continue
                try:
                    msg = adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    if (error := _unreadable_answer(line)) is not None:
                        # a response to the gateway's request: fail that request now
                        log.warning("malformed JSON-RPC line on stdin (%d characters): %s; "
                                    "it fails the request it answers (id %r), if in flight",
                                    len(line), error.error.message, error.id)
                        await read_w.send(SessionMessage(error))
                        continue
                    await refuse(line, exc)
                    continue
                if (why := nonstandard_number(line)) is not None:
                    rid = getattr(msg, "id", None)
                    log.warning("JSON-RPC line on stdin refused: %s", why)
                    await out.write(_answer(rid if isinstance(rid, str | int) else None,
                                            PARSE_ERROR, f"Parse error: {why}"))
                    await out.flush()
                    continue
                if isinstance(msg, notification) and _notification_with_bad_id(line):
                    await refuse(line, None)
                    continue
                if order is not None and isinstance(msg, request):
                    order.arrived(msg.id, at)
                await read_w.send(SessionMessage(msg))

    async def writer() -> None:
        gone = False
        async with write_r:
            async for sm in write_r:
                if gone:  # the client closed its end of stdout: nothing reaches it
                    continue
                try:
                    await out.write(sm.message.model_dump_json(by_alias=True,
                                                               exclude_unset=True) + "\n")
                    if order is not None and isinstance(sm.message, answers):
                        order.answered(sm.message.id)  # written: no await since the write
                    await out.flush()
                except (OSError, RuntimeError) as exc:  # a closed pipe (uvloop: Runtime)
                    gone = True
                    log.warning("stdout closed (the client went away): %s; answers from "
                                "now on are dropped, calls in flight still run and are "
                                "recorded", type(exc).__name__)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read_r, write_w
