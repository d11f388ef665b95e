"""``icore demo``: the main job on its embedded default."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from icore.workloads import staged_race


def demo() -> None:
    """Stage the stale-plan race (planfence Fig. 1) under each policy and show the result."""
    console = Console(width=140)
    console.rule("[bold]Stale-plan race (planfence Fig. 1)")
    console.print("planner derives p(r3) from r3 = Lisbon; the owner commits r4 = Porto; "
                  "the executor, holding r4, acts on the plan.")
    table = Table("policy", "tool ran", "booked", "current requirement", "invalid action",
                  "replanned", "decisions")
    for pol in ("local_replica", "owner_head_freshness", "planfence"):
        out = staged_race(pol)
        decisions = "; ".join(f"{d['outcome']}/{d['reason']}" for d in out.decisions)
        table.add_row(out.policy, str(out.executed), str(out.booked), out.current,
                      "[red]yes[/]" if out.invalid else "[green]no[/]",
                      str(out.replanned), decisions)
    console.print(table)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore demo``."""
    app.command("demo")(demo)
