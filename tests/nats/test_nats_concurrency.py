"""The stateful concurrent-writers conformance machine (issue 12) on JetStream: three
connections of one owner race commits; restarts reopen them on the same engine."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from icore.memory import Store
from icore.memory.conformance import (
    HOT_OWNER,
    HOT_OWNERSHIP,
    ConcurrentWriters,
    StoreWriter,
    Writer,
)
from icore.net.nats import NatsCluster, NatsStore

from .conftest import make_buckets

_ENGINE: dict[str, object] = {}
_prefixes = itertools.count(1)


@pytest.fixture(autouse=True, scope="module")
def _engine(nats_single: NatsCluster, nats_team_certs: Path) -> Iterator[None]:
    _ENGINE.update(cluster=nats_single, certs=nats_team_certs)
    yield
    _ENGINE.clear()


class NatsWriters(ConcurrentWriters):
    """Three NatsStores of one owner (three connections, as three processes have)."""

    def start(self) -> list[Writer]:
        cluster, certs = _ENGINE["cluster"], _ENGINE["certs"]
        assert isinstance(cluster, NatsCluster) and isinstance(certs, Path)
        if not hasattr(self, "prefix"):
            self.prefix = f"cw{next(_prefixes)}"
            make_buckets(cluster, certs, self.prefix)
        self.stores = [NatsStore(cluster.urls, certs_dir=certs, ownership=HOT_OWNERSHIP,
                                 agent=HOT_OWNER, prefix=self.prefix, timeout_s=5.0)
                       for _ in range(self.WRITERS)]
        return [StoreWriter(s) for s in self.stores]

    def stop(self) -> None:
        for s in self.stores:
            s.close()

    def reader(self) -> Store:
        return self.stores[0]


TestNatsWriters = NatsWriters.TestCase
TestNatsWriters.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)
