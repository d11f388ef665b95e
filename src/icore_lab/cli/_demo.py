"""``icore demo``: the main job on its embedded default (``make demo``).

Four parts, each calling the public API: the stale-plan race in one process; the live
five-agent reservation workflow over real processes and mutual-TLS TCP under owner-head
freshness and PlanFence; the Table 1 replay preset; an audit of one real Who&When trace.
The last two read the shared data (Mahimahi traces, Who&When); without it they say so and
are skipped.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from icore._data import shared_data_dir
from icore.cli.inputs import nonempty_path, refuse_non_folder
from icore.errors import IcoreError
from icore_lab.workloads import staged_race


def _race(console: Console) -> None:
    console.rule("[bold]1. Stale-plan race in one process (planfence Fig. 1)")
    console.print("planner derives p(r3) from r3 = Lisbon; the owner commits r4 = Porto; "
                  "the executor, holding r4, acts on the plan.")
    table = Table("policy", "tool ran", "booked", "current requirement", "invalid action",
                  "replanned", "decisions")
    for pol in ("local_replica", "owner_head_freshness", "planfence"):
        out = staged_race(pol)
        decisions = "; ".join(f"{d.outcome}/{d.reason}" for d in out.decisions)
        table.add_row(out.policy, str(out.executed), str(out.booked), out.current,
                      "[red]yes[/]" if out.invalid else "[green]no[/]",
                      str(out.replanned), decisions)
    console.print(table)


def _live(console: Console, out: Path) -> list[str]:
    from icore.live import default_manifest, run_policies
    from icore.report import write_live_report

    console.rule("[bold]2. Live five-agent reservation workflow (processes + mutual-TLS TCP)")
    t0 = time.perf_counter()
    runs = run_policies(default_manifest("reservation"), out / "live",
                        ("owner_head_freshness", "planfence"), reporter=write_live_report)
    table = Table("policy", "tasks", "succeeded", "invalid primary actions",
                  "successful replans", "blocked", "iCORE cq")
    reports = []
    for pol, r in runs.items():
        cq = r.icore.get("cq")
        table.add_row(pol, str(len(r.tasks)), str(r.succeeded),
                      f"[red]{r.invalid_actions}[/]" if r.invalid_actions else "0",
                      str(r.successful_replans), str(r.blocked),
                      f"{cq:.3f}" if isinstance(cq, float) else "-")
        if r.report is not None:
            reports.append(str(r.report))
    console.print(table)
    console.print(f"live runs took {time.perf_counter() - t0:.1f} s")
    return reports


def _table1(console: Console, out: Path) -> list[str]:
    from icore_lab.bench import run_planfence
    from icore_lab.net import traces_dir

    console.rule("[bold]3. Controlled replay: planfence Table 1 preset (virtual time)")
    try:
        traces_dir()
    except FileNotFoundError as exc:  # like part 4 without Who&When: say so, go on
        console.print(f"[yellow]skipped[/]: {exc}")
        return []
    t0 = time.perf_counter()
    folder = out / "table1"
    _result, doc = run_planfence("table1", folder, jobs=2, command="icore demo")
    table = Table("policy", "invalid", "completed", "blocked", "stall ms/action",
                  "KiB/action", title="Table 1 (AT&T trace, rho=4, 8 keys, N=5, H=64)")
    for row in doc["aggregates"]:
        n = row["actions"]
        table.add_row(str(row["policy"]), f"{row['invalid']}/{n}", f"{row['completed']}/{n}",
                      str(row["blocked"]), _fmt(row["stall_ms_per_action"]),
                      _fmt(row["kib_per_action"]))
    if table.row_count:
        console.print(table)
    for o in doc.get("orderings", []):
        mark = {True: "reproduced", False: "NOT reproduced", None: "-"}[o["reproduced"]]
        console.print(f"  {o['id']}: {mark}")
    console.print(f"{doc.get('scheduled_actions', '?')} actions replayed in "
                  f"{time.perf_counter() - t0:.1f} s; summary: {folder / 'summary.md'}")
    return [str(folder / "summary.md")]


def _fmt(v: object) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v if v is not None else "")


def _audit(console: Console, out: Path) -> list[str]:
    from icore.adapters import audit_path
    from icore.attribution import attribute
    from icore.report import render_report, view_from_audit

    console.rule("[bold]4. Audit of a recorded Who&When run (Magentic-One)")
    try:
        folder = shared_data_dir() / "who_and_when" / "Hand-Crafted"
    except IcoreError as exc:
        console.print(f"[yellow]skipped[/]: {exc}")
        return []
    files = sorted(folder.glob("*.json"))
    if not files:
        console.print(f"[yellow]skipped[/]: no traces in {folder}")
        return []
    res = audit_path(files[0])
    s = res.summary()
    att = attribute(res)
    console.print(f"run {s.run}: snd={s.snd:.3f} astab={s.astab:.3f} cq={s.cq:.3f} "
                  f"(mean over run {s.cq_mean:.3f}); hard flags {s.hard_flags}, stalls "
                  f"{s.stalls}, unsupported claims {s.unsupported}, diagnoses {s.diagnoses}")
    if att is not None:
        console.print(f"predicted responsible agent: {att.agent}, step {att.step}")
    page = render_report(view_from_audit(res, attribution=att), out / "audit")
    return [str(page)]


def demo(
    out: Path = typer.Option(Path("results/demo"), "--out", "-o", parser=nonempty_path,
                             help="Folder for the reports."),
    live: bool = typer.Option(True, "--live/--no-live", help="Run the live processes part."),
) -> None:
    """Run the embedded default: race, live team, Table 1 replay, Who&When audit.

    An --out that exists and is not a folder, or an empty --out (it would be the current
    folder), is a usage error (exit 2) before any part runs.
    """
    refuse_non_folder(out, what="--out")
    console = Console(width=140)
    t0 = time.perf_counter()
    reports: list[str] = []
    _race(console)
    if live:
        reports += _live(console, out)
    reports += _table1(console, out)
    reports += _audit(console, out)
    console.rule("[bold]Reports")
    for r in reports:
        console.print(f"  {r}")
    console.print(f"demo finished in {time.perf_counter() - t0:.1f} s")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore demo``."""
    app.command("demo")(demo)
