"""Fixtures for the lab's network tests: three owners and a plan over their records.

The same world as tests/net/conftest.py (the library's transport tests), for the
virtual-time transports.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from icore.memory import MemoryStore, OwnershipMap
from icore.records import Record, derive


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
