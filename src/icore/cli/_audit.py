"""``icore audit PATH...``: import recorded runs, audit them, write HTML reports.

Thin: calls :mod:`icore.adapters` (import, audit, attribution, PROV) and
:mod:`icore.report` (rendering) only.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from icore.adapters import (
    AdapterError,
    Attribution,
    AuditResult,
    attribute,
    audit_file,
    collect_paths,
    score,
    write_prov,
)
from icore.cli._inputs import refuse_special_file
from icore.report import (
    index_from_audits,
    render_index,
    render_report,
    report_filename,
    view_from_audit,
)


def audit(
    paths: list[Path] = typer.Argument(
        ..., help="Trace files (.json Who&When, .jsonl generic, .otlp.json OpenTelemetry / "
        "Phoenix / Langfuse spans) or folders of them."),
    out: Path = typer.Option(
        Path("icore-audit"), "--out", "-o", help="Folder for the HTML reports (and PROV)."),
    attribution: bool = typer.Option(
        False, "--attribution", help="Attribute each failure to an agent and step; score "
        "against the annotations (agent/step accuracy vs a random baseline)."),
    prov: bool = typer.Option(False, "--prov", help="Also export each run as PROV-JSON."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write HTML reports."),
    otlp_endpoint: str | None = typer.Option(
        None, "--otlp-endpoint", help="Also export each audit (metrics, cq timeline, hard "
        "flags, diagnoses) as OpenTelemetry spans to this OTLP/HTTP URL, or file:PATH. "
        "Needs icore[otel]."),
) -> None:
    """Audit recorded multi-agent runs: snd, astab, cq, hard flags, stalls, diagnoses."""
    console = Console(width=160)
    for p in paths:
        # a FIFO or device given by name would block (or never end) when read: refuse it
        # before anything is read; inside folders only regular files are collected
        refuse_special_file(p, what="trace path", dir_ok=True)
    files = collect_paths(paths)
    if not files:
        console.print("[red]no trace files found[/]")
        raise typer.Exit(2)
    results: list[AuditResult] = []
    errors: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    for f in files:
        try:
            results.extend(audit_file(f))  # an OpenTelemetry export: one run per trace
        except AdapterError as exc:
            errors.append((exc.file, f"{exc.field}: {exc.problem}"))
    elapsed = time.perf_counter() - t0
    results = _unique_ids(results)
    if otlp_endpoint:
        from icore.adapters import exporting

        with exporting(endpoint=otlp_endpoint) as ex:
            for r in results:
                ex.audit(r)
    table = Table("run", "family", "msgs", "snd", "astab", "cq", "cq mean", "cq min",
                  "hard flags", "stalls", "unsupported", "diagnoses",
                  title="iCORE audit (final X; cq mean/min over the run)")
    for r in results:
        s = r.summary()
        table.add_row(s.run, s.family, str(s.steps), f"{s.snd:.3f}", f"{s.astab:.3f}",
                      f"{s.cq:.3f}", f"{s.cq_mean:.3f}", f"{s.cq_min:.3f}", str(s.hard_flags),
                      str(s.stalls), str(s.unsupported), str(s.diagnoses))
    console.print(table)
    for r in results:
        for w in r.trace.extras.get("warnings", ()):
            console.print(f"[yellow]warning[/] {w}")
    for file, err in errors:
        console.print(f"[red]error[/] {file}: {err}")
    console.print(f"imported and audited {len(results)} run(s) in {elapsed:.2f} s "
                  f"(import + audit){f'; {len(errors)} file(s) failed' if errors else ''}")
    atts: dict[str, Attribution] = {}
    sc = None
    if attribution:
        for r in results:
            a = attribute(r)
            if a is not None:
                atts[r.trace.id] = a
        sc = score(results)
        _print_score(console, sc)
    if prov:
        out.mkdir(parents=True, exist_ok=True)
    if report or prov:
        for r in results:
            links: list[tuple[str, str]] = []
            if prov:
                p = write_prov(r.state, out / f"{Path(report_filename(r.trace.id)).stem}"
                               ".prov.json", run_id=r.trace.id)
                links.append(("PROV-JSON", p.name))
            if report:
                render_report(view_from_audit(r, attribution=atts.get(r.trace.id),
                                              links=links, index_href="index.html"), out)
        if report:
            idx = render_index(index_from_audits(
                results, attributions=atts if attribution else None, score=sc,
                errors=errors, elapsed_s=elapsed), out)
            console.print(f"reports: {idx}")
        if prov:
            console.print(f"PROV-JSON: {out}/*.prov.json (read back and validated)")
    if errors:
        raise typer.Exit(1)


def _unique_ids(results: list[AuditResult]) -> list[AuditResult]:
    """Give runs whose ids (hence report files) collide a ``-2``, ``-3`` ... suffix."""
    seen: set[str] = set()
    out = []
    for r in results:
        rid, n = r.trace.id, 1
        while report_filename(rid) in seen:
            n += 1
            rid = f"{r.trace.id}-{n}"
        seen.add(report_filename(rid))
        out.append(r if rid == r.trace.id else replace(r, trace=replace(r.trace, id=rid)))
    return out


def _print_score(console: Console, sc: object) -> None:
    from icore.adapters import AttributionScore

    assert isinstance(sc, AttributionScore)
    t = Table("method", "agent-level", "step-level", "runs",
              title="Failure attribution (Who&When annotations)")
    t.add_row("icore (first unsupported/unstable decision)", f"{sc.agent_accuracy:.1%}",
              f"{sc.step_accuracy:.1%}", str(sc.n))
    t.add_row("random baseline (expected, same candidates)", f"{sc.random_agent:.1%}",
              f"{sc.random_step:.1%}", str(sc.n))
    t.add_row("published best (Who&When paper)", f"{sc.published['agent']:.1%}",
              f"{sc.published['step']:.1%}", "")
    for fam, v in sc.by_family.items():
        t.add_row(f"  {fam}: icore / random",
                  f"{v['agent_accuracy']:.1%} / {v['random_agent']:.1%}",
                  f"{v['step_accuracy']:.1%} / {v['random_step']:.1%}", str(int(v["n"])))
    console.print(t)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore audit``."""
    app.command("audit")(audit)
