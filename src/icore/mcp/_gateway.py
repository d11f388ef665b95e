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

Parts: resources (:mod:`~icore.mcp._gateway_resources`), tools/call
(:mod:`~icore.mcp._gateway_calls`), upstreams' list changes (:mod:`~icore.mcp._gateway_lists`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import secrets
import weakref
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from icore.errors import IcoreError, StoreError
from icore.mcp._facts import FactBook, SessionView
from icore.mcp._gateway_asks import Asks
from icore.mcp._gateway_calls import _ToolCalls
from icore.mcp._gateway_checks import Unresolved, template_shape
from icore.mcp._gateway_lists import ListRelay, advertise
from icore.mcp._gateway_manifest import (
    FACT_SCHEME,
    GatewayError,
    GatewayManifest,
    GatewayManifestError,
)
from icore.mcp._gateway_order import Wire
from icore.mcp._gateway_paths import checked_paths
from icore.mcp._gateway_progress import ProgressRelay
from icore.mcp._gateway_resources import Route, _internal, _invalid, _Resources
from icore.mcp._gateway_watch import ManifestWatch, warn_not_shared
from icore.mcp._session_log import GatewayTrace, started
from icore.mcp._shared_writes import share_claims
from icore.mcp._trace_claim import TraceTaken, claim_trace
from icore.mcp._upstream import Upstream
from icore.mcp._upstream_failed import UpstreamError

log = logging.getLogger("icore.mcp")

GATEWAY_INSTRUCTIONS = ("icore MCP gateway: tools of the upstream servers; protected tools "
                        "run only when the facts they were planned from are current.")
"""The gateway's own ``instructions``; each upstream's follow it, named."""


