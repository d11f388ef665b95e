"""Whether a forwarded request's failure is the upstream's own JSON-RPC error (#28).

Only a well-formed JSON-RPC error answer (``{"jsonrpc": "2.0", "id": ..., "error":
{"code": int, "message": str}}``) says the upstream did not run the request. A body
that is no JSON, an empty one, a result of the wrong shape, an HTTP 500 with no JSON-RPC
error in it: the request left, and what the upstream did with it is unknown, so the
call may have run (as on the stdio path, ``ANSWER_INVALID``). The MCP SDK's client and
the gateway's lean HTTP path turn such answers into an ``MCPError`` of their own
(:data:`STAND_INS`: a code the upstream might send too, so told apart by its text);
anything not an ``MCPError`` (a pydantic ``ValidationError`` of a result that does not
fit ``CallToolResult``) is one too. QA qa-new10c S2. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

STAND_INS = ("Failed to parse JSON response", "Failed to parse SSE message",
             "Server returned an error response", "Unexpected content type",
             "server answered a request with 202 Accepted", "Redirect to ",
             "SSE stream ", "Connection closed", "Session terminated",
             "transport context unavailable", "the HTTP request to the upstream failed")
"""How the SDK's client (``mcp.client.streamable_http``, its dispatcher) and the
gateway's lean path (:mod:`icore.mcp._upstream_lean`) begin the ``MCPError`` they make
up for an answer that is no JSON-RPC answer (tests/mcp/test_gateway_qa10c.py checks the
SDK's list against this one)."""



def upstream_refused(exc: BaseException) -> bool:
    """True when ``exc`` is the upstream's own JSON-RPC error answer: it did not run.

    False for everything else raised after the request was sent (a stand-in for a
    garbage answer, :data:`STAND_INS`; a result that fits no ``CallToolResult``; a bug):
    the request may have run.
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT

    from icore.mcp._upstream_http import TRANSPORT_FAILED
    if not isinstance(exc, MCPError):
        return False
    if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT, TRANSPORT_FAILED) or (
            exc.code == METHOD_NOT_FOUND and exc.message == "Not Found"):  # a 404's
        return False
    return not exc.message.startswith(STAND_INS)


def garbage_text(exc: BaseException) -> str:
    """One line saying what was wrong with the answer ``exc`` stands for.

    A pydantic error is cut to its first error (``content: Input should be a valid
    list``), not its whole dump with documentation links.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first: Any = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "the result"
            return f"the result does not fit the protocol: {loc}: {first.get('msg')}"[:300]
        except Exception:  # not pydantic's: its text below
            pass
    text = " ".join(str(getattr(exc, "message", None) or exc or type(exc).__name__).split())
    # the SDK's own parse error carries pydantic's dump: its first sentence only
    return re.split(r" \[type=| For further information", text)[0][:1000]


__all__ = ["STAND_INS", "garbage_text", "upstream_refused"]
