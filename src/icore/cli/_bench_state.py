"""``icore bench state``: iCORE state benchmark (thin; see :mod:`icore.bench._state_bench`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from icore.bench._state_bench import run


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench state``."""

    @bench.command("state")
    def state_cmd(
        sizes: str = typer.Option("1000,10000,100000", help="Obligation counts to audit at."),
        samples: int = typer.Option(1000, help="Obligations cycled per size (3 proposals each)."),
        rebuild_entries: int = typer.Option(100_000, help="Entries in the rebuilt log."),
        quick: bool = typer.Option(False, help="Small sizes for a smoke run."),
        json_out: Annotated[
            Path | None, typer.Option("--json", help="Write figures as JSON.")
        ] = None,
        seed: int = typer.Option(0, help="Random seed."),
    ) -> None:
        """Benchmark the iCORE state: audit latency, incremental metrics, rebuild, memory."""
        if quick:
            res = run(
                (200, 1000),
                samples=100,
                speedup_at=2000,
                rebuild_entries=5000,
                memory_at=1000,
                seed=seed,
                echo=typer.echo,
            )
        else:
            res = run(
                tuple(int(s) for s in sizes.split(",") if s),
                samples=samples,
                rebuild_entries=rebuild_entries,
                seed=seed,
                echo=typer.echo,
            )
        if json_out is not None:
            json_out.write_text(json.dumps(asdict(res), indent=2))
