"""``icore_read_resource``: a tool that reads a declared resource as ``resources/read`` does.

Clients that hand a model tools only (``langchain-mcp-adapters``' ``load_mcp_tools``, the
OpenAI Agents SDK's MCP servers) give it no way to call ``resources/read``, so every first
protected call was planned blind and refused ``not_read`` (QA r6-lgmcp D4). This tool,
listed whenever the manifest protects a tool, reads any URI a ``depends_on`` or ``writes``
entry declares (an upstream resource, or a ``fact://`` key with an owner) through the
gateway's versioned read: the read is the session's, recorded exactly as a
``resources/read`` of the same URI (planfence Sec. 3.1: the version the plan derives from).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from icore.mcp._gateway_checks import dep_pattern
from icore.mcp._gateway_manifest import GatewayManifest

READ_RESOURCE = "icore_read_resource"


def read_tool_def(manifest: GatewayManifest) -> list[Any]:
    """The tool's definition (empty when the manifest protects no tool)."""
    from mcp_types import Tool
    if not manifest.tools:
        return []
    return [Tool(
        name=READ_RESOURCE,
        description="Read the current value of a resource a protected tool depends on "
        "(a URI such as those named in the tool's refusals, or a fact://... key). The "
        "read is recorded as the version this session saw: protected tools are checked "
        "against what this session read, so read before calling them.",
        input_schema={"type": "object", "required": ["uri"],
                      "properties": {"uri": {"type": "string"}}})]


def declared(manifest: GatewayManifest, uri: str) -> bool:
    """Whether a ``depends_on`` or ``writes`` entry of the manifest can name ``uri``."""
    return any(dep_pattern(e).fullmatch(uri) for t in manifest.tools.values()
               for e in (*t.depends_on, *t.writes))


async def read_tool(resources: Any, manifest: GatewayManifest, ctx: Any,
                    args: Mapping[str, Any], ex: Any = None) -> Any:
    """Run ``icore_read_resource``: the resource's text and version (QA qa-new9b).

    Args:
        resources: the gateway's resource side (its ``read_resource`` is
            ``resources/read``).
        manifest: the gateway manifest (what may be read).
        ctx: the request context (the session).
        args: the call's arguments (``uri``).
        ex: the tools/call request's exchange: the read's stamp, as a ``resources/read``
            request's own (its answer's moment decides which later calls derive from it).

    Returns:
        A ``CallToolResult`` whose structured content is ``{"uri", "text", "version"}``
        (``text``: the contents' texts, one a line, a binary one as ``<binary MIME>``;
        ``version``: ``_meta["icore/version"]`` of the read) and whose text is that JSON
        (MCP: a tool's text carries its structured content); ``isError`` with what to
        do when the URI is missing, not declared, or cannot be read.
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolResult, TextContent
    uri = args.get("uri")
    if not isinstance(uri, str) or not uri:
        return _error(f"{READ_RESOURCE}: uri must be a non-empty string")
    if not declared(manifest, uri):
        return _error(f"{READ_RESOURCE}: {uri} is no resource a protected tool of this "
                      "gateway depends on or writes (its manifest declares "
                      f"{', '.join(_entries(manifest))}); read other resources with "
                      "resources/read")
    try:
        result = await resources.read_resource(ctx, SimpleNamespace(uri=uri), ex)
    except MCPError as exc:
        return _error(f"{READ_RESOURCE}: cannot read {uri}: {exc.error.message}")
    texts = [getattr(c, "text", None) or f"<binary {getattr(c, 'mime_type', '') or ''}>"
             for c in result.contents]
    version = (result.meta or {}).get("icore/version")
    # the value in the structured content too (a client may hand the model only that),
    # and the text its JSON, as MCP asks of a tool returning structured content
    out = {"uri": uri, "text": "\n".join(texts), "version": version}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(
                              out, ensure_ascii=False))],
                          structured_content=out,
                          _meta={"icore/version": version} if version else None)


def _entries(manifest: GatewayManifest) -> list[str]:
    return sorted({e for t in manifest.tools.values() for e in (*t.depends_on, *t.writes)})


def _error(text: str) -> Any:
    from mcp_types import CallToolResult, TextContent
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


PUT_FACT = "icore_put_fact"
"""The gateway's own tool publishing a new version of a ``fact://`` key."""
GET_FACT = "icore_get_fact"
"""The gateway's own tool reading a ``fact://`` key's current version."""


def own_tool_defs(manifest: GatewayManifest) -> list[Any]:
    """The gateway's own tools: the resource read, the fact tools (put/get).

    ``icore_read_resource`` when the manifest protects a tool; put/get when the
    manifest enables them (``facts.tools``, with owners).
    """
    from mcp_types import Tool
    read = read_tool_def(manifest)
    if not manifest.facts.tools or not manifest.facts.owners:
        return read
    return [*read,
        Tool(name=PUT_FACT, description="Publish a new version of a shared fact "
             "(key fact://...) that this gateway serves; other sessions' plans that "
             "read the old version become stale. Only a session that speaks for the "
             "fact's owner may write it.",
             input_schema={"type": "object", "required": ["key", "value"],
                           "properties": {"key": {"type": "string"}, "value": {}}}),
        Tool(name=GET_FACT, description="Read the current version of a shared fact "
             "(key fact://...); the read is recorded as the version this session saw.",
             input_schema={"type": "object", "required": ["key"],
                           "properties": {"key": {"type": "string"}}}),
    ]
