"""``icore mcp``: PlanFence and iCORE recording in front of any MCP server (issue 25).

An MCP server (the official ``mcp`` SDK, 2.x; extra ``icore[mcp]``, imported lazily)
that proxies the upstream MCP servers a YAML manifest names, for any MCP client (Claude
Desktop, Cursor, the OpenAI Agents SDK, LangChain's MCP adapters):

* tools, resources and prompts listed unchanged (namespaced ``<upstream>.<name>`` only
  on a clash);
* upstream resources (and the gateway's own ``fact://`` key-value set) are versioned
  records with owners; a session's ``resources/read`` records the version it saw;
* a protected tool's call is validated against the owners' heads (planfence Alg. 1):
  stale -> not forwarded, ``isError`` with the fresh values (the next call is the one
  replan); second change, unread fact, unreachable owner, malformed reply -> blocked;
* every session's reads, calls and decisions go to a trace ``icore audit`` reads;
* the manifest is checked against what the upstreams serve at start (a protected tool
  or a D(a) resource no upstream serves is a typed error naming its line);
* over ``--http`` a client without an MCP session (protocol 2026-07-28) is identified
  by its bearer token (``http.clients``), else its protected calls are refused.

See docs/mcp.md. Import rule: this room sits beside ``integrations`` and uses only the
public API of records, fence, memory and integrations.
"""

# ruff: noqa: E402  (the extra is checked before the modules that import it)
from icore.mcp._sdk import require_mcp

require_mcp()  # a missing extra or mcp 1.x: one line naming the fix

from icore.mcp._bench import BenchRow, run_bench
from icore.mcp._deps import expand_deps
from icore.mcp._facts import FactBook, SessionView, Verdict, describe
from icore.mcp._gateway import Gateway
from icore.mcp._gateway_manifest import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_GATE_TIMEOUT_S,
    FACT_SCHEME,
    FactsSpec,
    GatewayError,
    GatewayManifest,
    GatewayManifestError,
    StoreSpec,
    ToolSpec,
    UpstreamSpec,
    load_manifest,
    manifest_from_dict,
)
from icore.mcp._gateway_resources import Route
from icore.mcp._manifest_http import ClientSpec, HttpSpec
from icore.mcp._session_log import GatewayTrace
from icore.mcp._transport import StaticTokens, serve_http, serve_stdio, token_verifier
from icore.mcp._upstream import Upstream
from icore.mcp._upstream_failed import UpstreamError

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_GATE_TIMEOUT_S",
    "FACT_SCHEME",
    "BenchRow",
    "ClientSpec",
    "FactBook",
    "FactsSpec",
    "Gateway",
    "GatewayError",
    "GatewayManifest",
    "GatewayManifestError",
    "GatewayTrace",
    "HttpSpec",
    "Route",
    "SessionView",
    "StaticTokens",
    "StoreSpec",
    "ToolSpec",
    "Upstream",
    "UpstreamError",
    "UpstreamSpec",
    "Verdict",
    "describe",
    "expand_deps",
    "load_manifest",
    "manifest_from_dict",
    "run_bench",
    "serve_http",
    "serve_stdio",
    "token_verifier",
]
