"""The run manifest of ``icore run`` (YAML, validated with pydantic).

A run manifest names the team (agents and roles), who owns which keys, the protected
tools with their declared dependency scopes D(a), the workflow family and templates, the
policy under test, the agent backend and the injected post-plan revision. Example (the
embedded default, ``icore/live/manifests/reservation.yaml``)::

    name: reservation-live
    family: reservation
    seeds: [0]
    policy: planfence            # any icore.fence.Policy, e.g. owner_head_freshness
    revision: true               # inject one owner revision after planning
    backend: {kind: scripted}    # or {kind: llm, base_url: ..., model: ...}
    agents:
      - {id: planner-1, role: planner}
      - {id: retriever-1, role: retriever}
      - {id: reviser-1, role: reviser}
      - {id: executor-1, role: executor}
      - {id: auditor-1, role: auditor}
    ownership: {"req/*": reviser-1, "cat/*": retriever-1, "short/*": retriever-1,
                "plan/*": planner-1, "act/*": executor-1, "audit/*": auditor-1}
    tools:
      - {name: book, depends_on: ["req/{task}"]}

Validation errors name the offending path (pydantic's ``loc``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from icore._files import not_a_regular_file, path_problem
from icore._yaml import ScalarTypes, safe_load
from icore.fence import Policy, strategy
from icore.live._errors import LiveManifestError as LiveManifestError  # re-exported
from icore.live._workflow import FAMILY_SPECS, ROLES
from icore.memory import OwnershipMap
from icore.net import MemorySpec, TeamManifest

LIVE_POLICIES = tuple(Policy)
"""Policies a live run supports: all nine (planfence Sec. 5.1-5.2 / App. A.5)."""

KEY_KINDS = ("req", "cat", "short", "plan", "act", "audit")
"""Key kinds of a live task; each needs an owner."""


WORKFLOW_KEYS = ("req/{task}", "cat/{task}", "short/{task}", "plan/{task}")
"""The keys the five-agent workflow writes per task (requirement, catalog, shortlist, plan):
a protected tool's D(a) names some of them (any other key is never reached from a plan,
so every task was blocked and the run exited 1 naming no manifest field; issue 29)."""


class _Model(ScalarTypes):
    # NaN and infinity are refused as such (not as "should be <= 3600")
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LiveAgentSpec(_Model):
    """One agent process."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    """Agent id (also the identity in its certificate)."""
    role: str
    """The agent's role in the five-agent workflow (planner, retriever, reviser,
    executor, auditor)."""

    @field_validator("role")
    @classmethod
    def _role(cls, v: str) -> str:
        if v not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {v!r}")
        return v


class ToolSpecM(_Model):
    """A protected tool and its declared dependency scope D(a)."""

    name: str = Field(min_length=1)
    """Action name (``book``, ``ship``, ``release``)."""
    depends_on: tuple[str, ...] = Field(min_length=1)
    """Key templates; ``{task}`` is replaced by the task id."""

    @field_validator("depends_on")
    @classmethod
    def _keys(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for k in v:
            if not k or "{" in k.replace("{task}", ""):
                raise ValueError(f"bad key template {k!r}; only {{task}} is substituted")
            if k not in WORKFLOW_KEYS:  # no agent writes it: every task would be blocked
                raise ValueError(f"{k!r} is no key the workflow's agents write; use one of "
                                 f"{', '.join(WORKFLOW_KEYS)} (issue 29)")
        return v


class BackendSpec(_Model):
    """The agent backend."""

    kind: Literal["scripted", "llm"] = "scripted"
    """``scripted`` (deterministic, no network) or ``llm`` (OpenAI-compatible)."""
    base_url: str | None = None
    """LLM base URL (else ``ICORE_LLM_BASE_URL``)."""
    model: str | None = None
    """LLM model (else ``ICORE_LLM_MODEL``)."""
    api_key_env: str = "ICORE_LLM_API_KEY"
    """Environment variable holding the API key (keys never go into manifests)."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Per-request timeout, seconds."""
    tool_choice: Literal["negotiate", "named", "required", "json_schema", "json_object",
                         "auto"] = "negotiate"
    """How the one tool is forced (``negotiate``: probe the server, see
    :func:`icore.agents.negotiate`)."""
    slots: int | None = Field(default=None, ge=1, le=256)
    """Requests the server serves at once (None: ask the server, else 1)."""

    def resolved(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Backend config for the agent processes (API key read from the environment)."""
        e = os.environ if env is None else env
        out: dict[str, Any] = self.model_dump()
        out["api_key"] = e.get(self.api_key_env) or None
        return out


class CrashSpec(_Model):
    """Fault injection for reliability tests: kill one agent process at a stage."""

    agent: str
    """The agent to kill (SIGKILL)."""
    at: Literal["after_seed", "after_plan", "after_revision", "after_execute"] = "after_plan"
    """Workflow stage after which it is killed (for the first task that reaches it)."""


class Timeouts(_Model):
    """Bounds of a run (seconds)."""

    rpc_s: float = Field(default=2.0, gt=0, le=60)
    """Owner RPC timeout (design.md 3.2)."""
    step_s: float = Field(default=60.0, gt=0, le=3600)
    """Longest one workflow step may take."""
    start_s: float = Field(default=30.0, gt=0, le=600)
    """Longest agent start-up may take."""
    run_s: float = Field(default=900.0, gt=0, le=86400)
    """Longest a whole run may take."""


class RunManifest(_Model):
    """An ``icore run`` manifest."""

    name: str = "live-run"
    """Run name (report title, team name, certificate): not empty or blank."""
    family: Literal["reservation", "fulfillment", "deployment"] = "reservation"
    """Workflow family."""
    seeds: tuple[int, ...] = Field(default=(0,), min_length=1)
    """Workflow templates (seeds) of the family; one task each (at least one: an empty
    list would run nothing and look like a clean run)."""
    repeat: int = Field(default=1, ge=1, le=1000)
    """Copies of every task (load tests: concurrent workflows on one team)."""
    concurrency: int = Field(default=1, ge=1, le=64)
    """Workflows run at once on the team."""
    policy: Literal["local_replica", "owner_head_freshness", "centralized_lineage",
                    "metadata_sync", "per_key_all_key", "batched_all_key", "planfence",
                    "majority_replica", "all_replica"] = "planfence"
    """Policy under test (any :class:`~icore.fence.Policy`; quorum policies need each
    agent's own owner service, so not on NATS)."""
    revision: bool = True
    """Inject one owner revision after planning, before the action."""
    backend: BackendSpec = BackendSpec()
    agents: tuple[LiveAgentSpec, ...]
    ownership: dict[str, str]
    """Key or glob pattern -> owning agent id."""
    tools: tuple[ToolSpecM, ...]
    timeouts: Timeouts = Timeouts()
    crash: CrashSpec | None = None
    """Reliability fault injection (tests)."""
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    """SQLite ``synchronous`` pragma of the agents' memories."""
    memory: MemorySpec = MemorySpec()
    """Where owner memory lives: each agent's SQLite (default) or NATS JetStream."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError(f"the run needs a name (report title, team name), not {v!r}")
        return v

    @model_validator(mode="after")
    def _check(self) -> RunManifest:
        ids = [a.id for a in self.agents]
        if len(set(ids)) != len(ids):
            raise ValueError("agent ids must be unique")
        roles = [a.role for a in self.agents]
        for r in ROLES:
            if roles.count(r) != 1:
                raise ValueError(f"the five-agent workflow needs exactly one {r} "
                                 f"(found {roles.count(r)})")
        if "central" in ids:
            raise ValueError("'central' is reserved for the centralized-lineage service")
        if self.memory.backend == "nats":
            dotted = [i for i in ids if "." in i]
            if dotted:
                raise ValueError(f"agent id {dotted[0]!r} contains '.', which the NATS "
                                 "memory backend cannot use as a subject token (use '-' "
                                 "or '_')")
        for key, owner in self.ownership.items():
            if owner not in ids:
                raise ValueError(f"ownership[{key!r}] names unknown agent {owner!r}")
        om = OwnershipMap.from_mapping(self.ownership)
        for kind in KEY_KINDS:
            if om.owner_of(f"{kind}/probe-task") is None:
                raise ValueError(f"no owner for {kind}/<task> keys")
        action = FAMILY_SPECS[self.family].action
        if action not in {t.name for t in self.tools}:
            raise ValueError(f"the {self.family} workflow needs a protected tool "
                             f"named {action!r}")
        if self.crash is not None and self.crash.agent not in ids:
            raise ValueError(f"crash.agent {self.crash.agent!r} is not an agent")
        return self

    # -- helpers --------------------------------------------------------------------
    def agent_for(self, role: str) -> str:
        """Return the id of the agent with ``role``."""
        for a in self.agents:
            if a.role == role:
                return a.id
        raise KeyError(role)

    def ownership_map(self) -> OwnershipMap:
        """The team's :class:`~icore.memory.OwnershipMap`."""
        return OwnershipMap.from_mapping(self.ownership)

    def tool(self, name: str) -> ToolSpecM:
        """The tool named ``name``."""
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def team_manifest(self, out_dir: str | os.PathLike[str], *, policy: str | None = None
                      ) -> TeamManifest:
        """The :class:`icore.net.TeamManifest` of this run's team (composition).

        Agents bind ephemeral ports on 127.0.0.1; stores live in ``<out_dir>/agents`` and
        certificates in ``<out_dir>/certs``. Centralized lineage adds the ``central``
        memory service (not on NATS, where the engine is the one shared service).
        """
        agents = [{"id": a.id, "role": a.role, "host": "127.0.0.1", "port": 0}
                  for a in self.agents]
        if strategy(policy or self.policy).central and self.memory.backend != "nats":
            agents.append({"id": "central", "role": "central", "host": "127.0.0.1",
                           "port": 0})
        out = Path(out_dir)
        return TeamManifest.parse({
            "team": f"icore-run-{self.name}"[:60], "agents": agents,
            "ownership": dict(self.ownership), "data_dir": str(out / "agents"),
            "certs_dir": str(out / "certs"), "synchronous": self.synchronous,
            "rpc_timeout_s": self.timeouts.rpc_s, "memory": self.memory.model_dump()},
            where=f"<run manifest {self.name}>")

    def with_(self, **changes: Any) -> RunManifest:
        """Return a validated copy with ``changes`` applied."""
        data = self.model_dump()
        data.update(changes)
        return manifest_from_dict(data)


def _loc(err: ValidationError) -> str:
    first = err.errors()[0]
    return ".".join(str(p) for p in first.get("loc", ())) or "<root>"


def manifest_from_dict(data: Mapping[str, Any], *, file: str = "<dict>") -> RunManifest:
    """Validate a manifest mapping.

    Raises:
        LiveManifestError: not a mapping, or invalid (naming the file and the offending
            path).
    """
    if not isinstance(data, Mapping):
        raise LiveManifestError(f"a run manifest must be a mapping, not "
                                f"{type(data).__name__}", file=file, path="<root>")
    try:
        return RunManifest.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise LiveManifestError(f"invalid run manifest: {first.get('msg')}", file=file,
                            path=_loc(exc)) from exc


def load_manifest(path: str | os.PathLike[str]) -> RunManifest:
    """Load a YAML (or JSON) run manifest.

    Raises:
        LiveManifestError: not a regular file (a FIFO, a device, a folder: refused by kind
            without opening it), an unreadable file, bad YAML or an invalid manifest
            (``fields['file']`` names the file); a path that names no file (None, a
            number, a NUL byte, a lone surrogate).
    """
    if (bad := path_problem(path)) is not None:
        raise LiveManifestError(f"the run manifest path {bad}", file=repr(path)[:200],
                                path="<root>")
    p = Path(path)
    if (problem := not_a_regular_file(p)) is not None:
        raise LiveManifestError(f"run manifest {p} {problem}; refusing to read it",
                            file=str(p), path="<root>")
    try:
        data = safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        where = str(exc).replace('"<unicode string>"', f'"{p}"')  # YAML names no file
        raise LiveManifestError(f"cannot read run manifest {p}: {where}", file=str(p)) \
            from exc
    except (ValueError, OverflowError) as exc:  # an int of 5000 digits, 2026-13-45
        raise LiveManifestError(f"cannot read run manifest {p}: a value YAML cannot "
                                f"convert: {exc}", file=str(p)) from None
    except RecursionError:
        raise LiveManifestError("cannot read run manifest: nested too deeply", file=str(p)) \
            from None
    if not isinstance(data, dict):
        raise LiveManifestError("a run manifest is a YAML mapping", file=str(p), path="<root>")
    return manifest_from_dict(data, file=str(p))


def default_manifest(family: str = "reservation") -> RunManifest:
    """The embedded default manifest of ``family`` (scripted backend, PlanFence).

    Raises:
        LiveManifestError: an unknown family (a ``ValueError``).
    """
    if not isinstance(family, str) or family not in FAMILY_SPECS:
        raise LiveManifestError(f"unknown family {family!r}; use one of "
                            f"{', '.join(sorted(FAMILY_SPECS))}", file="<embedded>",
                            path="family")
    folder = resources.files("icore.live").joinpath("manifests")
    text = folder.joinpath(f"{family}.yaml").read_text(encoding="utf-8")
    return manifest_from_dict(safe_load(text), file=f"<embedded {family}.yaml>")
