"""``icore bench net``: transport microbenchmarks (planfence Fig. 2 and Sec. 5.4 costs).

Two parts:

* **validation** - real owner process (``icore serve`` path, SQLite store, mutual TLS 1.3)
  on 127.0.0.1; executors run the PlanFence gate (``icore.fence.avalidate``) for an
  action with d=1 and no mismatch. Prints p50/p99 round trip, validations/s with 8
  concurrent executors (one connection each) and bytes on the wire per validation, with
  connection reuse and with a new connection per RPC. Targets (issue 3): p50 <= 1 ms,
  >= 3,000 validations/s, <= 512 bytes per validation (reused connections).
* **fig2** - blocking time of one fresh authenticated synchronization (new TCP + TLS
  connection, one record pushed and acknowledged) vs payload size 1 KiB..4 MiB: real TCP
  on loopback, and the virtual transport over the Mahimahi traces (p50/p95 over start
  times spread across the trace); plus the loss sweep of Fig. 2b for a 4 KiB transfer.
"""

from __future__ import annotations

import asyncio
import functools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from icore._clock import ManualClock
from icore.fence import Outcome, avalidate
from icore.memory import MemoryStore, OwnershipMap
from icore.net import (
    OwnerClient,
    SyncOwnerClient,
    TeamProcesses,
    client_context,
    init_team_certs,
)
from icore.records import Record, derive
from icore_lab.bench._checks import check_count, check_positive_seconds
from icore_lab.net import FixedLink, LinkPair, VirtualTransport, path_by_name

PAPER_KIB_PER_ACTION = 8.1
"""PlanFence traffic per action on the AT&T trace (planfence Sec. 5.4, Table 1)."""
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
TRACES = ["att", "tmobile", "verizon"]


