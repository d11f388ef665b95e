"""Input checks shared by the commands: bad option values and unreadable file kinds.

Not a command module (it has no ``register``): the command modules import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from icore._files import not_a_regular_file
from icore.bench import BadOption


def positive_seconds(value: float) -> float:
    """Typer callback: a duration option must be a finite number of seconds ``> 0``.

    Typer's ``min=`` cannot refuse NaN or infinity (both pass a range check, and an
    infinite or NaN deadline makes a measuring loop run forever), nor express ``> 0``.

    Raises:
        typer.BadParameter: NaN, infinite or ``<= 0`` (typer exits 2 naming the option).
    """
    if not math.isfinite(value) or value <= 0:
        raise typer.BadParameter(f"must be a finite number of seconds > 0, got {value}")
    return value


def positive_seconds_or_none(value: float | None) -> float | None:
    """Typer callback for an optional duration: None (not given) passes, anything else
    must pass :func:`positive_seconds`.

    Raises:
        typer.BadParameter: NaN, infinite or ``<= 0`` (typer exits 2 naming the option).
    """
    return None if value is None else positive_seconds(value)


@contextmanager
def bad_options() -> Iterator[None]:
    """Turn a :class:`~icore.bench.BadOption` from the library into ``error: ...`` and
    exit code 2 (a usage error), like typer's own range checks."""
    try:
        yield
    except BadOption as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def refuse_special_file(path: Path, *, what: str, dir_ok: bool = False) -> None:
    """Exit 2 with an ``error:`` message naming ``path`` when it exists but is not a
    regular file (or, with ``dir_ok``, a directory).

    Reading a FIFO or a character device can block forever or never end, so the path is
    only ``stat``-ed, never opened. A path that cannot be ``stat``-ed (missing, no
    permission) is left to the loader, which reports it with its own typed error.

    Args:
        path: the user-supplied path.
        what: what the command expected, for the message (``"manifest"``, ``"trace"``).
        dir_ok: a directory is acceptable too.

    Raises:
        typer.Exit: code 2, after the message is printed on stderr.
    """
    problem = not_a_regular_file(path, dir_ok=dir_ok)
    if problem is None:
        return
    typer.echo(f"error: {what} {path} {problem}; refusing to read it", err=True)
    raise typer.Exit(2)


__all__ = ["bad_options", "positive_seconds", "positive_seconds_or_none",
           "refuse_special_file"]
