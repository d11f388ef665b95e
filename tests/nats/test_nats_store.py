"""The JetStream owner-memory backend: conformance, the gate, engine-enforced authority."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.errors import OwnershipError
from icore.fence import Outcome, avalidate, validate
from icore.memory import AsyncOwnerAccess, MemoryStore, OwnerAccess, OwnershipMap, Store
from icore.memory.conformance import StoreConformance
from icore.net import OwnerUnreachable
from icore.net.nats import (
    ADMIN_IDENTITY,
    NatsCluster,
    NatsMemory,
    NatsOwnerAccess,
    NatsStore,
    decode_key,
    encode_key,
)
from icore.records import Record, derive

from .conftest import make_buckets


class TestNatsConformance(StoreConformance):
    """The store contract holds on JetStream (planfence App. A)."""

    @pytest.fixture(autouse=True)
    def _engine(self, nats_single: NatsCluster, nats_team_certs: Path,
                prefix: str) -> Iterator[None]:
        self.cluster, self.certs, self.prefix = nats_single, nats_team_certs, prefix
        self.opened: list[Store] = []
        yield
        for s in self.opened:
            s.close()

    def make_store(self, ownership: OwnershipMap, agent: str | None, tmp_path: Path) -> Store:
        s = NatsStore(self.cluster.urls, certs_dir=self.certs, ownership=ownership,
                      agent=agent, identity=None if agent else ADMIN_IDENTITY,
                      prefix=self.prefix, timeout_s=5.0)
        self.opened.append(s)
        return s


@given(st.lists(st.text(min_size=0, max_size=40), min_size=1, max_size=20, unique=True))
def test_key_encoding_round_trips_and_is_one_token(keys: list[str]) -> None:
    """Any semantic keys map to distinct valid KV key tokens (no '.', no '*', no '>') and
    back; a raw key never starts with '_' or '=', so neither form collides."""
    toks = [encode_key(k) for k in keys]
    assert len(set(toks)) == len(keys)
    for k, t in zip(keys, toks, strict=True):
        assert re.fullmatch(r"[-/_=A-Za-z0-9]+", t) or (k == "" and t == "_")
        assert decode_key(t) == k and not t.startswith("=")


def test_key_encoding_is_injective() -> None:
    """Semantic keys map to one subject token each, and back."""
    keys = ["req/a", "plan/trip-17", "a.b", "_x", "ünï", "a b", "x=1", "", "/lead"]
    toks = [encode_key(k) for k in keys]
    assert len(set(toks)) == len(keys)
    assert all("." not in t and " " not in t for t in toks)
    assert [decode_key(t) for t in toks] == keys


OM = OwnershipMap.from_mapping({"req/a": "a", "req/b": "b", "req/c": "c",
                                "plan/*": "executor"})
DEPS = ["req/a", "req/b", "req/c"]


class Team:
    """Owners a, b, c on JetStream; the executor's local replica holds the plan."""

    def __init__(self, cluster: NatsCluster, certs: Path, prefix: str) -> None:
        self.stores = {o: NatsStore(cluster.urls, certs_dir=certs, ownership=OM, agent=o,
                                    prefix=prefix, timeout_s=5.0) for o in ("a", "b", "c")}
        self.ex = NatsStore(cluster.urls, certs_dir=certs, ownership=OM, agent="executor",
                            prefix=prefix, timeout_s=5.0)
        self.local = MemoryStore(OM, "executor")
        self.reqs: dict[str, Record] = {}
        for o, s in self.stores.items():
            r = Record.create(key=f"req/{o}", owner=o, seq=1, content={"v": 1},
                              type="requirement")
            s.commit(r, writer=o)
            self.local.install(r)
            self.reqs[o] = r
        self.plan = derive(key="plan/p", owner="executor", seq=1, content={"do": 1},
                           inputs=list(self.reqs.values()))
        self.local.commit(self.plan, writer="executor")

    def revise(self, owner: str) -> Record:
        old = self.reqs[owner]
        new = derive(key=old.key, owner=owner, seq=old.seq + 1, content={"v": old.seq + 1},
                     inputs=[old], type="requirement")
        self.stores[owner].commit(new, writer=owner)
        self.reqs[owner] = new
        return new

    def close(self) -> None:
        for s in (*self.stores.values(), self.ex):
            s.close()


