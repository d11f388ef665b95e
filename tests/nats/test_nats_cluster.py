"""Faults on a real 3-node JetStream cluster (three nats-server processes, replicas = 3).

Kill one node mid-run: no acknowledged write is lost and validations continue. Kill a
second: the gate blocks (fail closed) within its timeout. Restart both: every
acknowledged write is there; every answer the gate gets holds every acknowledged head
(availability waited for apart, a single answer behind fails). A follower paused with
SIGSTOP and resumed answers direct gets while it catches up: the quorum-barrier check
refuses or re-reads each answer behind (without it the test fails).
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icore.errors import IcoreError
from icore.fence import Outcome, validate
from icore.memory import MemoryStore, OwnershipMap
from icore.net import OwnerUnreachable, client_context
from icore.net.nats import (
    ADMIN_IDENTITY,
    NatsCluster,
    NatsStore,
    bucket_names,
    connect_nats,
)
from icore.records import Record, derive

from .conftest import AGENTS, TEAM, make_buckets

pytestmark = pytest.mark.slow

OM = OwnershipMap.from_mapping({"req/a": "a", "req/b": "b", "log/*": "a",
                                "plan/*": "executor"})
DEPS = ["req/a", "req/b"]
GATE_TIMEOUT_S = 1.5


@pytest.fixture
def cluster(tmp_path: Path, nats_team_certs: Path) -> Iterator[NatsCluster]:
    with NatsCluster(tmp_path / "cluster", nats_team_certs, AGENTS, team=TEAM,
                     nodes=3) as cl:
        make_buckets(cl, nats_team_certs, "icore")
        yield cl


class Writer(threading.Thread):
    """Owner ``a`` appends log records (each citing its key's previous version); each one
    is retried until acknowledged."""

    def __init__(self, store: NatsStore) -> None:
        super().__init__(daemon=True)
        self.store, self.acked, self.failures = store, [], 0
        self.stop_ev = threading.Event()

    def run(self) -> None:
        seq = self.store.next_seq()
        i = 0
        last: dict[str, str] = {}
        while not self.stop_ev.is_set():
            key = f"log/{i % 5}"
            prev = last.get(key)
            rec = Record.create(key=key, owner="a", seq=seq, content={"i": i},
                                parents=[prev] if prev else [])
            last[key] = rec.id
            while not self.stop_ev.is_set():
                try:
                    self.store.commit(rec, writer="a")
                    self.acked.append(rec)
                    break
                except IcoreError:
                    self.failures += 1  # not acknowledged: retry the identical record
                    time.sleep(0.05)
            seq, i = seq + 1, i + 1


def _validate(ex: NatsStore, local: MemoryStore, plan: Record) -> tuple[Outcome, float]:
    t0 = time.monotonic()
    d = validate(roots=[plan.id], deps=DEPS, lookup=local.lookup, ownership=OM,
                 owners=ex.owner_access(), timeout_s=GATE_TIMEOUT_S)
    return d.outcome, time.monotonic() - t0


def _until_authorized(ex: NatsStore, local: MemoryStore, plan: Record, within_s: float
                      ) -> int:
    deadline = time.monotonic() + within_s
    ok = 0
    while time.monotonic() < deadline and ok < 5:
        if _validate(ex, local, plan)[0] is Outcome.AUTHORIZED:
            ok += 1
        else:
            time.sleep(0.1)
    return ok


def _committed(store: NatsStore, record: Record, writer: str) -> bool:
    store.commit(record, writer=writer)
    return True


def _until(check: Callable[[], bool], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while True:
        try:
            if check():
                return
        except OwnerUnreachable:
            pass
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


def _digest_answers(ex: NatsStore, keys: list[str], latest: dict[str, Record], *,
                    want: int, within_s: float, pause_s: float = 0.2
                    ) -> tuple[int, list[str]]:
    """Query owner a's heads of ``keys`` until ``want`` answers came (at least once).

    With d >= 2 keys the gate reads a's digest. Availability and safety apart: a refusal
    (OwnerUnreachable: no quorum yet, an answer behind the barrier, a timeout) is retried
    until ``within_s`` (a loaded machine may elect slowly), but every answer given must
    hold every acknowledged head of ``latest``: one answer behind fails at once (never
    retried).

    Returns:
        (answers, the refusals as "<seconds> <error>").
    """
    t0 = time.monotonic()
    answers, refusals = 0, []
    while True:
        try:
            got = ex.owner_access().query_heads("a", keys, timeout_s=GATE_TIMEOUT_S).heads
        except OwnerUnreachable as exc:
            refusals.append(f"{time.monotonic() - t0:.2f}s {type(exc).__name__}: {exc}")
        else:
            behind = {k: (got[k].seq if k in got else None, r.seq)
                      for k, r in latest.items() if k not in got or got[k].seq < r.seq}
            assert not behind, f"an answer behind acknowledged heads (safety): {behind}"
            answers += 1
        if answers >= want or time.monotonic() - t0 >= within_s:
            return answers, refusals
        if refusals:
            time.sleep(pause_s)

def test_cluster_faults(cluster: NatsCluster, nats_team_certs: Path) -> None:
    """One node down: nothing acknowledged lost, validations go on; two down: blocked
    within the gate timeout; both back: every acknowledged write is there."""
    def store(agent: str) -> NatsStore:
        return NatsStore(cluster.urls, certs_dir=nats_team_certs, ownership=OM,
                         agent=agent, timeout_s=GATE_TIMEOUT_S)
    stores: list[NatsStore] = []
    for agent in ("a", "b", "executor"):
        # a busy machine may elect the buckets' stream leaders after /healthz says ok:
        # until then binding a bucket times out (OwnerUnreachable, nothing opened)
        _until(lambda agent=agent: bool(stores.append(store(agent)) or stores), 20.0)
    a, b, ex = stores
    try:
        local = MemoryStore(OM, "executor")
        reqs = []
        for s, o in ((a, "a"), (b, "b")):
            r = Record.create(key=f"req/{o}", owner=o, seq=s.next_seq(), content={"v": 1})
            # a busy machine may elect the new stream's leader after /healthz says ok:
            # until then a write has no responders (OwnerUnreachable, nothing stored)
            _until(functools.partial(_committed, s, r, o), 20.0)
            local.install(r)
            reqs.append(r)
        plan = derive(key="plan/p", owner="executor", seq=1, content={}, inputs=reqs)
        local.commit(plan, writer="executor")
        assert _validate(ex, local, plan)[0] is Outcome.AUTHORIZED

        w = Writer(a)
        w.start()
        time.sleep(1.0)
        cluster.kill(0)  # one of three: quorum remains
        t_kill = time.monotonic()
        assert _until_authorized(ex, local, plan, 20.0) == 5, "validations did not resume"
        print(f"validations resumed {time.monotonic() - t_kill:.2f} s after the kill; "
              f"writer retries so far: {w.failures}")
        time.sleep(1.0)
        w.stop_ev.set()
        w.join(30)
        acked_one_down = list(w.acked)
        assert len(acked_one_down) > 10
        # readable through the surviving quorum (once the records stream, too, has
        # elected a leader among the two survivors)
        _until(lambda: all(ex.get(r.id) == r for r in acked_one_down[-20:]), 20.0)
        # d=5 keys of one owner: the gate reads owner a's digest (#27); it holds every
        # acknowledged head
        logs = [f"log/{i}" for i in range(5)]
        latest = {r.key: r for r in acked_one_down}

        fresh_answers, refusals = _digest_answers(ex, logs, latest, want=3, within_s=60.0)
        print(f"digest: {fresh_answers} fresh answers; refused {len(refusals)} times"
              f"{' (first: ' + refusals[0] + '; last: ' + refusals[-1] + ')' if refusals else ''}")
        assert fresh_answers == 3, f"owner a's digest unreachable for 60 s: {refusals[-3:]}"

        cluster.kill(1)  # two of three: no quorum
        time.sleep(0.5)
        outs = [_validate(ex, local, plan) for _ in range(3)]
        print(f"without quorum: {[(o.value, round(dt, 2)) for o, dt in outs]}")
        assert all(o is Outcome.BLOCKED for o, _ in outs), outs
        # the gate's bound is per phase: heads, then (if needed) one fetch round
        assert all(dt <= 2 * GATE_TIMEOUT_S + 1.5 for _, dt in outs), outs
        with pytest.raises(OwnerUnreachable):  # the digest read blocks too
            ex.owner_access().query_heads("a", logs, timeout_s=GATE_TIMEOUT_S)

        cluster.restart(0, wait=False)
        cluster.restart(1, wait=False)
        cluster.await_healthy()
        assert _until_authorized(ex, local, plan, 30.0) == 5
        opened: list[NatsStore] = []
        _until(lambda: bool(opened.append(store("a")) or opened), 30.0)
        fresh = opened[0]
        try:
            last = acked_one_down[-1]
            # every stream elects its leader on its own schedule after the restart
            _until(lambda: fresh.owner_seq("a") >= last.seq, 30.0)
            _until(lambda: all(fresh.get(r.id) == r for r in acked_one_down), 30.0)
            heads = {r.key: r for r in acked_one_down}
            for key, rec in heads.items():
                h = fresh.head(key)
                assert h is not None and h.seq >= rec.seq, f"acknowledged head {key} lost"
        finally:
            fresh.close()
    finally:
        for s in (a, b, ex):
            s.close()


def _non_leader(cluster: NatsCluster, certs: Path) -> int:
    """A node that leads none of the three buckets' streams (leaders are stepped down
    until one is free), so pausing it stops no write; its index."""
    async def go() -> int:
        nc = await connect_nats(cluster.urls, certs_dir=certs, identity=ADMIN_IDENTITY,
                                ssl_context=client_context(certs, ADMIN_IDENTITY),
                                timeout_s=5.0)
        js = nc.jetstream()
        streams = [f"KV_{b}" for b in bucket_names("icore")]
        try:
            for _ in range(20):
                leaders = {s: (await js.stream_info(s)).cluster.leader  # type: ignore[union-attr]
                           for s in streams}
                free = [i for i, n in enumerate(cluster.nodes)
                        if n.name not in leaders.values()]
                if free:
                    return free[0]
                on_last = next(s for s, lead in leaders.items()
                               if lead == cluster.nodes[-1].name)
                await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{on_last}", b"",
                                 timeout=5.0)
                await asyncio.sleep(1.0)
            raise AssertionError(f"every node leads a stream: {leaders}")
        finally:
            await nc.close()
    return asyncio.run(go())

def test_a_paused_follower_never_answers_behind(cluster: NatsCluster,
                                                 nats_team_certs: Path) -> None:
    """A follower of the heads stream is paused (SIGSTOP) while owner a commits, then
    resumed: the executor, connected to that follower only, has its direct gets answered
    by it while it catches up. Every answer holds every acknowledged head (the barrier
    check: answers behind are read again or refused), d=5 (digest) and d=1 alike."""
    f = _non_leader(cluster, nats_team_certs)
    others = [n.url for i, n in enumerate(cluster.nodes) if i != f]
    a = NatsStore(others, certs_dir=nats_team_certs, ownership=OM, agent="a",
                  timeout_s=GATE_TIMEOUT_S)
    ex = NatsStore([cluster.nodes[f].url], certs_dir=nats_team_certs, ownership=OM,
                   agent="executor", timeout_s=GATE_TIMEOUT_S)
    logs = [f"log/{i}" for i in range(5)]
    try:
        latest: dict[str, Record] = {}

        def commit(n: int) -> None:
            for _ in range(n):
                key = f"log/{a.next_seq() % 5}"
                prev = latest.get(key)
                rec = Record.create(key=key, owner="a", seq=a.next_seq(), content={},
                                    parents=[prev.id] if prev else [])
                _until(functools.partial(_committed, a, rec, "a"), 20.0)
                latest[key] = rec
        commit(5)
        assert _digest_answers(ex, logs, latest, want=1, within_s=20.0)[0] == 1
        proc = cluster.nodes[f].proc
        assert proc is not None
        rereads = ex.memory.stats.rereads
        outcomes: list[tuple[int, list[str]]] = []

        unsafe: list[AssertionError] = []

        def query(keys: list[str], acked: dict[str, Record]) -> None:
            try:
                outcomes.append(_digest_answers(ex, keys, acked, want=1, within_s=0.0))
            except AssertionError as exc:
                unsafe.append(exc)
        for _round in range(8):
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                commit(10)  # acknowledged by the leader and the third node
                acked = dict(latest)
                # queries sent while the follower sleeps: it answers them as it wakes,
                # racing its own catch-up
                qs = [threading.Thread(target=query, args=(k, {x: acked[x] for x in k}))
                      for k in (logs, logs[:1], logs[2:4], logs[1:], [logs[3]], logs)]
                for q in qs:
                    q.start()
                time.sleep(0.1)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            for q in qs:
                q.join(10)
        assert not unsafe, unsafe[0]
        answers = sum(n for n, _r in outcomes)
        refused = [r for _n, rs in outcomes for r in rs]
        print(f"after each pause: {answers} answers (all fresh), {len(refused)} refused, "
              f"{ex.memory.stats.rereads - rereads} re-reads behind the barrier; {refused[:2]}")
        assert _digest_answers(ex, logs, latest, want=3, within_s=20.0)[0] == 3
    finally:
        a.close()
        ex.close()
