"""The gateway manifest: upstream MCP servers, the fact store, protected tools (YAML).

Validated with pydantic; every error is a :class:`GatewayManifestError` naming the file,
the field path and, for a YAML file, the line (``line 12: tools.book.depends_on``).

Example::

    name: travel-gateway
    upstreams:
      notes: {command: python, args: [notes_server.py]}      # stdio
      booking: {url: "http://127.0.0.1:8000/mcp", timeout_s: 10}   # streamable HTTP
    store: {backend: sqlite, path: facts.db}     # owners' heads: memory|sqlite|owner-service|nats
    owners: {"memo://*": notes}                              # key or glob -> owner
    facts:                                                   # the gateway's own key-value set
      owners: {"fact://plan/*": planner}
      initial: {"fact://plan/goal": "Porto"}
    tools:
      book:
        depends_on: ["memo://price", "fact://plan/{trip}"]   # D(a); {arg} from the call
        writes: ["memo://price"]                             # re-read after a call
    trace: gateway-trace.jsonl
    otel: "http://127.0.0.1:4318"                            # optional: spans out
    http:                                    # --http: who is who (bearer tokens)
      clients: {alice: {token_env: ALICE_TOKEN}}
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from icore._files import path_problem
from icore._yaml import DuplicateKeyError, ScalarTypes, safe_load
from icore.errors import ErrorCode, IntegrationError, redact
from icore.mcp._manifest_facts import FACT_SCHEME as FACT_SCHEME  # re-exported
from icore.mcp._manifest_facts import FactsSpec as FactsSpec  # re-exported
from icore.mcp._manifest_facts import check_owner_id
from icore.mcp._manifest_hints import error_message
from icore.mcp._manifest_http import HttpSpec
from icore.mcp._manifest_values import DEFAULT_MAX_MESSAGE_MB as DEFAULT_MAX_MESSAGE_MB
from icore.mcp._manifest_values import MAX_MANIFEST_BYTES as MAX_MANIFEST_BYTES
from icore.mcp._manifest_values import _address, checked_path, checked_text, not_null, read_capped
from icore.mcp._manifest_values import checked_output as _checked_output
from icore.mcp._manifest_values import url_problem as url_problem  # re-exported

DEFAULT_CALL_TIMEOUT_S = 30.0
"""Default bound of one upstream request (tools/call, resources/read), in seconds."""
DEFAULT_GATE_TIMEOUT_S = 2.0
"""Default bound of one owner head query of the gate, in seconds (design.md 3.2)."""
DEFAULT_ASK_TIMEOUT_S = 300.0
"""Default longest wait for a client's answer to an upstream's question, seconds."""

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
class GatewayError(IntegrationError):
    """The MCP gateway met input or state it cannot serve (fields: upstream, tool, uri, key)."""

    code = ErrorCode.MCP


class GatewayManifestError(GatewayError, ValueError):
    """An invalid gateway manifest. Fields: ``file``, ``path`` (field path), ``line``."""


class _Model(ScalarTypes):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamSpec(_Model):
    """One upstream MCP server: a stdio ``command`` or a streamable-HTTP ``url``.

    Attributes:
        command: executable to launch (stdio); with ``args``, ``env`` (added to a safe
            default one: PATH, HOME, ...) and ``cwd`` (default: the manifest's folder;
            relative to it). A bare ``python``/``python3`` is the gateway's interpreter
            (``sys.executable``: its venv, even when launched with the venv not active).
        url: the server's streamable-HTTP endpoint (``http(s)://host:port/mcp``).
        timeout_s: bound of one request to this upstream, seconds (> 0).
        connect_timeout_s: bound of its launch and ``initialize``, s (default 30 or timeout_s).
        headers: extra HTTP headers (``url`` only).
        trust_updates: trust its ``notifications/resources/updated`` (a YAML bool only): a
            D(a) resource it serves is not read again at a protected call while the gateway
            holds a live ``resources.subscribe`` subscription to it, read since, not updated.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(DEFAULT_CALL_TIMEOUT_S, gt=0, le=3600, allow_inf_nan=False)
    connect_timeout_s: float | None = Field(None, gt=0, le=3600, allow_inf_nan=False)
    trust_updates: StrictBool = False
    """Strict: only a YAML ``true``/``false`` (it turns the per-call re-read off)."""

    _paths = field_validator("command", "cwd")(checked_path)
    _texts = field_validator("args", "env", "url", "headers")(checked_text)
    _given = field_validator("connect_timeout_s", mode="before")(not_null)

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError("url must start with http:// or https://")
        if self.url is not None and (problem := url_problem(self.url)) is not None:
            raise ValueError(f"url {redact(self.url)!r}: {problem}")
        if self.url is None and (self.headers):
            raise ValueError("headers apply to a url upstream only")
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"


