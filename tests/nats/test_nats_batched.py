"""The gate's batched head read over JetStream and its amortized quorum barrier (#27).

Real nats-server for the read and barrier paths; the barrier scheduling invariant
("authorized only by a barrier sent after the query began") is also checked as a
property over arbitrary interleavings, with the engine's put replaced by a scripted one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.fence import Outcome, avalidate
from icore.memory import HeadEntry, OwnershipMap
from icore.net import OwnerUnreachable
from icore.net.nats import NatsCluster, NatsMemory, NatsOwnerAccess, NatsStore
from icore.records import Record, derive

OM = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "executor"})
KEYS = [f"req/{i}" for i in range(8)]


class World:
    """Owner a with eight heads on the engine; the executor's plan cites them."""

    def __init__(self, cluster: NatsCluster, certs: Path, prefix: str) -> None:
        self.cluster, self.certs, self.prefix = cluster, certs, prefix
        self.store = NatsStore(cluster.urls, certs_dir=certs, ownership=OM, agent="a",
                               prefix=prefix, timeout_s=5.0)
        self.reqs: dict[str, Record] = {}
        for i, k in enumerate(KEYS):
            r = Record.create(key=k, owner="a", seq=i + 1, content={"k": k}, type="requirement")
            self.store.commit(r, writer="a")
            self.reqs[k] = r
        self.plan = derive(key="plan/p", owner="executor", seq=1, content={"do": 1},
                           inputs=list(self.reqs.values()))

    def lookup(self, rid: Any) -> Record | None:
        return self.plan if rid == self.plan.id else next(
            (r for r in self.reqs.values() if r.id == rid), None)

    async def memory(self, identity: str = "executor") -> NatsMemory:
        return await NatsMemory.connect(self.cluster.urls, certs_dir=self.certs,
                                        identity=identity, ownership=OM, prefix=self.prefix,
                                        timeout_s=5.0)


