"""Where a NATS gate validation's time goes: latency and client CPU per step (#27).

One nats-server (JetStream, TLS, the team certificates) on 127.0.0.1, owner ``owner``
with eight heads (its digest included), one executor connection. Over ``--n`` sequential
operations each, prints p50 latency and this thread's CPU per operation of:

* ``gate d=N``: a whole PlanFence validation (``icore.fence.avalidate``) of N keys;
* ``direct get``: one bare nats-py request (a direct get of the owner's digest);
* ``barrier kv put``: one write of the barrier key through nats-py's key-value put;
* ``barrier``: one quorum barrier as the gate sends it (``NatsMemory.barrier``: a publish
  whose acknowledgement comes back on the gate's own NATS connection);
* ``last_heads d=N``: the batched head read alone (the digest for N >= 2);
* ``query_heads d=N``: the read and the barrier together, as the gate asks them.

Thread CPU (``time.thread_time``) leaves out the server and other processes, so the
figures say what the client spends; the server's CPU per operation is read from Linux
``/proc`` (10 ms ticks: use ``--n`` of a few thousand). On a loaded machine latency
varies more than CPU.

Usage::

    PYTHONPATH=src python bench/bench_nats_cpu.py [--n 1000] [--d 8]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from icore.net import MemorySpec
from icore.net.nats import NatsMemory, NatsOwnerAccess, NatsStore, TeamEngine, nats_certs
from icore_lab.bench.micro._backends import D8, _agents, _World


def _server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` has used (Linux ``/proc``, 10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(label: str, fn: Callable[[], Awaitable[Any]], n: int,
                   server_pid: int | None) -> None:
    for _ in range(min(50, n)):
        await fn()
    lat = []
    s0 = _server_cpu_s(server_pid) if server_pid else 0.0
    c0 = time.thread_time()
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        lat.append(time.perf_counter() - t)
    cpu = (time.thread_time() - c0) / n
    server = f", server CPU {(_server_cpu_s(server_pid) - s0) / n * 1e6:.0f} µs" \
        if server_pid else ""
    lat.sort()
    print(f"{label:>18}: p50 {lat[len(lat) // 2] * 1e3:.3f} ms, client CPU {cpu * 1e6:.0f} µs"
          f"{server}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=1000, help="operations per figure")
    ap.add_argument("--d", type=int, default=8, choices=range(1, 9), help="keys asked")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # asyncio's TLS eof notes
    deps = D8[: args.d]
    w = _World()
    with tempfile.TemporaryDirectory(prefix="icore-nats-cpu-") as d:
        tmp = Path(d)
        certs = nats_certs(tmp / "certs", _agents(), team="bench")
        engine = TeamEngine(MemorySpec.model_validate({"backend": "nats", "nodes": 1}),
                            folder=tmp / "nats", certs_dir=certs, agents=_agents(),
                            team="bench")
        urls = engine.start()
        node = engine.cluster.nodes[0] if engine.cluster else None
        pid = node.proc.pid if node and node.proc and os.path.exists("/proc/self/stat") \
            else None
        try:
            with NatsStore(urls, certs_dir=certs, ownership=w.om, agent="owner",
                           timeout_s=10.0) as s:
                for r in w.reqs:
                    s.commit(r, writer="owner")

            async def go() -> None:
                m = await NatsMemory.connect(urls, certs_dir=certs, identity="ex0",
                                             ownership=w.om, timeout_s=10.0)
                try:
                    a = NatsOwnerAccess(m, identity="ex0")
                    digest = f"$JS.API.DIRECT.GET.{m.heads_stream}.{m._heads_pre}owner"
                    await _measure(f"gate d={args.d}", lambda: w.validate(a, deps), args.n, pid)
                    await _measure("direct get",
                                   lambda: m.nc.request(digest, b"", timeout=5), args.n, pid)
                    await _measure("barrier kv put",
                                   lambda: m.heads_kv.put("=barrier.ex0", b""), args.n, pid)

                    async def barrier() -> None:
                        fut = asyncio.get_running_loop().create_future()
                        await m.barrier("=barrier.ex0", fut)
                        await fut
                    await _measure("barrier", barrier, args.n, pid)
                    await _measure(f"last_heads d={args.d}",
                                   lambda: m.last_heads("owner", deps), args.n, pid)
                    await _measure(f"query_heads d={args.d}",
                                   lambda: a.query_heads("owner", deps), args.n, pid)
                finally:
                    await m.close()
            asyncio.run(go())
        finally:
            engine.stop()


if __name__ == "__main__":
    main()
