"""``icore bench integrations``: fenced vs unfenced calls per framework, in one run.

Thin: the framework cases come from :func:`icore.integrations.cost.seam_cases`, the timing from
:func:`icore_lab.bench.micro.run_seam_bench` (issue 28 item 8).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from icore.cli.inputs import output_file
from icore_lab.cli._options import bad_options


def bench_integrations(
    calls: int = typer.Option(2000, min=1, help="Calls per side of each case."),
    rounds: int = typer.Option(5, min=1, help="Alternating rounds (base, fenced, ...) "
                               "each side's calls are split into; the median round counts."),
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Write the figures as JSON.")] = None,
) -> None:
    """The cost of the PlanFence seam: fenced vs unfenced tool calls per framework.

    LangGraph ``tool.invoke``, the OpenAI Agents SDK's function tool, AG2's function, the
    bare ``Fence.execute`` against a plain call and ``Fence.aexecute`` against
    ``Fence.execute``, all over in-process owners (in-memory stores), every call
    authorized. Targets: LangGraph fenced <= 1.3x unfenced; aexecute <= 1.5x execute.
    """
    from icore.integrations.cost import seam_cases
    from icore_lab.bench.micro import Pair, SeamWorld, fence_cases, run_seam_bench

    console = Console(width=120)
    with output_file(json_out, what="--json output") as out, bad_options():
        if calls < rounds:
            typer.echo(f"error: --calls ({calls}) must be at least --rounds ({rounds})",
                       err=True)
            raise typer.Exit(2)
        framework, skipped = seam_cases(SeamWorld)
        cases: list[Pair] = [*framework, *fence_cases(SeamWorld())]
        per = max(1, calls // rounds) * rounds * 2
        with Progress(TextColumn("{task.description:<36}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as progress:
            tasks = {c.name: progress.add_task(c.name, total=per) for c in cases}
            figures = run_seam_bench(cases, calls=calls, rounds=rounds,
                                     advance=lambda name, n: progress.advance(tasks[name], n))
        table = Table("case", "base", "µs/call", "fenced", "µs/call", "ratio", "target",
                      title=f"PlanFence at the seam: {calls:,} calls per side, in-process "
                      "owners (median of alternating rounds)")
        for f in figures:
            verdict = "" if f.target is None else (
                f"≤ {f.target:g}x {'met' if f.met else 'MISSED'}")
            table.add_row(f.name, f.base_label, f"{f.base_us:,.1f}", f.fenced_label,
                          f"{f.fenced_us:,.1f}", f"{f.ratio:.2f}x", verdict)
        table.columns[0].no_wrap = True
        console.print(table)
        for name, reason in skipped:
            console.print(f"skipped {escape(name)}: {escape(reason)}")
        console.print("Figures from a shared machine vary between runs; compare the ratios "
                      "of one run (both sides are timed in alternating rounds).")
        if out is not None:
            out.write(json.dumps({
                "calls": calls, "rounds": rounds,
                "cases": [{"name": f.name, "base": f.base_label, "fenced": f.fenced_label,
                           "base_us": f.base_us, "fenced_us": f.fenced_us,
                           "ratio": f.ratio, "target": f.target, "met": f.met}
                          for f in figures],
                "skipped": [{"name": n, "reason": r} for n, r in skipped]},
                indent=2))


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench integrations``."""
    bench.command("integrations")(bench_integrations)
