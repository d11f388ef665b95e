"""``icore bench planfence``: the PlanFence controlled replay (planfence Sec. 5, App. A.6, B, C).

Thin: parses options, shows progress, calls :func:`icore_lab.bench.run_planfence`.
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from icore.cli.inputs import nonempty_path, refuse_non_folder
from icore_lab.bench import PLANFENCE_PRESETS, BenchError, run_planfence

_NAMES = ", ".join([*PLANFENCE_PRESETS, "paper", "selector"])


def bench_planfence(
    preset: str = typer.Argument("table1", help=f"Preset: {_NAMES}."),
    out: Path | None = typer.Option(None, "--out", parser=nonempty_path, help="Output folder "
                                    "(default results/planfence/<preset>)."),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="Worker processes."),
    transport: str = typer.Option("inproc", "--transport",
                                  help="inproc (virtual time) or tcp (real loopback TCP "
                                  "with mutual TLS, wall-clock time)."),
    seed: int = typer.Option(0, "--seed", help="Master seed mixed into every schedule."),
    link: str | None = typer.Option(None, "--link", help="Override every cell's link "
                                    "(loopback, att, att-2016, tmobile, verizon); use "
                                    "loopback with --transport tcp."),
    base_delay_ms: float | None = typer.Option(
        None, "--base-delay-ms", min=0.0,
        help="One-way propagation delay added to trace links, ms (default 0: mm-link "
        "semantics); a sensitivity knob."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the PNG figures."),
    scale: float = typer.Option(1.0, "--scale", min=0.001, max=1.0,
                                help="selector only: share of the paper's 1,332-example "
                                "campaign to replay (the dataset is cached)."),
) -> None:
    """Replay every policy on identical schedules; write the paper's tables and figures.

    The selector preset is App. B.2's learned policy selection (Table 10).
    """
    _check_flags(transport, link, base_delay_ms)  # usage errors naming the flag, first
    console = Console(width=140)
    folder = out if out is not None else Path("results") / "planfence" / preset
    refuse_non_folder(folder, what="--out")  # /proc/x, /dev/full: before the replay
    if preset == "selector":
        _selector(console, folder, jobs=jobs, seed=seed, scale=scale)
        return
    command = "icore bench planfence " + " ".join(shlex.quote(a) for a in sys.argv[3:]) \
        if len(sys.argv) > 3 else f"icore bench planfence {preset}"
    t0 = time.perf_counter()
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console, transient=False) as bar:
            task = bar.add_task(f"planfence {escape(preset)}", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            _result, doc = run_planfence(preset, folder, jobs=jobs, transport=transport,
                                        seed=seed, command=command, plots=not no_plots,
                                        link=link, base_delay_ms=base_delay_ms,
                                        progress=progress)
    except BenchError as exc:
        Console(stderr=True).print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc
    aggs = doc.get("aggregates", [])
    if 0 < len(aggs) <= 24:
        t = Table("cell", "policy", "invalid", "completed", "stall ms/action", "KiB/action",
                  title=f"{preset}: per policy")
        for row in aggs:
            n = row["actions"]
            t.add_row(escape(str(row["cell"])), str(row["policy"]), f"{row['invalid']}/{n}",
                      f"{row['completed']}/{n}", f"{row['stall_ms_per_action']:.1f}",
                      f"{row['kib_per_action']:.2f}")
        console.print(t)
    table = Table("ordering", "reproduced", "measured", title="Paper orderings",
                  show_lines=False)
    for o in doc["orderings"]:
        mark = {True: "[green]yes[/]", False: "[red]no[/]", None: "-"}[o["reproduced"]]
        table.add_row(o["id"], mark, escape(o["measured"]))
    if table.row_count:
        console.print(table)
    console.print(f"{doc['scheduled_actions']} actions, {doc['episodes']} episodes, "
                  f"{time.perf_counter() - t0:.1f} s; results in {escape(str(folder))}/ "
                  "(summary.md, summary.json, summary.csv, rows.csv, *.png)")


def _check_flags(transport: str, link: str | None, base_delay_ms: float | None) -> None:
    """Refuse a ``--transport``, ``--link`` or ``--base-delay-ms`` the replay cannot use.

    The replay refuses them too, but only once it started, naming its own argument
    (``transport='bogus'``), not the flag (issue 29).

    Raises:
        typer.BadParameter: exit 2, naming the flag and the values it takes.
    """
    from icore_lab.bench import TRANSPORTS
    from icore_lab.net import LINK_NAMES

    if transport not in TRANSPORTS:
        raise typer.BadParameter(f"unknown transport {transport!r}; use one of "
                                 f"{', '.join(TRANSPORTS)}", param_hint="--transport")
    if link is not None and link not in LINK_NAMES:
        raise typer.BadParameter(f"unknown link {link!r}; use one of {', '.join(LINK_NAMES)}",
                                 param_hint="--link")
    if base_delay_ms is not None and not math.isfinite(base_delay_ms):
        raise typer.BadParameter(f"a finite number of milliseconds >= 0, not {base_delay_ms}",
                                 param_hint="--base-delay-ms")


def _selector(console: Console, folder: Path, *, jobs: int, seed: int, scale: float
              ) -> None:
    from icore_lab.bench.planfence import (
        TABLE10_HEADER,
        run_selector,
        table10_markdown,
        table10_rows,
    )

    t0 = time.perf_counter()
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console, transient=False) as bar:
            task = bar.add_task("selector campaign (replay jobs)", total=None)
            res = run_selector(folder, seed=seed, scale=scale, workers=jobs,
                               progress=lambda d, n: bar.update(task, completed=d, total=n))
    except (BenchError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc
    t = Table(*TABLE10_HEADER, title="Table 10: policy selection (paper / ours)")
    for row in table10_rows(res):
        t.add_row(*row)
    console.print(t)
    notes = table10_markdown(res).split("\n\n", 1)[1]
    console.print(escape(notes.strip()))
    console.print(f"{time.perf_counter() - t0:.1f} s; results in {escape(str(folder))}/ "
                  "(table10.md, table10.json, dataset-s*.json)")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench planfence``."""
    bench.command("planfence")(bench_planfence)
