"""A team's NATS engine: local dev servers (or external ones) and the buckets.

The store itself lives in :mod:`icore.memory.nats`; this module starts what a team run
needs around it (see :mod:`icore.net.nats`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from icore.memory.nats import ADMIN_IDENTITY, connect_nats, create_buckets
from icore.net._team.manifest import MemorySpec
from icore.net._team.nats_server import NatsCluster, nats_certs


class TeamEngine:
    """A team's NATS engine: its servers (external, or local dev ones) and buckets.

    Args:
        spec: the manifest's ``memory`` section (backend ``nats``).
        folder: working folder of local dev servers (configs, logs, storage).
        certs_dir: team certs folder; completed with the server and admin pairs.
        agents: the team's agents (one NATS user each).
        team: team name of the certificates.

    :meth:`start` starts ``spec.nodes`` local servers when ``spec.servers`` is empty,
    then creates the buckets as the admin (replicas = 3 on a 3-node cluster).
    """

    def __init__(self, spec: MemorySpec, *, folder: str | Path, certs_dir: str | Path,
                 agents: Sequence[str], team: str) -> None:
        self.spec = spec
        self.folder = Path(folder)
        self.certs_dir = Path(certs_dir)
        self.agents = list(agents)
        self.team = team
        self.cluster: NatsCluster | None = None
        self.urls: list[str] = list(spec.servers)

    def start(self, *, timeout_s: float = 10.0) -> list[str]:
        """Start local servers if needed and create the buckets; return the URLs.

        Raises:
            NatsServerError: a local server did not start.
            OwnerUnreachable: the engine is unreachable with the admin certificate.
        """
        nats_certs(self.certs_dir, self.agents, team=self.team)
        replicas = 3 if self.spec.nodes == 3 else 1
        if not self.urls:
            self.cluster = NatsCluster(self.folder, self.certs_dir, self.agents,
                                       team=self.team, nodes=self.spec.nodes,
                                       prefix=self.spec.prefix).start()
            self.urls = self.cluster.urls
            replicas = self.cluster.replicas

        async def make() -> None:
            nc = await connect_nats(self.urls, certs_dir=self.certs_dir,
                                    identity=ADMIN_IDENTITY, timeout_s=timeout_s)
            try:
                await create_buckets(nc, replicas=replicas, prefix=self.spec.prefix)
            finally:
                await nc.close()
        try:
            asyncio.run(make())
        except BaseException:
            self.stop()
            raise
        return self.urls

    def stop(self) -> None:
        """Stop the local servers this engine started (external ones are left alone)."""
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    def __enter__(self) -> TeamEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