@dataclass
class ValidationFigures:
    """Figures of the validation benchmark for one connection mode."""

    mode: str
    n: int
    p50_ms: float
    p99_ms: float
    per_s_8: float
    """Validations/s of 8 concurrent executors, one client and connection each."""
    per_s_8_shared: float
    """Validations/s of 8 concurrent executors sharing one client (one connection)."""
    bytes_per_validation: float
    client_cpu_us: float
    """Executor-process CPU time per validation in the 8-executor run (µs)."""
    owner_cpu_us: float
    """Owner-process CPU time per validation in the 8-executor run (µs)."""

    @property
    def cpu_bound_per_s(self) -> float:
        """Validations/s the CPU cost allows when client and owner each get one core."""
        return 1e6 / max(self.client_cpu_us, self.owner_cpu_us, 1e-9)


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` by nearest rank: the sample at rank round(q (n - 1)).

    Args:
        xs: samples (any unit; not modified).
        q: the quantile, in [0, 1].

    Returns:
        The sample, in the unit of ``xs``; NaN when ``xs`` is empty.
    """
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _team(tmp: Path) -> Path:
    manifest = tmp / "team.yaml"
    manifest.write_text(
        "version: 1\nteam: bench\ndata_dir: data\ncerts_dir: certs\nagents:\n"
        "  - {id: owner, host: 127.0.0.1, port: 0}\n"
        "  - {id: writer2, host: 127.0.0.1, port: 0}\n"
        "ownership:\n  'req/*': owner\n  'plan/*': writer2\n  'sync/*': writer2\n")
    init_team_certs(tmp / "certs", ["owner", "writer2", *[f"ex{i}" for i in range(8)]],
                    team="bench")
    return manifest


async def _validation(addrs: dict[str, tuple[str, int]], certs: Path, om: OwnershipMap,
                      local: MemoryStore, plan: Record, *, per_rpc: bool, n: int,
                      seconds: float, owner_pid: int) -> ValidationFigures:
    def client(i: int) -> OwnerClient:
        return OwnerClient(addrs, identity=f"ex{i}", ssl_context=client_context(certs, f"ex{i}"),
                           new_connection_per_rpc=per_rpc)

    async def one(c: OwnerClient) -> None:
        d = await avalidate(roots=[plan.id], deps=["req/1"], lookup=local.lookup,
                            ownership=om, owners=c)
        if d.outcome is not Outcome.AUTHORIZED:
            raise RuntimeError(f"unexpected gate decision {d.outcome}: {d.detail}")

    c0 = client(0)
    await one(c0)  # connect (reused mode) and warm up
    before = c0.stats.snapshot()
    lat: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        await one(c0)
        lat.append((time.perf_counter() - t) * 1000.0)
    used = c0.stats - before
    await c0.close()
    clients = [client(i) for i in range(8)]
    for c in clients:
        await one(c)
    count = 0
    stop_at = time.perf_counter() + seconds

    async def executor(c: OwnerClient) -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            await one(c)
            count += 1

    t0 = time.perf_counter()
    cpu0, own0 = time.process_time(), _proc_cpu_s(owner_pid)
    await asyncio.gather(*(executor(c) for c in clients))
    rate = count / (time.perf_counter() - t0)
    cpu_client = (time.process_time() - cpu0) / max(count, 1) * 1e6
    cpu_owner = (_proc_cpu_s(owner_pid) - own0) / max(count, 1) * 1e6
    for c in clients:
        await c.close()
    shared = client(0)
    await one(shared)
    count_shared = 0
    stop_at2 = time.perf_counter() + seconds

    async def shared_executor() -> None:
        nonlocal count_shared
        while time.perf_counter() < stop_at2:
            await one(shared)
            count_shared += 1

    t1 = time.perf_counter()
    await asyncio.gather(*(shared_executor() for _ in range(8)))
    rate_shared = count_shared / (time.perf_counter() - t1)
    await shared.close()
    return ValidationFigures("new connection per RPC" if per_rpc else "reused connection", n,
                             statistics.median(lat), percentile(lat, 0.99), rate, rate_shared,
                             used.total_bytes / n, cpu_client, cpu_owner)


@functools.lru_cache(maxsize=16)
def _sync_record(size: int, seq: int) -> Record:
    return Record.create(key=f"sync/{seq}", owner="writer2", seq=seq,
                         content="x" * (size - 2), type="artifact")


def run_validation(*, n: int, seconds: float) -> tuple[list[ValidationFigures],
                                                        dict[int, list[float]]]:
    """Run the validation benchmark and the loopback part of Fig. 2 on real TCP.

    Args:
        n: sequential validations for the latency figures (reused connection; the
            new-connection-per-RPC mode runs ``max(50, n // 10)``).
        seconds: duration of each 8-executor throughput run.

    Raises:
        BadOption: ``n`` is not an integer >= 1, or ``seconds`` is not a finite number
            > 0 (checked before any process starts).
    """
    check_count("n", n)
    check_positive_seconds("seconds", seconds)
    with tempfile.TemporaryDirectory(prefix="icore-bench-net-") as d:
        tmp = Path(d)
        manifest = _team(tmp)
        certs = tmp / "certs"
        om = OwnershipMap.from_mapping({"req/*": "owner", "plan/*": "writer2",
                                        "sync/*": "writer2"})
        req = Record.create(key="req/1", owner="owner", seq=1, content={"city": "Oslo"})
        local = MemoryStore(om, "writer2")
        local.install(req)
        plan = derive(key="plan/1", owner="writer2", seq=1, content={"do": "book"},
                      inputs=[req])
        local.commit(plan, writer="writer2")
        with TeamProcesses(manifest, agents=["owner"]) as team:
            addrs = team.addresses()
            pid = team.procs["owner"].proc.pid
            with SyncOwnerClient(addrs, identity="owner",
                                 ssl_context=client_context(certs, "owner")) as w:
                w.commit("owner", req)
            figs = [asyncio.run(_validation(addrs, certs, om, local, plan, per_rpc=False,
                                            n=n, seconds=seconds, owner_pid=pid)),
                    asyncio.run(_validation(addrs, certs, om, local, plan, per_rpc=True,
                                            n=max(50, n // 10), seconds=seconds,
                                            owner_pid=pid))]
            fig2: dict[int, list[float]] = {}
            seq = 0
            with SyncOwnerClient(addrs, identity="writer2", new_connection_per_rpc=True,
                                 ssl_context=client_context(certs, "writer2")) as s:
                for size in SIZES:
                    reps = 20 if size <= 262144 else 5
                    xs = []
                    for _ in range(reps):
                        seq += 1
                        rec = _sync_record(size, seq)
                        t = time.perf_counter()
                        s.replicate("owner", [rec], timeout_s=30.0)
                        xs.append((time.perf_counter() - t) * 1000.0)
                    fig2[size] = xs
    return figs, fig2


def run_fig2_virtual(*, samples: int) -> tuple[dict[str, dict[int, list[float]]],
                                               dict[float, list[float]]]:
    """Fig. 2a over the traces and Fig. 2b (loss) in virtual time.

    Args:
        samples: start times per (trace, payload size) cell, spread over 60 s of trace.

    Raises:
        BadOption: ``samples`` is not an integer >= 1.
    """
    check_count("samples", samples)
    om = OwnershipMap.from_mapping({"sync/*": "writer2"})
    out: dict[str, dict[int, list[float]]] = {}
    for name in TRACES:
        out[name] = {}
        for size in SIZES:
            xs = []
            for k in range(samples):
                clock = ManualClock()
                start = k * 60_000.0 / samples
                clock.set(start)
                net = VirtualTransport({"owner": MemoryStore(om, "owner")}, clock=clock,
                                       path=path_by_name(name), identity="writer2",
                                       new_connection_per_rpc=True)
                net.replicate("owner", [_sync_record(size, 1)], timeout_s=1e9)
                xs.append(clock.now_ms() - start)
            out[name][size] = xs
    loss: dict[float, list[float]] = {}
    for p in (0.0, 0.01, 0.02, 0.05):
        xs = []
        for k in range(200):
            net = VirtualTransport({"owner": MemoryStore(om, "owner")}, identity="writer2",
                                   path=LinkPair(FixedLink(10.0, loss=p, seed=k),
                                                 FixedLink(10.0, loss=p, seed=10_000 + k)),
                                   new_connection_per_rpc=True)
            net.replicate("owner", [_sync_record(4096, 1)], timeout_s=1e9)
            xs.append(net.clock.now_ms())
        loss[p] = xs
    return out, loss


def size_label(b: int) -> str:
    """A size in bytes as a label: whole MiB from 1 MiB up, else whole KiB."""
    return f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB"
