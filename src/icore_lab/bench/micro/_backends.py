"""``icore bench net --backend nats``: owner memory backends side by side (planfence Sec. 5.4).

One run measures, for icore's own owner service (``icore serve``: SQLite + mutual TLS 1.3
TCP, one process per owner) and for NATS JetStream (one node, and a 3-node cluster with
replicas = 3, all on 127.0.0.1, TLS with the team certificates):

* validation p50/p99 (ms) of the PlanFence gate (``icore.fence.avalidate``) for d=1 and
  d=8 (eight keys of one owner), no mismatch, one executor;
* validations/s with 8 concurrent executors (one connection each, d=1);
* commits/s with 8 concurrent writers (8 owners, one connection each);
* bytes on the wire per validation (d=1 and d=8): icore's client counts its TCP bytes;
  for NATS a counting TCP relay sits between a second executor connection and the
  server, so TLS records, protocol lines, the quorum barrier and pings are all included
  (latency is measured on a direct connection: the relay runs in the executor's event
  loop and would add its own hops to every message; before #27 round 3 it did).

NATS validations include the quorum barrier (:class:`icore.net.nats.NatsOwnerAccess`),
which is what keeps the gate fail closed on a cluster that lost its quorum. ``nats-1``
reads the d heads with one batched direct get (nats-server 2.11+); ``nats-1-json`` is
the same single node read with one JSON API get per key (the path of buckets created
before the heads bucket allowed direct gets), for comparison.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from icore.fence import Outcome, avalidate
from icore.memory import AsyncOwnerAccess, MemoryStore, OwnershipMap
from icore.net import (
    OwnerClient,
    SyncOwnerClient,
    TeamProcesses,
    client_context,
    init_team_certs,
)
from icore.records import Record, derive
from icore_lab.bench._checks import check_count, check_positive_seconds
from icore_lab.bench.micro._loopback import ByteRelay
from icore_lab.bench.micro._net import percentile

BACKENDS = ("icore-tcp", "nats-1", "nats-1-json", "nats-3")
"""Backends compared: icore's owner service, NATS single node (batched head read, and
one JSON get per key), NATS 3-node cluster."""
EXECUTORS = 8
WRITERS = 8
D8 = [f"req/{i}" for i in range(1, 9)]


@dataclass(frozen=True)
class BackendFigures:
    """Figures of one backend.

    Attributes:
        backend: one of :data:`BACKENDS`.
        n: sequential validations per latency figure.
        p50_d1_ms / p99_d1_ms: validation latency, d=1.
        p50_d8_ms / p99_d8_ms: validation latency, d=8 (one owner).
        validations_per_s: with 8 executors (d=1).
        commits_per_s: with 8 writers (8 owners).
        bytes_per_validation: on the wire, d=1, executor side.
        bytes_per_validation_d8: on the wire, d=8, executor side.
    """

    backend: str
    n: int
    p50_d1_ms: float
    p99_d1_ms: float
    p50_d8_ms: float
    p99_d8_ms: float
    validations_per_s: float
    commits_per_s: float
    bytes_per_validation: float
    bytes_per_validation_d8: float = 0.0


class _World:
    """Eight requirements of ``owner`` and a plan citing them (the executor's replica)."""

    def __init__(self) -> None:
        self.om = OwnershipMap.from_mapping({"req/*": "owner", "plan/*": "ex0",
                                             **{f"w{i}/*": f"w{i}" for i in range(WRITERS)}})
        self.reqs = [Record.create(key=k, owner="owner", seq=i + 1, content={"k": k})
                     for i, k in enumerate(D8)]
        self.local = MemoryStore(self.om, "ex0")
        for r in self.reqs:
            self.local.install(r)
        self.plan = derive(key="plan/1", owner="ex0", seq=1, content={"do": "book"},
                           inputs=self.reqs)
        self.local.commit(self.plan, writer="ex0")

    async def validate(self, owners: AsyncOwnerAccess, deps: Sequence[str]) -> None:
        """Run the PlanFence gate (planfence Alg. 1) on the plan against ``owners`` (5 s timeout).

        Args:
            owners: the owner access of the backend under test.
            deps: the declared dependencies D(a), keys of :data:`D8`.

        Raises:
            RuntimeError: the gate did not authorize.
        """
        d = await avalidate(roots=[self.plan.id], deps=deps, lookup=self.local.lookup,
                            ownership=self.om, owners=owners, timeout_s=5.0)
        if d.outcome is not Outcome.AUTHORIZED:
            raise RuntimeError(f"unexpected gate decision {d.outcome}: {d.detail}")


class _Versions:
    """Writer i's next version: 16 keys in turn, each citing its previous version.

    The previous version is the base it replaces, as compare-and-set commits require.
    """

    def __init__(self) -> None:
        self.seq = [0] * WRITERS
        self.last: dict[str, str] = {}

    def next(self, i: int) -> Record:
        """Writer ``i``'s next record: key ``w{i}/{seq % 16}``, citing that key's previous version.

        Returns:
            The record (its parent is the base a compare-and-set commit replaces).
        """
        self.seq[i] += 1
        key = f"w{i}/{self.seq[i] % 16}"
        prev = self.last.get(key)
        rec = Record.create(key=key, owner=f"w{i}", seq=self.seq[i],
                            content={"n": self.seq[i]}, parents=[prev] if prev else [])
        self.last[key] = rec.id
        return rec


async def _latency(fn: Callable[[], Awaitable[None]], n: int) -> list[float]:
    await fn()
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        lat.append((time.perf_counter() - t) * 1000.0)
    return lat


async def _rate(fns: Sequence[Callable[[], Awaitable[None]]], seconds: float) -> float:
    count = 0
    stop_at = time.perf_counter() + seconds

    async def loop(fn: Callable[[], Awaitable[None]]) -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            await fn()
            count += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(f) for f in fns))
    return count / (time.perf_counter() - t0)


