"""Fixtures for the net tests: team certificates, stores, owners on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from icore.memory import MemoryStore, OwnershipMap
from icore.net import ServerThread, init_team_certs, server_context
from icore.records import Record, derive

AGENTS = ["a", "b", "c", "executor", "mallory"]


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A team CA plus certificates for AGENTS."""
    return init_team_certs(tmp_path_factory.mktemp("certs"), AGENTS, team="test-team")


@pytest.fixture(scope="session")
def other_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Certificates for the same agent ids, signed by another CA."""
    return init_team_certs(tmp_path_factory.mktemp("other"), AGENTS, team="evil-team")


@dataclass
class World:
    """Three owners with a requirement each and a plan derived from them."""

    ownership: OwnershipMap
    stores: dict[str, MemoryStore]
    local: MemoryStore
    reqs: dict[str, Record]
    plan: Record

    def revise(self, owner: str) -> Record:
        """Commit a new revision of ``owner``'s requirement; return it."""
        old = self.reqs[owner]
        new = Record.create(key=old.key, owner=owner, seq=old.seq + 1,
                            content={"v": old.seq + 1}, parents=[old.id], type="requirement")
        self.stores[owner].commit(new, writer=owner)
        self.reqs[owner] = new
        return new


@pytest.fixture
def world() -> World:
    """Owners a, b, c; executor-local store holding a plan over their requirements."""
    om = OwnershipMap.from_mapping({"req/a": "a", "req/b": "b", "req/c": "c",
                                    "plan/*": "executor"})
    stores = {o: MemoryStore(om, o) for o in ("a", "b", "c")}
    reqs = {}
    local = MemoryStore(om, "executor")
    for o, s in stores.items():
        r = Record.create(key=f"req/{o}", owner=o, seq=1, content={"v": 1},
                          type="requirement")
        s.commit(r, writer=o)
        local.install(r)
        reqs[o] = r
    plan = derive(key="plan/1", owner="executor", seq=1, content={"do": "book"},
                  inputs=list(reqs.values()))
    local.commit(plan, writer="executor")
    return World(om, stores, local, reqs, plan)


@pytest.fixture
def servers(world: World, certs: Path) -> Iterator[dict[str, ServerThread]]:
    """One real TLS owner server per owner of ``world``, on 127.0.0.1 ephemeral ports."""
    started: dict[str, ServerThread] = {}
    try:
        for o, s in world.stores.items():
            started[o] = ServerThread(s, agent=o, ssl_context=server_context(certs, o))
        yield started
    finally:
        for t in started.values():
            t.close()
