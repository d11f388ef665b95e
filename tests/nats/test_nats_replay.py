"""A commit retried after its head did not move is acknowledged only once it moved (#27).

The NATS commit decides by the owner CAS, then stores the record, then moves the head
and the owner's digest. An attempt that fails after the record is stored (a timeout on
the head or digest write: a node killed, a loaded machine) leaves the record in the
engine with its head behind; the writer retries the identical record. That retry is an
idempotent replay, but it must not be acknowledged before the head and the digest hold
the record, or the gate reads a head older than an acknowledged write (the safety
failure the 3-node fault test saw under load). Real nats-server (``nats_single``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats.errors
import pytest

from icore.memory import FROM_PARENTS, CommitOp, CommitResult, OwnershipMap
from icore.net import OwnerUnreachable
from icore.net.nats import NatsCluster, NatsStore
from icore.records import Record

OM = OwnershipMap.from_mapping({"log/*": "a", "plan/*": "executor"})
KEYS = [f"log/{i}" for i in range(3)]


def _fail_once(target: Callable[..., Awaitable[Any]], rid: str
               ) -> Callable[..., Awaitable[Any]]:
    """``target`` (``_move_head`` or ``_note_digest``), timing out once for ``rid``."""
    calls = iter([True])

    async def flaky(owner: str, it: Any, *args: Any) -> Any:
        if it.rid == rid and next(calls, False):
            raise nats.errors.TimeoutError
        return await target(owner, it, *args)
    return flaky


def _commit_many(store: NatsStore, record: Record) -> CommitResult:
    """One commit through ``commit_many`` (the owner service's group path)."""
    (res,) = store.commit_many([CommitOp(record, "a", FROM_PARENTS)])
    if isinstance(res, Exception):
        raise res
    return res


@pytest.mark.parametrize("via", ["commit", "commit_many"])
@pytest.mark.parametrize("step", ["_move_head", "_note_digest"])
def test_replay_after_a_lost_head_move_moves_it_before_the_ack(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str, step: str,
        via: str) -> None:
    """The record is stored, the head (or digest) write times out; the identical retry is
    acknowledged as a replay only with the head and the digest holding the record. Also
    through ``commit_many`` (the owner service's group commits): same retries, same
    settle, the timeout a typed refusal of its op."""
    a = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                  prefix=prefix, timeout_s=3.0)
    ex = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM,
                   agent="executor", prefix=prefix, timeout_s=3.0)
    try:
        first = [Record.create(key=k, owner="a", seq=i + 1, content={"i": i})
                 for i, k in enumerate(KEYS)]
        for r in first:
            a.commit(r, writer="a")
        r2 = Record.create(key="log/0", owner="a", seq=4, content={"i": 4},
                           parents=[first[0].id])
        real = getattr(a.memory, step)
        setattr(a.memory, step, _fail_once(real, r2.id))
        def commit(r: Record) -> CommitResult:
            return a.commit(r, writer="a") if via == "commit" else _commit_many(a, r)
        with pytest.raises(OwnerUnreachable):
            commit(r2)  # decided and stored, its head (or digest) not moved
        setattr(a.memory, step, real)
        res = commit(r2)  # the writer's retry of the identical record
        assert not res.created  # an idempotent replay ...
        head = a.head("log/0")
        assert head is not None and head.record_id == r2.id  # ... acked with its head moved
        got = ex.owner_access().query_heads("a", KEYS, timeout_s=3.0).heads  # the digest
        assert got["log/0"].record_id == r2.id, "the gate reads a head behind an ack"
        got1 = ex.owner_access().query_heads("a", ["log/0"], timeout_s=3.0).heads
        assert got1["log/0"].record_id == r2.id
    finally:
        a.close()
        ex.close()
