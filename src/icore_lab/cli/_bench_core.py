"""``icore bench core``: gate decisions/s, single-writer and contended commits/s."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from icore.cli.inputs import positive_seconds
from icore_lab.bench.micro import BEFORE_COMMITS_PER_S, run_core_bench
from icore_lab.cli._options import bad_options

TARGET = 20_000.0


def bench_core(
    seconds: float = typer.Option(1.0, callback=positive_seconds,
                                  help="Measuring time per cell, in seconds (finite, > 0)."),
) -> None:
    """Gate decisions/s and commits/s on both stores (PlanFence core microbenchmark).

    Decisions/s for d in {1, 8} x depth in {1, 8}; commits/s of one writer (next to the
    figure before the atomic owner rules) and of 8 contended writers.
    """
    console = Console(width=120)
    with bad_options(), console.status("measuring the gate and the stores..."):
        res = run_core_bench(seconds)
    table = Table("store", "d", "depth", "decisions/s", "µs/decision",
                  title="PlanFence gate, in process (planfence Alg. 1)")
    for f in res.gates:
        table.add_row(f.store, str(f.d), str(f.depth), f"{f.decisions_per_s:,.0f}",
                      f"{f.us_per_decision:.1f}")
    console.print(table)
    head = next(f for f in res.gates if f.store == "memory" and f.d == 1 and f.depth == 1)
    ratio = head.decisions_per_s / TARGET
    console.print(f"memory d=1 depth=1: {head.decisions_per_s:,.0f} decisions/s = "
                  f"{ratio:.2f}x the 20,000/s target")
    commits = Table("store", "commits/s", "before", "change", "commits/CPU-s", "before",
                    "change", title="Single writer, one commit per transaction "
                    "(atomic owner rules, CAS on the base) vs before #12 (b43cb0e)")
    labels = {"memory": "memory", "sqlite": "SQLite WAL NORMAL",
              "sqlite-full": "SQLite WAL FULL"}
    for kind, rate in res.commits.items():
        wall0, cpu0 = BEFORE_COMMITS_PER_S[kind]
        commits.add_row(labels[kind], f"{rate.per_s:,.0f}", f"{wall0:,.0f}",
                        f"{(rate.per_s / wall0 - 1) * 100:+.0f}%", f"{rate.per_cpu_s:,.0f}",
                        f"{cpu0:,.0f}", f"{(rate.per_cpu_s / cpu0 - 1) * 100:+.0f}%")
    console.print(commits)
    cont = Table("writers", "backend", "hot keys", "acknowledged", "conflicts (retried)",
                 "commits/s", title="Contended commits: writers racing on the same keys")
    for c in res.contended:
        cont.add_row(str(c.writers), c.backend, str(c.keys), f"{c.commits:,}",
                     f"{c.conflicts:,}", f"{c.commits_per_s:,.0f}")
    console.print(cont)
    console.print("'before': the same workload on commit b43cb0e, measured on the shared "
                  "2-core dev machine; CPU-s is the fair comparison on a loaded machine.")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench core``."""
    bench.command("core")(bench_core)