@pytest.fixture
def team(nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> Iterator[Team]:
    t = Team(nats_single, nats_team_certs, prefix)
    yield t
    t.close()


def test_gate_runs_unchanged_over_nats(team: Team) -> None:
    """Authorized; after a revision replan-required with the fresh verified record;
    after the replan a second change blocks (planfence Alg. 1, App. A.3)."""
    owners = team.ex.owner_access()
    assert isinstance(owners, OwnerAccess)
    kw = {"roots": [team.plan.id], "deps": DEPS, "lookup": team.local.lookup,
          "ownership": OM, "owners": owners}
    assert validate(**kw).outcome is Outcome.AUTHORIZED  # type: ignore[arg-type]
    new = team.revise("c")
    d = validate(**kw)  # type: ignore[arg-type]
    assert d.outcome is Outcome.REPLAN_REQUIRED and d.fresh["req/c"] == new
    assert validate(**kw, replanned=True).outcome is Outcome.BLOCKED  # type: ignore[arg-type]


def test_async_gate_and_missing_buckets_block(team: Team, nats_single: NatsCluster,
                                              nats_team_certs: Path, prefix: str) -> None:
    """avalidate over NatsOwnerAccess; a team whose buckets do not exist cannot connect,
    and an access whose engine fails blocks (fail closed)."""
    async def go() -> tuple[Outcome, Outcome]:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="executor", ownership=OM, prefix=prefix)
        try:
            acc = NatsOwnerAccess(mem, identity="executor")
            assert isinstance(acc, AsyncOwnerAccess)
            ok = await avalidate(roots=[team.plan.id], deps=DEPS, lookup=team.local.lookup,
                                 ownership=OM, owners=acc)
            await mem.close()  # the engine is gone for this client (both connections)
            bad = await avalidate(roots=[team.plan.id], deps=DEPS,
                                  lookup=team.local.lookup, ownership=OM, owners=acc,
                                  timeout_s=1.0)
            return ok.outcome, bad.outcome
        finally:
            await mem.close()
    ok, bad = asyncio.run(go())
    assert ok is Outcome.AUTHORIZED and bad is Outcome.BLOCKED
    with pytest.raises(OwnerUnreachable):
        NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                  prefix="nosuchteam", timeout_s=2.0)


def test_engine_refuses_another_owners_keys(team: Team, nats_single: NatsCluster,
                                             nats_team_certs: Path, prefix: str) -> None:
    """Authority is the engine's: user ``a``, bypassing every client check, cannot write
    b's owner entry, head or record (subject permissions); b's head is unchanged."""
    forged = derive(key="req/b", owner="b", seq=9, content={"v": "forged"},
                    inputs=[team.reqs["b"]], type="requirement")

    async def go() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="a", ownership=OM, prefix=prefix,
                                       timeout_s=1.5)
        try:
            _it, rev = await mem.intent("b")
            with pytest.raises(OwnershipError):
                await mem.decide("b", forged, rev)
            _h, hrev = await mem.head("b", "req/b")
            from icore.memory.nats._codec import _pack
            with pytest.raises(OwnershipError):
                await mem._write(mem.heads_kv, "b.req/b", _pack([forged.id, 9]), hrev, None)
            assert mem.stats.permission_denied >= 2
        finally:
            await mem.close()
    asyncio.run(go())
    head = team.stores["b"].head("req/b")
    assert head is not None and head.record_id == team.reqs["b"].id
    assert team.ex.get(forged.id) is None


def test_concurrent_writers_of_one_owner(nats_single: NatsCluster, nats_team_certs: Path,
                                         prefix: str) -> None:
    """Two processes' stores of one owner race on the same sequence: exactly one wins,
    the loser gets SequenceConflict; the owner sequence spans keys."""
    from icore.errors import SequenceConflict
    om = OwnershipMap.from_mapping({"req/a": "a", "req/x": "a"})
    s1, s2 = (NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=om,
                        agent="a", prefix=prefix, timeout_s=5.0) for _ in range(2))
    try:
        r1 = Record.create(key="req/a", owner="a", seq=1, content={"w": 1})
        r2 = Record.create(key="req/x", owner="a", seq=1, content={"w": 2})
        s1.commit(r1, writer="a")
        with pytest.raises(SequenceConflict):
            s2.commit(r2, writer="a")
        assert s2.next_seq() == 2
        assert not s2.commit(r1, writer="a").created  # idempotent from another process
        r3 = Record.create(key="req/x", owner="a", seq=2, content={"w": 3})
        s2.commit(r3, writer="a")
        assert sorted(s1.head_keys()) == ["req/a", "req/x"]
    finally:
        s1.close()
        s2.close()


