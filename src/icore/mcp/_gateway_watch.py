"""The gateway's manifest watched against its listing: at start, and after each listing.

At start (:meth:`ManifestWatch.check`) the checks of :mod:`icore.mcp._gateway_checks`
refuse a manifest that protects nothing it names (exit 2), and an upstream marked
``trust_updates`` that cannot subscribe is a warning (its resources are read again). Afterwards
(:meth:`ManifestWatch.recheck`) a protected name no listed tool has - an upstream was down
at start, or one that came back namespaced it by a clash - keeps the tools it may mean
blocked (fail closed) until the name is found again; the findings are logged and noted
in the trace.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from icore.mcp._gateway_checks import (
    Unresolved,
    check_ambiguous,
    check_facts,
    check_placeholders,
    check_resources,
    check_tools,
    clashed_routes,
    dep_pattern,
    unserved,
)
from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayManifest, GatewayManifestError
from icore.mcp._gateway_resources import Route
from icore.mcp._session_log import GatewayTrace

log = logging.getLogger("icore.mcp")


class _Host(Protocol):
    """What the watch reads of its gateway (manifest, listing, upstreams, trace)."""

    manifest: GatewayManifest
    upstreams: dict[str, Any]
    tools: dict[str, Route]
    tool_defs: dict[str, Any]
    resources: dict[str, Route]
    template_routes: dict[str, Route]
    listed: set[str]
    trace: GatewayTrace


class ManifestWatch:
    """The manifest against what the upstreams serve (held by the gateway).

    Args:
        host: the gateway.
        resources: its resource side (told which URIs the gateway subscribes to itself).
        calls: its tools/call side (the gateway's own tools).

    Attributes:
        unresolved: protected names no listed tool has, with the tools they may mean.
        checked: True once :meth:`check` ran.
    """

    def __init__(self, host: _Host, resources: Any, calls: Any) -> None:
        self.gw = host
        self._resources = resources
        self._calls = calls
        self.unresolved = Unresolved()
        self.checked = False
        self._late_error = False
        self._listed: set[str] = set()  # the tools of the last listing
        self._renames: dict[str, list[str]] = {}  # protected name -> tools new when it went

    def _routes(self) -> dict[str, str]:
        return {shown: r.name for shown, r in self.gw.tools.items()}

    def _own(self) -> list[str]:
        return [t.name for t in self._calls.fact_tools()]

    def check(self) -> None:
        """The manifest against the first listing.

        A manifest refused here leaves no trace file: the gateway served nothing, and an
        empty trace would only be moved aside by the next run (QA qa-new9b).

        Raises:
            GatewayManifestError: a protected name or a D(a) resource no upstream serves,
                a placeholder that is no argument of its tool (every upstream listed), a
                ``fact://`` entry of D(a) no owner covers.
        """
        try:
            self._check()
        except GatewayManifestError:
            self.gw.trace.discard()
            raise

    def _check(self) -> None:
        gw, m = self.gw, self.gw.manifest
        down = sorted(n for n in gw.upstreams if n not in gw.listed)
        self.unresolved = check_tools(m, self._routes(), self._own(), down)
        self._listed = set(self._routes())
        pats = [dep_pattern(d) for t in m.tools.values() for d in t.depends_on
                if not d.startswith(FACT_SCHEME)]
        self._resources.watched = lambda uri: any(p.fullmatch(uri) for p in pats)
        self.checked = True
        check_facts(m)
        check_placeholders(m, {n: getattr(d, "input_schema", None)
                               for n, d in gw.tool_defs.items()})
        check_ambiguous(m, clashed_routes(gw.resources, gw.template_routes))
        if not down:
            check_resources(m, list(gw.resources), list(gw.template_routes),
                            [*m.owners, *m.facts.owners])
        for n, u in gw.upstreams.items():
            caps = u.capabilities
            if u.spec.trust_updates and caps is not None and not (
                    caps.resources is not None and caps.resources.subscribe):
                msg = (f"upstream {n} is marked trust_updates but does not support "
                       "resources/subscribe: its resources are read again at every "
                       "protected call")
                log.warning("%s", msg)
                gw.trace.note("gateway", msg, upstream=n)
        for name, cands in self.unresolved.names.items():
            msg = (f"the manifest protects {name!r} (tools.{name}, line "
                   f"{m.line_of('tools', name)}), which no reachable upstream serves; "
                   f"upstreams {', '.join(down)} are down. Until it is found, calls of "
                   f"{', '.join(cands) or 'no listed tool'} are blocked (it may mean them)")
            log.warning("%s", msg)
            gw.trace.note("gateway", msg, tool=name, candidates=cands)

    def recheck(self) -> None:
        """After a listing: which protected names no listed tool has (now).

        A name found now is resolved; a name lost since (a clash with an upstream that
        came back namespaces it) is unresolved again: the tools it may mean are blocked
        (fail closed), and so are the tools that appeared in the listing where it went
        (a rename, whatever the new name: QA qa-new15b S3). When every upstream is
        listed, a name still missing is a manifest error (logged once).
        """
        gw, un = self.gw, self.unresolved
        before, routes = set(un.names), self._routes()
        un.names = unserved(gw.manifest, routes, self._own())
        new = sorted(set(routes) - self._listed) if self._listed else []
        self._listed = set(routes)
        for name in set(un.names) - before:  # a tool new in the same listing: its rename?
            self._renames[name] = sorted(set(self._renames.get(name, ())) | set(new))
        for name in list(self._renames):  # blocked too until the name is found (qa-new15b)
            if name not in un.names:
                del self._renames[name]
            else:
                un.names[name] = sorted(set(un.names[name]) | set(self._renames[name]))
        un.down = sorted(n for n in gw.upstreams if n not in gw.listed)
        for name in sorted(before - set(un.names)):
            gw.trace.note("gateway", f"protected tool {name} found", tool=name)
        for name in sorted(set(un.names) - before):
            msg = (f"protected tool {name} (tools.{name}, line "
                   f"{gw.manifest.line_of('tools', name)}) is no longer listed under "
                   f"that name; {', '.join(un.names[name]) or 'no tool'} blocked")
            log.error("%s", msg)
            gw.trace.note("gateway", msg, tool=name, candidates=un.names[name])
        if un.names and not un.down and not self._late_error:
            self._late_error = True
            log.error("manifest %s protects %s, which no upstream serves (every upstream "
                      "is listed now): fix it; the tools it may mean stay blocked",
                      gw.manifest.file, ", ".join(sorted(un.names)))


def warn_not_shared(m: GatewayManifest, trace: GatewayTrace, tpath: Path) -> None:
    """Warn that trust is not shared: another live gateway holds ``m``'s trace.

    This one writes ``tpath``. The warning (log and trace) names the ``trust_updates``
    upstreams; none: nothing is said.
    """
    trusting = sorted(n for n, s in m.upstreams.items() if s.trust_updates)
    if not trusting:
        return
    msg = (f"another icore gateway is running with this manifest (it holds the trace "
           f"{m.resolve(m.trace or '')}; this one writes {tpath.name}). Upstreams "
           f"{', '.join(trusting)} are marked trust_updates: each gateway has its own "
           "connection (a stdio upstream is launched per gateway), whose notifications "
           "reach only that gateway, so a change made through the other gateway may "
           "never be notified here and a stale call can be forwarded. Trust only an "
           "upstream that notifies every change by any writer; otherwise remove "
           "trust_updates (the default re-read)")
    log.warning("%s", msg)
    trace.note("gateway", msg, upstreams=trusting)
