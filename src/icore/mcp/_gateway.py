"""The gateway: an MCP server proxying upstream MCP servers, with PlanFence at tools/call.

Built on the SDK's low-level :class:`mcp.server.Server` (2.x: ``on_list_tools``,
``on_call_tool``, ... handlers; the gateway validates arguments itself, since 2.x no
longer does). Tools, resources, resource templates and prompts of the upstreams are
listed unchanged; a name (or URI) two upstreams share is namespaced ``<upstream>.<name>``
for both.

Each client session is an agent of the gateway's workspace (:mod:`icore.workspace`):
its reads are the versions of the facts it saw. A protected tool's call is validated against the
owners' heads (planfence Alg. 1; :meth:`FactBook.gate`):

* authorized: forwarded to the upstream;
* stale (first time): not forwarded; ``CallToolResult(isError=true)`` names each changed
  fact with its fresh value, which the session has now seen - the model's next call of
  the tool is the one replan (validated with ``replanned``);
* a second change, a fact never read, an unreachable owner, a malformed or conflicting
  owner reply, arguments that cannot be bound: blocked, not forwarded (fail closed).

The gateway holds two parts: its resource side (:mod:`icore.mcp._gateway_resources`:
versioned reads, subscriptions) and its tools/call side (:mod:`icore.mcp._gateway_calls`:
argument checks, the gate, the fact tools).
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from icore.errors import IcoreError
from icore.mcp._facts import FactBook, SessionView
from icore.mcp._gateway_calls import _ToolCalls
from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayError, GatewayManifest
from icore.mcp._gateway_resources import Route, _internal, _invalid, _Resources
from icore.mcp._session_log import GatewayTrace
from icore.mcp._upstream import Upstream, UpstreamError

log = logging.getLogger("icore.mcp")


class Gateway:
    """PlanFence and iCORE recording in front of the manifest's upstream MCP servers.

    Use as an async context manager (it runs the upstream connections), then serve it
    with :func:`~icore.mcp.serve_stdio` / :func:`~icore.mcp.serve_http`, or hand
    :attr:`server` to any SDK transport.

    Args:
        manifest: the validated :class:`~icore.mcp.GatewayManifest`.

    Attributes:
        facts: the :class:`FactBook` (owners' stores, heads, the gate).
        trace: the :class:`GatewayTrace` (``icore audit`` reads its file).
        server: the SDK server (``mcp.server.Server``).
    """

    def __init__(self, manifest: GatewayManifest) -> None:
        from icore._extras import require
        require("mcp.server", "mcp", feature="icore mcp")
        self.manifest = manifest
        self._resources = _Resources(self, self._client_key)
        self.upstreams = {
            n: Upstream(n, s.model_copy(update={"cwd": str(manifest.resolve(s.cwd or "."))})
                        if s.command is not None else s,
                        self._resources.on_upstream_notification)
            for n, s in manifest.upstreams.items()}
        tpath = manifest.resolve(manifest.trace) if manifest.trace else None
        self.trace = GatewayTrace(manifest.name, tpath)
        if tpath is not None:
            try:
                tpath.parent.mkdir(parents=True, exist_ok=True)
                if tpath.exists():  # an earlier run's trace is kept, never overwritten
                    n = 1
                    while (old := tpath.with_name(f"{tpath.stem}-{n}{tpath.suffix}")
                           ).exists():
                        n += 1
                    tpath.rename(old)
                self.trace.flush()
            except OSError as exc:
                raise GatewayError(f"cannot write the trace {tpath}: {exc}",
                                   file=str(tpath), path="trace") from None
        self.facts: FactBook | None = None
        self.otel: Any = None
        if manifest.otel:
            from icore.adapters import OtelExporter
            ep = manifest.otel
            if ep.startswith("file:"):
                ep = "file:" + str(manifest.resolve(ep.removeprefix("file:")))
            self.otel = OtelExporter(endpoint=ep)
        self.tools: dict[str, Route] = {}
        self.tool_defs: dict[str, Any] = {}
        self.resources: dict[str, Route] = {}
        self.prompts: dict[str, Route] = {}
        self._calls = _ToolCalls(self, self._resources)
        self._sessions: weakref.WeakKeyDictionary[Any, SessionView] = \
            weakref.WeakKeyDictionary()
        self._n = itertools.count(1)
        self.single_client = False
        """True when serving stdio: every request comes from the one client."""
        self._stdio_key = _Key("stdio")
        self._sid_keys: dict[str, _Key] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.server = self._make_server()

    # -- lifecycle ----------------------------------------------------------------------
    async def __aenter__(self) -> Gateway:
        self._tg = self._resources.tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for u in self.upstreams.values():
            u.bind(self._tg)
        try:
            await self._start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for u in self.upstreams.values():
            u.close()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = self._resources.tg = None
        if self.facts is not None:
            with anyio.CancelScope(shield=True):
                await self.facts.stop_serving()
            self.facts.close()
        if self.otel is not None:
            self.otel.flush()
            self.otel.shutdown()
        self.trace.close()

    async def _start(self) -> None:
        async def one(name: str, u: Upstream) -> None:
            try:
                await u.connect()
            except UpstreamError as exc:
                log.warning("%s", exc)
                self.trace.note("gateway", str(exc), upstream=name)

        async with anyio.create_task_group() as tg:
            for n, u in self.upstreams.items():
                tg.start_soon(one, n, u)
        await self.refresh()
        m = self.manifest
        owners: dict[str, str] = {}
        for uri, r in self.resources.items():
            owners[uri] = r.upstream
        owners.update(m.owners)
        owners.update(m.facts.owners)
        backend = m.store.backend
        path = m.resolve(m.store.path) if m.store.path else None
        remote = m.store.endpoints() if backend == "owner-service" else None
        certs = m.resolve(m.store.certs_dir) if m.store.certs_dir else None
        try:
            self.facts = FactBook(owners, backend=backend, path=path,
                                  gate_timeout_s=m.gate_timeout_s, remote=remote,
                                  identity=m.store.identity, certs_dir=certs,
                                  serve=m.store.served(), servers=m.store.servers,
                                  prefix=m.store.prefix)
            ports = await self.facts.start_serving()
        except (IcoreError, OSError) as exc:
            raise GatewayError(f"cannot open the {backend} store: {exc}",
                               path="store") from None
        for owner, port in ports.items():
            self.trace.note("gateway", f"serving owner {owner} on port {port}", owner=owner,
                            port=port)
        for key, value in m.facts.initial.items():
            if self.facts.owner_of(key) in self.facts.remote:
                continue  # a remote owner writes its own facts
            if self.facts.head(key) is None:
                rec, _ = self.facts.observe(key, value, type="fact")
                if rec is not None:
                    self.trace.version(rec, "manifest")

    # -- catalog ------------------------------------------------------------------------
    async def _list(self, u: Upstream, what: str) -> list[Any]:
        caps = u.capabilities
        if caps is None or getattr(caps, what, None) is None:
            return []
        method = {"tools": "list_tools", "resources": "list_resources",
                  "prompts": "list_prompts"}[what]
        out: list[Any] = []
        cursor = None
        while True:
            from mcp_types import PaginatedRequestParams
            params = PaginatedRequestParams(cursor=cursor) if cursor else None

            async def page(s: Any, m: str = method, p: Any = params) -> Any:
                return await getattr(s, m)(params=p)

            res = await u.request(f"{what}/list", page)
            out.extend(getattr(res, what))
            cursor = res.next_cursor
            if not cursor:
                return out

    async def refresh(self) -> None:
        """List every upstream's tools, resources and prompts again (names routed)."""
        found: dict[str, dict[str, list[tuple[str, Any]]]] = {
            "tools": {}, "resources": {}, "prompts": {}}
        for n, u in self.upstreams.items():
            if u.session is None:
                try:
                    await u.connect()
                except UpstreamError:
                    continue
            for what in found:
                try:
                    items = await self._list(u, what)
                except (UpstreamError, Exception) as exc:  # an upstream's bad listing
                    log.warning("upstream %s: %s/list failed: %r", n, what, exc)
                    continue
                for it in items:
                    ident = it.uri if what == "resources" else it.name
                    found[what].setdefault(ident, []).append((n, it))
        tools, tool_defs = _namespaced(found["tools"], "name")
        defs = dict(tool_defs)
        res, res_defs = _namespaced(found["resources"], "uri")
        prompts, prompt_defs = _namespaced(found["prompts"], "name")
        self._resource_defs = [d for _, d in res_defs]
        self._prompt_defs = [d for _, d in prompt_defs]
        if defs != self.tool_defs:
            self._calls.validators.clear()
        self.tools, self.tool_defs, self.resources, self.prompts = tools, defs, res, prompts

    # -- sessions -----------------------------------------------------------------------
    def view(self, ctx: Any) -> SessionView:
        """The :class:`SessionView` of the request's client session (made on first use)."""
        key = self._client_key(ctx)
        v = self._sessions.get(key)
        if v is None:
            params = getattr(ctx.session, "client_params", None)
            info = getattr(params, "client_info", None)
            client = getattr(info, "name", None) or "client"
            assert self.facts is not None
            v = self.facts.session(f"{client}#{next(self._n)}")
            self._sessions[key] = v
            self.trace.session(v.sid, client)
        return v

    def _client_key(self, ctx: Any) -> Any:
        """What identifies the request's client session.

        Over stdio the process has exactly one client. Over HTTP: the MCP session id
        (``Mcp-Session-Id``), else the SDK's connection object (a handshake-era
        connection lives as long as its client; a stateless request is a session of its
        own, so a protected call there never cites a read: blocked, fail closed).
        """
        if self.single_client:
            return self._stdio_key
        conn = getattr(ctx.session, "_connection", None) or ctx.session
        sid = getattr(conn, "session_id", None)
        if isinstance(sid, str) and sid:
            k = self._sid_keys.get(sid)
            if k is None:
                k = self._sid_keys[sid] = _Key(sid)
            return k
        return conn

    # -- the SDK server -----------------------------------------------------------------
    def _make_server(self) -> Any:
        from mcp.server import Server
        return Server(
            self.manifest.name, version="icore",
            instructions="icore MCP gateway: tools of the upstream servers; protected "
            "tools run only when the facts they were planned from are current.",
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._resources.subscribe,
            on_unsubscribe_resource=self._resources.unsubscribe,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListToolsResult
        self.view(ctx)
        await self.refresh()
        return ListToolsResult(tools=[*self.tool_defs.values(), *self._calls.fact_tools()])

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListResourcesResult, Resource
        self.view(ctx)
        await self.refresh()
        facts = []
        if self.facts is not None:
            for k in self.facts.known_keys():
                if k.startswith(FACT_SCHEME):
                    facts.append(Resource(uri=k, name=k.removeprefix(FACT_SCHEME),
                                          description="a shared fact served by the gateway",
                                          mime_type="application/json"))
        return ListResourcesResult(resources=[*self._resource_defs, *facts])

    async def _list_templates(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListResourceTemplatesResult
        out: list[Any] = []
        for u in self.upstreams.values():
            caps = u.capabilities
            if caps is None or caps.resources is None:
                continue
            try:
                r = await u.request("resources/templates/list",
                                    lambda s: s.list_resource_templates())
            except (UpstreamError, Exception) as exc:
                log.warning("upstream %s: resources/templates/list failed: %r", u.name, exc)
                continue
            out.extend(r.resource_templates)
        return ListResourceTemplatesResult(resource_templates=out)

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListPromptsResult
        await self.refresh()
        return ListPromptsResult(prompts=list(self._prompt_defs))

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        route = self.prompts.get(params.name)
        if route is None:
            await self.refresh()
            route = self.prompts.get(params.name)
        if route is None:
            raise _invalid(f"Unknown prompt: {params.name}")
        u = self.upstreams[route.upstream]
        try:
            return await u.request("prompts/get", lambda s: s.get_prompt(
                route.name, arguments=params.arguments))
        except UpstreamError as exc:
            raise _internal(str(exc)) from None

    # -- the parts: resources (_gateway_resources), tools/call (_gateway_calls) ----------
    async def fetch_resource(self, uri: str, source: str) -> tuple[Any, Any]:
        """Read ``uri`` from its upstream; commit a new version when it changed.

        Returns:
            ``(ReadResourceResult, record or None)``.

        Raises:
            UpstreamError: the upstream failed; MCPError: it answered an error.
            GatewayError: no upstream serves ``uri``.
        """
        return await self._resources.fetch(uri, source)

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        return await self._resources.read_resource(ctx, params)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        return await self._calls.call_tool(ctx, params)


def _namespaced(found: Mapping[str, list[tuple[str, Any]]], field: str
                ) -> tuple[dict[str, Route], list[tuple[str, Any]]]:
    """Routes and definitions of one listing (tools, resources or prompts).

    An identifier served by one upstream is shown as it is; one served by several is shown
    as ``upstream.identifier`` by each (the definition's ``field`` renamed to match).
    Returns the routes by shown identifier and the (shown identifier, definition) pairs.
    """
    routes: dict[str, Route] = {}
    defs: list[tuple[str, Any]] = []
    for ident, hits in found.items():
        for up, d in hits:
            shown = ident if len(hits) == 1 else f"{up}.{ident}"
            routes[shown] = Route(up, ident)
            defs.append((shown, d if shown == ident else d.model_copy(update={field: shown})))
    return routes, defs


class _Key:
    """A hashable, weak-referenceable stand-in for a string session key."""

    __slots__ = ("__weakref__", "name")

    def __init__(self, name: str) -> None:
        self.name = name
