"""A client's unreadable answer to the gateway's request fails that request at once (#29).

The gateway asks its clients on behalf of its upstreams (elicitation, sampling, roots:
:mod:`icore.mcp._gateway_asks`). A client's response that is no valid JSON-RPC response
(a ``result`` that is no object, an ``error`` without an integer ``code``, both or
neither) was dropped as the SDK drops it, and the question waited the whole
``ask_timeout_s``: the upstream's call hung on an answer that had come. JSON-RPC never
answers a response, but such a response still names the request it answers (its
``id``): :func:`stand_in` turns it into a JSON-RPC error under that id, which the
gateway's transports (stdio: :func:`~icore.mcp._stdio_lines.stdio_streams`; HTTP:
:class:`~icore.mcp._http_shape.MessageShape`) hand to the SDK's session in its place, so
the waiting request fails at once with a message naming what was wrong. A response
whose id names no request in flight is dropped there, as before. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

INTERNAL_ERROR = -32603
"""JSON-RPC 2.0 code of the stand-in: the gateway could not get a valid answer."""

UNREADABLE = "the client's answer is no valid JSON-RPC response"
"""How a stand-in's message begins (the question's error and its trace line quote it)."""

_SHOWN = 200
"""Characters of a validator's message quoted (never the whole input)."""


def _usable_id(obj: dict[str, Any]) -> str | int | None:
    rid = obj.get("id")
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def problem(obj: dict[str, Any]) -> str | None:
    """What makes ``obj`` (a response: no ``method``) no valid JSON-RPC response, or None.

    One phrase: ``result: Input should be a valid dictionary``, ``error.code: ...``,
    ``it has both a result and an error``.
    """
    import mcp_types as types
    from pydantic import ValidationError
    if "result" in obj and "error" in obj:
        return "it has both a result and an error"
    if obj.get("jsonrpc") != "2.0":
        return f"jsonrpc must be \"2.0\", not {str(obj.get('jsonrpc'))[:40]!r}"
    model = types.JSONRPCError if "error" in obj else types.JSONRPCResponse
    try:
        model.model_validate(obj, by_name=False)
    except ValidationError as exc:
        first: Any = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ())) or "the message"
        return f"{loc}: {str(first.get('msg', 'invalid'))[:_SHOWN]}"
    return None


def stand_in(obj: Any) -> dict[str, Any] | None:
    """The JSON-RPC error that answers in place of ``obj``, a client's malformed response.

    Args:
        obj: a message the client sent (parsed JSON) that failed validation.

    Returns:
        ``{"jsonrpc": "2.0", "id": <its id>, "error": {"code": -32603, "message":
        "the client's answer is no valid JSON-RPC response (<what>)"}}`` when ``obj`` is
        an object with no ``method``, a ``result`` or an ``error``, and an id that is a
        string or an integer (so it names a request); else None (nothing to fail: a
        request or notification, or no usable id).
    """
    if not isinstance(obj, dict) or "method" in obj or not ("result" in obj or "error" in obj):
        return None
    rid = _usable_id(obj)
    if rid is None:
        return None
    what = problem(obj) or "it does not validate"
    return {"jsonrpc": "2.0", "id": rid,
            "error": {"code": INTERNAL_ERROR, "message": f"{UNREADABLE} ({what})"}}


__all__ = ["INTERNAL_ERROR", "UNREADABLE", "problem", "stand_in"]
