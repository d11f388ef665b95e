"""``icore bench peers``: icore's owner service side by side with Redis, NATS KV and etcd.

What a user compares before choosing icore to answer "are my plan's inputs still
current?" (issue 17). Every system runs on 127.0.0.1 in its own process; the clients run
in this process on asyncio; systems alternate within each round and the figures are the
medians over rounds. Natural equivalent operations:

* **validation** = read the current versions of the d declared keys in one round trip
  (icore: the PlanFence gate ``avalidate`` (planfence Alg. 1) and, separately, the raw
  batched ``query_heads``; Redis: ``MGET``; NATS JetStream KV: one batched direct get
  (``multi_last`` of the d subjects, nats-server 2.11+; d=1 a single get); etcd: one
  transaction of d ``Range`` reads);
* **commit** = compare-and-set on the expected version, then a durable write (icore: a
  record citing the current head, planfence App. A; Redis: a Lua CAS script; NATS:
  ``update(key, value, last=revision)``; etcd: a transaction comparing ``mod_revision``).

Durability columns: *fsync per commit* is icore with SQLite ``synchronous=FULL``, Redis
``appendfsync always`` and etcd (its WAL syncs before it acknowledges); *no fsync per
commit* is icore ``synchronous=NORMAL`` (WAL), Redis ``appendfsync everysec`` and NATS
JetStream (file storage, periodic sync; nats-server 2.9 has no per-write sync option).

Bytes per validation are TCP payload bytes in both directions (TLS records included),
counted by a loopback relay in a separate, untimed pass, so every system is counted
the same way. CPU per validation is this process's CPU time (clients) and the server
process's user+system time from ``/proc`` over the 8-executor run.

Peers are optional: a peer whose server binary or Python client is missing is reported
as not started, with the reason; ``make bench-peers`` installs them from Debian's
packages (``redis-server``, ``nats-server``, ``etcd-server``) and PyPI (``redis``,
``nats-py``, ``aetcd``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icore._extras import run_async
from icore_lab.bench._checks import check_count, check_positive_seconds
from icore_lab.bench._errors import BadOption
from icore_lab.bench.micro._loopback import ByteRelay
from icore_lab.bench.micro._net import _proc_cpu_s, percentile
from icore_lab.bench.micro._peers_icore import IcoreSystem
from icore_lab.bench.micro._peers_systems import (
    D_VALUES,
    Conn,
    EtcdSystem,
    NatsSystem,
    RedisSystem,
    System,
    _nats_binary,
)

PEERS = ("redis", "nats", "etcd")
"""Peer systems the benchmark knows, in table order."""


EXECUTORS = 8


WRITERS = 8


@dataclass
class Figures:
    """One system's figures in one round (``None``: not measured for this system)."""

    system: str
    p50_ms: dict[int, float] = field(default_factory=dict)
    """Validation p50 by d (ms), one sequential client."""
    p99_ms: dict[int, float] = field(default_factory=dict)
    per_s_8: float | None = None
    """Validations/s (d=1) of 8 concurrent executors, one connection each."""
    client_cpu_us: float | None = None
    server_cpu_us: float | None = None
    bytes_per_validation: dict[int, float] = field(default_factory=dict)
    commits_fsync_per_s: float | None = None
    """Commits/s of 8 writers (CAS + write) with an fsync before each acknowledgement."""
    commits_nofsync_per_s: float | None = None


