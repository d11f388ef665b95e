"""The manifest checked against what the upstreams serve, once they are listed (at start).

A manifest can be valid YAML and still protect nothing: ``tools: {reserv: ...}`` when the
upstream serves ``reserve`` leaves the real tool unfenced, and a D(a) entry naming a
resource no upstream serves (``room://{hotel}/rate``) blocks every call. Both are refused
at start with a :class:`~icore.mcp.GatewayManifestError` naming the file, the field and
its line, with a did-you-mean. When an upstream is down at start, a protected name no
reachable upstream serves cannot be judged yet: the gateway starts, and until the name is
found, every tool it could be a typo of is blocked (fail closed: the real tool never runs
unprotected), see :class:`Unresolved`.

Pure functions over the listing (no I/O).
"""

from __future__ import annotations

import difflib
import functools
import re
import string
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.mcp._gateway_manifest import FACT_SCHEME, GatewayManifest, ToolSpec
from icore.workspace import GLOB_CHARS

_GLOB = re.compile(f"[{re.escape(GLOB_CHARS)}]")


@dataclass
class Unresolved:
    """Protected names no reachable upstream serves yet (some upstream was down).

    Attributes:
        names: protected name -> the listed tools it may be a typo of (blocked).
        down: the upstreams not listed yet.
    """

    names: dict[str, list[str]] = field(default_factory=dict)
    down: list[str] = field(default_factory=list)

    def blocking(self, tool: str) -> list[str]:
        """The unresolved protected names ``tool`` may be the real tool of."""
        return sorted(n for n, cands in self.names.items() if tool in cands)


def _did_you_mean(name: str, options: Collection[str]) -> list[str]:
    close = difflib.get_close_matches(name, sorted(options), n=3, cutoff=0.6)
    # a clash namespaces a name as <upstream>.<name>: that is the name to protect
    close += sorted(o for o in options if o.endswith(f".{name}") and o not in close)
    return close


def _hint(cands: list[str]) -> str:
    if not cands:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in cands) + "?)"


def unserved(m: GatewayManifest, tools: Mapping[str, str], own: Collection[str]
             ) -> dict[str, list[str]]:
    """Protected names no listed tool has, each with the tools it may mean.

    Args:
        m: the manifest.
        tools: listed tool name (as clients see it, ``<upstream>.<name>`` on a clash) ->
            its name at the upstream.
        own: the gateway's own tools when served.

    Returns:
        Protected name -> the listed tools whose shown or upstream name is it or close to
        it (a typo, or a name a clash has namespaced since).
    """
    out: dict[str, list[str]] = {}
    served = set(tools) | set(own)
    for name in m.tools:
        if name in served:
            continue
        near = set(_did_you_mean(name, tools))
        near |= {t for t, up in tools.items()
                 if up == name or difflib.get_close_matches(name, [up], cutoff=0.6)}
        out[name] = sorted(near)
    return out


def check_tools(m: GatewayManifest, tools: Mapping[str, str], own: Collection[str],
                down: Collection[str]) -> Unresolved:
    """Every protected tool name is a tool clients see.

    Args:
        m: the manifest.
        tools: listed tool name (as clients see it) -> its name at the upstream.
        own: the gateway's own tools (``icore_put_fact``, ``icore_get_fact``) when served.
        down: upstreams that could not be listed.

    Returns:
        The names that cannot be judged while ``down`` is not empty.

    Raises:
        GatewayManifestError: a protected name no upstream serves (every upstream listed),
            naming ``tools.<name>``, its line and the closest tool names.
    """
    out = Unresolved(names=unserved(m, tools, own), down=sorted(down))
    if down:
        return out
    for name, near in out.names.items():
        cands = _did_you_mean(name, [*tools, *own]) or near
        own_hint = ("; the gateway serves its fact tools only with facts.owners and "
                    "facts.tools: true" if name in ("icore_put_fact", "icore_get_fact")
                    else "")
        raise m.error(f"no upstream serves a tool named {name!r}{_hint(cands)}; a "
                      "protected tool is named as clients see it, so this entry "
                      f"protects nothing{own_hint}", "tools", name, tool=name,
                      candidates=cands)
    return out


def _entries(spec: ToolSpec) -> list[tuple[str, int, str]]:
    """A protected tool's ``depends_on`` then ``writes`` entries: ``(part, index, entry)``."""
    return [*(("depends_on", i, e) for i, e in enumerate(spec.depends_on)),
            *(("writes", i, e) for i, e in enumerate(spec.writes))]


