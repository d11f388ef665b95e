"""``icore bench net`` (thin; see :mod:`icore_lab.bench.micro._net`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from icore.cli.inputs import output_file, positive_seconds
from icore_lab.bench.micro import (
    PAPER_KIB_PER_ACTION,
    SIZES,
    TRACES,
    percentile,
    run_fig2_virtual,
    run_validation,
    size_label,
)
from icore_lab.cli._options import bad_options


def bench_net(
    n: int = typer.Option(2000, min=1,
                          help="Sequential validations for the latency figures."),
    seconds: float = typer.Option(3.0, callback=positive_seconds,
                                  help="Seconds of the 8-executor throughput run "
                                  "(finite, > 0)."),
    samples: int = typer.Option(30, min=1,
                                help="Start times per trace cell (virtual Fig. 2)."),
    quick: bool = typer.Option(False, "--quick", help="Small run (smoke test)."),
    json_out: Annotated[Path | None,
                        typer.Option("--json", help="Also write figures as JSON.")] = None,
    backend: Annotated[str, typer.Option(
        help="tcp: icore's owner service (validation + Fig. 2). nats: owner memory "
             "backends side by side (icore TCP, NATS 1 node, NATS 3-node cluster).")
    ] = "tcp",
) -> None:
    """Validation round trip and Fig. 2 transport microbenchmark (loopback TCP + traces).

    With --backend nats: validation p50/p99 (d=1, d=8), validations/s (8 executors),
    commits/s (8 writers) and bytes per validation for icore's owner service, NATS
    JetStream on one node and on a 3-node cluster (replicas = 3), in one table.
    """
    if quick:
        n, seconds, samples = 200, 0.5, 5
    console = Console(width=120)
    if backend not in ("tcp", "nats"):
        raise typer.BadParameter("use tcp or nats", param_hint="--backend")
    if backend == "nats":
        _bench_backends(console, n=n, seconds=seconds, json_out=json_out)
        return
    with output_file(json_out, what="--json output") as out:
        with bad_options(), console.status("validation round trips over mutual-TLS TCP..."):
            figs, loop2 = run_validation(n=n, seconds=seconds)
        t = Table("connection", "p50 ms", "p99 ms", "validations/s (8 exec)",
                  "/s (8 exec, 1 shared client)", "bytes/validation",
                  "KiB/validation", "client CPU µs", "owner CPU µs", "CPU-bound /s",
                  title="PlanFence validation, d=1, no mismatch, loopback TCP + mutual TLS 1.3 "
                  "(owner in its own process)")
        for f in figs:
            t.add_row(f.mode, f"{f.p50_ms:.3f}", f"{f.p99_ms:.3f}", f"{f.per_s_8:,.0f}",
                      f"{f.per_s_8_shared:,.0f}",
                      f"{f.bytes_per_validation:,.0f}", f"{f.bytes_per_validation / 1024:.2f}",
                      f"{f.client_cpu_us:.0f}", f"{f.owner_cpu_us:.0f}",
                      f"{f.cpu_bound_per_s:,.0f}")
        console.print(t)
        r = figs[0]
        console.print(
            f"targets (reused): p50 <= 1 ms: {'PASS' if r.p50_ms <= 1 else 'MISS'}; "
            f">= 3,000/s: {'PASS' if max(r.per_s_8, r.per_s_8_shared) >= 3000 else 'MISS'}; "
            f"<= 512 B: "
            f"{'PASS' if r.bytes_per_validation <= 512 else 'MISS'}.  Paper: "
            f"{PAPER_KIB_PER_ACTION} KiB/action (AT&T, whole protected action incl. replan)")
        with bad_options(), console.status("Fig. 2 over the traces (virtual time)..."):
            traces, loss = run_fig2_virtual(samples=samples)
        t2 = Table("payload", "loopback TCP p50/p95 ms",
                   *[f"{nm} p50/p95 ms" for nm in TRACES],
                   title="Fig. 2a: one fresh authenticated synchronization "
                   "(new TCP+TLS connection)")
        for size in SIZES:
            row = [size_label(size), f"{statistics.median(loop2[size]):.1f} / "
                                f"{percentile(loop2[size], 0.95):.1f}"]
            row += [f"{statistics.median(traces[nm][size]):.0f} / "
                    f"{percentile(traces[nm][size], .95):.0f}" for nm in TRACES]
            t2.add_row(*row)
        console.print(t2)
        t3 = Table("loss", "p50 ms", "p95 ms", title="Fig. 2b: 4 KiB transfer, 10 ms one-way, "
                   "packet loss (RTO 200 ms), virtual time")
        for p, xs in loss.items():
            t3.add_row(f"{p:.0%}", f"{statistics.median(xs):.0f}", f"{percentile(xs, 0.95):.0f}")
        console.print(t3)
        if out is not None:
            doc: dict[str, Any] = {
                "validation": [{**asdict(f), "cpu_bound_per_s": f.cpu_bound_per_s}
                               for f in figs],
                "paper_kib_per_action": PAPER_KIB_PER_ACTION,
                "fig2_loopback_ms": {str(k): v for k, v in loop2.items()},
                "fig2_traces_ms": {nm: {str(k): v for k, v in d.items()}
                                   for nm, d in traces.items()},
                "fig2b_loss_ms": {str(k): v for k, v in loss.items()},
            }
            out.write(json.dumps(doc, indent=1))
            console.print(f"figures written to {json_out}")


def _bench_backends(console: Console, *, n: int, seconds: float,
                    json_out: Path | None) -> None:
    from icore_lab.bench.micro import EXECUTORS, WRITERS, run_backends
    try:
        import icore.net.nats  # noqa: F401  (the extra is needed for this table)
    except ImportError as exc:
        raise typer.BadParameter(str(exc), param_hint="--backend") from exc

    with output_file(json_out, what="--json output") as out:
        with bad_options(), console.status("owner memory backends: icore TCP, NATS x1, x3..."):
            figs = run_backends(n=n, seconds=seconds)
        t = Table("backend", "p50 d=1 ms", "p99 d=1 ms", "p50 d=8 ms", "p99 d=8 ms",
                  f"validations/s ({EXECUTORS} exec)", f"commits/s ({WRITERS} writers)",
                  "bytes d=1", "bytes d=8",
                  title="Owner memory backends, PlanFence validation (no mismatch) and "
                  "commits, 127.0.0.1, TLS")
        for f in figs:
            t.add_row(f.backend, f"{f.p50_d1_ms:.2f}", f"{f.p99_d1_ms:.2f}",
                      f"{f.p50_d8_ms:.2f}", f"{f.p99_d8_ms:.2f}",
                      f"{f.validations_per_s:,.0f}", f"{f.commits_per_s:,.0f}",
                      f"{f.bytes_per_validation:,.0f}", f"{f.bytes_per_validation_d8:,.0f}")
        console.print(t)
        by = {f.backend: f for f in figs}
        tcp, n1, nj = by.get("icore-tcp"), by.get("nats-1"), by.get("nats-1-json")
        if tcp is not None and n1 is not None:
            b8 = n1.bytes_per_validation_d8 / tcp.bytes_per_validation_d8
            console.print(f"nats-1 / icore-tcp: p50 d=8 {n1.p50_d8_ms / tcp.p50_d8_ms:.2f}x "
                          f"(target <= 2x), p50 d=1 {n1.p50_d1_ms / tcp.p50_d1_ms:.2f}x, "
                          f"bytes d=8 {b8:.2f}x")
        if n1 is not None and nj is not None:
            console.print(f"nats-1 batched direct get (owner digest at d=8) / one JSON get "
                          f"per key: bytes d=8 "
                          f"{n1.bytes_per_validation_d8 / nj.bytes_per_validation_d8:.2f}x "
                          "(target <= 0.33x), bytes d=1 "
                          f"{n1.bytes_per_validation / nj.bytes_per_validation:.2f}x, "
                          f"p50 d=8 {n1.p50_d8_ms / nj.p50_d8_ms:.2f}x")
        console.print("icore-tcp: one owner process per agent (SQLite, mutual TLS 1.3); "
                      "nats-1/nats-3: JetStream KV, one batched direct get (d=1: the head; "
                      "d>=2: the owner's digest of its heads) + quorum barrier per "
                      "validation (nats-1-json: one JSON get per key); "
                      "nats-3 replicates every write to 3 nodes (Raft).")
        if out is not None:
            out.write(json.dumps({"backends": [asdict(f) for f in figs]}, indent=1))
            console.print(f"figures written to {json_out}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench net``."""
    bench.command("net")(bench_net)
