"""``icore bench peers`` (thin; see :mod:`icore_lab.bench.micro._peers`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from icore.cli.inputs import output_file, positive_seconds
from icore_lab.bench.micro import PEERS, Figures, PeersResult, run_peers
from icore_lab.cli._options import bad_options

REFERENCE = "redis (TLS)"
"""The peer the targets of issue 17 are stated against."""


SERVER_CPU_TARGET_US = 35.0
"""Issue 27: owner CPU per d=1 head query, in µs (``icore query_heads`` column)."""
CLIENT_CPU_TARGET_US = 90.0
"""Issue 27: client CPU per gate validation, in µs (``icore gate`` column)."""


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _rows(f: Figures) -> list[str]:
    return [
        _fmt(f.p50_ms.get(1), ".3f"), _fmt(f.p50_ms.get(8), ".3f"),
        _fmt(f.p99_ms.get(1), ".3f"), _fmt(f.per_s_8, ",.0f"),
        f"{_fmt(f.client_cpu_us, '.0f')} / {_fmt(f.server_cpu_us, '.0f')}",
        f"{_fmt(f.bytes_per_validation.get(1), '.0f')} / "
        f"{_fmt(f.bytes_per_validation.get(8), '.0f')}",
        _fmt(f.commits_fsync_per_s, ",.0f"), _fmt(f.commits_nofsync_per_s, ",.0f"),
    ]


METRICS = ["validation p50 d=1 (ms)", "validation p50 d=8 (ms)", "validation p99 d=1 (ms)",
           "validations/s, 8 executors", "client / server CPU per validation (µs)",
           "bytes per validation (d=1 / d=8)", "commits/s, 8 writers, fsync per commit",
           "commits/s, 8 writers, no fsync per commit"]


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def print_result(console: Console, res: PeersResult) -> None:
    """The side-by-side table, icore/peer ratios and the issue-17/27 targets (PASS/MISS)."""
    t = Table("", *[f.system for f in res.systems],
              title=f"icore vs peers on 127.0.0.1 (medians of {res.rounds} alternating "
              f"round(s), {res.seconds:g} s per throughput run)")
    cols = [_rows(f) for f in res.systems]
    for i, m in enumerate(METRICS):
        t.add_row(m, *[c[i] for c in cols])
    console.print(t)
    gate = next(f for f in res.systems if f.system == "icore gate")
    peers = [f for f in res.systems if not f.system.startswith("icore")]
    if peers:
        r = Table("icore gate / peer", *[p.system for p in peers],
                  title="Ratios (latency and bytes: lower is better for icore; "
                  "rates: higher)")
        r.add_row("validation p50 d=1", *[_ratio(gate.p50_ms.get(1), p.p50_ms.get(1))
                                          for p in peers])
        r.add_row("validation p50 d=8", *[_ratio(gate.p50_ms.get(8), p.p50_ms.get(8))
                                          for p in peers])
        r.add_row("validations/s, 8 executors", *[_ratio(gate.per_s_8, p.per_s_8)
                                                  for p in peers])
        r.add_row("bytes per validation d=1",
                  *[_ratio(gate.bytes_per_validation.get(1), p.bytes_per_validation.get(1))
                    for p in peers])
        r.add_row("bytes per validation d=8",
                  *[_ratio(gate.bytes_per_validation.get(8), p.bytes_per_validation.get(8))
                    for p in peers])
        r.add_row("client CPU per validation", *[_ratio(gate.client_cpu_us, p.client_cpu_us)
                                                 for p in peers])
        r.add_row("server CPU per validation", *[_ratio(gate.server_cpu_us, p.server_cpu_us)
                                                 for p in peers])
        r.add_row("commits/s, fsync", *[_ratio(gate.commits_fsync_per_s,
                                               p.commits_fsync_per_s) for p in peers])
        r.add_row("commits/s, no fsync", *[_ratio(gate.commits_nofsync_per_s,
                                                  p.commits_nofsync_per_s) for p in peers])
        console.print(r)
    ref = next((f for f in res.systems if f.system == REFERENCE), None)

    def check(name: str, ok: bool | None) -> str:
        return f"{name}: {'–' if ok is None else 'PASS' if ok else 'MISS'}"

    def le(a: float | None, b: float | None, k: float = 1.0) -> bool | None:
        return None if a is None or b is None else a <= k * b

    raw = next((f for f in res.systems if f.system == "icore query_heads"), None)
    owner_cpu = raw.server_cpu_us if raw is not None else None
    console.print(
        f"CPU per validation (issue 27 targets): owner {_fmt(owner_cpu, '.0f')} "
        f"µs per d=1 head query (target <= {SERVER_CPU_TARGET_US:g}), client "
        f"{_fmt(gate.client_cpu_us, '.0f')} µs per gate validation (target <= "
        f"{CLIENT_CPU_TARGET_US:g}): " + "; ".join([
            check("owner", le(owner_cpu, SERVER_CPU_TARGET_US)),
            check("client", le(gate.client_cpu_us, CLIENT_CPU_TARGET_US))]),
        highlight=False)
    if ref is not None:
        console.print("targets vs Redis with TLS: " + "; ".join([
            check("validations/s >= 1.0x", le(ref.per_s_8, gate.per_s_8)),
            check("p50 d=1 <= 1.5x", le(gate.p50_ms.get(1), ref.p50_ms.get(1), 1.5)),
            check("p50 d=8 <= 1.5x", le(gate.p50_ms.get(8), ref.p50_ms.get(8), 1.5)),
            check("durable commits/s >= 1.0x",
                  le(ref.commits_fsync_per_s, gate.commits_fsync_per_s)),
            check("bytes d=1 <= 1.0x", le(gate.bytes_per_validation.get(1),
                                          ref.bytes_per_validation.get(1))),
            check("bytes d=8 <= 1.0x", le(gate.bytes_per_validation.get(8),
                                          ref.bytes_per_validation.get(8))),
        ]))
    for peer, why in res.skipped.items():
        console.print(f"[yellow]not started:[/yellow] {peer}: {why}", markup=True,
                      highlight=False)


def bench_peers(
    peer: Annotated[list[str] | None,
                    typer.Option("--peer", help=f"Peer to include (repeatable; default "
                                 f"all of {', '.join(PEERS)}).")] = None,
    rounds: int = typer.Option(3, min=1, help="Alternating rounds (figures are medians)."),
    n: int = typer.Option(500, min=1, help="Sequential validations per d (latency)."),
    seconds: float = typer.Option(2.0, callback=positive_seconds,
                                  help="Seconds of each 8-executor / 8-writer run."),
    quick: bool = typer.Option(False, "--quick", help="Small run (smoke test)."),
    json_out: Annotated[Path | None,
                        typer.Option("--json", help="Also write figures as JSON.")] = None,
) -> None:
    """Compare icore's owner service with Redis (TLS), NATS KV and etcd."""
    if quick:
        rounds, n, seconds = 1, 50, 0.3
    console = Console(width=160)
    with output_file(json_out, what="--json output") as out:
        with bad_options(), console.status("starting systems...") as status:
            res = run_peers(peer or PEERS, rounds=rounds, n=n, seconds=seconds,
                            progress=lambda m: status.update(m))
        print_result(console, res)
        if out is not None:
            out.write(json.dumps(res.to_json(), indent=1))
            console.print(f"figures written to {json_out}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench peers``."""
    bench.command("peers")(bench_peers)
