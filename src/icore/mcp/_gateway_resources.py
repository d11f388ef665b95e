"""The gateway's resources: reads versioned as facts, subscriptions, update notifications.

Every resource read through the gateway is a version of a fact (:meth:`FactBook.observe`):
a changed content commits a new version, owned by the upstream serving it, and the
session's read is recorded as the version it saw (planfence Sec. 4: the reads a plan
derives from). A ``fact://`` URI is a shared fact served by the gateway itself.
Subscribers of a URI are notified when a new version is committed.

With an upstream's ``trust_updates`` (opt-in), a resource it serves is *trusted* while the
gateway holds a live subscription to it (accepted by the upstream on the current
connection, its notification channel open since), has read it since then, and has seen no
``notifications/resources/updated`` for it since that read (:meth:`_Resources.trusted`): a
protected call then skips reading it again. Any loss (a crash, an exit while idle, a
reconnect, a lost GET stream, a failed subscription), update, or request forwarded to that
upstream that may write (a ``tools/call``: the upstream may notify its change only after
answering) makes it untrusted: read again (fail closed).
"""

from __future__ import annotations

import json
import logging
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc

from icore.errors import IcoreError
from icore.mcp._facts import FactBook, SessionView
from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayError, GatewayManifest
from icore.mcp._gateway_read_tool import declared
from icore.mcp._session_log import GatewayTrace
from icore.mcp._upstream import Upstream
from icore.mcp._upstream_answer import garbage_text, upstream_refused
from icore.mcp._upstream_failed import UpstreamError

log = logging.getLogger("icore.mcp")

REREAD_CONCURRENCY = 8
"""At most this many resources of one call's D(a) are read again from upstreams at once."""

