"""The lab's link emulator shapes a real TCP owner connection through ``PathModel`` (#26).

The TCP client types ``path=`` against :class:`icore.net.PathModel`; the lab's
``LinkPair`` satisfies it structurally, so the library never imports the emulator.
"""

from __future__ import annotations

import time
from pathlib import Path

from icore.memory import MemoryStore, OwnershipMap
from icore.net import (
    ServerThread,
    SyncOwnerClient,
    client_context,
    init_team_certs,
    server_context,
)
from icore.records import Record
from icore_lab.net import FixedLink, LinkPair


def test_link_pair_shapes_a_real_connection(tmp_path: Path) -> None:
    certs = init_team_certs(tmp_path / "certs", ["a", "executor"])
    store = MemoryStore(OwnershipMap({"req/1": "a"}), "a")
    rec = Record.create(key="req/1", owner="a", seq=1, content={"v": 1})
    store.commit(rec, writer="a")
    delay_ms = 40.0
    path = LinkPair(FixedLink(delay_ms / 2), FixedLink(delay_ms / 2))
    with ServerThread(store, agent="a", ssl_context=server_context(certs, "a")) as srv, \
            SyncOwnerClient({"a": srv.address}, identity="executor",
                            ssl_context=client_context(certs, "executor"), path=path) as c:
        c.query_heads("a", ["req/1"], timeout_s=10.0)  # connect (handshake shaped too)
        t = time.perf_counter()
        reply = c.query_heads("a", ["req/1"], timeout_s=10.0)
        took_ms = (time.perf_counter() - t) * 1000.0
    assert reply.heads["req/1"].record_id == rec.id
    assert took_ms >= delay_ms * 0.9  # one round trip through both modelled links
