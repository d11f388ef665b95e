"""``icore bench core``: gate decisions/s and SQLite put throughput."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from icore.bench._core_gate import run_core_bench
from icore.cli._inputs import bad_options, positive_seconds

TARGET = 20_000.0


def bench_core(
    seconds: float = typer.Option(1.0, callback=positive_seconds,
                                  help="Measuring time per cell, in seconds (finite, > 0)."),
) -> None:
    """Gate decisions/s for d in {1, 8} x depth in {1, 8} on both stores; SQLite puts/s."""
    console = Console(width=120)
    with bad_options(), console.status("measuring the gate..."):
        figs, puts = run_core_bench(seconds)
    table = Table("store", "d", "depth", "decisions/s", "µs/decision",
                  title="PlanFence gate, in process (planfence Alg. 1)")
    for f in figs:
        table.add_row(f.store, str(f.d), str(f.depth), f"{f.decisions_per_s:,.0f}",
                      f"{f.us_per_decision:.1f}")
    console.print(table)
    head = next(f for f in figs if f.store == "memory" and f.d == 1 and f.depth == 1)
    ratio = head.decisions_per_s / TARGET
    console.print(f"memory d=1 depth=1: {head.decisions_per_s:,.0f} decisions/s = "
                  f"{ratio:.2f}x the 20,000/s target")
    for mode, rate in puts.items():
        console.print(f"SQLite commits/s (WAL, synchronous={mode}): {rate:,.0f}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench core``."""
    bench.command("core")(bench_core)