def test_watcher_installs_new_heads(team: Team) -> None:
    """Metadata sync through a KV watcher: every owner's new head reaches the replica."""
    seen: list[str] = []
    team.ex.watch_heads(on_install=lambda r: seen.append(r.key))
    new = team.revise("b")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        h = team.ex.installed_head("req/b")
        if h is not None and h.record_id == new.id:
            break
        time.sleep(0.05)
    h = team.ex.installed_head("req/b")
    assert h is not None and h.record_id == new.id
    assert team.ex.get(new.id) == new and "req/b" in seen
    # the installed view never moves an authoritative head, nor writes to the engine
    assert team.ex.head("req/b") is None


def test_fresh_store_reads_existing_memory(team: Team, nats_single: NatsCluster,
                                           nats_team_certs: Path, prefix: str) -> None:
    """A new process of owner b sees its committed heads and sequence in the engine."""
    team.revise("b")
    s = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="b",
                  prefix=prefix, timeout_s=5.0)
    try:
        assert s.next_seq() == 3
        h = s.head("req/b")
        assert h is not None and h.record_id == team.reqs["b"].id
        assert s.get(team.reqs["b"].id) == team.reqs["b"]
    finally:
        s.close()


_ = make_buckets


def _race(stores: list[NatsStore], recs: list[Record]) -> list[object]:
    """Commit recs[i] through stores[i], all released at once; results or conflicts."""
    import threading

    from icore.errors import CommitConflict
    out: list[object] = [None] * len(recs)
    gate = threading.Barrier(len(recs))

    def go(i: int) -> None:
        gate.wait()
        try:
            out[i] = stores[i].commit(recs[i], writer=recs[i].owner)
        except CommitConflict as exc:
            out[i] = exc
    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(recs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


def test_cross_process_race_one_winner(nats_single: NatsCluster, nats_team_certs: Path,
                                       prefix: str) -> None:
    """Four stores of one owner (four connections, as four processes would have) commit
    the next version from one base at once: exactly one wins, the others get a
    retryable CommitConflict, and the head is the winner's (compare-and-set in the
    engine, not a process-local lock)."""
    from icore.errors import CommitConflict
    om = OwnershipMap.from_mapping({"req/a": "a"})
    stores = [NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=om,
                        agent="a", prefix=prefix, timeout_s=5.0) for _ in range(4)]
    try:
        base = Record.create(key="req/a", owner="a", seq=1, content={"r": -1})
        stores[0].commit(base, writer="a")
        for rnd in range(8):
            seq = stores[0].next_seq()
            recs = [Record.create(key="req/a", owner="a", seq=seq + (i % 2),
                                  content={"r": rnd, "i": i}, parents=[base.id])
                    for i in range(4)]
            out = _race(stores, recs)
            assert all(o.retryable for o in out if isinstance(o, CommitConflict))
            won = [r for r, o in zip(recs, out, strict=True) if not isinstance(o, Exception)]
            assert len(won) == 1, out
            head = stores[1].head("req/a")
            assert head is not None and head.record_id == won[0].id
            base = won[0]
    finally:
        for s in stores:
            s.close()


def test_async_access_from_another_loop(team: Team) -> None:
    """The store's async access works from any event loop (e.g. an agent's)."""
    acc = team.ex.async_owner_access()
    assert isinstance(acc, AsyncOwnerAccess)

    async def go() -> Outcome:
        d = await avalidate(roots=[team.plan.id], deps=DEPS, lookup=team.local.lookup,
                            ownership=OM, owners=acc)
        return d.outcome
    assert asyncio.run(go()) is Outcome.AUTHORIZED


