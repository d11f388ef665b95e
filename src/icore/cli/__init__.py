"""The ``icore`` command: a thin layer over the public API (style habit 19).

Each command group lives in its own ``_<area>.py`` module exposing
``register(app, bench)``; this module wires the modules that exist.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import typer

from icore import __version__
from icore.cli._text import neutral
from icore.errors import IcoreError, redact

_HELP = {"help_option_names": ["-h", "--help"]}

_app = typer.Typer(
    name="icore",
    help="Safe-to-act, auditable LLM multi-agent teams (PlanFence + iCORE).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's paragraphs rewrapped, ``x`` as code
    context_settings=_HELP,
)
_bench = typer.Typer(help="Benchmarks and paper reproductions.", no_args_is_help=True,
                     context_settings=_HELP, rich_markup_mode="markdown")
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

_LAB_PACKAGE = "icore_lab.cli"
"""The lab's command modules (``icore bench ...``, ``icore demo``): the only place the
library names the lab, imported only when one of :data:`_LAB` is asked for."""

_LAB = ("bench", "demo")
"""First arguments that load the lab (with ``-h``/``--help`` and no argument: the help
lists every command)."""

_MODULES: tuple[tuple[str, bool], ...] = (
    ("_demo", True),
    ("_certs", False),
    ("_serve", False),
    ("_ownership_cli", False),
    ("_bench_core", True),
    ("_bench_net", True),
    ("_bench_peers", True),
    ("_bench_planfence", True),
    ("_bench_state", True),
    ("_bench_otel", True),
    ("_bench_icore", True),
    ("_bench_attribution", True),
    ("_bench_integrations", True),
    ("_audit", False),
    ("_compare", False),
    ("_run", False),
    ("_mcp", False),
)
"""Every command module in registration order (the order ``--help`` lists), and whether
it is the lab's (a module of :data:`_LAB_PACKAGE`) or the library's (``icore.cli``)."""


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


def _register(names: tuple[str, ...], *, lab: bool = False) -> None:
    """Register the command modules ``names``, in :data:`_MODULES` order.

    Args:
        names: module names of :data:`_MODULES`.
        lab: register the lab's modules among them too (else they are skipped).
    """
    for name, of_lab in _MODULES:
        if name not in names or name in _done or (of_lab and not lab):
            continue
        _done.add(name)
        full = f"{_LAB_PACKAGE if of_lab else __name__}.{name}"
        try:
            found = importlib.util.find_spec(full) is not None
        except ModuleNotFoundError:     # the lab package itself is not installed
            found = False
        if found:
            importlib.import_module(full).register(_app, _bench)
    _guard(_app)


def _register_all(*, lab: bool = True) -> None:
    _register(tuple(name for name, _ in _MODULES), lab=lab)


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


class _Redacting:
    """A text stream that redacts URL credentials in everything written to it (issue 29).

    It also makes the terminal control codes icore never writes visible
    (:func:`icore.cli._text.neutral`: OSC titles, BEL, NUL, C1, bidi controls).

    Wraps ``sys.stdout``/``sys.stderr`` for the whole command, so no path prints a
    password (:func:`icore.errors.redact`): icore's messages, usage errors, library
    logs and even a traceback.
    """

    def __init__(self, inner: IO[str]) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        """Write ``text`` redacted; returns ``len(text)`` (what the caller gave)."""
        self._inner.write(redact(neutral(text)))
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Write each line redacted."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def _redacted_output(*, stdout: bool = True) -> Iterator[None]:
    """``sys.stderr`` and (unless ``stdout=False``) ``sys.stdout`` redacted for a command.

    Text they cannot encode (a file name that is not UTF-8 reaches Python as lone
    surrogates) is printed as backslash escapes instead of raising.
    """
    old = sys.stdout, sys.stderr
    errors = [getattr(s, "errors", None) for s in old]
    for s in old:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            s.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    if stdout and not isinstance(sys.stdout, _Redacting):
        sys.stdout = _Redacting(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _Redacting):
        sys.stderr = _Redacting(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = old
        for s, e in zip(old, errors, strict=True):
            if e is not None:
                with contextlib.suppress(AttributeError, ValueError, OSError):
                    s.reconfigure(errors=e)  # type: ignore[union-attr]


def main() -> None:
    """Entry point of the ``icore`` console script.

    Library commands never load the lab: its modules are registered only for
    ``icore bench ...``, ``icore demo``, the top-level help and no argument. Output is
    redacted (:class:`_Redacting`); for ``icore mcp`` only stderr (its stdout is the MCP
    protocol; its messages and logs redact on their own).

    Raises:
        SystemExit: 130 on Ctrl-C that no command handled (e.g. while modules load),
            after one ``interrupted`` line on stderr.
    """
    argv = sys.argv[1:]
    fast = _FAST.get(argv[0]) if argv else None
    try:
        if fast is not None:
            _register(fast)
            with _redacted_output(stdout=False):  # stdout is the MCP protocol: left alone
                _app()
            return
        _register_all(lab=not argv or argv[0] in (*_LAB, "-h", "--help"))
        with _redacted_output():
            _app()
    except KeyboardInterrupt:
        # Ctrl-C while the command's modules load (before its own handler): one line,
        # exit 130 as a shell reports SIGINT, not a traceback (QA r8-bad D22)
        print("interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


__all__ = ["app", "main"]
