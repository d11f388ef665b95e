"""What an HTTP upstream that failed to initialize answered: its HTTP status and URL (#28).

An HTTP upstream that is no MCP streamable-HTTP endpoint (a web server, a wrong path)
failed start-up with the MCP SDK's stand-in (``upstream f is unreachable: MCPError: Not
Found``, ``... Server returned an error response``), though it was reached. After such a
failure, :func:`http_answer` posts one ``initialize`` there and says what came back:
``http://127.0.0.1:8931/wrong answered HTTP 404 (text/plain) to initialize: no MCP
streamable-HTTP endpoint there (check the URL and its path, e.g. /mcp)`` (QA qa-new10c
S4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from icore.errors import redact

PROBE_TIMEOUT_S = 5.0
"""Bound of the probe, seconds."""

_INIT = {"jsonrpc": "2.0", "id": "icore-probe", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "icore-mcp-probe", "version": "0"}}}


async def http_answer(url: str, headers: Mapping[str, str], exc: BaseException | None
                      ) -> str | None:
    """What ``url`` answered an ``initialize`` with, when that is no MCP answer, else None.

    Only after a connection failure ``exc`` that is an ``MCPError`` (the SDK's stand-in
    for an answer it could not use): a transport error (refused, timed out) is said as
    before. None too when the probe gets a JSON or SSE 2xx answer (then the first
    failure was something else) or fails itself.
    """
    from mcp.shared.exceptions import MCPError

    from icore.mcp._upstream_failed import root_cause
    if exc is None or not isinstance(root_cause(exc), MCPError):
        return None
    import httpx2
    try:
        async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT_S) as client:
            r = await client.post(url, content=json.dumps(_INIT), headers={
                **dict(headers), "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"})
            await r.aclose()
    except Exception:  # the probe is best effort: the first failure is said instead
        return None
    ctype = r.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    mcp_like = ctype in ("application/json", "text/event-stream")
    if r.status_code < 300 and mcp_like:
        return None
    what = ("no MCP streamable-HTTP endpoint there (check the URL and its path, e.g. /mcp)"
            if r.status_code in (404, 405, 501) or not mcp_like else
            "the server refused the MCP handshake")
    return (f"{redact(url)} answered HTTP {r.status_code} ({ctype}) to initialize: {what}")


def probe_said(name: str, said: str) -> str:
    """The start-up error of upstream ``name`` from :func:`http_answer`'s ``said``."""
    return f"upstream {name} is not an MCP server at its URL: {said}"


__all__ = ["http_answer", "probe_said"]
