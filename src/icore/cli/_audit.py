"""``icore audit PATH...``: import recorded runs, audit them, write HTML reports.

Thin: calls :mod:`icore.adapters` (import, audit, attribution, PROV) and
:mod:`icore.report` (rendering) only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
    audit_path,
    collect_paths,
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
        ..., help="Trace files (.json Who&When, .jsonl generic) or folders of them."),
    out: Path = typer.Option(
        Path("icore-audit"), "--out", "-o", help="Folder for the HTML reports (and PROV)."),
    attribution: bool = typer.Option(
        False, "--attribution", help="Attribute each failure to an agent and step (shipped "
        "scorer, trained on the whole Who&When development half); on annotated runs also "
        "print the cross-validated accuracy per subset next to the baselines."),
    folds: int = typer.Option(5, min=2, help="--attribution: k of the grouped k-fold CV."),
    repeats: int = typer.Option(1, min=1, help="--attribution: CV repeats (icore bench "
                                "attribution uses 5)."),
    llm_base_url: str = typer.Option(
        "", help="--attribution: attribute with an LLM behind this OpenAI-compatible "
        "endpoint, X-derived evidence as context (default: LLM-free)."),
    llm_model: str = typer.Option("gpt-4o-mini", help="Model name for --llm-base-url."),
    llm_mode: str = typer.Option("hybrid", help="all-at-once, step-by-step or hybrid."),
    llm_api_key: str = typer.Option("not-needed", envvar="OPENAI_API_KEY",
                                    help="API key sent to --llm-base-url."),
    prov: bool = typer.Option(False, "--prov", help="Also export each run as PROV-JSON."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write HTML reports."),
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
            results.append(audit_path(f))
        except AdapterError as exc:
            errors.append((exc.file, f"{exc.field}: {exc.problem}"))
    elapsed = time.perf_counter() - t0
    results = _unique_ids(results)
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
        attr: Callable[[AuditResult], Attribution | None] = attribute
        if llm_base_url:
            from icore.adapters import LLMAttributor
            from icore.agents import LLMSettings

            attr = LLMAttributor(LLMSettings(base_url=llm_base_url, model=llm_model,
                                             api_key=llm_api_key), mode=llm_mode).attribute
        for r in results:
            a = attr(r)
            if a is not None:
                atts[r.trace.id] = a
        _print_candidates(console, atts)
        if any(r.trace.annotation is not None and r.trace.succeeded is not True
               for r in results):
            from icore.bench._attribution import cross_validate, cv_score, markdown

            ev = cross_validate(results, folds=folds, repeats=repeats)
            if ev.rows:
                from rich.markdown import Markdown

                console.print(Markdown(markdown(ev, weights=False)))
                sc = cv_score(ev)
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


def _print_candidates(console: Console, atts: dict[str, Attribution]) -> None:
    """The top three (agent, step) candidates of each attributed run and their features."""
    t = Table("run", "rank", "agent", "step", "score", "features that ranked it",
              title="Failure attribution: top candidates (shipped scorer, trained on the "
              "whole development half; in-sample for those runs)")
    for rid, a in atts.items():
        for i, c in enumerate(a.candidates, 1):
            why = ", ".join(f"{n}={v:.2g} (+{w:.2f})" for n, v, w in c.reasons)
            t.add_row(rid if i == 1 else "", str(i), c.agent, str(c.step), f"{c.score:.2f}",
                      why)
        if not a.candidates:
            t.add_row(rid, "-", str(a.agent), str(a.step), "", a.rule)
    console.print(t)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore audit``."""
    app.command("audit")(audit)