def _threads_rate(fns: Sequence[Callable[[], None]], seconds: float) -> float:
    count = 0
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def loop(fn: Callable[[], None]) -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            fn()
            with lock:
                count += 1

    t0 = time.perf_counter()
    ts = [threading.Thread(target=loop, args=(f,), daemon=True) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return count / (time.perf_counter() - t0)


def _agents() -> list[str]:
    return ["owner", *[f"ex{i}" for i in range(EXECUTORS)], *[f"w{i}" for i in range(WRITERS)]]


# -- icore's own owner service -------------------------------------------------------
def _tcp(tmp: Path, w: _World, n: int, seconds: float) -> BackendFigures:
    certs = init_team_certs(tmp / "certs", _agents(), team="bench")
    owners = ["owner", *[f"w{i}" for i in range(WRITERS)]]
    agents = "".join(f"  - {{id: {a}, host: 127.0.0.1, port: 0}}\n" for a in owners)
    own = "".join(f"  'w{i}/*': w{i}\n" for i in range(WRITERS))
    manifest = tmp / "team.yaml"
    manifest.write_text("version: 1\nteam: bench\ndata_dir: data\ncerts_dir: certs\n"
                        f"agents:\n{agents}ownership:\n  'req/*': owner\n  'plan/*': owner\n"
                        f"{own}", encoding="utf-8")
    with TeamProcesses(manifest) as team:
        addrs = team.addresses()
        with SyncOwnerClient(addrs, identity="owner",
                             ssl_context=client_context(certs, "owner")) as c:
            for r in w.reqs:
                c.commit("owner", r)

        def client(i: int) -> OwnerClient:
            return OwnerClient(addrs, identity=f"ex{i}",
                               ssl_context=client_context(certs, f"ex{i}"))

        async def go() -> BackendFigures:
            c0 = client(0)
            await w.validate(c0, ["req/1"])
            before = c0.stats.snapshot()
            l1 = await _latency(lambda: w.validate(c0, ["req/1"]), n)
            used = c0.stats - before
            before8 = c0.stats.snapshot()
            l8 = await _latency(lambda: w.validate(c0, D8), n)
            used8 = c0.stats - before8
            await c0.close()
            cs = [client(i) for i in range(EXECUTORS)]
            rate = await _rate([functools.partial(w.validate, c, ["req/1"]) for c in cs], seconds)
            for c in cs:
                await c.close()
            writers = [OwnerClient(addrs, identity=f"w{i}",
                                   ssl_context=client_context(certs, f"w{i}"))
                       for i in range(WRITERS)]
            nxt = _Versions()

            async def commit(i: int) -> None:
                await writers[i].commit(f"w{i}", nxt.next(i), timeout_s=10.0)
            crate = await _rate([functools.partial(commit, i) for i in range(WRITERS)], seconds)
            for c in writers:
                await c.close()
            return BackendFigures("icore-tcp", n, statistics.median(l1), percentile(l1, 0.99),
                                  statistics.median(l8), percentile(l8, 0.99), rate, crate,
                                  used.total_bytes / n, used8.total_bytes / n)
        return asyncio.run(go())


# -- NATS JetStream ------------------------------------------------------------------
def _nats(tmp: Path, w: _World, n: int, seconds: float, nodes: int,
          json_gets: bool = False) -> BackendFigures:
    from icore.net import MemorySpec
    from icore.net.nats import (
        NatsCluster,
        NatsMemory,
        NatsOwnerAccess,
        NatsStore,
        TeamEngine,
        nats_certs,
    )

    certs = nats_certs(tmp / "certs", _agents(), team="bench")
    engine = TeamEngine(MemorySpec.model_validate({"backend": "nats", "nodes": nodes}),
                        folder=tmp / "nats",
                        certs_dir=certs, agents=_agents(), team="bench")
    urls = engine.start()
    try:
        cluster: NatsCluster | None = engine.cluster
        assert cluster is not None
        with NatsStore(urls, certs_dir=certs, ownership=w.om, agent="owner",
                       timeout_s=10.0) as s:
            for r in w.reqs:
                s.commit(r, writer="owner")

        async def go() -> BackendFigures:
            async def access(url: str) -> NatsOwnerAccess:
                m = await NatsMemory.connect([url], certs_dir=certs, identity="ex0",
                                             ownership=w.om, timeout_s=10.0)
                m.heads_direct = m.heads_direct and not json_gets
                a = NatsOwnerAccess(m, identity="ex0")
                await w.validate(a, ["req/1"])
                await w.validate(a, D8)
                return a
            # latency on a direct connection (a relay in this loop would add its own
            # Python hops to every message), bytes on a second one through the relay
            a0 = await access(urls[0])
            l1 = await _latency(lambda: w.validate(a0, ["req/1"]), n)
            l8 = await _latency(lambda: w.validate(a0, D8), n)
            await a0.memory.close()
            relay = ByteRelay(cluster.nodes[0].port)
            rport = await relay.start()
            ab = await access(f"tls://127.0.0.1:{rport}")
            before = relay.bytes
            for _ in range(n):
                await w.validate(ab, ["req/1"])
            used = relay.bytes - before
            before = relay.bytes
            for _ in range(n):
                await w.validate(ab, D8)
            used8 = relay.bytes - before
            await ab.memory.close()
            await relay.close()
            mems = [await NatsMemory.connect(urls, certs_dir=certs, identity=f"ex{i}",
                                             ownership=w.om, timeout_s=10.0)
                    for i in range(EXECUTORS)]
            for m in mems:
                m.heads_direct = m.heads_direct and not json_gets
            accs = [NatsOwnerAccess(m, identity=f"ex{i}") for i, m in enumerate(mems)]
            rate = await _rate([functools.partial(w.validate, a, ["req/1"]) for a in accs],
                               seconds)
            for m in mems:
                await m.close()
            return BackendFigures(f"nats-{nodes}" + ("-json" if json_gets else ""), n,
                                  statistics.median(l1), percentile(l1, 0.99),
                                  statistics.median(l8), percentile(l8, 0.99), rate, 0.0,
                                  used / n, used8 / n)
        figs = asyncio.run(go())
        stores = [NatsStore(urls, certs_dir=certs, ownership=w.om, agent=f"w{i}",
                            timeout_s=10.0) for i in range(WRITERS)]
        try:
            nxt = _Versions()

            def commit(i: int) -> None:
                stores[i].commit(nxt.next(i), writer=f"w{i}")
            crate = _threads_rate([functools.partial(commit, i) for i in range(WRITERS)],
                                  seconds)
        finally:
            for st in stores:
                st.close()
        return BackendFigures(**{**figs.__dict__, "commits_per_s": crate})
    finally:
        engine.stop()


def run_backends(*, n: int, seconds: float,
                 backends: Sequence[str] = BACKENDS) -> list[BackendFigures]:
    """Measure every backend of ``backends`` in one run (see the module docstring).

    Args:
        n: sequential validations per latency figure (d=1 and d=8).
        seconds: duration of each 8-executor and 8-writer run.
        backends: a subset of :data:`BACKENDS`.

    Raises:
        BadOption: ``n`` < 1, ``seconds`` not finite and > 0, or an unknown backend.
    """
    check_count("n", n)
    check_positive_seconds("seconds", seconds)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        from icore_lab.bench._errors import BadOption
        raise BadOption(f"unknown backends {unknown}; use {', '.join(BACKENDS)}",
                        option="backend")
    w = _World()
    out = []
    for b in backends:
        with tempfile.TemporaryDirectory(prefix=f"icore-bench-{b}-") as d:
            tmp = Path(d)
            if b == "icore-tcp":
                out.append(_tcp(tmp, w, n, seconds))
            else:
                out.append(_nats(tmp, w, n, seconds, nodes=int(b.split("-")[1]),
                                 json_gets=b.endswith("-json")))
    return out
