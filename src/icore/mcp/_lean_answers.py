"""Reading the answers of the gateway's lean upstream path (#25).

The JSON-RPC and SSE pieces :class:`~icore.mcp._upstream_lean.LeanCalls` reads an
upstream's answer with, as the SDK's client reads them: a JSON-RPC error or result, the
SDK's result checks for a ``tools/call``, one SSE event's fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def error_of(body: bytes) -> Exception | None:
    """The JSON-RPC error a non-2xx answer's body carries, if it is one."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    return error_in(obj)


def error_in(obj: Any) -> Exception | None:
    """The ``error`` of JSON-RPC message ``obj`` as an ``MCPError``, if it has a valid one."""
    from mcp.shared.exceptions import MCPError
    err = obj.get("error") if isinstance(obj, dict) else None
    if not (isinstance(err, dict) and isinstance(err.get("code"), int)
            and isinstance(err.get("message"), str)):
        return None
    return MCPError(err["code"], err["message"], err.get("data"))


def response_result(obj: Any, rid: str) -> Any:
    """The ``result`` of the JSON-RPC response ``obj`` to ``rid``.

    Raises:
        MCPError: it is an error (as sent), or not a response to ``rid`` (parse error).
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import PARSE_ERROR
    if isinstance(obj, bytes):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise MCPError(PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None
    if isinstance(obj, dict) and obj.get("jsonrpc") == "2.0" and obj.get("id") == rid:
        if isinstance(obj.get("result"), dict):
            return obj["result"]
        err = error_in(obj)
        if err is not None:
            raise err
    raise MCPError(PARSE_ERROR, "Failed to parse JSON response: not a JSON-RPC response "
                   f"to request {rid}")


def result_checks() -> tuple[Callable[[Any], Any], Callable[[str, str], Any]]:
    """The SDK's result checks :func:`checked_result` applies.

    Imported before a call is sent: an import failure must never fail a call the
    upstream already ran.
    """
    from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
    return _clamp_inbound_ttl, _later_revision_fields


def checked_result(raw: dict[str, Any], version: str,
             checks: tuple[Callable[[Any], Any], Callable[[str, str], Any]]
             ) -> dict[str, Any]:
    """``raw`` as ``ClientSession.send_request`` hands on a ``tools/call`` result.

    ``checks``: :func:`result_checks`.

    Raises:
        pydantic.ValidationError: it does not fit ``version``'s ``CallToolResult``.
    """
    from mcp_types import methods
    clamp_inbound_ttl, later_revision_fields = checks
    clamp_inbound_ttl(raw)
    try:
        methods.validate_server_result("tools/call", version, raw)
    except KeyError:
        pass
    foreign = later_revision_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {k: v for k, v in raw.items() if k not in foreign}
    return raw


def sse_fields(event: bytes) -> tuple[str, bytes, str | None, int | None]:
    """``(event type, data, id, retry)`` of one SSE event's lines.

    An empty ``event:`` is ``"message"``; an empty ``id:`` is no id (None), as the SDK
    reads them.
    """
    kind, data, eid, retry = "message", [], None, None
    for line in event.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field == b"data":
            data.append(value)
        elif field == b"event":  # empty: the default type
            kind = value.decode("utf-8", "replace") or "message"
        elif field == b"id" and value and b"\0" not in value:  # empty: no resumption point
            eid = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():
            retry = int(value)
    return kind, b"\n".join(data), eid, retry


__all__ = ["checked_result", "error_in", "error_of", "response_result", "result_checks",
           "sse_fields"]