class StoreSpec(_Model):
    """Where the owners' records and heads live.

    Attributes:
        backend: ``memory`` (in process, lost at exit), ``sqlite`` (durable, one file per
            owner under ``path``), ``owner-service`` (icore's owner service over TCP with
            mutual TLS: the owners named in ``addresses`` are served by other processes,
            team agents or other gateways, and read and validated there; the owners named
            in ``serve`` are hosted here and served to them; every other owner is in
            process) or ``nats`` (owner memory on NATS JetStream: every owner's records
            and heads in the engine, shared by every gateway and agent of the team).
        path: the folder of the SQLite files (``sqlite`` only; relative to the manifest).
        identity: the gateway's agent id in the team (its certificate; owner-service).
        certs_dir: the team's certificate folder (``icore certs init``; owner-service,
            nats: ``icore.net.nats.nats_certs``, with a pair per owner).
        addresses: owner -> ``host:port`` of its owner service (owner-service).
        serve: owner -> ``host:port`` this gateway serves that owner's store on
            (owner-service; port 0 picks a free one).
        servers: NATS URLs (``tls://127.0.0.1:4222``; nats).
        prefix: the team's bucket prefix (nats; default ``icore``).
    """

    backend: Literal["memory", "sqlite", "owner-service", "nats"] = "memory"
    path: str | None = None
    identity: str | None = None
    certs_dir: str | None = None
    addresses: dict[str, str] = Field(default_factory=dict)
    serve: dict[str, str] = Field(default_factory=dict)
    servers: tuple[str, ...] = ()
    prefix: str | None = None

    _paths = field_validator("path", "certs_dir")(checked_path)

    @model_validator(mode="after")
    def _path(self) -> StoreSpec:
        b = self.backend
        if b == "sqlite" and not self.path:
            raise ValueError("the sqlite backend needs path (a folder for the owners' files)")
        if b != "sqlite" and self.path:
            raise ValueError("path applies to the sqlite backend only")
        if b == "owner-service":
            if not (self.identity and self.certs_dir and (self.addresses or self.serve)):
                raise ValueError("the owner-service backend needs identity, certs_dir and "
                                 "addresses (owner -> host:port) or serve")
            for o, a in self.addresses.items():
                _address(o, a)
            for o, a in self.serve.items():
                host, port = a.rpartition(":")[0], a.rpartition(":")[2]
                if not host or not port.isdigit() or not 0 <= int(port) < 65536:
                    raise ValueError(f"serve address of owner {o!r} must be host:port, "
                                     f"not {a!r}")
            both = sorted(set(self.addresses) & set(self.serve))
            if both:
                raise ValueError(f"owners {both} are both served here and reached at an "
                                 "address")
        elif self.identity or self.addresses or self.serve:
            raise ValueError("identity, addresses and serve apply to the owner-service "
                             "backend only")
        if b == "nats":
            if not (self.servers and self.certs_dir):
                raise ValueError("the nats backend needs servers (NATS URLs) and certs_dir")
            for u in self.servers:
                if not re.match(r"^(nats|tls)://[^/]+$", u):
                    raise ValueError(f"NATS server {u!r} must be nats://host:port or "
                                     "tls://host:port")
        elif self.servers or self.prefix is not None:
            raise ValueError("servers and prefix apply to the nats backend only")
        elif self.certs_dir and b != "owner-service":
            raise ValueError("certs_dir applies to the owner-service and nats backends")
        return self

    def endpoints(self) -> dict[str, tuple[str, int]]:
        """Owner -> ``(host, port)`` of the remote owners (owner-service)."""
        return {o: _address(o, a) for o, a in self.addresses.items()}

    def served(self) -> dict[str, tuple[str, int]]:
        """Owner -> ``(host, port)`` this gateway serves it on (owner-service)."""
        out = {}
        for o, a in self.serve.items():
            host, _, port = a.rpartition(":")
            out[o] = (host.strip("[]"), int(port))
        return out