def check_placeholders(m: GatewayManifest, schemas: Mapping[str, Any]) -> None:
    """Each ``{arg}`` of a protected tool's D(a) and writes is an argument of its input schema.

    Tools without a listed schema (or whose schema has no ``properties``) are skipped.

    Raises:
        GatewayManifestError: naming ``tools.<name>.depends_on.<i>``, its line and the
            closest argument names; or a placeholder bound to an argument whose schema
            allows only objects or arrays (naming the tool, placeholder and argument); or
            a placeholder naming a field inside an argument (``{payment.to_account}``:
            nested fields are not supported).
    """
    for name, spec in m.tools.items():
        schema = schemas.get(name)
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(props, Mapping):
            continue
        for part, i, entry in _entries(spec):
            for _, arg, _, _ in string.Formatter().parse(entry):
                head = re.split(r"[.\[]", arg, maxsplit=1)[0] if arg else arg
                if arg and head != arg and head in props:  # {payment.to_account}
                    raise m.error(f"placeholder {{{arg}}} in {entry!r} names a field inside "
                                  f"argument {head!r} of {name}: nested fields are not "
                                  "supported; a placeholder is one top-level argument (a "
                                  "string, number or boolean). Use such an argument, or a "
                                  "glob over the keys the call may touch (e.g. "
                                  f"{entry.split('{', 1)[0]}*)", "tools", name, part, i,
                                  tool=name, entry=entry, argument=head)
                if arg and arg not in props:
                    raise m.error(f"placeholder {{{arg}}} in {entry!r} is not an argument "
                                  f"of {name}{_hint(_did_you_mean(arg, list(props)))}; "
                                  f"its arguments: {', '.join(sorted(props)) or 'none'}",
                                  "tools", name, part, i, tool=name, entry=entry)
                kinds = _json_types(props[arg], schema) if arg else None
                if kinds is not None and not kinds & _SCALARS:
                    raise m.error(f"placeholder {{{arg}}} in {entry!r} of tool {name} "
                                  f"binds its argument {arg!r}, of type "
                                  f"{' or '.join(sorted(kinds))}: a placeholder is filled "
                                  "with the argument's value in the URI, so the argument "
                                  "must be a string, number or boolean (#29)",
                                  "tools", name, part, i, tool=name, entry=entry,
                                  argument=arg)


_SCALARS = frozenset({"string", "number", "integer", "boolean"})


