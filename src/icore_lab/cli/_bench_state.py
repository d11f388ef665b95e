"""``icore bench state``: iCORE state benchmark (thin; see :mod:`icore_lab.bench.micro._state`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from icore.cli.inputs import output_file
from icore_lab.bench.micro import run_state_bench as run
from icore_lab.cli._options import bad_options


def _sizes(text: str) -> tuple[int, ...]:
    """Parse ``--sizes``: comma-separated obligation counts, at least one, each >= 1.

    Raises:
        typer.BadParameter: not integers, none, or one below 1 (typer exits 2).
    """
    try:
        counts = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise typer.BadParameter(f"use comma-separated integers, e.g. 1000,10000; "
                                 f"got {text!r}") from None
    if not counts or min(counts) < 1:
        raise typer.BadParameter(f"give one or more obligation counts >= 1; got {text!r}")
    return counts


def _check_sizes(text: str) -> str:
    _sizes(text)
    return text


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench state``."""

    @bench.command("state")
    def state_cmd(
        sizes: str = typer.Option(
            "1000,10000,100000", callback=_check_sizes,
            help="Obligation counts to audit at (comma-separated, each >= 1).",
        ),
        samples: int = typer.Option(
            1000, min=1, help="Obligations cycled per size (3 proposals each)."
        ),
        rebuild_entries: int = typer.Option(100_000, min=1, help="Entries in the rebuilt log."),
        trace_sizes: str = typer.Option(
            "1000,10000,100000", callback=_check_sizes,
            help="Events of the synthetic generic JSONL runs audited (comma-separated).",
        ),
        trial_at: str = typer.Option(
            "10000,100000", callback=_check_sizes,
            help="Log lengths at which the per-proposal recovery-audit cost is timed.",
        ),
        quick: bool = typer.Option(False, help="Small sizes for a smoke run."),
        json_out: Annotated[
            Path | None, typer.Option("--json", help="Write figures as JSON.")
        ] = None,
        seed: int = typer.Option(0, help="Random seed."),
    ) -> None:
        """Benchmark the iCORE state: audit latency, incremental metrics, rebuild, memory.

        Also ``icore audit`` of generic runs and recovery-audit cost per proposal.
        """
        counts = _sizes(sizes)
        with output_file(json_out, what="--json output") as out, bad_options():
            if quick:
                res = run(
                    (200, 1000),
                    samples=100,
                    speedup_at=2000,
                    rebuild_entries=5000,
                    memory_at=1000,
                    trace_sizes=(1000,),
                    trial_at=(2000,),
                    seed=seed,
                    echo=typer.echo,
                )
            else:
                res = run(
                    counts,
                    samples=samples,
                    rebuild_entries=rebuild_entries,
                    trace_sizes=_sizes(trace_sizes),
                    trial_at=_sizes(trial_at),
                    seed=seed,
                    echo=typer.echo,
                )
            if out is not None:
                out.write(json.dumps(asdict(res), indent=2))