@pytest.fixture
def world(nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> Iterator[World]:
    w = World(nats_single, nats_team_certs, prefix)
    yield w
    w.store.close()


def test_batched_read_is_one_request_and_omits_missing_keys(world: World) -> None:
    """One direct get answers the present heads (a missing key is absent) with the
    snapshot's stream sequence; no key present gives None (the caller's leader reads)."""
    async def go() -> None:
        mem = await world.memory()
        try:
            assert mem.heads_direct
            before = mem.stats.gets
            got = await mem.last_heads("a", [*KEYS, "req/missing"])
            assert got is not None and mem.stats.gets == before + 1
            heads, upto = got
            assert set(heads) == set(KEYS) and upto >= len(KEYS)
            assert all(heads[k] == HeadEntry(k, r.id, r.seq) for k, r in world.reqs.items())
            assert await mem.last_heads("a", ["req/missing"]) is None
            acc = NatsOwnerAccess(mem, identity="executor")
            rep = await acc.query_heads("a", ["req/missing", "req/0"])
            assert set(rep.heads) == {"req/0"}
            assert (await acc.query_heads("a", ["req/missing"])).heads == {}
            mem.heads_direct = False  # a bucket made before it allowed direct gets
            assert await mem.last_heads("a", KEYS) is None
            assert set((await acc.query_heads("a", KEYS)).heads) == set(KEYS)
        finally:
            await mem.close()
    asyncio.run(go())


def test_malformed_head_blocks(world: World) -> None:
    """A head entry (d=1: per-key read) or an owner digest (d=8) that does not parse
    fails the query, so the gate blocks."""
    async def go() -> tuple[Outcome, Outcome]:
        mem = await world.memory()
        own = await world.memory("a")
        try:
            acc = NatsOwnerAccess(mem, identity="executor")
            ok = await avalidate(roots=[world.plan.id], deps=KEYS, lookup=world.lookup,
                                 ownership=OM, owners=acc, timeout_s=3.0)
            await own.heads_kv.put("a.req/3", b"\xc1not msgpack")
            with pytest.raises(OwnerUnreachable):
                await acc.query_heads("a", ["req/3"], timeout_s=3.0)
            await own.heads_kv.put("a", b"\xc1not msgpack")  # the owner's digest
            with pytest.raises(OwnerUnreachable):
                await acc.query_heads("a", KEYS, timeout_s=3.0)
            bad = await avalidate(roots=[world.plan.id], deps=KEYS, lookup=world.lookup,
                                  ownership=OM, owners=acc, timeout_s=3.0)
            return ok.outcome, bad.outcome
        finally:
            await mem.close()
            await own.close()
    ok, bad = asyncio.run(go())
    assert ok is Outcome.AUTHORIZED and bad is Outcome.BLOCKED


def test_barrier_failure_blocks(world: World) -> None:
    """No committed barrier, no authorization: the barrier write fails -> blocked."""
    async def go() -> Outcome:
        mem = await world.memory()
        try:
            acc = NatsOwnerAccess(mem, identity="executor")

            async def refuse(key: str, fut: asyncio.Future[int], **kw: Any) -> None:
                fut.set_exception(TimeoutError("no quorum"))
            mem.barrier = refuse  # type: ignore[method-assign]
            with pytest.raises(OwnerUnreachable):
                await acc.query_heads("a", KEYS, timeout_s=2.0)
            d = await avalidate(roots=[world.plan.id], deps=KEYS, lookup=world.lookup,
                                ownership=OM, owners=acc, timeout_s=2.0)
            return d.outcome
        finally:
            await mem.close()
    assert asyncio.run(go()) is Outcome.BLOCKED


def test_answer_behind_the_barrier_blocks(world: World) -> None:
    """A replica whose snapshot stays behind the barrier's predecessor is not trusted:
    the heads are read again, and if still behind the query blocks."""
    async def go() -> None:
        mem = await world.memory()
        try:
            acc = NatsOwnerAccess(mem, identity="executor")
            real = mem.last_heads
            calls: list[int] = []

            async def behind(owner: str, keys: Any, **kw: Any) -> Any:
                calls.append(1)
                got = await real(owner, keys, **kw)
                assert got is not None
                return got[0], 0  # a snapshot older than any barrier
            mem.last_heads = behind  # type: ignore[method-assign]
            with pytest.raises(OwnerUnreachable, match="behind"):
                await acc.query_heads("a", KEYS, timeout_s=3.0)
            assert len(calls) == 5  # read again (bounded) after the barrier committed
            stale_once = iter([True])

            async def lag_once(owner: str, keys: Any, **kw: Any) -> Any:
                got = await real(owner, keys, **kw)
                assert got is not None
                return (got[0], 0) if next(stale_once, False) else got
            mem.last_heads = lag_once  # type: ignore[method-assign]
            assert set((await acc.query_heads("a", KEYS, timeout_s=3.0)).heads) == set(KEYS)
        finally:
            await mem.close()
    asyncio.run(go())


def test_concurrent_queries_share_only_a_later_barrier(world: World) -> None:
    """Queries that begin while a barrier is in flight wait for the next one (sent after
    they began) and share it: 3 queries, 2 barrier writes, none answered early."""
    async def go() -> None:
        mem = await world.memory()
        try:
            acc = NatsOwnerAccess(mem, identity="executor")
            real_barrier = mem.barrier
            release = asyncio.Event()
            sent: list[int] = []
            held: list[asyncio.Task[None]] = []

            async def held_barrier(key: str, fut: asyncio.Future[int], **kw: Any) -> None:
                sent.append(len(sent))
                if len(sent) > 1:
                    return await real_barrier(key, fut, **kw)

                async def later() -> None:  # the first barrier leaves only on release
                    await release.wait()
                    await real_barrier(key, fut, **kw)
                held.append(asyncio.ensure_future(later()))
            mem.barrier = held_barrier  # type: ignore[method-assign]
            first = asyncio.ensure_future(acc.query_heads("a", KEYS, timeout_s=5.0))
            await asyncio.sleep(0.05)
            later = [asyncio.ensure_future(acc.query_heads("a", KEYS[:2], timeout_s=5.0))
                     for _ in range(2)]
            await asyncio.sleep(0.1)
            assert not first.done() and not any(t.done() for t in later)
            assert sent == [0]  # the next barrier waits for the in-flight one
            release.set()
            replies = await asyncio.gather(first, *later)
            assert sent == [0, 1]
            assert [len(r.heads) for r in replies] == [8, 2, 2]
        finally:
            await mem.close()
    asyncio.run(go())


class _FakeMemory:
    """Scripted barrier writes: each waits for its own release, then commits or fails."""

    def __init__(self) -> None:
        self.gates: list[asyncio.Future[bool]] = []
        self.heads_direct = True
        self.timeout_s = 60.0

        class _S:
            puts = 0
        self.stats = _S()

    async def last_heads(self, owner: str, keys: Any, **kw: Any) -> Any:
        return {}, 10**9

    async def heads(self, owner: str, keys: Any, **kw: Any) -> dict[str, HeadEntry]:
        return {}

    async def barrier(self, key: str, fut: asyncio.Future[int], **kw: Any) -> None:
        n = len(self.gates)
        gate: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.gates.append(gate)

        def settle(g: asyncio.Future[bool]) -> None:
            if not fut.done():
                if g.result():
                    fut.set_result(100 + n)
                else:  # marked retrieved, as NatsMemory.barrier does
                    fut.set_exception(TimeoutError("no quorum"))
                    fut.exception()
        gate.add_done_callback(settle)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["query", "commit", "fail", "tick"])),
                min_size=1, max_size=30))
def test_a_query_is_authorized_only_by_a_barrier_sent_after_it_began(
        script: list[tuple[str]]) -> None:
    """Over any interleaving of query arrivals and barrier outcomes: every answered
    query was answered after a barrier sent after it began, and a query whose barrier
    failed is not answered (fail closed)."""
    async def go() -> None:
        mem = _FakeMemory()
        acc = NatsOwnerAccess(mem, identity="executor")  # type: ignore[arg-type]
        fake = mem
        started: dict[int, int] = {}  # query -> number of barriers sent when it began
        tasks: dict[int, asyncio.Task[Any]] = {}
        outcome: dict[int, int] = {}  # the barrier index whose outcome settled it

        async def settle(gate_ok: bool) -> None:
            pending = [g for g in fake.gates if not g.done()]
            if pending:
                pending[0].set_result(gate_ok)
            for _ in range(50):  # let every query it settles finish
                await asyncio.sleep(0)

        for (op,) in [*script, *[("commit",)] * 40]:
            if op == "query":
                q = len(started)
                started[q] = len(fake.gates)
                tasks[q] = asyncio.ensure_future(acc.query_heads("a", ["req/x"],
                                                                 timeout_s=60.0))
                for _ in range(10):
                    await asyncio.sleep(0)
            elif op in ("commit", "fail"):
                await settle(op == "commit")
            else:
                await asyncio.sleep(0)
            for q, t in tasks.items():
                if t.done() and q not in outcome:
                    outcome[q] = len([g for g in fake.gates if g.done()]) - 1
        for q, t in tasks.items():
            assert t.done()
            ok = t.exception() is None
            settled_by = outcome[q]
            # the settling barrier was sent after the query began
            assert settled_by >= started[q]
            assert ok == fake.gates[settled_by].result()
        assert len(fake.gates) <= max(1, 2 * len(tasks))
    asyncio.run(go())
