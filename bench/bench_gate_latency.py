"""Where a gate validation's latency goes, beside the raw head query, on one connection (#27).

``icore bench peers`` measures the gate's p50 and the raw ``query_heads`` p50 on two
owner processes, one after the other. This probe puts them side by side on *one*
connection to one owner service (``icore serve`` in its own process, mutual TLS 1.3, the
event loop of :func:`icore._extras.event_loop_factory`) and alternates them request by
request (A B C A B C, or in blocks of ``--block`` like the bench), so a change of the
machine's state hits all of them alike:

* **gate**: ``avalidate`` (planfence Alg. 1) on a plan citing the first d requirements;
* **query_heads**: the raw batched head query of the same d keys;
* **query_heads+known**: the same query with the caller's known ids, the very request
  the gate sends (so gate minus this is the gate's own client work).

Per validation it records the latency and where both processes ran: the client's CPU
when it started and when it returned (``sched_getcpu``) and the owner's last CPU (from
``/proc/PID/stat``, read after the reply): *same* when all three agree, else *split*.
``--pin same|split`` pins the client and the owner to one CPU or to two. ``--phases``
stamps the moments inside each request (entry, Alg. 1 lines 1-4 done, request queued,
the write's loop callback, the socket write returned, the reply read, its future
resolved, the caller resumed, the decision built, return) by wrapping the library's
methods in this process (each wrapper adds a little time of its own).

Usage::

    PYTHONPATH=src python bench/bench_gate_latency.py [--n 400] [--pin none|same|split]
        [--phases] [--block N] [--json F]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import icore.fence._gate as gate_mod
import icore.net._tcp.client as client_mod
import icore.net._tcp.link as link_mod
from icore._extras import run_async
from icore.fence import Outcome, avalidate
from icore.net import OwnerClient
from icore_lab.bench.micro._peers_icore import _OM, IcoreSystem

_now = time.perf_counter_ns
_stamps: dict[str, int] = {}


def _stamp(name: str) -> None:
    _stamps.setdefault(name, _now())


def _wrap(cls: Any, attr: str, before: str | None = None, after: str | None = None) -> None:
    f = getattr(cls, attr)

    def wrapped(*a: Any, **k: Any) -> Any:
        if before:
            _stamp(before)
        r = f(*a, **k)
        if after:
            _stamp(after)
        return r

    setattr(cls, attr, wrapped)


def _install_phase_stamps() -> None:
    _wrap(gate_mod.GateRun, "start", after="1 lines 1-4 done")
    _wrap(link_mod.OwnerLink, "request", before="2 request", after="3 queued")
    _wrap(link_mod.OwnerLink, "_flush_writes", before="4 write callback")
    _wrap(link_mod.OwnerLink, "_write", after="5 write returned")
    _wrap(link_mod.OwnerLink, "data_received", before="6 reply read")
    _wrap(link_mod.OwnerLink, "_replies", after="7 future resolved")
    orig = client_mod.to_head_reply

    def resumed(*a: Any, **k: Any) -> Any:
        _stamp("8 caller resumed")
        return orig(*a, **k)

    client_mod.to_head_reply = resumed  # type: ignore[assignment]
    _wrap(gate_mod.GateRun, "on_heads", after="9 decision built")


def _sched_getcpu() -> Callable[[], int]:
    f = ctypes.CDLL(None).sched_getcpu
    return lambda: int(f())


def _last_cpu(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[36])


def _idle_jiffies() -> tuple[int, int]:
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return v[3] + v[4], sum(v)


def _ops(s: IcoreSystem, client: OwnerClient, d: int) -> dict[str, Callable[[], Awaitable[None]]]:
    keys = [f"req/{i}" for i in range(1, d + 1)]
    known = {r.key: r.id for r in s.reqs[:d]}
    root = s.plans[d].id

    async def gate() -> None:
        dec = await avalidate(roots=[root], deps=keys, lookup=s.local.lookup, ownership=_OM,
                              owners=client)
        if dec.outcome is not Outcome.AUTHORIZED:
            raise RuntimeError(f"gate decided {dec.outcome}: {dec.detail}")

    async def raw() -> None:
        if len((await client.query_heads("owner", keys)).heads) != d:
            raise RuntimeError("wrong number of heads")

    async def raw_known() -> None:
        if len((await client.query_heads("owner", keys, known=known)).heads) != d:
            raise RuntimeError("wrong number of heads")

    return {"gate": gate, "query_heads": raw, "query_heads+known": raw_known}


async def _measure(s: IcoreSystem, client: OwnerClient, d: int, n: int, block: int,
                   phases: bool) -> dict[str, Any]:
    ops = _ops(s, client, d)
    getcpu = _sched_getcpu()
    lat: dict[str, dict[str, list[float]]] = {k: {"same": [], "split": []} for k in ops}
    stamps: dict[str, dict[str, list[float]]] = {k: {} for k in ops}
    for _ in range(30):
        for f in ops.values():
            await f()
    i0, t0 = _idle_jiffies()
    done = 0
    while done < n:
        for name, f in ops.items():
            for _ in range(block):
                _stamps.clear()
                c0 = getcpu()
                a = _now()
                await f()
                b = _now()
                c1 = getcpu()
                where = "same" if c0 == c1 == _last_cpu(s.pid) else "split"
                lat[name][where].append((b - a) / 1000)
                if phases:
                    for k, v in _stamps.items():
                        stamps[name].setdefault(k, []).append((v - a) / 1000)
                    stamps[name].setdefault("z returned", []).append((b - a) / 1000)
        done += block
    i1, t1 = _idle_jiffies()
    out: dict[str, Any] = {"idle_fraction": (i1 - i0) / max(t1 - t0, 1)}
    for name, by in lat.items():
        every = by["same"] + by["split"]
        out[name] = {
            "p50_us": statistics.median(every),
            "split_fraction": len(by["split"]) / len(every),
            **{f"p50_{w}_us": statistics.median(v) for w, v in by.items() if v},
            **({"phases_us": {k: statistics.median(v) for k, v in sorted(stamps[name].items())}}
               if phases else {}),
        }
    return out


def _pin(mode: str, owner_pid: int) -> None:
    if mode == "none":
        return
    cpus = sorted(os.sched_getaffinity(0))
    if mode == "split" and len(cpus) < 2:
        raise SystemExit("--pin split needs two CPUs")
    os.sched_setaffinity(0, {cpus[0]})
    os.sched_setaffinity(owner_pid, {cpus[0] if mode == "same" else cpus[1]})


async def _main(ns: argparse.Namespace) -> dict[str, Any]:
    if ns.phases:
        _install_phase_stamps()
    res: dict[str, Any] = {"n": ns.n, "pin": ns.pin, "block": ns.block}
    with tempfile.TemporaryDirectory(prefix="icore-gate-latency-") as d:
        s = IcoreSystem(gate=True)
        try:
            await s.start(Path(d))
            _pin(ns.pin, s.pid)
            conn = await s.connect()
            client: OwnerClient = conn.client  # type: ignore[attr-defined]
            try:
                for dd in (1, 8):
                    r = res[f"d={dd}"] = await _measure(s, client, dd, ns.n, ns.block,
                                                        ns.phases)
                    print(f"d={dd} (machine idle {r['idle_fraction']:.0%}):", flush=True)
                    for name in ("gate", "query_heads", "query_heads+known"):
                        f = r[name]
                        by = "  ".join(f"{w} {f[f'p50_{w}_us']:.1f}" for w in ("same", "split")
                                       if f"p50_{w}_us" in f)
                        print(f"  {name:18} p50 {f['p50_us']:6.1f} us  split "
                              f"{f['split_fraction']:4.0%}  by placement: {by}")
                        if ns.phases:
                            print("    " + "  ".join(f"{k}={v:.1f}"
                                                     for k, v in f["phases_us"].items()))
            finally:
                await conn.close()
        finally:
            await s.stop()
    return res


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the probe, print (and optionally write) the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--n", type=int, default=400, help="validations per operation and d")
    p.add_argument("--pin", choices=("none", "same", "split"), default="none")
    p.add_argument("--block", type=int, default=1,
                   help="consecutive validations of one operation before the next (1: A B C)")
    p.add_argument("--phases", action="store_true", help="stamp the moments inside a request")
    p.add_argument("--json", type=Path, default=None)
    ns = p.parse_args(argv)
    res = run_async(_main(ns))
    if ns.json is not None:
        ns.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
