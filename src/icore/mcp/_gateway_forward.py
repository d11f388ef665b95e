"""Forwarding a ``tools/call`` to its upstream: the ``_meta`` kept, the result as it came.

Split from :mod:`icore.mcp._gateway_calls` (the gate side); the result is the upstream's
wire dict, handed to the gateway's client unparsed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from icore.mcp._gateway_order import TURN_META

_RESERVED = "io.modelcontextprotocol/"


def forward_meta(meta: Any) -> Any:
    """The client's ``_meta`` for the upstream.

    Trace context (``traceparent``, ``tracestate``, ``baggage``) and the application's
    own keys are kept; dropped: the
    protocol-reserved ``io.modelcontextprotocol/*`` envelope of the client's
    connection (the upstream connection has its own), ``progressToken`` (progress
    belongs to the client's request, not the gateway's) and ``icore/turn`` (the
    gateway's own, :data:`~icore.mcp._gateway_order.TURN_META`).
    """
    if not meta:
        return None
    raw = meta if isinstance(meta, Mapping) else meta.model_dump(by_alias=True,
                                                                  exclude_none=True)
    out = {k: v for k, v in raw.items()
           if not k.startswith(_RESERVED) and k not in ("progressToken", TURN_META)}
    return out or None


@functools.cache
def _raw_result() -> Any:
    """The pydantic adapter of a result kept as the wire dict."""
    from pydantic import TypeAdapter
    return TypeAdapter(dict[str, Any])


async def call_raw(session: Any, name: str, args: Mapping[str, Any], meta: Any
                    ) -> dict[str, Any]:
    """``tools/call`` at the upstream; its result as the wire dict.

    The SDK's ``ClientSession.send_request`` (public) checks the result against the
    negotiated protocol version; it is then handed to the gateway's client as it came,
    not parsed into a ``CallToolResult``, checked against the tool's output schema and
    dumped again (``call_tool`` would; the gateway's client checks the output schema
    itself, and the SDK server checks the result's shape before sending it).
    """
    from mcp_types import CallToolRequest, CallToolRequestParams
    req = CallToolRequest(params=CallToolRequestParams(name=name, arguments=dict(args),
                                                       _meta=meta))
    out: dict[str, Any] = await session.send_request(req, _raw_result())
    # as CallToolResult's default: a 2026-07-28 client requires it, older ones drop it
    out.setdefault("resultType", "complete")
    return out


def is_error(result: Any) -> bool:
    """``isError`` of a forwarded result (the wire dict) or a ``CallToolResult``."""
    if isinstance(result, Mapping):
        return bool(result.get("isError"))
    return bool(result.is_error)


def result_text(result: Any) -> str:
    """The text of a result's content (the wire dict or a ``CallToolResult``)."""
    if isinstance(result, Mapping):
        items = result.get("content") or []
        return "\n".join((c.get("text") if isinstance(c, Mapping) else None)
                         or f"<{c.get('type', 'content') if isinstance(c, Mapping) else 'content'}>"
                         for c in items)
    parts = [getattr(c, "text", None) or f"<{getattr(c, 'type', 'content')}>"
             for c in result.content]
    return "\n".join(parts)