STREAM_GRACE_S = 2.0
"""How long after an accepted subscription a trusted HTTP upstream's GET stream may take to
open before the gateway warns that trust is not in effect, seconds."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where one listed name goes: the upstream and the name it has there."""

    upstream: str
    name: str


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def uri_key(uri: str) -> str:
    """One spelling of ``uri`` for matching an update notification to the reads.

    RFC 3986 equivalences, made coarser on purpose (two URIs taken as one only make
    the gateway read both again after either's update): scheme and authority in lower
    case, ``%XX`` of an unreserved character decoded (and any other in upper case), a
    trailing ``/`` of the path dropped (``http://h`` = ``http://h/``).
    """
    def escape(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else m.group(0).upper()

    text = re.sub(r"%([0-9A-Fa-f]{2})", escape, uri)
    scheme, sep, rest = text.partition(":")
    if not sep:
        return text.rstrip("/")
    if rest.startswith("//"):
        auth, slash, path = rest[2:].partition("/")
        rest = "//" + auth.lower() + slash + path
    return scheme.lower() + ":" + rest.rstrip("/")


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


class _Host(Protocol):
    """What the resource side reads of its gateway (routes, upstreams, facts, trace)."""

    manifest: GatewayManifest
    upstreams: dict[str, Upstream]
    resources: dict[str, Route]
    template_routes: dict[str, Route]
    facts: FactBook | None
    trace: GatewayTrace

    def view(self, ctx: Any) -> SessionView:
        """The request's session view."""
        ...


class _Resources:
    """The resource side of a :class:`~icore.mcp.Gateway` (held by it).

    Args:
        host: the gateway.
        client_key: what identifies a request's client session (subscriptions are kept
            per client).
    """

    def __init__(self, host: _Host, client_key: Callable[[Any], Any]) -> None:
        self.gw = host
        self._client_key = client_key
        self._subscribers: weakref.WeakKeyDictionary[Any, set[str]] = \
            weakref.WeakKeyDictionary()
        self._notifiers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.tg: anyio.abc.TaskGroup | None = None
        """The gateway's task group while it runs (re-reads after an upstream's update)."""
        self._limit = anyio.CapacityLimiter(REREAD_CONCURRENCY)
        self._subscribed: set[tuple[str, int, str]] = set()
        self._live: set[tuple[str, int, str]] = set()
        """(upstream, generation, name) of the subscriptions an upstream accepted."""
        self._stream_checked: set[tuple[str, int]] = set()
        """(upstream, generation) whose notification stream was checked (:meth:`_check_stream`)."""
        self._updates: dict[tuple[str, str], int] = {}
        """(upstream, its URI as :func:`uri_key` spells it) -> how many update
        notifications the gateway has seen for it. Keyed as the upstream names the
        resource (never the shown form or a template), in one spelling, so a
        notification spelling the URI another way (``http://h`` / ``http://h/``, host
        case, ``%41``) still finds it."""
        self._stray: dict[str, int] = {}
        """upstream -> notifications naming a URI none of its trusted reads has: every
        resource of that upstream is read again after one (fail closed)."""
        self._fresh: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        """(upstream, its URI) -> the watch state (:meth:`_watch_state`) its last read
        was made under."""
        self.watched: Callable[[str], bool] = lambda uri: False
        self.needed: Callable[[str], bool] = lambda uri: declared(host.manifest, uri)
        """Whether a protected tool's ``depends_on`` or ``writes`` can name a URI: a
        resource too large to version passes through unversioned only when no protected
        call depends on it or writes it."""
        """Whether the gateway subscribes itself to a URI it reads (a resource some D(a)
        of the manifest names; set by the gateway)."""

    def read(self, view: SessionView, key: str, stamp: Any = None) -> Any:
        """The version of ``key`` the session reads now (recorded as seen), or None.

        ``stamp``: the request it is read for (its answer's moment decides which later
        calls may derive from it; :class:`~icore.mcp._gateway_order.Exchange`).

        Raises:
            MCPError: the store failed (INTERNAL_ERROR).
        """
        assert self.gw.facts is not None
        try:
            return self.gw.facts.read(view, key, stamp)
        except IcoreError as exc:
            raise _internal(f"cannot read {key}: {exc}") from None

    def version_meta(self, rec: Any) -> dict[str, Any]:
        """``_meta["icore/version"]`` of a read: the record and the key's version number.

        ``{"record": id, "version": n}``, ``n`` counted as the refusals count it (1: the
        key's first version; :meth:`FactBook.version_of`), so a model sees one numbering
        (QA qa-new9b); ``{"record": id, "seq": owner seq}`` when the count is unknown (an
        owner's store elsewhere), as the refusals then say ``owner seq``.
        """
        assert self.gw.facts is not None
        n = self.gw.facts.version_of(rec)
        return {"record": rec.id, "version": n} if n is not None else \
            {"record": rec.id, "seq": rec.seq}

    def route_uri(self, uri: str) -> Route | None:
        """The route of ``uri`` (a listed resource, else the only upstream serving any).

        A URI no upstream lists is routed by the resource templates (shown forms:
        ``<upstream>.<uri>`` for a template two upstreams serve, routed to that upstream
        with the prefix removed); None when templates of several upstreams match it, or
        none does and several upstreams serve resources.
        """
        r = self.gw.resources.get(uri)
        if r is not None:
            return r
        from icore.mcp._gateway_checks import template_regex
        hits = {(rt.upstream, shown != rt.name) for shown, rt in
                self.gw.template_routes.items() if template_regex(shown).fullmatch(uri)}
        if len(hits) == 1:
            up, prefixed = hits.pop()
            return Route(up, uri[len(up) + 1:] if prefixed else uri)
        if hits:
            return None
        ups = [n for n, u in self.gw.upstreams.items()
               if u.capabilities is not None and u.capabilities.resources is not None]
        return Route(ups[0], uri) if len(ups) == 1 else None

    def shown_uri(self, upstream: str, uri: str) -> str:
        """The URI clients see for ``uri`` of ``upstream`` (namespaced on a clash).

        Always a concrete URI (``uri`` itself or ``<upstream>.<uri>``), never the template
        that serves it: what a client reads, subscribes to and is notified of.
        """
        from icore.mcp._gateway_checks import template_regex
        for shown, r in self.gw.resources.items():
            if r.upstream == upstream and r.name == uri:
                return shown
        for shown, r in self.gw.template_routes.items():
            if r.upstream == upstream and template_regex(r.name).fullmatch(uri):
                return uri if shown == r.name else f"{upstream}.{uri}"
        return uri

    def _unrouted(self, uri: str) -> GatewayError:
        """Why no upstream serves ``uri``: several do (name the namespaced forms), or none."""
        from icore.mcp._gateway_checks import clashed_routes, namespaced_forms
        clashed = clashed_routes(self.gw.resources, self.gw.template_routes)
        forms = sorted({f if f in self.gw.resources else f"{clashed[f][0]}.{uri}"
                        for f in namespaced_forms(uri, clashed)})
        if not forms:
            return GatewayError(f"no upstream serves resource {uri}", uri=uri)
        return GatewayError(f"resource {uri} is served by several upstreams, so it is "
                            f"shown namespaced by upstream: read {' or '.join(forms)}",
                            uri=uri, candidates=forms)

    async def fetch(self, uri: str, source: str) -> tuple[Any, Any]:
        """Read ``uri`` from its upstream; commit a new version when it changed.

        Returns:
            ``(ReadResourceResult, record or None)``.

        Raises:
            UpstreamError: the upstream failed; MCPError: it answered an error.
            GatewayError: no upstream serves ``uri``.
        """
        route = self.route_uri(uri)
        if route is None:
            raise self._unrouted(uri)
        u = self.gw.upstreams[route.upstream]
        watch = self._watch_state(route, u)
        result = await u.request("resources/read", lambda s: s.read_resource(route.name))
        if route.name != uri:  # namespaced: the contents named as the client asked
            result = result.model_copy(update={"contents": [
                c.model_copy(update={"uri": uri}) if c.uri == route.name else c
                for c in result.contents]})
        if self.tg is not None and self.watched(uri) \
                and (route.upstream, u.generation, route.name) not in self._subscribed:
            self.tg.start_soon(self.subscribe_upstream, uri)
        rec = None
        if self.gw.facts is not None:
            content = {"uri": uri, "contents": [_dump(c) for c in result.contents]}
            try:
                rec, created = self.gw.facts.observe(uri, content)
            except IcoreError as exc:
                if "size" not in exc.fields:
                    raise GatewayError(f"cannot version resource {uri}: {exc}",
                                       uri=uri) from None
                if self.needed(uri):
                    raise _too_large(uri, exc.fields["size"], exc.fields["limit"]) from None
                rec, created = None, False  # no protected call depends on it: unversioned
            if created and rec is not None:
                self.gw.trace.version(rec, source)
                await self.notify_subscribers(uri)
        if watch is not None and watch == self._watch_state(route, u):
            self._fresh[route.upstream, uri_key(route.name)] = watch  # no loss or update
        return result, rec

    def _watch_state(self, route: Route, u: Upstream
                     ) -> tuple[int, int, int, int] | None:
        """The watch state under which ``route`` may be trusted, or None.

        ``(channel epoch, write epoch, updates seen, stray updates of the upstream)``.

        None unless its upstream has ``trust_updates``, declares ``resources.subscribe``,
        accepted the gateway's subscription on this connection, its notification
        channel is open and its connection alive (:meth:`Upstream.alive`). The write
        epoch moves with every request forwarded to it that may write (a ``tools/call``):
        a read made before such a request ended is not trusted after it.
        """
        if not u.spec.trust_updates or not u.watch_live or u.session is None or \
                (route.upstream, u.generation, route.name) not in self._live or \
                not u.alive():
            return None
        return (u.watch_epoch, u.write_epoch,
                self._updates.get((route.upstream, uri_key(route.name)), 0),
                self._stray.get(route.upstream, 0))

    def trusted(self, uri: str) -> bool:
        """True when a protected call need not read ``uri`` again (``trust_updates``).

        The gateway holds a live subscription to it, read it under that subscription,
        and has had neither an update notification nor a loss of the channel since.
        """
        route = self.route_uri(uri)
        if route is None:
            return False
        st = self._watch_state(route, self.gw.upstreams[route.upstream])
        return st is not None and self._fresh.get((route.upstream, uri_key(route.name))) == st

    async def read_resource(self, ctx: Any, params: Any, stamp: Any = None) -> Any:
        """``resources/read``: the content, versioned; ``_meta`` names the version seen.

        ``stamp``: the request's exchange, the stamp of the read (see :meth:`read`).
        """
        from mcp_types import ReadResourceResult, TextResourceContents
        view = self.gw.view(ctx)
        uri = str(params.uri)
        if uri.startswith(FACT_SCHEME):
            rec = self.read(view, uri, stamp)
            if rec is None:
                raise _invalid(f"Unknown fact: {uri}")
            self.gw.trace.read(view.sid, uri, rec)
            value = rec.content
            return ReadResourceResult(
                contents=[TextResourceContents(uri=uri, mime_type="application/json",
                                               text=json.dumps(value, ensure_ascii=False))],
                _meta={"icore/version": self.version_meta(rec)})
        try:
            result, rec = await self.fetch(uri, view.sid)
        except UpstreamError as exc:
            self.gw.trace.note(view.sid, f"read {uri} failed: {exc}")
            raise _internal(str(exc)) from None
        except GatewayError as exc:
            raise _invalid(str(exc)) from None
        except Exception as exc:
            if upstream_refused(exc):  # the upstream's own JSON-RPC error, as it sent it
                raise
            # a garbage answer is the upstream's fault, not the client's (QA qa-new10c S3)
            r = self.route_uri(uri)
            said = (f"upstream {r.upstream if r else '?'} sent no valid answer to "
                    f"resources/read {uri} ({garbage_text(exc)})")
            self.gw.trace.note(view.sid, f"read {uri} failed: {said}")
            raise _internal(said) from None
        if rec is not None:
            seen = self.read(view, uri, stamp)
            if seen is not None and seen.id != rec.id:
                # another session's read committed a newer version in between: serve the
                # version this session is recorded to have seen
                result = _result_of(seen, result)
                rec = seen
            meta = dict(result.meta or {})
            meta["icore/version"] = self.version_meta(rec)
            result = result.model_copy(update={"meta": meta})
        self.gw.trace.read(view.sid, uri, rec)
        return result

    async def subscribe(self, ctx: Any, params: Any) -> Any:
        """``resources/subscribe``: the client is notified of each new version."""
        from mcp_types import EmptyResult
        uri = str(params.uri)
        conn = self._client_key(ctx)
        self._subscribers.setdefault(conn, set()).add(uri)
        self._notifiers[conn] = ctx.session
        route = self.route_uri(uri)
        if route is not None:
            await self._upstream_subscribe(route)
        return EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> Any:
        """``resources/unsubscribe``."""
        from mcp_types import EmptyResult
        self._subscribers.get(self._client_key(ctx), set()).discard(str(params.uri))
        return EmptyResult()

    async def _upstream_subscribe(self, route: Route) -> None:
        """Subscribe at the upstream (when it supports it); an accepted one is live."""
        u = self.gw.upstreams[route.upstream]
        caps = u.capabilities
        if caps is None or caps.resources is None or not caps.resources.subscribe:
            return
        gen = u.generation
        import warnings

        async def sub(s: Any) -> Any:
            with warnings.catch_warnings():  # the SDK warns: removed as of 2026-07-28;
                warnings.simplefilter("ignore")  # the upstream speaks the handshake era
                return await s.subscribe_resource(route.name)

        try:
            await u.request("resources/subscribe", sub)
        except Exception as exc:  # subscription is an optimisation: reads still version
            if not u.spec.trust_updates:
                log.debug("upstream %s: subscribe %s failed: %r", u.name, route.name, exc)
                return
            # trust_updates asked for: say that its resources are read again instead, so
            # an operator does not believe the cost cut is on (fail closed all the same)
            msg = (f"upstream {u.name} is marked trust_updates but refused the "
                   f"subscription to {route.name} ({getattr(exc, 'message', None) or exc}); "
                   "its resources are read again before every protected call")
            log.warning("%s", msg)
            self.gw.trace.note("gateway", msg, upstream=u.name, resource=route.name)
            return
        if u.generation == gen:
            self._live.add((route.upstream, gen, route.name))
            if u.spec.trust_updates and u.spec.url is not None and not u.watch_live \
                    and self.tg is not None and (u.name, gen) not in self._stream_checked:
                self._stream_checked.add((u.name, gen))
                self.tg.start_soon(self._check_stream, u, gen, route.name)

    async def _check_stream(self, u: Upstream, gen: int, name: str) -> None:
        """Warn (log and trace) when a trusted HTTP upstream has no notification stream.

        The SDK opens the standalone GET stream shortly after ``initialize``; when it is
        still closed :data:`STREAM_GRACE_S` after an accepted subscription (a stateless
        server, or one that refuses the GET), no update can reach the gateway, so
        ``trust_updates`` is not in effect: its resources are read again at every
        protected call (fail closed), and the operator is told so, once per connection.
        """
        await anyio.sleep(min(STREAM_GRACE_S, u.spec.timeout_s))
        if u.generation != gen or u.watch_live or u.session is None:
            return
        why = ("it gave no Mcp-Session-Id: a stateless server, which has no GET stream"
               if u.http_session is False else "its GET stream (HTTP) did not open")
        msg = (f"upstream {u.name} is marked trust_updates and accepted the subscription "
               f"to {name}, but no notification can reach the gateway ({why}); its "
               "resources are read again before every protected call")
        log.warning("%s", msg)
        self.gw.trace.note("gateway", msg, upstream=u.name, resource=name)

    async def notify_subscribers(self, uri: str) -> None:
        """Tell every subscribed client that ``uri`` has a new version."""
        for conn, uris in list(self._subscribers.items()):
            session = self._notifiers.get(conn)
            if uri in uris and session is not None:
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # a gone client: drop it
                    log.debug("notify %s failed: %r", uri, exc)

    async def on_upstream_notification(self, upstream: str, message: Any) -> None:
        """An upstream's notification: a resource update is read again (versioned)."""
        method = getattr(message, "method", None)
        if method != "notifications/resources/updated":
            return
        uri = str(message.params.uri)
        key = (upstream, uri_key(uri))
        # at once, before any await: a protected call from now on reads it again
        self._updates[key] = self._updates.get(key, 0) + 1
        if self._fresh.pop(key, None) is None and any(up == upstream for up, _ in self._fresh):
            # a URI no trusted read has (another spelling, or one never read): every
            # trusted read of this upstream is read again (fail closed)
            self._stray[upstream] = self._stray.get(upstream, 0) + 1
        shown = self.shown_uri(upstream, uri)  # the concrete URI a client reads
        if self.tg is not None:
            self.tg.start_soon(self.reread, shown, f"upstream {upstream} (updated)")

    async def reread_all(self, uris: Sequence[str], source: str) -> dict[str, Exception]:
        """Read each of ``uris`` again from its upstream, concurrently.

        One read each, at most :data:`REREAD_CONCURRENCY` at a time; a change is
        committed as a new version.

        Returns:
            URI -> why its read failed (:class:`UpstreamError`: the upstream did not
            answer; :class:`GatewayError`: no upstream serves it or it cannot be
            versioned; ``MCPError``: the upstream answered an error). Empty: all read.
        """
        failed: dict[str, Exception] = {}
        if not uris:
            return failed

        async def one(uri: str) -> None:
            async with self._limit:
                try:
                    await self.fetch(uri, source)
                except Exception as exc:  # fail closed: the caller refuses the call
                    failed[uri] = exc

        if len(uris) == 1:
            await one(uris[0])
            return failed
        async with anyio.create_task_group() as tg:
            for uri in uris:
                tg.start_soon(one, uri)
        return failed

    async def subscribe_upstream(self, uri: str) -> None:
        """Subscribe the gateway itself to ``uri`` at its upstream, once per connection.

        Only when the upstream supports subscriptions: its notifications then re-read
        ``uri`` at once (a protected call re-reads it anyway).
        """
        route = self.route_uri(uri)
        if route is None:
            return
        u = self.gw.upstreams[route.upstream]
        key = (route.upstream, u.generation, route.name)
        if key in self._subscribed:
            return
        self._subscribed.add(key)
        await self._upstream_subscribe(route)

    async def reread(self, uri: str, source: str) -> Any:
        """Read ``uri`` again after a change (``source`` names who caused it).

        Returns the version read (a record; None: unversioned, or the read failed, which
        is noted in the trace).
        """
        try:
            return (await self.fetch(uri, source))[1]
        except Exception as exc:
            self.gw.trace.note("gateway", f"re-read of {uri} after an update failed: {exc}")
            return None


def _result_of(rec: Any, like: Any) -> Any:
    """A ReadResourceResult carrying the contents recorded in ``rec``."""
    contents = rec.content.get("contents") if isinstance(rec.content, dict) else None
    if not isinstance(contents, list):
        return like
    return like.model_validate({**like.model_dump(by_alias=True, exclude_none=True),
                                "contents": contents})


def _too_large(uri: str, size: int, limit: int) -> GatewayError:
    """Why a resource a protected tool depends on (or writes) cannot be versioned."""
    return GatewayError(
        f"resource {uri} is {size} bytes as JSON (its contents), over the {limit} bytes "
        f"({limit >> 20} MiB) a version of a fact may hold, and a protected tool of the "
        "gateway manifest depends on it or writes it, so each read must be versioned. "
        "The limit is fixed (no setting raises it): serve the data as smaller resources "
        "(one per entry) and declare those in depends_on", uri=uri, size=size, limit=limit)


def _invalid(msg: str) -> Exception:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS
    return MCPError(INVALID_PARAMS, msg)


def _internal(msg: str) -> Exception:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR
    return MCPError(INTERNAL_ERROR, msg)
