"""The ``icore`` command: a thin layer over the public API (style habit 19).

Each command group lives in its own ``_<area>.py`` module exposing
``register(app, bench)``; this module wires the modules that exist.
"""

from __future__ import annotations

import importlib
import importlib.util

import typer

app = typer.Typer(
    name="icore",
    help="Safe-to-act, auditable LLM multi-agent teams (PlanFence + iCORE).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench = typer.Typer(help="Benchmarks and paper reproductions.", no_args_is_help=True)
app.add_typer(bench, name="bench")

_MODULES = (
    "_demo",
    "_certs",
    "_serve",
    "_bench_core",
    "_bench_net",
    "_bench_planfence",
    "_bench_state",
    "_bench_icore",
    "_audit",
    "_run",
)


def _register_all() -> None:
    for name in _MODULES:
        full = f"icore.cli.{name}"
        if importlib.util.find_spec(full) is None:
            continue
        importlib.import_module(full).register(app, bench)


_register_all()


def main() -> None:
    """Entry point of the ``icore`` console script."""
    app()


__all__ = ["app", "main"]
