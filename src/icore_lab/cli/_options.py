"""The lab commands' shared option check: a harness's bad option is a usage error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from icore_lab.bench import BadOption


@contextmanager
def bad_options() -> Iterator[None]:
    """Turn a harness's :class:`~icore_lab.bench.BadOption` into a usage error (exit code 2).

    It prints ``error: ...`` like typer's own range checks do.
    """
    try:
        yield
    except BadOption as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
