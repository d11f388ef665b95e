"""Issue 12 over a real owner service (TLS on 127.0.0.1): concurrent clients keep one
chain per key, a lost update is refused with the typed conflict, explicit expected heads
and create-if-absent travel over the wire."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from icore.errors import HeadConflict
from icore.memory import ExpectedHead, SQLiteStore, Store
from icore.memory.conformance import HOT_OWNER, HOT_OWNERSHIP, ConcurrentWriters, Writer
from icore.net import (
    RemoteError,
    ServerThread,
    SyncOwnerClient,
    client_context,
    init_team_certs,
    server_context,
)
from icore.records import Record


@pytest.fixture(scope="module")
def wcerts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Certificates for the hot-key owner ``w``."""
    return init_team_certs(tmp_path_factory.mktemp("wcerts"), [HOT_OWNER], team="hot")


class ClientWriter:
    """A :class:`Writer` that is a client of the owner service (its own connection)."""

    def __init__(self, addr: tuple[str, int], certs: Path) -> None:
        self.c = SyncOwnerClient({HOT_OWNER: addr}, identity=HOT_OWNER,
                                 ssl_context=client_context(certs, HOT_OWNER))
        self.job: tuple[Record, ExpectedHead] | None = None

    def arm(self, record: Record, expected_head: ExpectedHead) -> None:
        self.job = (record, expected_head)

    def fire(self) -> str:
        assert self.job is not None
        rec, exp = self.job
        try:
            ack = self.c.commit(HOT_OWNER, rec, expected_head=exp)
        except HeadConflict:
            return "conflict"
        except RemoteError as exc:
            if exc.fields.get("remote_code") in ("sequence", "sequence_conflict"):
                return "conflict"
            raise
        return "created" if ack.created else "exists"


class ServiceClients(ConcurrentWriters):
    """Clients of one owner service over an SQLite store; a restart stops the service,
    closes the store, and starts both again on the same file."""

    CERTS: Path

    def start(self) -> list[Writer]:
        self.store = SQLiteStore(self.scratch() / "w.sqlite", HOT_OWNERSHIP, HOT_OWNER)
        self.server = ServerThread(self.store, agent=HOT_OWNER,
                                   ssl_context=server_context(self.CERTS, HOT_OWNER))
        self.clients = [ClientWriter(self.server.address, self.CERTS)
                        for _ in range(self.WRITERS)]
        return list(self.clients)

    def stop(self) -> None:
        for c in self.clients:
            c.c.close()
        self.server.close()
        self.store.close()

    def reader(self) -> Store:
        return self.store



@pytest.mark.timeout(300)
def test_service_clients_keep_one_chain(wcerts: Path) -> None:
    """The stateful concurrent-writers machine with clients of a real owner service."""
    ServiceClients.CERTS = wcerts
    run_state_machine_as_test(ServiceClients, settings=settings(
        max_examples=5, stateful_step_count=8, deadline=None))


def test_lost_update_refused_over_the_wire(wcerts: Path, tmp_path: Path) -> None:
    """Two writers read head r1; the second, citing r1 after r2 won, gets the typed,
    retryable HeadConflict naming key, expected and current (main: accepted, and r2
    silently left the head); explicit expected heads and create-if-absent likewise."""
    store = SQLiteStore(tmp_path / "w.sqlite", HOT_OWNERSHIP, HOT_OWNER)
    srv = ServerThread(store, agent=HOT_OWNER, ssl_context=server_context(wcerts, HOT_OWNER))
    a = ClientWriter(srv.address, wcerts).c
    b = ClientWriter(srv.address, wcerts).c
    try:
        r1 = Record.create(key="hot/x", owner=HOT_OWNER, seq=1, content=1)
        assert a.commit(HOT_OWNER, r1, expected_head=None).created
        r2 = Record.create(key="hot/x", owner=HOT_OWNER, seq=2, content=2, parents=[r1.id])
        a.commit(HOT_OWNER, r2)
        r3 = Record.create(key="hot/x", owner=HOT_OWNER, seq=3, content=3, parents=[r1.id])
        with pytest.raises(HeadConflict) as ei:
            b.commit(HOT_OWNER, r3)
        assert ei.value.retryable
        assert ei.value.fields["key"] == "hot/x" and ei.value.fields["expected"] == r1.id
        assert ei.value.fields["current"] == r2.id and ei.value.fields["owner"] == HOT_OWNER
        fresh = Record.create(key="hot/x", owner=HOT_OWNER, seq=3, content=4)
        with pytest.raises(HeadConflict):
            b.commit(HOT_OWNER, fresh, expected_head=r1.id)
        with pytest.raises(HeadConflict):
            b.commit(HOT_OWNER, fresh, expected_head=None)
        assert b.commit(HOT_OWNER, fresh, expected_head=r2.id).created
        head = store.head("hot/x")
        assert head is not None and head.record_id == fresh.id and store.get(r3.id) is None
    finally:
        a.close()
        b.close()
        srv.close()
        store.close()