@dataclass(frozen=True)
class PeersResult:
    """Medians over rounds, per system, plus the peers that could not run."""

    systems: list[Figures]
    skipped: dict[str, str]
    """Peer name -> why it did not start."""
    rounds: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure."""
        return {"rounds": self.rounds, "seconds": self.seconds, "skipped": self.skipped,
                "systems": [asdict(f) for f in self.systems]}


def peer_availability() -> dict[str, str | None]:
    """Peer name -> ``None`` when it can run here, else why not (binary or client missing)."""
    need = {"redis": ("redis-server", "redis"), "nats": ("nats-server", "nats"),
            "etcd": ("etcd", "aetcd")}
    out: dict[str, str | None] = {}
    for peer, (binary, module) in need.items():
        found = _nats_binary() if peer == "nats" else shutil.which(binary)
        if found is None:
            out[peer] = f"no `{binary}` on PATH (make bench-peers installs it)"
        elif importlib.util.find_spec(module) is None:
            out[peer] = f"Python client `{module}` not installed (make bench-peers)"
        else:
            out[peer] = None
    return out


async def _throughput(conns: Sequence[Conn], op: Callable[[Conn], Awaitable[None]],
                      seconds: float, pid: int) -> tuple[float, float, float]:
    count = 0
    stop_at = time.perf_counter() + seconds

    async def loop(c: Conn) -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            await op(c)
            count += 1

    t0, cpu0, srv0 = time.perf_counter(), time.process_time(), _proc_cpu_s(pid)
    await asyncio.gather(*(loop(c) for c in conns))
    wall = time.perf_counter() - t0
    n = max(count, 1)
    return (count / wall, (time.process_time() - cpu0) / n * 1e6,
            (_proc_cpu_s(pid) - srv0) / n * 1e6)


async def _measure_validation(s: System, f: Figures, *, n: int, seconds: float) -> None:
    c = await s.connect()
    try:
        for d in D_VALUES:
            await c.validate(d)
            lat = []
            for _ in range(n):
                t = time.perf_counter()
                await c.validate(d)
                lat.append((time.perf_counter() - t) * 1000.0)
            f.p50_ms[d] = statistics.median(lat)
            f.p99_ms[d] = percentile(lat, 0.99)
    finally:
        await c.close()
    conns = [await s.connect(i) for i in range(EXECUTORS)]
    try:
        for c in conns:
            await c.validate(1)
        f.per_s_8, f.client_cpu_us, f.server_cpu_us = await _throughput(
            conns, lambda c: c.validate(1), seconds, s.pid)
    finally:
        for c in conns:
            await c.close()
    relay = ByteRelay(s.port)
    port = await relay.start()
    try:
        c = await s.connect(port=port)
        try:
            m = max(20, n // 5)
            for d in D_VALUES:
                await c.validate(d)
                b0 = relay.bytes
                for _ in range(m):
                    await c.validate(d)
                await asyncio.sleep(0.01)  # let the relay forward the last reply
                f.bytes_per_validation[d] = (relay.bytes - b0) / m
        finally:
            await c.close()
    finally:
        await relay.close()


async def _measure_commits(s: System, seconds: float) -> float:
    conns, to_close = await s.writers(WRITERS)
    try:
        for c in conns:
            await c.commit()
        rate, _c, _s = await _throughput(conns, lambda c: c.commit(), seconds, s.pid)
        return rate
    finally:
        for c in to_close:
            await c.close()


@dataclass
class _Slot:
    """A table column: one system for validation and the two commit columns."""

    name: str
    validation: System | None
    fsync: System | None
    nofsync: System | None


def _slots(peers: Sequence[str]) -> list[_Slot]:
    gate_normal = IcoreSystem(gate=True)
    slots = [
        _Slot("icore gate", gate_normal, IcoreSystem(gate=True, synchronous="FULL"),
              gate_normal),
        _Slot("icore query_heads", IcoreSystem(gate=False), None, None),
    ]
    if "redis" in peers:
        everysec = RedisSystem(appendfsync="everysec")
        slots.append(_Slot("redis (TLS)", everysec, RedisSystem(appendfsync="always"),
                           everysec))
    if "nats" in peers:
        nats_sys = NatsSystem()
        slots.append(_Slot("nats kv", nats_sys, None, nats_sys))
    if "etcd" in peers:
        etcd_sys = EtcdSystem()
        slots.append(_Slot("etcd", etcd_sys, etcd_sys, None))
    return slots


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _merge(name: str, rounds: list[Figures]) -> Figures:
    out = Figures(name)
    for d in D_VALUES:
        if all(d in r.p50_ms for r in rounds):
            out.p50_ms[d] = statistics.median(r.p50_ms[d] for r in rounds)
            out.p99_ms[d] = statistics.median(r.p99_ms[d] for r in rounds)
        if all(d in r.bytes_per_validation for r in rounds):
            out.bytes_per_validation[d] = statistics.median(
                r.bytes_per_validation[d] for r in rounds)
    for attr in ("per_s_8", "client_cpu_us", "server_cpu_us", "commits_fsync_per_s",
                 "commits_nofsync_per_s"):
        setattr(out, attr, _median([getattr(r, attr) for r in rounds]))
    return out


async def _run(peers: Sequence[str], *, rounds: int, n: int, seconds: float,
               progress: Callable[[str], None]) -> PeersResult:
    avail = peer_availability()
    skipped = {p: why for p in peers if (why := avail.get(p)) is not None}
    slots = _slots([p for p in peers if p not in skipped])
    systems: list[System] = []
    for sl in slots:
        for s in (sl.validation, sl.fsync, sl.nofsync):
            if s is not None and s not in systems:
                systems.append(s)
    per_round: dict[str, list[Figures]] = {sl.name: [] for sl in slots}
    with tempfile.TemporaryDirectory(prefix="icore-bench-peers-") as d:
        tmp = Path(d)
        started: list[System] = []
        try:
            for s in list(systems):
                progress(f"starting {s.name}")
                try:
                    await s.start(tmp)
                    started.append(s)
                except Exception as exc:  # reported, not fatal for a peer
                    if isinstance(s, IcoreSystem):
                        raise
                    skipped[_peer_of(s)] = f"did not start: {exc}"
            slots = [sl for sl in slots if all(
                x is None or x in started for x in (sl.validation, sl.fsync, sl.nofsync))]
            for r in range(rounds):
                for sl in slots:  # alternate systems within a round
                    progress(f"round {r + 1}/{rounds}: {sl.name}")
                    f = Figures(sl.name)
                    if sl.validation is not None:
                        await _measure_validation(sl.validation, f, n=n, seconds=seconds)
                    if sl.fsync is not None:
                        f.commits_fsync_per_s = await _measure_commits(sl.fsync, seconds)
                    if sl.nofsync is not None:
                        f.commits_nofsync_per_s = await _measure_commits(sl.nofsync, seconds)
                    per_round[sl.name].append(f)
        finally:
            for s in started:
                with contextlib.suppress(Exception):
                    await s.stop()
    return PeersResult([_merge(sl.name, per_round[sl.name]) for sl in slots], skipped,
                       rounds, seconds)


def _peer_of(s: System) -> str:
    return {RedisSystem: "redis", NatsSystem: "nats", EtcdSystem: "etcd"}.get(type(s), s.name)


def run_peers(peers: Sequence[str] = PEERS, *, rounds: int = 3, n: int = 500,
              seconds: float = 2.0,
              progress: Callable[[str], None] = lambda _m: None) -> PeersResult:
    """Run icore and the installed peers side by side (see the module docstring).

    Args:
        peers: which of :data:`PEERS` to include (those not installed are skipped and
            reported in :attr:`PeersResult.skipped`).
        rounds: rounds; every system is measured once per round, in turn.
        n: sequential validations per d for the latency figures.
        seconds: duration of each 8-executor / 8-writer throughput run, in seconds.
        progress: called with a short message as the run advances.

    Returns:
        Medians over rounds per system.

    Raises:
        BadOption: an unknown peer, ``rounds``/``n`` not an integer >= 1, or ``seconds``
            not a finite number > 0.
        TransportError: icore's own owner service did not start.
    """
    for p in peers:
        if p not in PEERS:
            raise BadOption(f"unknown peer {p!r}: choose from {', '.join(PEERS)}")
    check_count("rounds", rounds)
    check_count("n", n)
    check_positive_seconds("seconds", seconds)
    return run_async(_run(list(dict.fromkeys(peers)), rounds=rounds, n=n, seconds=seconds,
                          progress=progress))