def _json_types(prop: Any, schema: Any, depth: int = 0) -> set[str] | None:
    """The JSON types an argument's schema allows (``null`` left out), None if unknown.

    Follows ``anyOf``/``oneOf``/``allOf`` and local ``$ref`` (``#/$defs/...``), as
    pydantic writes a model argument; an ``enum`` or ``const`` counts as a scalar.
    """
    if not isinstance(prop, Mapping) or depth > 8:
        return None
    if "enum" in prop or "const" in prop:
        return {"string"}
    t = prop.get("type")
    if isinstance(t, str):
        return {t} - {"null"} or None
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t) - {"null"} or None
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and isinstance(schema, Mapping):
        node: Any = schema
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        return _json_types(node, schema, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        subs = prop.get(key)
        if isinstance(subs, list) and subs:
            found = [_json_types(x, schema, depth + 1) for x in subs]
            if any(f is None for f in found):
                return None
            return set().union(*found) or None  # type: ignore[arg-type]
    return None


def check_facts(m: GatewayManifest) -> None:
    """Each ``fact://`` entry of a protected tool's D(a) has an owner in the manifest.

    A fact no owner covers has no head to validate against: every call of the tool
    would be refused, so the manifest is refused at start instead. An entry is covered
    when an owner key or glob (``facts.owners``, or ``owners``) matches it with each
    ``{arg}`` filled in, or names an instance of it.

    Raises:
        GatewayManifestError: naming ``tools.<name>.depends_on.<i>``, its line, the
            entry and the owner patterns declared.
    """
    import fnmatch
    owned = [*m.facts.owners, *m.owners]
    for name, spec in m.tools.items():
        for i, entry in enumerate(spec.depends_on):
            if not entry.startswith(FACT_SCHEME):
                continue
            probe = re.sub(r"\{[^}]*\}", "x", entry)
            pat = dep_pattern(entry)
            if any(fnmatch.fnmatchcase(probe, o) or pat.fullmatch(o) for o in owned):
                continue
            have = ", ".join(repr(o) for o in m.facts.owners) or "none"
            raise m.error(f"no owner is declared for the fact {entry!r} (facts.owners: "
                          f"{have}), so every call of {name} would be refused; add a key "
                          f"or glob covering it to facts.owners (e.g. "
                          f"{{{re.sub(r'{[^}]*}', '*', entry)!r}: OWNER}})", "tools", name,
                          "depends_on", i, tool=name, entry=entry)


@functools.lru_cache(maxsize=4096)
def dep_pattern(entry: str) -> re.Pattern[str]:
    """A D(a) entry as a regex over URIs: ``{arg}`` and globs match anything."""
    out = []
    for lit, arg, _, _ in string.Formatter().parse(entry):
        out.append(".*".join(re.escape(p) for p in _GLOB.split(lit)))
        if arg:
            out.append(".+")
    return re.compile("".join(out), re.DOTALL)


@functools.lru_cache(maxsize=4096)
def template_regex(template: str) -> re.Pattern[str]:
    """An RFC 6570 level-1 URI template (``rooms://{hotel}/info``) as a regex over URIs."""
    parts = re.split(r"\{[^}]*\}", template)
    return re.compile("[^/]+".join(re.escape(p) for p in parts), re.DOTALL)


def template_shape(template: str) -> str:
    """A URI template with every placeholder as ``{}`` (two templates of one shape clash)."""
    return re.sub(r"\{[^}]*\}", "{}", template)


def served_by(entry: str, uris: Collection[str], templates: Collection[str]) -> bool:
    """Whether some listed resource or resource template can be what ``entry`` names."""
    pat = dep_pattern(entry)
    if any(pat.fullmatch(u) for u in uris):
        return True
    for t in templates:
        if pat.fullmatch(t) or template_regex(t).fullmatch(entry):
            return True
    # a templated entry against a template: compare their shapes with every
    # placeholder of either side as one token
    shape = template_shape(entry)
    return any(template_shape(t) == shape for t in templates)


def clashed_routes(*routes: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The namespaced names among ``routes`` (shown name -> (upstream, bare name)).

    Each of ``routes`` maps a shown URI or template to its route (``upstream``, ``name``).
    """
    return {shown: (r.upstream, r.name) for rs in routes for shown, r in rs.items()
            if shown != r.name}


def namespaced_forms(entry: str, clashed: Mapping[str, tuple[str, str]]) -> list[str]:
    """The shown (namespaced) URIs or templates that ``entry`` names in its bare form.

    Args:
        entry: a D(a) or ``writes`` entry (a URI, or a URI with ``{arg}`` placeholders).
        clashed: shown URI or template -> ``(upstream, its own URI or template)`` of
            each one namespaced by a clash.

    Returns:
        The shown forms whose bare URI or template ``entry`` could be (several: the
        entry is ambiguous), sorted.
    """
    return sorted(shown for shown, (_up, raw) in clashed.items()
                  if entry == raw or served_by(entry, [raw], [raw]))


def check_ambiguous(m: GatewayManifest, clashed: Mapping[str, tuple[str, str]]) -> None:
    """No ``depends_on`` or ``writes`` entry names a URI several upstreams serve.

    A URI (or URI template) two upstreams serve is shown ``<upstream>.<uri>`` by each
    (QA r5-mcp D5); its bare form names neither, so the manifest names the namespaced
    one.

    Raises:
        GatewayManifestError: naming ``tools.<name>.<depends_on|writes>.<i>``, its line,
            the upstreams and the namespaced forms to choose from.
    """
    if not clashed:
        return
    for name, spec in m.tools.items():
        for part, i, entry in _entries(spec):
            if entry.startswith(FACT_SCHEME) or entry in clashed or \
                    _GLOB.search(re.sub(r"\{[^}]*\}", "", entry)):
                continue  # a glob is matched against the keys, shown forms included
            forms = namespaced_forms(entry, clashed)
            if not forms:
                continue
            ups = sorted({clashed[f][0] for f in forms})
            raise m.error(f"{entry!r} is ambiguous: upstreams {', '.join(ups)} all serve "
                          "it, so the gateway shows it namespaced by upstream; name the "
                          f"one meant: {' or '.join(repr(f) for f in forms)}", "tools",
                          name, part, i, tool=name, entry=entry, candidates=forms)


def check_resources(m: GatewayManifest, uris: Collection[str], templates: Collection[str],
                    owned: Collection[str]) -> None:
    """Each D(a) entry that is not a fact or a glob names a resource an upstream serves.

    Args:
        m: the manifest.
        uris: the listed resource URIs (as clients see them).
        templates: the upstreams' resource templates.
        owned: keys or globs the manifest's ``owners:`` declares (a resource listed by no
            upstream but declared there is the operator's word that it exists).

    Raises:
        GatewayManifestError: naming ``tools.<name>.depends_on.<i>``, its line and the
            closest URIs.
    """
    import fnmatch
    for name, spec in m.tools.items():
        for i, entry in enumerate(spec.depends_on):
            if entry.startswith(FACT_SCHEME) or _GLOB.search(entry.split("{")[0]):
                continue
            if served_by(entry, uris, templates):
                continue
            if any(fnmatch.fnmatchcase(entry, o) or entry == o for o in owned):
                continue
            cands = _did_you_mean(entry, [*uris, *templates])
            raise m.error(f"no upstream serves a resource {entry!r}{_hint(cands)}; a "
                          "protected call re-reads each resource of D(a) from its upstream, "
                          "so every call would be refused", "tools", name, "depends_on", i,
                          tool=name, entry=entry)
