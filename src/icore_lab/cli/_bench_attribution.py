"""``icore bench attribution``: cross-validated failure attribution per subset (thin).

See :mod:`icore.attribution._crossval` for the protocol.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from icore._data import shared_data_dir
from icore._extras import require
from icore.adapters import AdapterError, audit_path, collect_paths
from icore.attribution import fit_model_set
from icore.cli.inputs import (
    check_llm_options,
    nonempty_path,
    refuse_input_as_output,
    refuse_non_folder,
    refuse_special_file,
    shown_path,
    unwritable,
)


def bench_attribution(
    paths: list[Path] = typer.Argument(
        None, help="Annotated runs (files or folders; default: the shared Who&When "
        "development half)."),
    folds: int = typer.Option(5, min=2, help="k of the grouped k-fold split."),
    repeats: int = typer.Option(5, min=1, help="Shuffles of the question groups."),
    seed: int = typer.Option(0, help="Seed of the first shuffle."),
    out: Path = typer.Option(Path("results/attribution"), "--out", "-o", parser=nonempty_path,
                             help="Folder for attribution.md/.json and predictions.csv."),
    write_model: Path | None = typer.Option(
        None, "--write-model", parser=nonempty_path, help="Also fit the scorer on ALL "
        "given runs and write the model file (how the shipped model is made)."),
    weights: bool = typer.Option(True, "--weights/--no-weights",
                                 help="Print the fitted features and weights."),
    llm_base_url: str = typer.Option(
        "", help="Also evaluate the LLM mode behind this OpenAI-compatible endpoint."),
    llm_model: str = typer.Option("gpt-4o-mini", help="Model name for --llm-base-url."),
    llm_mode: str = typer.Option("hybrid", help="all-at-once, step-by-step or hybrid."),
    llm_api_key: str = typer.Option("not-needed", envvar="OPENAI_API_KEY",
                                    help="API key sent to --llm-base-url."),
) -> None:
    """Failure attribution on Who&When, cross-validated per subset, next to baselines.

    Grouped k-fold, with and without ground truth, step tolerance ±0..±5, 95% intervals.
    """
    refuse_non_folder(out, what="--out")  # /proc/x, /dev/full: before the evaluation
    # the model file and the LLM mode were found bad only after the cross-validation
    check_llm_options(llm_base_url or None, llm_mode)
    if llm_base_url:  # a server that is down: said now, not after the cross-validation
        _probe(llm_base_url, llm_model, llm_api_key)
    if write_model is not None:
        if write_model.is_dir():
            raise typer.BadParameter(f"{write_model} is a folder; give a file name",
                                     param_hint="--write-model")
        if (problem := unwritable(write_model, folder=False)) is not None:
            raise typer.BadParameter(f"{shown_path(write_model)}: {problem}",
                                     param_hint="--write-model")
    console = Console(width=180)
    where = "the given runs"
    if not paths:
        paths = [shared_data_dir() / "who_and_when"]
        where = "the whole Who&When development half"
    for p in paths:
        refuse_special_file(p, what="trace path", dir_ok=True)
    files = collect_paths(paths)
    refuse_input_as_output(  # no output may replace a run it reads (issue 29)
        [("--out", out / n) for n in ("attribution.md", "attribution.json", "predictions.csv")]
        + ([("--write-model", write_model)] if write_model is not None else []), files)
    results = []
    for f in files:
        try:
            results.append(audit_path(f))
        except AdapterError as exc:
            console.print(f"[red]error[/] {exc.file}: {exc.field}: {exc.problem}")
    if not results:
        console.print("[red]no runs to evaluate[/]")
        raise typer.Exit(2)
    require("sklearn", "attribution", feature="icore bench attribution")
    from icore_lab.bench.icore import cross_validate, write_outputs

    ev = cross_validate(results, folds=folds, repeats=repeats, seed=seed)
    if llm_base_url:
        from icore.agents import LLMSettings
        from icore.attribution import LLMAttributor
        from icore_lab.bench.icore import with_llm_rows

        att = LLMAttributor(LLMSettings(base_url=llm_base_url, model=llm_model,
                                        api_key=llm_api_key), mode=llm_mode)
        ev = with_llm_rows(ev, results, att)
    paths_out = write_outputs(ev, out)
    text = paths_out["markdown"].read_text(encoding="utf-8")
    if not weights:
        text = text.split("## Features and weights")[0]
    console.print(Markdown(text))
    console.print(f"cross-validation: {ev.elapsed_s:.1f} s")
    for name, path in paths_out.items():
        console.print(f"{name}: {path}")
    if write_model is not None:
        fams = ", ".join(f"{sum(r.trace.family == f for r in results)} {f}"
                         for f in sorted({r.trace.family for r in results}))
        ms = fit_model_set(results, trained_on=f"{where} ({fams})")
        write_model.parent.mkdir(parents=True, exist_ok=True)
        write_model.write_text(json.dumps(ms.to_json(), indent=1) + "\n", encoding="utf-8")
        console.print(f"model (fitted on all {len(results)} runs): {write_model}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench attribution``."""
    bench.command("attribution")(bench_attribution)


def _probe(base_url: str, model: str, api_key: str) -> None:
    """Exit 1 naming ``--llm-base-url`` when the model server cannot be used (issue 29)."""
    from icore.agents import LLMSettings, LLMUnavailable, negotiate

    try:
        negotiate(LLMSettings(base_url=base_url, model=model, api_key=api_key).to_config())
    except LLMUnavailable as exc:
        Console(stderr=True).print(f"[red]error[/]: --llm-base-url: model server unusable: "
                                   f"{escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
