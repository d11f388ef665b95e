"""The gateway's tools/call: argument checks, PlanFence at a protected tool, fact tools.

A protected tool's call is validated against the owners' heads (planfence Alg. 1;
:meth:`FactBook.execute`) and forwarded to its upstream only when authorized; a refusal
is a ``CallToolResult(isError=true)`` telling the model what changed and what to do
(the one replan, App. A.3). Unprotected tools are forwarded unchanged.

The owner of an upstream resource is the upstream itself, so Alg. 1 asking the owner for
its current head means reading the resource from the upstream: at every protected call
each resource of D(a) is read again (concurrently, one read each; a change is committed
as a new version before the gate compares it with the version the session saw).
Notifications from the upstream only make the gateway's heads move sooner; they are never
needed for a stale call to be refused. A read that fails blocks the call (fail closed).
An upstream with ``trust_updates`` (opt-in) is trusted to notify instead: a resource it
serves under a live subscription is not read again (``_Resources.trusted``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from icore.errors import IcoreError
from icore.fence import INVALID_ARGUMENTS as FENCE_INVALID_ARGUMENTS
from icore.fence import Reason
from icore.integrations import refusal_head
from icore.mcp._deps import expand_deps, glob_args
from icore.mcp._facts import (
    FactBook,
    SessionView,
    Verdict,
    bad_args_hint,
)
from icore.mcp._gateway_abandon import Unknowns, spender
from icore.mcp._gateway_args import ArgChecks
from icore.mcp._gateway_asks import CLIENT_GONE, Asks, Caller
from icore.mcp._gateway_big_args import KEPT, recorded_args
from icore.mcp._gateway_checks import Unresolved
from icore.mcp._gateway_delivery import Delivery, run_detached
from icore.mcp._gateway_fact_tool import fact_tool
from icore.mcp._gateway_forward import forward_meta, is_error, output_problem, result_text
from icore.mcp._gateway_inflight import call_patterns
from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayError, GatewayManifest, ToolSpec
from icore.mcp._gateway_outcome import (
    OPEN,
    RAN,
    Answered,
    heads_before,
    judge,
    outcome_fields,
    ran_after_all,
    write_back,
    write_uris,
)
from icore.mcp._gateway_progress import ProgressRelay
from icore.mcp._gateway_read_tool import (
    GET_FACT,
    PUT_FACT,
    READ_RESOURCE,
    own_tool_defs,
    read_tool,
)
from icore.mcp._gateway_refusal import HINT as _HINT
from icore.mcp._gateway_refusal import error_result as _error_result
from icore.mcp._gateway_refusal import refusal as _refusal
from icore.mcp._gateway_resources import Route, _invalid, _Resources
from icore.mcp._gateway_unanswered import (
    effect_open,
    not_delivered,
    spent_error,
    upstream_failed,
)
from icore.mcp._gateway_upstream_errors import no_answer, refused_by_upstream
from icore.mcp._replans import Replans
from icore.mcp._session_log import GatewayTrace, undelivered
from icore.mcp._shared_writes import Claims, ClaimsUnavailable, WriterGone
from icore.mcp._upstream import Upstream
from icore.mcp._upstream_answer import garbage_text, upstream_refused
from icore.mcp._upstream_failed import UpstreamError
from icore.workspace import ARGS_TOO_LARGE

log = logging.getLogger("icore.mcp")

INVALID_ARGUMENTS = FENCE_INVALID_ARGUMENTS
"""The reason of a protected call refused because its arguments break the tool's schema
(:data:`icore.fence.INVALID_ARGUMENTS`)."""


class _Host(Protocol):
    """What the tool side reads of its gateway (manifest, routes, facts, trace, spans)."""

    manifest: GatewayManifest
    upstreams: dict[str, Upstream]
    tools: dict[str, Route]
    tool_defs: dict[str, Any]
    facts: FactBook | None
    trace: GatewayTrace
    otel: Any
    asks: Asks
    progress: ProgressRelay
    single_client: bool
    wire: Any


    @property
    def unresolved(self) -> Unresolved:
        """Protected names no listed tool has yet."""
        ...

    def view(self, ctx: Any) -> SessionView:
        """The request's session view."""
        ...

    def anonymous(self, ctx: Any) -> bool:
        """True when the request has no session and no client identity (HTTP)."""
        ...

    async def refresh(self) -> None:
        """List the upstreams' tools, resources and prompts again."""
        ...