def instructions(upstreams: Mapping[str, Upstream]) -> str:
    """The gateway's sentence, then each upstream's ``instructions``, ``[<name>]`` first.

    Clients put them in the model's context: the upstreams' guidance is kept (QA r5-mcp D6).
    """
    theirs = [f"[{name}] {u.instructions.strip()}" for name, u in upstreams.items()
              if isinstance(u.instructions, str) and u.instructions.strip()]
    return "\n\n".join([GATEWAY_INSTRUCTIONS, *theirs])


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
        otel_endpoint = checked_paths(manifest)
        self.otel: Any = None
        if otel_endpoint:  # before the trace's claim: a missing extra leaves nothing
            from icore.adapters import OtelExporter
            self.otel = OtelExporter(endpoint=otel_endpoint)
        tpath = manifest.resolve(manifest.trace) if manifest.trace else None
        claim = None
        if tpath is not None:
            # os.path.realpath: Path.resolve raises RuntimeError on a link loop (a trace
            # path that is one is refused by claim_trace, naming the field)
            if manifest.file != "<dict>" and \
                    os.path.realpath(tpath) == os.path.realpath(manifest.file):
                raise manifest.error("the trace would replace the manifest itself; "
                                     "choose another path", "trace")
            try:  # a path no other live gateway writes; an earlier run's file is kept
                claim = claim_trace(tpath)
            except TraceTaken as exc:
                raise manifest.error(str(exc), "trace") from None
            except OSError as exc:
                raise GatewayError(f"cannot write the trace {tpath}: {exc}",
                                   file=str(tpath), path="trace") from None
            tpath = claim.path
        self.trace = GatewayTrace(manifest.name, tpath, claim=claim)
        try:
            self.trace.flush()
        except BaseException:
            self.trace.discard()
            raise
        self.asks = Asks(self.trace, manifest.ask_timeout_s)
        """Upstreams' questions to the clients (elicitation, sampling), forwarded."""
        self.progress = ProgressRelay()  # upstreams' progress of calls, to their clients
        self.lists = ListRelay(self.refresh, self.trace, lambda: self._tg)  # list_changed
        self.upstreams = {
            n: Upstream(n, s.model_copy(update={"cwd": str(manifest.resolve(s.cwd or "."))})
                        if s.command is not None else s,
                        self.progress.before(self.asks.urls.then(self.lists.then(
                            self._resources.on_upstream_notification))),
                        int(manifest.max_message_mb * 2**20), self.asks.callbacks(n))
            for n, s in manifest.upstreams.items()}
        if tpath is not None and manifest.trace and \
                tpath != manifest.resolve(manifest.trace):
            warn_not_shared(manifest, self.trace, tpath)
        self.facts: FactBook | None = None
        self.tools: dict[str, Route] = {}
        self.tool_defs: dict[str, Any] = {}
        self.template_routes: dict[str, Route] = {}
        """Shown URI template (``<upstream>.<template>`` on a clash) -> its route."""
        self._template_items: dict[str, list[Any]] = {}
        self._template_defs: list[Any] = []
        self.listed: set[str] = set()
        """Upstreams whose tools have been listed at least once."""
        self._tmpl_gen: dict[str, int] = {}
        self.resources: dict[str, Route] = {}
        self.prompts: dict[str, Route] = {}
        self._calls = _ToolCalls(self, self._resources)
        self.wire = Wire()  # each request's arrival and answer (QA r6-oa D1)
        self._read_resource = self.wire.handler(self._resources.read_resource)
        self._call_tool = self.wire.handler(self._calls.call_tool)
        self.watch = ManifestWatch(self, self._resources, self._calls)
        """The manifest checked against the listing (at start, after each listing)."""
        self._sessions: weakref.WeakKeyDictionary[Any, SessionView] = \
            weakref.WeakKeyDictionary()
        self._n = itertools.count(1)
        self.single_client = False
        """True when serving stdio: every request comes from the one client."""
        self._stdio_key = _Key("stdio")
        self.tag = secrets.token_hex(3)
        """This gateway process's tag in its session names (``client#1@<tag>``)."""
        self._sid_keys: dict[str, _Key] = {}
        self._anon_key = _Anonymous()  # every HTTP request with no session or identity
        self._tg: anyio.abc.TaskGroup | None = None
        self._failure: str | None = None
        self.server = self._make_server()

    # -- lifecycle ----------------------------------------------------------------------
    async def __aenter__(self) -> Gateway:
        self._tg = self._resources.tg = self.wire.detached.tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for u in self.upstreams.values():
            u.bind(self._tg)
        try:
            await self._start()
            self.server.instructions = instructions(self.upstreams)
            started(self.trace)  # an earlier trace moved aside: said now (QA qa-new15b)
        except BaseException as exc:
            if isinstance(exc, GatewayManifestError):  # refused: it leaves nothing (#29)
                self.trace.discard()
            self._failure = ("interrupted while starting (Ctrl-C or a stop)" if isinstance(
                exc, anyio.get_cancelled_exc_class() | KeyboardInterrupt) else
                f"start failed: {getattr(exc, 'message', None) or exc!r}")
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if exc and isinstance(exc[0], type) and not issubclass(
                exc[0], (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
            self._failure = self._failure or f"{exc[0].__name__}: {exc[1]}"
        await self.wire.detached.wait()  # calls a client left: ended, recorded, first
        # then the trace: a client that stopped it kills it soon after (SDK: 2 s later)
        self.trace.close(self._failure)
        for u in self.upstreams.values():
            u.close()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = self._resources.tg = self.wire.detached.tg = None
        if self.facts is not None:
            with anyio.CancelScope(shield=True):
                await self.facts.stop_serving()
            self.facts.close()
        self._calls.claims.close()
        if self.otel is not None:
            self.otel.flush()
            self.otel.shutdown()

    async def _start(self) -> None:
        failed: dict[str, str] = {}

        async def one(name: str, u: Upstream) -> None:
            try:
                await u.connect()
            except UpstreamError as exc:
                failed[name] = exc.message
                log.warning("%s", exc.message)
                self.trace.note("gateway", exc.message, upstream=name)

        async with anyio.create_task_group() as tg:
            for n, u in self.upstreams.items():
                tg.start_soon(one, n, u)
        if len(failed) == len(self.upstreams):
            raise GatewayError("no upstream could be started: " + "; ".join(
                failed[n] for n in sorted(failed)), upstreams=sorted(failed))
        await self.refresh()
        self.watch.check()
        m = self.manifest
        owners: dict[str, str] = {}
        for t, r in sorted(self.template_routes.items()):  # a templated resource's upstream
            owners.setdefault(re.sub(r"\{[^}]*\}", "*", t), r.upstream)
        for uri, r in self.resources.items():
            owners[uri] = r.upstream
        owners.update(m.owners)
        owners.update(m.facts.owners)
        self.facts = _fact_book(m, owners)
        try:
            ports = await self.facts.start_serving()
        except (IcoreError, OSError) as exc:
            raise GatewayError(f"cannot open the {m.store.backend} store: {exc}",
                               path="store") from None
        self._calls.claims.shared = share_claims(m, self.trace)  # QA qa-new13c S1
        for owner, port in ports.items():
            self.trace.note("gateway", f"serving owner {owner} on port {port}", owner=owner,
                            port=port)
        for spec in m.tools.values():  # the gateway subscribes itself (when supported)
            for d in spec.depends_on:
                if not d.startswith(FACT_SCHEME) and not any(c in d for c in "{*?["):
                    await self._resources.subscribe_upstream(d)
        for key, value in m.facts.initial.items():
            if self.facts.owner_of(key) in self.facts.remote:
                continue  # a remote owner writes its own facts
            if self.facts.head(key) is None:
                rec, _ = self.facts.observe(key, value, type="fact")
                if rec is not None:
                    self.trace.version(rec, "manifest")

    @property
    def unresolved(self) -> Unresolved:
        """Protected names no listed tool has (:class:`ManifestWatch`)."""
        return self.watch.unresolved

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

    async def refresh(self, *, templates_too: bool = False) -> None:
        """List every upstream's tools, resources and prompts again (names routed).

        Resource templates are listed again when an upstream (re)connected, or with
        ``templates_too``.
        """
        found: dict[str, dict[str, list[tuple[str, Any]]]] = {
            "tools": {}, "resources": {}, "prompts": {}}
        templates: dict[str, list[Any]] = {}
        for n, u in self.upstreams.items():
            if u.session is None:
                try:
                    await u.connect()
                except UpstreamError:
                    continue
            ok = True
            for what in found:
                try:
                    items = await self._list(u, what)
                except (UpstreamError, Exception) as exc:  # an upstream's bad listing
                    log.warning("upstream %s: %s/list failed: %r", n, what, exc)
                    ok = ok and what != "tools"
                    continue
                for it in items:
                    ident = it.uri if what == "resources" else it.name
                    found[what].setdefault(ident, []).append((n, it))
            if templates_too or self._tmpl_gen.get(n) != u.generation:
                templates[n] = await _templates(u)
                self._tmpl_gen[n] = u.generation
            if ok:
                self.listed.add(n)
        tools, tool_defs = _namespaced(found["tools"], "name")
        defs = dict(tool_defs)
        res, res_defs = _namespaced(found["resources"], "uri")
        prompts, prompt_defs = _namespaced(found["prompts"], "name")
        self._resource_defs = [d for _, d in res_defs]
        self._prompt_defs = [d for _, d in prompt_defs]
        if defs != self.tool_defs:
            self._calls.args.clear()
        self.tools, self.tool_defs, self.resources, self.prompts = tools, defs, res, prompts
        if templates:
            self._template_items.update(templates)
            self.template_routes, tdefs = _namespaced_templates(self._template_items)
            self._template_defs = [d for _, d in tdefs]
        if self.watch.checked:
            self.watch.recheck()

    # -- sessions -----------------------------------------------------------------------
    def view(self, ctx: Any) -> SessionView:
        """The :class:`SessionView` of the request's client session (made on first use).

        Its id is ``<client>#<n>@<tag>``: ``tag`` names this gateway process, so two
        gateways sharing a store (and their traces) never share a session name.
        """
        key = self._client_key(ctx)
        v = self._sessions.get(key)
        if v is None:
            params = getattr(ctx.session, "client_params", None)
            info = getattr(params, "client_info", None)
            client = (key.client if isinstance(key, _Key) and key.client else None) or \
                (ANONYMOUS_HTTP if key is self._anon_key else None) or \
                getattr(info, "name", None) or "client"
            assert self.facts is not None
            v = self.facts.session(f"{client}#{next(self._n)}@{self.tag}")
            self._sessions[key] = v
            self.trace.session(v.sid, client)
        self.lists.seen(ctx.session)
        if self.single_client:  # an upstream's roots/list outside a call goes there
            self.asks.sole = (ctx, v.sid)
        return v

    def _client_key(self, ctx: Any) -> Any:
        """What identifies the request's client session.

        Over stdio the process has exactly one client. Over HTTP, in this order: the MCP
        session id (``Mcp-Session-Id``, protocol revisions up to 2025-11-25); the
        authenticated principal of the request's bearer token (client id, issuer,
        subject: the SDK's ``principal_components``, what the 2026-07-28 revision, which
        has no sessions, leaves as the identity of a client across requests; see
        ``http.clients``); else one key for all requests with neither (:meth:`anonymous`:
        refused; one agent ``anonymous-http#<n>``). A session opened with a token is
        named by the token's client, not by its ``clientInfo``.
        """
        if self.single_client:
            return self._stdio_key
        conn = getattr(ctx.session, "_connection", None) or ctx.session
        sid = getattr(conn, "session_id", None)
        if isinstance(sid, str) and sid:
            k = self._sid_keys.get(sid)
            if k is None:
                who = _principal()
                k = self._sid_keys[sid] = _Key(sid, who[1] if who is not None else None)
            return k
        who = _principal()
        if who is not None:
            k = self._sid_keys.get(who[0])
            if k is None:
                k = self._sid_keys[who[0]] = _Key(who[0], who[1])
            return k
        return self._anon_key

    def anonymous(self, ctx: Any) -> bool:
        """True when the request has neither a session nor a client identity.

        (HTTP, protocol 2026-07-28, no bearer token): its reads cannot be tied to its
        calls.
        """
        return not self.single_client and not isinstance(self._client_key(ctx), _Key)

    # -- the SDK server -----------------------------------------------------------------
    def _make_server(self) -> Any:
        from mcp.server import Server
        server = Server(
            self.manifest.name, version="icore",
            instructions=GATEWAY_INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._resources.subscribe,
            on_unsubscribe_resource=self._resources.unsubscribe,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)
        self.asks.listen_roots(server, self)  # a client's roots/list_changed
        advertise(server)  # listChanged: upstreams' list changes are relayed (qa-new15b)
        return self.wire.detached.listen(server, self)  # and its notifications/cancelled

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
        await self.refresh(templates_too=True)
        return ListResourceTemplatesResult(resource_templates=list(self._template_defs))

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



def _fact_book(m: GatewayManifest, owners: Mapping[str, str]) -> FactBook:
    """The owners' stores of ``m`` (``store:``) for the facts ``owners`` names.

    Raises:
        GatewayManifestError: ``store.path`` holds a database that is not an icore store
            (a user's own: never touched), naming ``store.path``.
        GatewayError: the store cannot be opened (naming ``store``).
    """
    backend = m.store.backend
    path = m.resolve(m.store.path) if m.store.path else None
    remote = m.store.endpoints() if backend == "owner-service" else None
    certs = m.resolve(m.store.certs_dir) if m.store.certs_dir else None
    try:
        return FactBook(owners, backend=backend, path=path, gate_timeout_s=m.gate_timeout_s,
                        remote=remote, identity=m.store.identity, certs_dir=certs,
                        serve=m.store.served(), servers=m.store.servers,
                        prefix=m.store.prefix)
    except (IcoreError, OSError) as exc:
        if isinstance(exc, StoreError) and backend == "sqlite" and \
                exc.message.startswith("not an icore store"):  # a user's own database
            raise m.error(f"{exc.fields.get('path', path)}: {exc.message}", "store",
                          "path") from None
        raise GatewayError(f"cannot open the {backend} store: {exc}", path="store") from None


async def _templates(u: Upstream) -> list[Any]:
    """The URI templates ``u`` serves (none when it has no resources or fails)."""
    caps = u.capabilities
    if caps is None or caps.resources is None:
        return []
    try:
        r = await u.request("resources/templates/list",
                            lambda s: s.list_resource_templates())
    except (UpstreamError, Exception) as exc:  # an upstream's bad listing
        log.debug("upstream %s: resources/templates/list failed: %r", u.name, exc)
        return []
    return list(r.resource_templates)


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


def _namespaced_templates(found: Mapping[str, list[Any]]
                          ) -> tuple[dict[str, Route], list[tuple[str, Any]]]:
    """Routes and definitions of the upstreams' resource templates (QA r5-mcp D5).

    Two templates clash when they have the same shape (their placeholders aside:
    ``oven://{oven}/slot`` and ``oven://{id}/slot`` both name ``oven://x/slot``): each
    upstream's is then shown as ``<upstream>.<template>`` (a URI whose scheme is
    ``<upstream>.<scheme>``), as a clashing static URI is. Returns the routes by shown
    template (to the upstream and its template) and the (shown, definition) pairs.
    """
    by_shape: dict[str, set[str]] = {}
    for up, ts in found.items():
        for t in ts:
            by_shape.setdefault(template_shape(t.uri_template), set()).add(up)
    routes: dict[str, Route] = {}
    defs: list[tuple[str, Any]] = []
    for up, ts in found.items():
        for t in ts:
            raw = t.uri_template
            shown = raw if len(by_shape[template_shape(raw)]) == 1 else f"{up}.{raw}"
            if shown in routes:
                continue
            routes[shown] = Route(up, raw)
            defs.append((shown, t if shown == raw else
                         t.model_copy(update={"uri_template": shown})))
    return routes, defs


ANONYMOUS_HTTP = "anonymous-http"
"""The client name of the HTTP requests with neither a session nor an identity."""


class _Anonymous:
    """The session key of every HTTP request without a session or an identity."""

    __slots__ = ("__weakref__",)


class _Key:
    """A hashable, weak-referenceable stand-in for a string session key.

    Attributes:
        name: the key (an MCP session id, or ``principal:<components>``).
        client: the client's name when the key is an authenticated principal.
    """

    __slots__ = ("__weakref__", "client", "name")

    def __init__(self, name: str, client: str | None = None) -> None:
        self.name = name
        self.client = client


def _principal() -> tuple[str, str] | None:
    """``(key, client id)`` of the request's authenticated principal, else None.

    The bearer token the SDK's auth middleware verified (``get_access_token``), as the
    SDK identifies a principal (``principal_components``: client id, issuer, subject).
    """
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
        from mcp.server.auth.provider import principal_components
    except ImportError:  # pragma: no cover - the SDK always has them
        return None
    token = get_access_token()
    if token is None:
        return None
    return "principal:" + json.dumps(list(principal_components(token))), token.client_id
