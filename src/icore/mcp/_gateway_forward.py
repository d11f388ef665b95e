"""Forwarding a ``tools/call`` to its upstream: the ``_meta`` kept, the result as it came.

Split from :mod:`icore.mcp._gateway_calls` (the gate side); the result is the upstream's
wire dict, handed to the gateway's client unparsed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from icore.mcp._gateway_order import TURN_META

_RESERVED = "io.modelcontextprotocol/"
_DROPPED = frozenset({"progressToken", "progress_token", TURN_META})


def meta_dict(meta: Any) -> Mapping[str, Any]:
    """A request's ``_meta`` (a dict, or a model dumped by alias) as a mapping."""
    return meta if isinstance(meta, Mapping) else meta.model_dump(by_alias=True,
                                                                   exclude_none=True)


def forward_meta(meta: Any) -> Any:
    """The client's ``_meta`` for the upstream.

    Trace context (``traceparent``, ``tracestate``, ``baggage``) and the application's
    own keys are kept; dropped: the
    protocol-reserved ``io.modelcontextprotocol/*`` envelope of the client's
    connection (the upstream connection has its own), ``progressToken`` (either
    spelling: the SDK's parsed ``_meta`` names it ``progress_token``; the client's token
    is the client's, :mod:`~icore.mcp._gateway_progress` hands the upstream a token of
    the gateway's) and ``icore/turn`` (the gateway's own,
    :data:`~icore.mcp._gateway_order.TURN_META`).
    """
    if not meta:
        return None
    raw = meta_dict(meta)
    out = {k: v for k, v in raw.items()
           if not k.startswith(_RESERVED) and k not in _DROPPED}
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


def output_problem(name: str, tool: Any, result: Any) -> str | None:
    """Why the MCP SDK's client refuses a result of ``tool`` (its ``outputSchema``), or None.

    As the SDK client checks it (``ClientSession.validate_tool_result``): a result that is
    not ``isError``, of a tool declaring an ``outputSchema``, must carry
    ``structuredContent`` that the schema accepts. MCP (2025-06-18, Tools: Output Schema):
    a server MUST return structured results that conform, a client SHOULD check them; so
    the gateway, a server to its clients, answers such a result with an ``isError`` result
    saying this, and traces it as the failed call it is (QA qa-mcp7, #25; #29).
    """
    schema = getattr(tool, "output_schema", None)
    if not isinstance(schema, dict) or is_error(result) or not isinstance(result, Mapping):
        return None
    if "structuredContent" not in result:
        return f"Tool {name} has an output schema but did not return structured content"
    try:
        error = _output_check(json.dumps(schema, sort_keys=True))(result["structuredContent"])
    except Exception as exc:  # a schema jsonschema cannot use: the client refuses it too
        return f"Invalid schema for tool {name}: {exc}"
    return None if error is None else (
        f"Invalid structured content returned by tool {name}: {error}")


@functools.lru_cache(maxsize=256)
def _output_check(schema: str) -> Any:
    """A compiled check of one output schema (JSON text): value -> first error or None."""
    from jsonschema import exceptions
    from jsonschema.validators import validator_for
    loaded = json.loads(schema)
    v = validator_for(loaded)(loaded)
    return lambda value: (None if (e := exceptions.best_match(v.iter_errors(value))) is None
                          else e.message)
