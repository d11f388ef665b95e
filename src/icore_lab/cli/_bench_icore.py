"""``icore bench icore``: the controlled evaluation of iCORE-Audit (design.md 4.5)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from icore.agents import LLMSettings, LLMUnavailable, negotiate
from icore.cli.inputs import nonempty_path, refuse_non_folder
from icore_lab.bench import BadOption, UnknownPreset
from icore_lab.bench.icore import PRESETS, default_jobs, evaluate, evaluate_grid
from icore_lab.cli._options import bad_options
from icore_lab.workloads import TASK_MODES, TaskMode


def bench_icore(
    preset: str = typer.Option("quick", help=f"Size: {', '.join(PRESETS)}."),
    per_mode: int = typer.Option(0, min=0,
                                 help="Instances per task mode (0: the preset's)."),
    mode: list[TaskMode] = typer.Option(
        [], "--mode", help="Task mode(s) to run, each once (default: all six)."
    ),
    seed0: int = typer.Option(0, help="First instance seed."),
    jobs: int = typer.Option(default_jobs(), min=1, help="Worker processes."),
    out: Path | None = typer.Option(None, parser=nonempty_path,
                                    help="Output folder (default results/icore/<preset>)."),
    llm_base_url: str = typer.Option(
        "", help="Run the LLM team behind this OpenAI-compatible endpoint (real-LLM setting)."
    ),
    llm_model: str = typer.Option("gpt-4o-mini", help="Model name for --llm-base-url."),
    llm_api_key: str = typer.Option(
        "not-needed", envvar="OPENAI_API_KEY", help="API key sent to --llm-base-url."
    ),
    grid: bool = typer.Option(
        False, help="Run the fault-model settings grid (fabricated evidence, gaming, "
        "ignored/misread feedback, capability noise) and tabulate it."
    ),
    llm_timeout_s: float = typer.Option(30.0, min=0.001,
                                        help="Per-request timeout, seconds."),
) -> None:
    """MAS-only vs passive observation vs iCORE-Audit on matched instances of six task modes.

    G/Q/X representation ablations (detection on passive logs, and the audit loop run with
    a G-only / Q-only / full-X view); Prop. 4 check; CSV, JSON, PNG and markdown outputs.
    """
    console = Console(width=140)
    modes = [str(m) for m in mode or TASK_MODES]
    with bad_options():
        # a repeated mode would run (and count) its matched instances twice
        for i, m in enumerate(modes):
            if m in modes[:i]:
                raise BadOption(f"option '--mode': task mode {m!r} given twice; give each "
                                "mode once", option="--mode", value=m)
    try:
        p = PRESETS[preset]
    except KeyError:
        raise typer.BadParameter(str(UnknownPreset(f"unknown preset {preset!r}",
                                                   known=sorted(PRESETS))),
                                 param_hint="--preset") from None
    if not math.isfinite(llm_timeout_s):  # typer's min= lets inf through
        raise typer.BadParameter(f"a finite number of seconds > 0, not {llm_timeout_s}",
                                 param_hint="--llm-timeout-s")
    if out is not None:  # /proc/x, /dev/full: before the instances run
        refuse_non_folder(out, what="--out")
    n = per_mode or p.per_mode
    if grid:
        with bad_options():
            _rows, md = evaluate_grid(preset=preset, per_mode=n, modes=modes, seed0=seed0,
                                      jobs=jobs, out=out)
        console.print(Markdown(md.read_text(encoding="utf-8")))
        console.print(f"grid: {md}")
        return
    llm: LLMSettings | None = None
    if llm_base_url:
        llm = LLMSettings(base_url=llm_base_url, model=llm_model, api_key=llm_api_key,
                          timeout_s=llm_timeout_s)
        try:
            neg = negotiate(llm.to_config())
        except LLMUnavailable as exc:
            console.print(f"[red]model server unusable[/] (--llm-base-url): {exc}")
            raise typer.Exit(1) from None
        # the workers skip the probe; no more worker processes than the server's slots
        llm = replace(llm, tool_choice=neg.mode, slots=neg.slots)
        if jobs > neg.slots:
            console.print(f"jobs: {jobs} -> {neg.slots} (the server's slots)")
            jobs = neg.slots
        console.print(neg.describe())
    try:
        with bad_options(), Progress(
            TextColumn("[bold]iCORE eval"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console,
        ) as prog:
            task = prog.add_task("instances", total=n * len(modes))
            _summary, paths = evaluate(
                preset=preset, per_mode=n, modes=modes, seed0=seed0, jobs=jobs, out=out,
                progress=lambda k: prog.advance(task, k), llm=llm,
            )
    except LLMUnavailable as exc:
        console.print(f"[red]model server unusable[/] (infrastructure, not the model): {exc}")
        raise typer.Exit(1) from None
    console.print(Markdown(paths["markdown"].read_text(encoding="utf-8")))
    if llm is not None:
        t = Table("condition", "runs", "responses", "accepted", "schema violations",
                  "corrections used", "unrecovered (rejected proposals)",
                  "infra failures (retried)", title="LLM team decisions")
        for cond, d in _summary.get("llm", {}).items():
            t.add_row(cond, *(str(d[k]) for k in ("runs", "responses", "accepted",
                                                  "violations", "corrections",
                                                  "unrecovered", "infra_failures")))
        console.print(t)
        console.print(f"wall time: {_summary['runtime_s']:.1f} s")
    for name, path in paths.items():
        console.print(f"{name}: {path}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench icore``."""
    bench.command("icore")(bench_icore)