def test_commit_decided_but_not_acknowledged_is_replayed(
        team: Team, nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """A writer that crashed after the owner CAS (intent written, record not stored, head
    not moved): readers still see the old head; the owner's retry of the identical
    record is an idempotent replay that completes it."""
    from icore.memory.nats._codec import _pack
    old = team.reqs["a"]
    new = derive(key="req/a", owner="a", seq=2, content={"v": 2}, inputs=[old],
                 type="requirement")

    async def crash_after_owner_cas() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="a", ownership=OM, prefix=prefix)
        try:
            _it, rev = await mem.intent("a")
            from icore.records import encode_record
            await mem._write(mem.owners_kv, "a",
                             _pack([new.seq, new.id, new.key, encode_record(new)]), rev, None)
        finally:
            await mem.close()
    asyncio.run(crash_after_owner_cas())
    reply = team.ex.owner_access().query_heads("a", ["req/a"])
    assert reply.heads["req/a"].record_id == old.id  # not acknowledged: not visible yet
    res = team.stores["a"].commit(new, writer="a")
    assert not res.created
    head = team.stores["a"].head("req/a")
    assert head is not None and head.record_id == new.id
    assert team.ex.get(new.id) == new


def _wait_installed(s: NatsStore, key: str, rid: str, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        h = s.installed_head(key)
        if h is not None and h.record_id == rid:
            return
        time.sleep(0.05)
    raise AssertionError(f"{key} not installed as {rid[:12]}")


@pytest.mark.parametrize("k", [1, 2])
def test_metadata_sync_k_on_the_engine(team: Team, k: int) -> None:
    """Metadata sync K runs on NATS: watchers install an owner's heads after every K
    dirty updates, and the gate over the installed heads (planfence Sec. 5.1) sees a
    revision at once for K=1, only after K updates for K=2 (the K>1 sensitivity)."""
    from icore.fence import InstalledHeads
    team.ex.watch_heads(k=k)
    for o, r in team.reqs.items():
        _wait_installed(team.ex, f"req/{o}", r.id)
    kw = {"roots": [team.plan.id], "deps": DEPS, "lookup": team.local.lookup,
          "ownership": OM, "owners": InstalledHeads(team.ex)}
    assert validate(**kw).outcome is Outcome.AUTHORIZED  # type: ignore[arg-type]
    first = team.revise("c")
    if k == 1:
        _wait_installed(team.ex, "req/c", first.id)
        assert validate(**kw).outcome is Outcome.REPLAN_REQUIRED  # type: ignore[arg-type]
        return
    time.sleep(0.5)  # one dirty update of two: nothing installed yet
    h = team.ex.installed_head("req/c")
    assert h is not None and h.record_id != first.id
    assert validate(**kw).outcome is Outcome.AUTHORIZED  # type: ignore[arg-type]
    second = team.revise("c")
    _wait_installed(team.ex, "req/c", second.id)
    d = validate(**kw)  # type: ignore[arg-type]
    assert d.outcome is Outcome.REPLAN_REQUIRED and d.fresh["req/c"] == second


def test_spoiled_entries_under_own_prefix_fool_nobody(
        team: Team, nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """Agent b may write anything under its own prefix: garbage under a's record id, or
    a's genuine record. Neither hides nor fakes a's record: lookups verify and accept a
    record only under its own owner's prefix."""
    from icore.records import encode_record
    ra = team.reqs["a"]
    ghost = derive(key="req/a", owner="a", seq=7, content={"v": "never committed"},
                   inputs=[ra], type="requirement")

    async def spoil() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="b", ownership=OM, prefix=prefix)
        try:
            await mem._write(mem.records_kv, f"b.{ra.id}", b"\x00garbage", None, None)
            await mem._write(mem.records_kv, f"b.{ghost.id}", encode_record(ghost), None,
                             None)
        finally:
            await mem.close()
    asyncio.run(spoil())
    fresh = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM,
                      agent="c", prefix=prefix, timeout_s=5.0)
    try:
        assert fresh.get(ra.id) == ra
        assert fresh.get(ghost.id) is None  # not a's: b's copy proves nothing
    finally:
        fresh.close()
    # and a's own commit of that record is not mistaken for an idempotent replay
    assert team.stores["a"].commit(ghost, writer="a").created