class _ToolCalls:
    """The tools/call side of a :class:`~icore.mcp.Gateway` (held by it).

    Args:
        host: the gateway.
        resources: its resource side (pre-reads, re-reads after a write, notifications).
    """

    def __init__(self, host: _Host, resources: _Resources) -> None:
        self.gw = host
        self._resources = resources
        self.args = ArgChecks(lambda: host.tool_defs)
        """The argument checks (:meth:`ArgChecks.clear` when the tools change)."""
        self._static_deps = {n: frozenset(t.depends_on)
                             for n, t in host.manifest.tools.items() if not t.globs}
        self._tasks = itertools.count(1)
        self._replans = Replans()
        self.unknowns = Unknowns()  # per session: keys of calls with an unknown outcome
        self.claims = Claims(None)  # protected calls' writes (shared: set at start)
        self._wrote: dict[str, tuple[Any, str, str]] = {}
        """URI -> (record, session, tool) of the version a protected call's write made."""

    def fact_tools(self) -> list[Any]:
        """The gateway's own tools (:func:`~icore.mcp._gateway_read_tool.own_tool_defs`)."""
        return own_tool_defs(self.gw.manifest)

    async def call_tool(self, ctx: Any, params: Any, ex: Any = None) -> Any:
        """``tools/call``: checked arguments, PlanFence at a protected tool, forwarded.

        ``ex``: the request's exchange (:class:`~icore.mcp._gateway_order.Exchange`), the
        call's ``turn``: only reads answered before it arrived count for its plan.
        """
        view = self.gw.view(ctx)
        name = params.name
        args = dict(params.arguments or {})
        if self.gw.wire.refuses(ex):  # sent after a stop signal: never run (QA qa-new9b)
            return self._stopping(view, name, args)
        if name in (PUT_FACT, GET_FACT) and self.gw.manifest.facts.tools \
                and self.gw.manifest.facts.owners:
            refused = self._not_owner(view, args, None if self.gw.single_client
                                      else _token_client()) if name == PUT_FACT else None
            return refused or await fact_tool(self.gw, self._resources, view, name, args,
                                                ex)
        if name == READ_RESOURCE and self.gw.manifest.tools:
            return await read_tool(self._resources, self.gw.manifest, ctx, args, ex)
        if name not in self.gw.tools:
            await self.gw.refresh()
        route = self.gw.tools.get(name)
        if route is None and name in self.gw.manifest.tools and (
                down := await _down(self.gw)):
            return self._refuse(view, name, args, f"{view.sid}/{next(self._tasks)}",
                                Reason.OWNER_UNAVAILABLE.value, list(
                                    self.gw.manifest.tools[name].depends_on), detail=down)
        if route is None:
            self.gw.trace.note(view.sid, f"unknown tool {name!r} refused")
            raise _invalid(f"Unknown tool: {name}")
        spec = self.gw.manifest.tools.get(name)
        problem = self.args.problem(name, args, protected=spec is not None)
        if problem is not None:
            said = f"Invalid arguments for tool {name}: {problem}"
            if spec is None:  # no fence here: the upstream's own error, as it would say
                self.gw.trace.call(view.sid, name, args, f"REFUSED: {problem}", error=True,
                                   refused=True)
                return _error_result(said)
            # a protected call refused at the boundary: a gate refusal (text head, _meta
            # and trace) like every other, blocked, never valid nor a failed call
            return self._refuse(view, name, args, f"{view.sid}/{next(self._tasks)}",
                                INVALID_ARGUMENTS, list(spec.depends_on), detail=said,
                                extra={"problem": problem})
        task = f"{view.sid}/{next(self._tasks)}"
        if spec is None and self.gw.unresolved.names:
            refused = await self._unverified(view, name, args, task)
            if refused is not None:
                return refused
            spec = self.gw.manifest.tools.get(name)
        if spec is not None and self.gw.anonymous(ctx):
            return self._refuse(view, name, args, task, "no_session", [])
        # a client gone mid-call does not cut it short (run_detached()); a protected call
        # first waits for the calls in flight writing its facts, other gateways' too: not
        # shielded, so a call cancelled meanwhile is never sent (QA qa-re7 N2, qa-new13c)
        claim = None
        if spec is not None:  # a call its client left spends its reads (QA qa-new18b)
            await self.gw.wire.detached.look(view.sid)
            try:
                claim = await self.claims.enter(*call_patterns(
                    spec.depends_on, spec.writes, self.args.with_defaults(name, args)),
                    waiting=_waits(self.gw.trace, view.sid, name))
            except WriterGone as exc:
                return self._refuse(view, name, args, task, "write_unknown",
                                    list(spec.depends_on), detail="a gateway that died was "
                                    f"writing {', '.join(exc.keys)}", extra={"keys": exc.keys})
            except ClaimsUnavailable as exc:  # cannot tell who writes D(a): fail closed
                return self._refuse(view, name, args, task, "claims_unavailable",
                                    list(spec.depends_on), detail=str(exc))
        return await run_detached(self.gw, ctx, view.sid, lambda d: self._run(
            ctx, view, name, args, spec, task, route, params, ex, d),
            lambda: self.claims.leave(claim))

    async def _run(self, ctx: Any, view: SessionView, name: str, args: dict[str, Any],
                   spec: ToolSpec | None, task: str, route: Route, params: Any,
                   ex: Any = None, delivery: Delivery | None = None) -> Any:
        """Gate (when protected), forward and record one call (shielded by the caller)."""
        delivery = delivery or Delivery()  # whether its result reached the client
        u = self.gw.upstreams[route.upstream]
        reached: list[Caller] = []
        before: dict[str, str | None] = {}
        filled = self.args.with_defaults(name, args) if spec is not None else args

        async def forward(**a: Any) -> Any:
            caller = Caller(ctx, view.sid, name, a, spec is not None, route.upstream,
                            CLIENT_GONE.get(), task)
            reached.append(caller)
            if spec is not None and spec.writes:  # a new version after it: it ran
                before.update(heads_before(self.gw.facts, write_uris(spec.writes, filled)[0]))
            with self.gw.asks.calling(caller), self.gw.progress.relayed(
                    ctx, params.meta, route.upstream, forward_meta(params.meta)) as meta:
                got = await u.request("tools/call", lambda s: u.call_tool(
                    s, route.name, a, meta))
            if spec is not None:  # a client gone meanwhile never sees it (QA qa-new18b)
                await delivery.look(view.sid, name)
            return got if spec is None else judge(  # ran, or its outcome open (qa-new15b)
                name, got, schema_problem=output_problem(name, self.gw.tool_defs.get(name),
                                                         got),
                no_effect=spec.error_means_no_effect, error=is_error(got),
                text=result_text(got))

        def open_effect(exc: Exception | None) -> str | None:  # reads spent (h35gw)
            if exc is None:  # answered: open to the agent only if it never saw it
                said = not_delivered(delivery)
            else:
                said = spent_error(exc) if effect_open(exc, reached=bool(reached), asked=any(
                    c.asked for c in reached)) else None
            if said is not None:
                self.unknowns.note(view.sid, delivery.keys, name)
            return said

        try:
            if spec is None:
                result = await forward(**args)
            else:
                result = await self._protected(view, name, spec, args, task, forward, ex,
                                               open_effect, delivery)
                if isinstance(result, _Refused):
                    return result.result
        except UpstreamError as exc:
            # sent and not answered: it may have run (never a clean refusal, #25)
            return upstream_failed(self.gw, view.sid, name, filled, task, route.upstream,
                                   exc, spec, await delivery.undelivered(view.sid, name))
        except Exception as exc:
            msg = getattr(exc, "message", None) or str(exc)
            if not reached:  # the gate path failed: the upstream never saw the call
                log.warning("gate of %s failed: %r", name, exc)
                return self._refuse(view, name, args, task, "gateway_error", [],
                                    detail=msg)
            if not upstream_refused(exc):  # garbage, not a JSON-RPC error: it may have run
                return no_answer(self.gw.trace, view.sid, name, filled, task, route, exc,
                                 spec)
            # the upstream answered a JSON-RPC error
            return refused_by_upstream(self.gw, ctx, view.sid, name, args, task, route,
                                        exc, sorted(set().union(*(c.asked for c in reached))))
        answered = result if isinstance(result, Answered) else None
        result = result.result if answered is not None else result
        if spec is None and (bad := output_problem(name, self.gw.tool_defs.get(name),
                                                   result)) is not None:
            result = _error_result(f"{bad}; the gateway does not forward a result that breaks "
                                   "the tool's outputSchema (MCP: a server MUST conform to it)")
        moved = None
        if spec is not None and spec.writes and answered is not None and answered.kind == OPEN:
            moved = await write_back(self._resources, self.gw.trace, self._wrote, view.sid,
                                     name, spec.writes, filled, before)
            if moved:  # its writes moved: it ran after all
                answered = ran_after_all(answered, name, moved)
                result = answered.result
        lost = await delivery.undelivered(view.sid, name)
        self.gw.trace.call(view.sid, name, args, result_text(result), error=is_error(result),
                           task=task, **lost, **outcome_fields(answered))
        if lost and spec is not None and (not is_error(result) or (
                answered is not None and answered.kind == RAN)):  # the agent never saw it
            undelivered(self.gw.trace, task, cancelled=delivery.cancelled)
        if spec is not None and spec.writes and moved is None:
            await write_back(self._resources, self.gw.trace, self._wrote, view.sid, name,
                             spec.writes, filled, before)
        return result

    async def _unverified(self, view: SessionView, name: str, args: Mapping[str, Any],
                          task: str) -> Any:
        """Refuse an unprotected tool that a still-unresolved protected name may mean.

        The upstreams are listed again first: the missing one may be back.
        """
        if not self.gw.unresolved.blocking(name):
            return None
        await self.gw.refresh()
        means = self.gw.unresolved.blocking(name)
        if not means or name in self.gw.manifest.tools:
            return None
        m = self.gw.manifest
        where = ", ".join(f"tools.{n} (line {m.line_of('tools', n)})" for n in means)
        down = self.gw.unresolved.down
        detail = (f"the manifest protects {', '.join(repr(n) for n in means)} ({where}); "
                  + (f"upstreams {', '.join(down)} are down, so the gateway cannot tell "
                     f"whether that is a typo of {name!r}" if down else
                     f"no upstream serves it: fix the manifest (did you mean {name!r}?)"))
        return self._refuse(view, name, args, task, "unverified_protection", [],
                            detail=detail)

    def _stopping(self, view: SessionView, name: str, args: Mapping[str, Any]) -> Any:
        """Refuse a call that arrived after the gateway's stop signal (recorded refused)."""
        detail = ("the gateway received a stop signal (SIGINT or SIGTERM) before this call "
                  "arrived; only the calls already in flight finish. Do not retry "
                  "through this gateway")
        spec = self.gw.manifest.tools.get(name)
        if spec is not None:
            return self._refuse(view, name, args, f"{view.sid}/{next(self._tasks)}",
                                "gateway_stopping", list(spec.depends_on), detail=detail)
        self.gw.trace.call(view.sid, name, args, f"REFUSED: gateway stopping: {detail}",
                           error=True, refused=True)
        return _error_result(f"icore gateway stopping: {name} was not run: {detail}")

    def _refuse(self, view: SessionView, name: str, args: Mapping[str, Any], task: str,
                reason: str, deps: list[str], *, detail: str = "",
                extra: Mapping[str, Any] | None = None, hint: str | None = None) -> Any:
        """A refusal before the gate (blocked, ``_meta``; ``hint``: the model's text)."""
        said = self.unknowns.said(view.sid, deps, args) \
            if reason == Reason.OWNER_UNAVAILABLE.value else ""  # QA qa-new18b #5
        text = f"{refusal_head(name, reason)}: {hint or _HINT.get(reason, 'fail closed')}{said}."
        if detail:
            text += f"\nDetail: {detail}"
        self.gw.trace.refused(view.sid, name, args, task=task, reason=reason, deps=deps,
                              detail=detail or text, action=name != PUT_FACT)
        meta = {"reason": reason, "deps": deps, "changed": {}, **(extra or {})}
        return _error_result(text, meta={"icore/gate": meta})

    async def _reread(self, view: SessionView, name: str, spec: ToolSpec,
                      args: Mapping[str, Any], deps: frozenset[str], known: Any,
                      task: str, heads: dict[str, list[str]]) -> Any:
        """Alg. 1's owner query for upstream resources: read each again from its upstream.

        Fills ``heads``: ``reread`` (the upstream resources of D(a) read again now) and
        ``trusted`` (those of a ``trust_updates`` upstream taken on trust, not read).

        Returns a refusal when a read failed (fail closed) or a resource has no owner,
        else None (changes are now the owners' heads, for the gate to compare).
        """
        facts = self.gw.facts
        assert facts is not None
        keys = sorted(k for k in deps if not k.startswith(FACT_SCHEME)
                      and facts.owner_of(k) not in facts.remote)
        stale = [k for k in keys if not self._resources.trusted(k)]
        heads["reread"] = stale
        heads["trusted"] = [k for k in keys if k not in stale]
        failed = await self._resources.reread_all(stale, f"{view.sid} via {name} "
                                                  "(validation)")
        bad = {k: e for k, e in failed.items()}
        for k in keys:
            if k not in bad and facts.owner_of(k) is None:
                bad[k] = GatewayError("no upstream lists this resource and the manifest "
                                      "declares no owner for it", uri=k)
        if not bad:
            return None
        down = any(isinstance(e, UpstreamError) for e in bad.values())
        reason = Reason.OWNER_UNAVAILABLE.value if down else "dependency_unreadable"
        lines = [f"{k} ({_entry_of(self.gw.manifest, spec, name, args, k, known)}): "
                 f"{garbage_text(e)}" for k, e in sorted(bad.items())]
        return self._refuse(view, name, args, task, reason, sorted(deps),
                            detail="; ".join(lines), extra={"unreadable": sorted(bad)})

    async def _protected(self, view: SessionView, name: str, spec: ToolSpec,
                         args: Mapping[str, Any], task: str, forward: Any,
                         ex: Any = None, open_effect: Any = None,
                         delivery: Delivery | None = None) -> Any:
        """Run one protected call through the gate; a refusal comes back as _Refused.

        The caller waited for the protected calls in flight writing its facts (their
        writes read again) and claimed its own ``writes`` (docs/mcp.md, concurrent
        calls), so D(a) here is taken after them. ``open_effect``: whether a failure of
        the forward leaves the effect open (its reads spent: :meth:`FactBook.execute`).
        ``delivery``: the call's client; once authorized, its leaving spends the reads at
        once (:meth:`Delivery.arm`).
        """
        assert self.gw.facts is not None
        seen = view.seen
        static = self._static_deps.get(name)
        args_d = self.args.with_defaults(name, args) if static is None else args
        known: Any = ()
        try:
            if static is not None:  # D(a) without globs or placeholders: the same each call
                deps = static
            else:
                # the known keys are only needed to match globs (a scan of every owner's
                # heads)
                known = (set(self.gw.facts.known_keys()) | set(seen)) if spec.globs else ()
                deps = expand_deps(spec.depends_on, args_d, known)
                bad = glob_args(spec.depends_on, args_d)
                if bad:  # literal keys no fact has: refused, never a pattern (QA r8 D5)
                    return _Refused(self._refuse(
                        view, name, args, task, "not_read", sorted(deps),
                        hint=bad_args_hint(bad, name), extra={"arguments": sorted(bad)},
                        detail=f"argument values that name no fact: {bad}"))
        except IcoreError as exc:
            return _Refused(self._refuse(view, name, args, task, "incomplete_declaration",
                                         list(spec.depends_on),
                                         detail=self.args.no_default(name, exc)))
        if not deps:
            return _Refused(self._refuse(
                view, name, args, task, "incomplete_declaration", list(spec.depends_on),
                detail=f"D(a) matches no known fact; read the resources it depends on "
                f"first ({', '.join(spec.depends_on)})"))
        heads: dict[str, list[str]] = {}
        refused = await self._reread(view, name, spec, args_d, deps, known, task, heads)
        if refused is not None:
            return _Refused(refused)
        ticket = self._replans.before(view, name, deps, args)
        if ticket is not None and ticket.resent:  # the replan line's resent_unchanged
            heads["resent"] = list(ticket.resent)
        n0, written = len(view.agent.log), []

        async def authorized(**a: Any) -> Any:  # on disk before the forward (QA r7 D2)
            self.gw.trace.authorized(view, name, n0, args, task=task, ticket=ticket,
                                     heads=heads)
            written.append(True)
            self.unknowns.clear(view.sid, deps)
            if delivery is not None:
                delivery.arm(name, frozenset(deps), spender(self.gw.trace, view, name, deps,
                                                            self.unknowns))
            return await forward(**a)

        try:
            v: Verdict = await self.gw.facts.execute(view, name, deps, args, authorized, ex,
                                                       open_effect)
        except Exception:  # the gate or the forward failed: its decisions written once
            if not written:
                self.gw.trace.decisions(view.sid, name, view.agent.log.since(n0), task=task,
                                        heads=heads)
            raise
        replan = self._replans.after(view, name, deps, v, ticket, args, seen)
        if v.reason == ARGS_TOO_LARGE:  # a bounded stand-in on the trace (QA qa-new18b #7)
            args = recorded_args(args)
            v = replace(v, call=replace(v.call, detail=f"{v.call.detail}; {KEPT}"))
        if not written:  # a refusal (an executed call's lines went before its forward)
            self.gw.trace.verdict(view.sid, name, v, args, task=task, replan=replan,
                                  plan_roots=ticket.roots if ticket else (), heads=heads)
        if self.gw.otel is not None:
            for d in v.decisions:  # child spans of the SDK's tools/call server span
                self.gw.otel.decision(d)
        if v.call.executed:
            return v.call.value
        own = {k: w[2] for k, r in v.changed.items()
               if (w := self._wrote.get(k)) is not None and w[:2] == (r.id, view.sid)}
        return _Refused(_refusal(name, v, first_read=not seen,
                                 late=sorted(k for k in v.call.fresh if k in seen),
                                 version_of=self.gw.facts.version_of, own=own,
                                 stopping=self.gw.wire.stopped_at is not None))

    def _not_owner(self, view: SessionView, args: Mapping[str, Any],
                   client: str | None) -> Any:
        """Refuse a fact write by a session that does not speak for the fact's owner.

        Over stdio the session speaks for ``facts.stdio_speaks_for``; over HTTP for the
        owner its token's client is named like, and those ``facts.writers`` lists it for
        (QA r6-oa D2). The refusal is recorded as a blocked call (the audit shows it).
        Returns None when the write may go on (or is malformed:
        :func:`~icore.mcp._gateway_fact_tool.fact_tool`).
        """
        key, facts, stdio = args.get("key"), self.gw.manifest.facts, self.gw.single_client
        owner = self.gw.facts.owner_of(key) if isinstance(key, str) and self.gw.facts else None
        if owner is None or facts.may_write(owner, client, stdio=stdio):
            return None
        if stdio:
            who = ("the stdio client, which speaks for "
                   + (", ".join(facts.stdio_speaks_for) or "no owner"))
            allow = f"facts.stdio_speaks_for: [{owner}]"
        else:
            who = (f"client {client!r} (its bearer token)" if client is not None else
                   "a client without a bearer token (http.clients)")
            allow = (f"a client named {owner!r} in http.clients, or facts.writers: "
                     f"{{{owner}: [CLIENT]}} naming a declared client")
        return self._refuse(view, PUT_FACT, args, f"{view.sid}/{next(self._tasks)}",
                            "not_owner", [str(key)],
                            detail=f"{key} is owned by {owner!r}; this session is {who}. To "
                            f"allow it, the gateway manifest needs {allow}",
                            extra={"owner": owner})