class ToolSpec(_Model):
    """A protected tool: its dependency declaration D(a) (planfence Sec. 3.2).

    Attributes:
        depends_on: resource URIs, fact keys or glob patterns; ``{arg}`` placeholders
            are filled from the call's arguments (argument binding).
        writes: URIs the tool changes: re-read from the upstream after a call, so the
            change becomes a new version at once; ``{arg}`` placeholders are filled from
            the call's arguments, as in ``depends_on``.
        error_means_no_effect: its upstream's error results (``isError``) mean it did
            nothing (default False: outcome unknown); never a call it did not answer.
    """

    depends_on: tuple[str, ...]
    writes: tuple[str, ...] = ()
    error_means_no_effect: StrictBool = False

    @field_validator("depends_on")
    @classmethod
    def _deps(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("depends_on must name at least one resource URI or fact key")
        for d in v:
            if not isinstance(d, str) or not d.strip():
                raise ValueError("depends_on entries are non-empty strings")
            try:
                list(string.Formatter().parse(d))
            except ValueError as exc:
                raise ValueError(f"bad placeholder in {d!r}: {exc}") from None
        return v

    @property
    def globs(self) -> bool:
        """True when D(a) is not the same for every call.

        A glob in ``depends_on`` (matched against the known keys), or a placeholder
        (filled from the call's arguments; a value is literal, never a pattern: QA r8 D5).
        """
        return any(c in d for d in self.depends_on for c in "*?[{")

    def placeholders(self) -> set[str]:
        """The argument names the ``{arg}`` placeholders of ``depends_on`` use."""
        out: set[str] = set()
        for d in self.depends_on:
            out.update(f for _, f, _, _ in string.Formatter().parse(d) if f)
        return out


class GatewayManifest(_Model):
    """A validated gateway manifest (see the module docstring for the YAML form).

    Attributes:
        name: the server name clients see.
        upstreams: upstream name -> :class:`UpstreamSpec` (at least one; names
            ``[A-Za-z0-9_.-]``).
        store: :class:`StoreSpec`.
        owners: resource URI or glob -> owner id (default: the upstream serving it).
        facts: :class:`FactsSpec`.
        tools: tool name (as clients see it) -> :class:`ToolSpec`; others pass through.
        trace: the JSONL trace file ``icore audit`` reads (relative to the manifest);
            None: keep it in memory only.
        otel: gate decisions' OpenTelemetry export (GenAI conventions, ``icore[otel]``):
            an OTLP/HTTP URL or ``file:PATH`` (OTLP JSON lines); each span continues the
            client's trace context (``traceparent`` in the request's ``params._meta``).
        gate_timeout_s: bound of one owner query of the gate, seconds.
        ask_timeout_s: longest wait for a client's answer to an upstream's question, s.
        http: :class:`HttpSpec` (``--http`` only: the clients' bearer tokens).
        max_message_mb: the largest JSON-RPC message a client may send (a stdio line, an
            HTTP body), MiB (default 16, above a protected call's 4 MiB ``args_too_large``):
            a longer one is answered (HTTP 413) naming the cap, never parsed or traced (#29).
        base_dir: folder relative paths are resolved against (set by :func:`load_manifest`).
    """

    name: str = "icore-mcp"
    upstreams: dict[str, UpstreamSpec]
    store: StoreSpec = StoreSpec()
    owners: dict[str, str] = Field(default_factory=dict)
    facts: FactsSpec = FactsSpec()
    tools: dict[str, ToolSpec] = Field(default_factory=dict)
    trace: str | None = None
    otel: str | None = None
    gate_timeout_s: float = Field(DEFAULT_GATE_TIMEOUT_S, gt=0, le=60, allow_inf_nan=False)
    ask_timeout_s: float = Field(DEFAULT_ASK_TIMEOUT_S, gt=0, le=86400, allow_inf_nan=False)
    http: HttpSpec = HttpSpec()
    max_message_mb: float = Field(DEFAULT_MAX_MESSAGE_MB, gt=0, le=1024, allow_inf_nan=False)
    base_dir: str = "."
    _file: str = PrivateAttr("<dict>")
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)

    _paths = field_validator("trace")(_checked_output)

    @field_validator("otel")
    @classmethod
    def _otel(cls, v: str | None) -> str | None:
        _checked_output(v.removeprefix("file:")) if v and v.startswith("file:") else None
        checked_text(v)
        return v

    @field_validator("upstreams")
    @classmethod
    def _ups(cls, v: dict[str, UpstreamSpec]) -> dict[str, UpstreamSpec]:
        if not v:
            raise ValueError("name at least one upstream")
        for n in v:
            if not _NAME.match(n):
                raise ValueError(f"upstream name {n!r} must match [A-Za-z0-9_.-]{{1,64}}")
            check_owner_id(n, "upstream name")  # an upstream owns its resources
        return v

    @field_validator("owners")
    @classmethod
    def _owners(cls, v: dict[str, str]) -> dict[str, str]:
        for k, o in v.items():
            if not k or not o:
                raise ValueError("owners entries need a non-empty key and owner")
            check_owner_id(o, "owner")
        return v

    @model_validator(mode="after")
    def _nats_owners(self) -> GatewayManifest:
        if self.store.backend != "nats":
            return self
        from icore.net import check_agent_id
        # every owner (an upstream by default) is a NATS user: a subject token, no "."
        for o in sorted({*self.upstreams, *self.owners.values(), *self.facts.owners.values()}):
            try:
                check_agent_id(o)
            except ValueError as exc:
                raise ValueError(f"owner {o!r} cannot be a NATS agent: {exc}") from None
            if "." in o:
                raise ValueError(f"owner {o!r} contains '.', which the nats backend cannot "
                                 "use as a subject token (use '-' or '_')")
        return self

    def resolve(self, path: str) -> Path:
        """``path`` relative to :attr:`base_dir` (absolute paths unchanged)."""
        p = Path(path)
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def file(self) -> str:
        """The manifest's file (``<dict>`` when built from a mapping)."""
        return self._file

    def line_of(self, *path: str | int) -> int | None:
        """The YAML line of the field at ``path`` (``"tools", "book"``).

        The nearest known parent's line when that one has none; None for a manifest built
        from a mapping.
        """
        parts = [str(p) for p in path]
        while parts:
            got = self._lines.get(".".join(parts))
            if got is not None:
                return got
            parts.pop()
        return None

    def error(self, message: str, *path: str | int, **fields: object
              ) -> GatewayManifestError:
        """A :class:`GatewayManifestError` at ``path``: ``file``, ``path``, ``line`` named."""
        dotted = ".".join(str(p) for p in path) or "<root>"
        line = self.line_of(*path)
        where = f"line {line}: " if line is not None else ""
        return GatewayManifestError(f"invalid gateway manifest at {where}{dotted}: {message}",
                                    file=self.file, path=dotted, line=line, **fields)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (the deepest one found)."""
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
        if node is None:
            break
    return line


def _walk(node: yaml.Node | None, path: tuple[str, ...], lines: dict[str, int],
          file: str) -> None:
    """Fill ``lines`` (dotted path -> 1-based line); refuse a key given twice.

    Iterative (a deep document cannot exhaust the stack); a node reached again through
    an alias is walked once (an alias bomb stays linear). YAML itself keeps the last of
    two equal keys, so a second ``tools.book`` entry would silently replace the first
    (its D(a) gone): refused, naming both lines.

    Raises:
        GatewayManifestError: a mapping holds the same key twice.
    """
    stack: list[tuple[yaml.Node | None, tuple[str, ...]]] = [(node, path)]
    walked: set[int] = set()  # an alias is the same node again: walk it once (no bomb)
    while stack:
        n, at = stack.pop()
        if isinstance(n, yaml.MappingNode | yaml.SequenceNode):
            if id(n) in walked:
                continue
            walked.add(id(n))
        if isinstance(n, yaml.MappingNode):
            seen: dict[str, int] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    continue
                line = k.start_mark.line + 1
                if k.value in seen and k.value != "<<":
                    dotted = ".".join((*at, k.value))
                    raise GatewayManifestError(
                        f"invalid gateway manifest at line {line}: {dotted}: duplicate key "
                        f"(first at line {seen[k.value]}, again at line {line}); YAML keeps "
                        "only the last one, so the first entry would be silently lost",
                        file=file, path=dotted, line=line, lines=[seen[k.value], line])
                seen[k.value] = line
                lines.setdefault(".".join((*at, k.value)), line)
                stack.append((v, (*at, k.value)))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                lines.setdefault(".".join((*at, str(i))), v.start_mark.line + 1)
                stack.append((v, (*at, str(i))))


def _extras(m: GatewayManifest, file: str, node: yaml.Node | None) -> None:
    """The extras the manifest needs are installed (``store.backend: nats``: nats-py).

    Raises:
        GatewayManifestError: naming the field and the install line.
    """
    import importlib.util
    if m.store.backend == "nats" and importlib.util.find_spec("nats") is None:
        line = _line_of(node, ("store", "backend"))
        where = f"line {line}: " if line is not None else ""
        raise GatewayManifestError(
            f"invalid gateway manifest at {where}store.backend: the nats backend needs "
            "nats-py: pip install 'icore[nats]'", file=file, path="store.backend", line=line,
            extra="nats")


def _writers(m: GatewayManifest, file: str, node: yaml.Node | None) -> None:
    """``facts.writers`` and ``facts.stdio_speaks_for`` name fact owners and clients.

    Raises:
        GatewayManifestError: an owner no ``facts.owners`` entry names, or a writer no
            ``http.clients`` entry declares: one error naming every such entry with its
            line (its ``path`` and ``line`` fields: the first one's).
    """
    owners = set(m.facts.owners.values())
    bad: list[tuple[tuple[str, ...], str]] = []
    for o, names in m.facts.writers.items():
        if o not in owners:
            bad.append((("facts", "writers", o), f"owner {o!r} owns no fact (facts.owners "
                        f"names {sorted(owners) or 'none'})"))
        for i, n in enumerate(names):
            if n not in m.http.clients:
                bad.append((("facts", "writers", o, str(i)), f"client {n!r} is not declared "
                            "in http.clients (only a token-named client can write for an "
                            "owner)"))
    for i, o in enumerate(m.facts.stdio_speaks_for):
        if o not in owners:
            bad.append((("facts", "stdio_speaks_for", str(i)), f"owner {o!r} owns no fact "
                        f"(facts.owners names {sorted(owners) or 'none'})"))
    if bad:
        said = []
        for loc, msg in bad:
            line = _line_of(node, loc)
            said.append(f"{f'line {line}: ' if line is not None else ''}{'.'.join(loc)}: {msg}")
        raise GatewayManifestError(f"invalid gateway manifest at {'; '.join(said)}",
                                   file=file, path=".".join(bad[0][0]),
                                   line=_line_of(node, bad[0][0]))


def manifest_from_dict(data: Mapping[str, Any], *, file: str = "<dict>",
                       node: yaml.Node | None = None) -> GatewayManifest:
    """Validate a manifest mapping.

    Args:
        data: the manifest as parsed YAML/JSON.
        file: named in errors.
        node: the YAML node tree, to name the line of an error (and of later checks:
            :meth:`GatewayManifest.line_of`).

    Raises:
        GatewayManifestError: naming the file, field path and line (when known); a key
            given twice in ``node``; a missing extra; ``data`` no mapping, ``file`` no str.
    """
    if not isinstance(file, str) or not isinstance(data, Mapping):
        raise GatewayManifestError(f"a gateway manifest is a mapping (file= a str), not "
                                   f"{type(data).__name__}", path="<root>", line=1,
                                   file=file if isinstance(file, str) else "<dict>")
    lines: dict[str, int] = {}
    _walk(node, (), lines, file)
    try:
        m = GatewayManifest.model_validate(dict(data))
    except ValidationError as exc:
        errs = exc.errors()  # an unknown key explains a required one missing beside it
        first = next((e for e in errs if e.get("type") == "extra_forbidden"), errs[0])
        loc = tuple(p for p in first.get("loc", ()) if not str(p).startswith("function-"))
        path = ".".join(str(p) for p in loc) or "<root>"
        line = _line_of(node, loc)
        where = f"line {line}: " if line is not None else ""
        raise GatewayManifestError(f"invalid gateway manifest at {where}{path}: "
                                   f"{error_message(GatewayManifest, first)}", file=file, path=path,
                                   line=line) from None
    _extras(m, file, node)
    _writers(m, file, node)
    m._file = file
    m._lines = lines
    return m


def load_manifest(path: str | os.PathLike[str]) -> GatewayManifest:
    """Load and validate a YAML (or JSON) gateway manifest.

    Relative paths in it (``store.path``, ``trace``, an upstream's ``cwd``) are resolved
    against the manifest's folder.

    Raises:
        GatewayManifestError: ``path`` names no file (None, a NUL, ...), not a regular
            file, unreadable, bad YAML (with its line), a key given twice (both lines
            named), an invalid manifest (file, field path and line named), a file over
            :data:`MAX_MANIFEST_BYTES` (refused before parsing) or a missing
            extra (``pip install 'icore[nats]'``).
    """
    if (bad := path_problem(path)) is not None:  # None, a number, a NUL, a surrogate
        raise GatewayManifestError(f"the gateway manifest path {bad}", file=repr(path)[:200],
                                   path="<root>", line=None)
    p = Path(path)
    if not p.is_file():
        raise GatewayManifestError(f"gateway manifest {p} is not a readable regular file",
                                   file=str(p), path="<root>", line=None)
    try:
        text = read_capped(p).decode("utf-8")
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = safe_load(text)
    except DuplicateKeyError as exc:  # _walk names the key's dotted path and both lines;
        _walk(node, (), {}, str(p))  # a key two merges bring (<<: [*a, *b]): its lines
        raise GatewayManifestError(f"bad YAML at line {exc.lines[1]}: {exc.problem}",
                                   file=str(p), path="<root>", line=exc.lines[1]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = None if mark is None else mark.line + 1
        raise GatewayManifestError(f"bad YAML at line {line}: {exc.problem}", file=str(p),
                                   path="<root>", line=line) from None
    except RecursionError:
        raise GatewayManifestError("cannot read gateway manifest: nested too deeply",
                                   file=str(p), path="<root>", line=None) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, OverflowError) as exc:
        raise GatewayManifestError(f"cannot read gateway manifest: {exc}", file=str(p),
                                   path="<root>", line=None) from None
    if not isinstance(data, dict):
        raise GatewayManifestError("a gateway manifest is a YAML mapping", file=str(p),
                                   path="<root>", line=1)
    if "base_dir" in data:
        raise GatewayManifestError("base_dir is set from the manifest's folder, not in it",
                                   file=str(p), path="base_dir",
                                   line=_line_of(node, ("base_dir",)))
    data = {**data, "base_dir": str(p.resolve().parent)}
    return manifest_from_dict(data, file=str(p), node=node)
