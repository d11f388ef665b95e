"""The lab's commands: ``icore bench ...`` and ``icore demo``.

Each command module exposes ``register(app, bench)`` like the library's
(:mod:`icore.cli`); ``icore`` registers them only when a lab command or the top-level help
is asked for, so the library's commands never load the lab. :func:`register` registers
them all (for a host that builds its own Typer app).
"""

from __future__ import annotations

import importlib

import typer

MODULES = (
    "_demo",
    "_bench_core",
    "_bench_net",
    "_bench_peers",
    "_bench_planfence",
    "_bench_state",
    "_bench_otel",
    "_bench_icore",
    "_bench_attribution",
    "_bench_integrations",
)
"""The lab's command modules, in ``--help`` order."""


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Register every lab command: ``demo`` on ``app``, the harnesses on ``bench``.

    Args:
        app: the ``icore`` command group.
        bench: its ``bench`` sub-group.
    """
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}").register(app, bench)


__all__ = ["MODULES", "register"]