def _entry_of(m: GatewayManifest, spec: ToolSpec, name: str, args: Mapping[str, Any],
              key: str, known: Any) -> str:
    """The manifest entry (``tools.<name>.depends_on.<i>``, line) that gave ``key``."""
    for i, pat in enumerate(spec.depends_on):
        try:
            hit = key in expand_deps([pat], args, known)
        except IcoreError:
            continue
        if hit:
            line = m.line_of("tools", name, "depends_on", i)
            at = f", line {line}" if line is not None else ""
            return f"D(a) entry {pat!r} (tools.{name}.depends_on.{i}{at})"
    return f"tools.{name}.depends_on"


def _waits(trace: GatewayTrace, sid: str, name: str) -> Callable[[list[str]], None]:
    """The trace note of a call that waits for other gateways' calls writing ``keys``."""
    return lambda keys: trace.note(sid, f"{name} waits for another gateway's call writing "
                                   f"{', '.join(keys)}", tool=name, keys=keys)


async def _down(gw: _Host) -> str:
    """Why a protected tool no upstream lists now cannot be routed: the upstreams down.

    Each upstream is pinged (bounded by its ``timeout_s``); ``""`` when every one answers
    (then the tool is unknown: a JSON-RPC error). A protected call is refused
    ``owner_unavailable`` (fail closed), never "unknown tool", which the MCP SDK's client
    raises as an exception (QA qa-new10c S3: an HTTP upstream that died).
    """
    down = []
    for n, u in sorted(gw.upstreams.items()):
        try:
            await u.request("ping", lambda s: s.send_ping())
        except Exception as exc:  # unreachable, crashed, or no valid answer: down
            down.append(f"{n} ({getattr(exc, 'message', None) or exc})")
    if not down:
        return ""
    return (f"upstream {', '.join(down)} is down or unavailable, so its tools are not "
            "listed: the protected tool cannot be routed; the call was not made (fail "
            "closed). Try again later")


def _token_client() -> str | None:
    """The client the request's bearer token names (HTTP ``http.clients``), else None."""
    from mcp.server.auth.middleware.auth_context import get_access_token
    token = get_access_token()
    return None if token is None else str(token.client_id)


@dataclass(frozen=True, slots=True)
class _Refused:
    result: Any
