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
"""

from __future__ import annotations

import itertools
import json
import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from icore.errors import IcoreError
from icore.fence import Reason
from icore.mcp._facts import (
    FactBook,
    SessionView,
    Verdict,
    describe,
    expand_deps,
)
from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayError, GatewayManifest, ToolSpec
from icore.mcp._session_log import GatewayTrace
from icore.mcp._upstream import Upstream, UpstreamError

log = logging.getLogger("icore.mcp")

PUT_FACT = "icore_put_fact"
GET_FACT = "icore_get_fact"
_HINT = {
    Reason.STALE.value: "the facts this call was planned from changed; their fresh values "
    "are below. Re-plan from them and call again (this is the one replan)",
    Reason.SECOND_CHANGE.value: "the facts changed again after the one replan. Do not "
    "retry with this plan: read the changed resources again (a new plan) or report it",
    "not_read": "this call depends on facts this session has not read; their current "
    "values are below (now read). Plan from them and call again",
    Reason.MISSING_BOUNDARY.value: "the call does not derive from a version of every fact "
    "the tool depends on; read them and call again",
    Reason.OWNER_UNAVAILABLE.value: "an owner of the facts this call depends on did not "
    "answer; the call was not made (fail closed). Try again later",
    Reason.ARGS_MISMATCH.value: "the call's arguments could not be bound to a plan",
    Reason.NO_OWNER.value: "a fact this call depends on has no owner in the gateway "
    "manifest (a configuration error); do not retry",
}


@dataclass(frozen=True, slots=True)
class Route:
    """Where one listed name goes: the upstream and the name it has there."""

    upstream: str
    name: str


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


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
        self.upstreams = {
            n: Upstream(n, s.model_copy(update={"cwd": str(manifest.resolve(s.cwd or "."))})
                        if s.command is not None else s, self._on_upstream_notification)
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
        self._validators: dict[str, Any] = {}
        self._static_deps = {n: frozenset(t.depends_on) for n, t in manifest.tools.items()
                             if not t.globs}
        self._sessions: weakref.WeakKeyDictionary[Any, SessionView] = \
            weakref.WeakKeyDictionary()
        self._subscribers: weakref.WeakKeyDictionary[Any, set[str]] = \
            weakref.WeakKeyDictionary()
        self._notifiers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._n = itertools.count(1)
        self.single_client = False
        """True when serving stdio: every request comes from the one client."""
        self._stdio_key = _Key("stdio")
        self._sid_keys: dict[str, _Key] = {}
        self._tasks = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None
        self.server = self._make_server()

    # -- lifecycle ----------------------------------------------------------------------
    async def __aenter__(self) -> Gateway:
        self._tg = anyio.create_task_group()
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
            self._tg = None
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
            self._validators.clear()
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
            on_subscribe_resource=self._subscribe, on_unsubscribe_resource=self._unsubscribe,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    def _fact_tools(self) -> list[Any]:
        from mcp_types import Tool
        if not self.manifest.facts.tools or not self.manifest.facts.owners:
            return []
        return [
            Tool(name=PUT_FACT, description="Publish a new version of a shared fact "
                 "(key fact://...) that this gateway serves; other sessions' plans that "
                 "read the old version become stale.",
                 input_schema={"type": "object", "required": ["key", "value"],
                               "properties": {"key": {"type": "string"}, "value": {}}}),
            Tool(name=GET_FACT, description="Read the current version of a shared fact "
                 "(key fact://...); the read is recorded as the version this session saw.",
                 input_schema={"type": "object", "required": ["key"],
                               "properties": {"key": {"type": "string"}}}),
        ]

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListToolsResult
        self.view(ctx)
        await self.refresh()
        return ListToolsResult(tools=[*self.tool_defs.values(), *self._fact_tools()])

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

    # -- resources ------------------------------------------------------------------------
    def _route_uri(self, uri: str) -> Route | None:
        r = self.resources.get(uri)
        if r is not None:
            return r
        # a template resource: the upstream whose template matches, else the only one
        ups = [n for n, u in self.upstreams.items()
               if u.capabilities is not None and u.capabilities.resources is not None]
        return Route(ups[0], uri) if len(ups) == 1 else None

    async def fetch_resource(self, uri: str, source: str) -> tuple[Any, Any]:
        """Read ``uri`` from its upstream; commit a new version when it changed.

        Returns:
            ``(ReadResourceResult, record or None)``.

        Raises:
            UpstreamError: the upstream failed; MCPError: it answered an error.
            GatewayError: no upstream serves ``uri``.
        """
        route = self._route_uri(uri)
        if route is None:
            raise GatewayError(f"no upstream serves resource {uri}", uri=uri)
        u = self.upstreams[route.upstream]
        result = await u.request("resources/read", lambda s: s.read_resource(route.name))
        rec = None
        if self.facts is not None:
            content = {"uri": uri, "contents": [_dump(c) for c in result.contents]}
            try:
                rec, created = self.facts.observe(uri, content)
            except IcoreError as exc:
                raise GatewayError(f"cannot version resource {uri}: {exc}", uri=uri) from None
            if created and rec is not None:
                self.trace.version(rec, source)
                await self._notify_subscribers(uri)
        return result, rec

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ReadResourceResult, TextResourceContents
        view = self.view(ctx)
        uri = str(params.uri)
        if uri.startswith(FACT_SCHEME):
            rec = self._read(view, uri)
            if rec is None:
                raise _invalid(f"Unknown fact: {uri}")
            self.trace.read(view.sid, uri, rec)
            value = rec.content
            return ReadResourceResult(
                contents=[TextResourceContents(uri=uri, mime_type="application/json",
                                               text=json.dumps(value))],
                _meta={"icore/version": {"record": rec.id, "seq": rec.seq}})
        try:
            result, rec = await self.fetch_resource(uri, view.sid)
        except UpstreamError as exc:
            self.trace.note(view.sid, f"read {uri} failed: {exc}")
            raise _internal(str(exc)) from None
        except GatewayError as exc:
            raise _invalid(str(exc)) from None
        if rec is not None:
            seen = self._read(view, uri)
            if seen is not None and seen.id != rec.id:
                # another session's read committed a newer version in between: serve the
                # version this session is recorded to have seen
                result = _result_of(seen, result)
                rec = seen
            meta = dict(result.meta or {})
            meta["icore/version"] = {"record": rec.id, "seq": rec.seq}
            result = result.model_copy(update={"meta": meta})
        self.trace.read(view.sid, uri, rec)
        return result

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        from mcp_types import EmptyResult
        uri = str(params.uri)
        conn = self._client_key(ctx)
        self._subscribers.setdefault(conn, set()).add(uri)
        self._notifiers[conn] = ctx.session
        route = self._route_uri(uri)
        if route is not None:
            await self._upstream_subscribe(route)
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp_types import EmptyResult
        self._subscribers.get(self._client_key(ctx), set()).discard(str(params.uri))
        return EmptyResult()

    async def _upstream_subscribe(self, route: Route) -> None:
        u = self.upstreams[route.upstream]
        caps = u.capabilities
        if caps is None or caps.resources is None or not caps.resources.subscribe:
            return
        try:
            await u.request("resources/subscribe", lambda s: s.subscribe_resource(route.name))
        except Exception as exc:  # subscription is an optimisation: reads still version
            log.debug("upstream %s: subscribe %s failed: %r", u.name, route.name, exc)

    async def _notify_subscribers(self, uri: str) -> None:
        for conn, uris in list(self._subscribers.items()):
            session = self._notifiers.get(conn)
            if uri in uris and session is not None:
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # a gone client: drop it
                    log.debug("notify %s failed: %r", uri, exc)

    async def _on_upstream_notification(self, upstream: str, message: Any) -> None:
        method = getattr(message, "method", None)
        if method != "notifications/resources/updated":
            return
        uri = str(message.params.uri)
        shown = next((k for k, r in self.resources.items()
                      if r.upstream == upstream and r.name == uri), uri)
        if self._tg is not None:
            self._tg.start_soon(self._reread, shown, f"upstream {upstream} (updated)")

    async def _reread(self, uri: str, source: str) -> None:
        try:
            await self.fetch_resource(uri, source)
        except Exception as exc:
            self.trace.note("gateway", f"re-read of {uri} after an update failed: {exc}")

    # -- tools ----------------------------------------------------------------------------
    def _validator(self, name: str) -> Any:
        v = self._validators.get(name)
        if v is None:
            import jsonschema
            schema = getattr(self.tool_defs[name], "input_schema", None) or {"type": "object"}
            cls = jsonschema.validators.validator_for(schema)
            v = cls(schema)
            self._validators[name] = v
        return v

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        view = self.view(ctx)
        name = params.name
        args = dict(params.arguments or {})
        if name in (PUT_FACT, GET_FACT) and self._fact_tools():
            return await self._fact_tool(view, name, args)
        if name not in self.tools:
            await self.refresh()
        route = self.tools.get(name)
        if route is None:
            self.trace.note(view.sid, f"unknown tool {name!r} refused")
            raise _invalid(f"Unknown tool: {name}")
        problem = self._arg_problem(name, args)
        if problem is not None:
            self.trace.call(view.sid, name, args, f"REFUSED: {problem}", error=True,
                            refused=True)
            return _error_result(f"Invalid arguments for tool {name}: {problem}")
        spec = self.manifest.tools.get(name)
        task = f"{view.sid}/{next(self._tasks)}"
        u = self.upstreams[route.upstream]

        async def forward(**a: Any) -> Any:
            return await u.request("tools/call", lambda s: s.call_tool(
                route.name, a, meta=_forward_meta(params.meta)))

        try:
            if spec is None:
                result = await forward(**args)
            else:
                result = await self._protected(view, name, spec, args, task, forward)
                if isinstance(result, _Refused):
                    return result.result
        except UpstreamError as exc:
            self.trace.call(view.sid, name, args, f"UPSTREAM FAILED: {exc}", error=True,
                            task=task)
            return _error_result(str(exc))
        except Exception as exc:  # the upstream answered a JSON-RPC error
            msg = getattr(exc, "message", None) or str(exc)
            self.trace.call(view.sid, name, args, f"UPSTREAM ERROR: {msg}", error=True,
                            task=task)
            return _error_result(f"upstream {route.upstream} refused {name}: {msg}")
        self.trace.call(view.sid, name, args, _result_text(result),
                        error=bool(result.is_error), task=task)
        if spec is not None:
            for w in spec.writes:
                await self._reread(w, f"{view.sid} via {name}")
        return result

    def _arg_problem(self, name: str, args: Mapping[str, Any]) -> str | None:
        import jsonschema
        try:
            err = jsonschema.exceptions.best_match(self._validator(name).iter_errors(args))
        except jsonschema.exceptions.SchemaError:
            return None  # the upstream's schema is broken: let the upstream judge
        if err is None:
            return None
        where = "/".join(str(p) for p in err.absolute_path) or "<arguments>"
        return f"{where}: {err.message}"

    def _read(self, view: SessionView, key: str) -> Any:
        assert self.facts is not None
        try:
            return self.facts.read(view, key)
        except IcoreError as exc:
            raise _internal(f"cannot read {key}: {exc}") from None

    async def _protected(self, view: SessionView, name: str, spec: ToolSpec,
                         args: Mapping[str, Any], task: str, forward: Any) -> Any:
        """Run one protected call through the gate; a refusal comes back as _Refused."""
        assert self.facts is not None
        seen = view.seen
        static = self._static_deps.get(name)
        try:
            if static is not None:  # D(a) without globs or placeholders: the same each call
                deps = static
            else:
                # the known keys are only needed to match globs (a scan of every owner's
                # heads)
                known: Any = (set(self.facts.known_keys()) | set(seen)) if spec.globs else ()
                deps = expand_deps(spec.depends_on, args, known)
        except IcoreError as exc:
            self.trace.call(view.sid, name, args, f"REFUSED: {exc.message}", error=True,
                            task=task, blocked=True)
            return _Refused(_error_result(f"PlanFence blocked {name} "
                                          f"(incomplete_declaration): {exc.message}"))
        if not deps:
            msg = (f"PlanFence blocked {name} (incomplete_declaration): D(a) matches no "
                   f"known fact; read the resources it depends on first "
                   f"({', '.join(spec.depends_on)})")
            self.trace.call(view.sid, name, args, msg, error=True, task=task, blocked=True)
            return _Refused(_error_result(msg))
        for k in sorted(deps):
            if k not in seen and not k.startswith(FACT_SCHEME) \
                    and self.facts.owner_of(k) is not None and self.facts.head(k) is None:
                # never read by anyone yet: read it, so the refusal can hand it over
                try:
                    await self.fetch_resource(k, f"{view.sid} via {name}")
                except Exception as exc:
                    log.debug("pre-read of %s failed: %r", k, exc)
        n0 = len(view.agent.log)
        try:
            v: Verdict = await self.facts.execute(view, name, deps, args, forward)
        except Exception:  # authorized, then the upstream failed: keep the decisions
            self.trace.decisions(view.sid, name, list(view.agent.log)[n0:], task=task)
            raise
        # an executed call's lines are written with its result line (one write per call)
        self.trace.verdict(view.sid, name, v, args, task=task, flush=not v.call.executed)
        if self.otel is not None:
            for d in v.decisions:  # child spans of the SDK's tools/call server span
                self.otel.decision(d)
        if v.call.executed:
            return v.call.value
        reason = v.reason
        lines = [f"PlanFence blocked {name} ({reason}): "
                 f"{_HINT.get(reason, 'the call was refused (fail closed)')}."]
        if v.changed and reason != Reason.SECOND_CHANGE.value:
            lines.append("Current values:")
            lines.extend(f"- {describe(r)}" for r in v.changed.values())
        elif v.changed:
            lines.append("Changed: " + ", ".join(sorted(v.changed)))
        if v.call.detail and reason not in (Reason.STALE.value, "not_read"):
            lines.append(f"Detail: {v.call.detail}")
        return _Refused(_error_result("\n".join(lines), meta={"icore/gate": {
            "reason": reason, "deps": list(v.deps),
            "changed": {k: {"record": r.id, "seq": r.seq} for k, r in v.changed.items()}}}))

    async def _fact_tool(self, view: SessionView, name: str, args: dict[str, Any]) -> Any:
        from mcp_types import CallToolResult, TextContent
        assert self.facts is not None
        key = args.get("key")
        if not isinstance(key, str) or not key.startswith(FACT_SCHEME):
            return _error_result(f"{name}: key must be a string starting with {FACT_SCHEME}")
        if self.facts.owner_of(key) is None:
            return _error_result(f"{name}: fact {key} has no owner in the gateway manifest "
                                 "(facts.owners)")
        if name == GET_FACT:
            rec = self._read(view, key)
            if rec is None:
                return _error_result(f"{GET_FACT}: no fact {key} yet")
            self.trace.read(view.sid, key, rec)
            value = rec.content
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(value))],
                                  structured_content={"key": key, "value": value,
                                                      "seq": rec.seq})
        if "value" not in args:
            return _error_result(f"{PUT_FACT}: value is required")
        if self.facts.owner_of(key) in self.facts.remote:
            return _error_result(f"{PUT_FACT}: fact {key} is owned by "
                                 f"{self.facts.owner_of(key)}, a team agent serving its own "
                                 "store; it writes the fact there")
        try:
            rec, created = self.facts.observe(key, args["value"], type="fact")
        except IcoreError as exc:
            return _error_result(f"{PUT_FACT}: {exc}")
        assert rec is not None
        if created:
            self.trace.version(rec, view.sid)
            await self._notify_subscribers(key)
        self._read(view, key)  # the writer knows the value it wrote
        self.trace.call(view.sid, PUT_FACT, args, f"{key} seq {rec.seq}", error=False)
        return CallToolResult(content=[TextContent(type="text", text=f"{key} is now version "
                                                   f"{rec.seq}")],
                              structured_content={"key": key, "seq": rec.seq})


_RESERVED = "io.modelcontextprotocol/"


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


def _forward_meta(meta: Any) -> Any:
    """The client's ``_meta`` for the upstream.

    Trace context (``traceparent``, ``tracestate``, ``baggage``) and the application's
    own keys are kept; dropped: the
    protocol-reserved ``io.modelcontextprotocol/*`` envelope of the client's
    connection (the upstream connection has its own) and without ``progressToken``
    (progress belongs to the client's request, not the gateway's).
    """
    if not meta:
        return None
    raw = meta if isinstance(meta, Mapping) else meta.model_dump(by_alias=True,
                                                                  exclude_none=True)
    out = {k: v for k, v in raw.items()
           if not k.startswith(_RESERVED) and k != "progressToken"}
    return out or None


class _Key:
    """A hashable, weak-referenceable stand-in for a string session key."""

    __slots__ = ("__weakref__", "name")

    def __init__(self, name: str) -> None:
        self.name = name


@dataclass(frozen=True, slots=True)
class _Refused:
    result: Any


def _result_of(rec: Any, like: Any) -> Any:
    """A ReadResourceResult carrying the contents recorded in ``rec``."""
    contents = rec.content.get("contents") if isinstance(rec.content, dict) else None
    if not isinstance(contents, list):
        return like
    return like.model_validate({**like.model_dump(by_alias=True, exclude_none=True),
                                "contents": contents})


def _error_result(text: str, meta: dict[str, Any] | None = None) -> Any:
    from mcp_types import CallToolResult, TextContent
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                          _meta=meta)


def _result_text(result: Any) -> str:
    parts = [getattr(c, "text", None) or f"<{getattr(c, 'type', 'content')}>"
             for c in result.content]
    return "\n".join(parts)


def _invalid(msg: str) -> Exception:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS
    return MCPError(INVALID_PARAMS, msg)


def _internal(msg: str) -> Exception:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR
    return MCPError(INTERNAL_ERROR, msg)
