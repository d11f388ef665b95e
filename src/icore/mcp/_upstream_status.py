"""An HTTP upstream's error answer named by its HTTP status (#29).

The MCP SDK's streamable-HTTP client turns a POST's non-2xx answer that is no JSON-RPC
error into its own ``Server returned an error response`` and hands on a JSON-RPC error
sent at a non-2xx status without the status: a call's error never said whether the
upstream answered 500, 502, 503 or 401. The gateway's HTTP client to its upstreams
(:func:`~icore.mcp._upstream_http.keepalive_http_client`) and its lean path
(:mod:`icore.mcp._upstream_lean`) now name it: ``Server returned an error response
(HTTP 503 Service Unavailable, text/plain)`` (still one of the SDK's stand-ins,
:data:`~icore.mcp._upstream_answer.STAND_INS`: the call may have run), and the
upstream's own JSON-RPC error with `` (HTTP 500)`` after its message (the upstream
refused: it did not run). A 404 is left to the session logic (a lost session, or no
endpoint there: the start-up probe says so).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

STAND_IN = "Server returned an error response"
"""The SDK's own words for a non-2xx answer that is no JSON-RPC error (kept as the head)."""

READ_AT_MOST = 1 << 20
"""Most bytes of an error answer read to look for a JSON-RPC error in it."""


def status_text(status: int, ctype: str) -> str:
    """``Server returned an error response (HTTP 503 Service Unavailable, text/plain)``."""
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    shown = ctype.split(";")[0].strip().lower() or "no content type"
    return f"{STAND_IN} (HTTP {status}{phrase}, {shown[:60]})"


def with_status(message: str, status: int) -> str:
    """The upstream's own error ``message`` with the HTTP status it came at."""
    return f"{message} (HTTP {status})"


def error_body(body: bytes, status: int, ctype: str, rid: Any) -> dict[str, Any]:
    """The JSON-RPC error (to request ``rid``) a POST's ``status`` answer ``body`` means.

    The upstream's own error (``{"error": {"code": int, "message": str}}``) with its
    status (:func:`with_status`), else the SDK's stand-in naming it (:func:`status_text`,
    code ``-32603``).
    """
    err: Any = None
    if ctype.split(";")[0].strip().lower() == "application/json":
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            obj = None
        err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), int) \
            and not isinstance(err.get("code"), bool) and isinstance(err.get("message"), str):
        named = {**err, "message": with_status(err["message"], status)}
        return {"jsonrpc": "2.0", "id": rid, "error": named}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603,
                                                   "message": status_text(status, ctype)}}


async def status_named(request: Any, resp: Any, rid: Any) -> Any:
    """``resp`` (a POST's 4xx/5xx answer, not 404) as a JSON-RPC error naming its status.

    Reads at most :data:`READ_AT_MOST` bytes of it (then closes it); the answer keeps its
    status, so the SDK hands its JSON-RPC error on (its own path for such answers).
    """
    import httpx2
    body = bytearray()
    try:
        async for part in resp.aiter_raw():
            body += part
            if len(body) > READ_AT_MOST:
                body.clear()  # too big to be an error object: named by its status only
                break
    finally:
        await resp.aclose()
    ctype = resp.headers.get("content-type", "")
    return httpx2.Response(resp.status_code, json=error_body(bytes(body), resp.status_code,
                                                             ctype, rid), request=request)


__all__ = ["STAND_IN", "error_body", "status_named", "status_text", "with_status"]
