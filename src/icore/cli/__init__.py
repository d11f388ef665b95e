"""The ``icore`` command: a thin layer over the public API (style habit 19).

Each command group lives in its own ``_<area>.py`` module exposing
``register(app, bench)``; this module wires the modules that exist.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import typer

from icore import __version__
from icore.errors import IcoreError, redact

_HELP = {"help_option_names": ["-h", "--help"]}

_app = typer.Typer(
    name="icore",
    help="Safe-to-act, auditable LLM multi-agent teams (PlanFence + iCORE).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=_HELP,
)
_bench = typer.Typer(help="Benchmarks and paper reproductions.", no_args_is_help=True,
                     context_settings=_HELP)
_app.add_typer(_bench, name="bench")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"icore {__version__}")
        raise typer.Exit(0)


@_app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version,
                                 is_eager=True, help="Print the version and exit."),
) -> None:
    """Safe-to-act, auditable LLM multi-agent teams (PlanFence + iCORE)."""

_MODULES = (
    "_demo",
    "_certs",
    "_serve",
    "_bench_core",
    "_bench_net",
    "_bench_peers",
    "_bench_planfence",
    "_bench_state",
    "_bench_otel",
    "_bench_icore",
    "_bench_attribution",
    "_bench_integrations",
    "_audit",
    "_run",
    "_mcp",
)


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a typed icore error or an OS error (bad path) into a message and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (IcoreError, OSError) as exc:
            typer.echo(f"error: {redact(str(exc))}", err=True)
            raise typer.Exit(1) from exc

    return wrapper


def _guard(t: typer.Typer) -> None:
    for cmd in t.registered_commands:
        if cmd.callback is not None and not getattr(cmd.callback, "_icore_guarded", False):
            cmd.callback = _guarded(cmd.callback)
            cmd.callback._icore_guarded = True  # type: ignore[attr-defined]
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _guard(group.typer_instance)


_done: set[str] = set()


def _register(names: tuple[str, ...]) -> None:
    for name in names:
        if name in _done:
            continue
        _done.add(name)
        full = f"icore.cli.{name}"
        if importlib.util.find_spec(full) is None:
            continue
        importlib.import_module(full).register(_app, _bench)
    _guard(_app)


def _register_all() -> None:
    _register(_MODULES)


def __getattr__(name: str) -> Any:
    """``app`` / ``bench``: the command groups with every command module registered.

    Registration is lazy (PEP 562) so that ``icore mcp``, which an MCP client launches
    and waits for, imports only its own command module (start-up in seconds saved).
    """
    if name in ("app", "bench"):
        _register_all()
        return _app if name == "app" else _bench
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_FAST = {"mcp": ("_mcp",)}
"""Commands an MCP client launches: run with only their own module registered."""


def main() -> None:
    """Entry point of the ``icore`` console script."""
    argv = sys.argv[1:]
    fast = _FAST.get(argv[0]) if argv else None
    if fast is not None:
        _register(fast)
    else:
        _register_all()
    _app()


__all__ = ["app", "main"]
