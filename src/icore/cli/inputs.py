"""Input checks shared by the commands: bad option values and unreadable file kinds.

Not a command module (it has no ``register``): the command modules import it, the
library's and the lab's (:mod:`icore_lab.cli`) alike. It imports nothing of the lab.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from icore._files import (
    append_refusal,
    file_identity,
    not_a_regular_file,
    output_refusal,
    record_written,
    write_owned,
)
from icore.cli._text import printable
from icore.cli._writable import is_stream, shown_path, too_long, unwritable, write_stream
from icore.errors import redact

FAIL_EXIT = 3
"""Exit code of a command that ran to the end but meets a ``--fail-on`` condition (for
CI: 1 is an error, 2 a usage error)."""


def fail_conditions(values: list[str] | None, known: tuple[str, ...]) -> frozenset[str]:
    """Check ``--fail-on`` values (repeatable, or comma-separated).

    A given value that names no condition (``--fail-on ''``, ``','``, ``' '``: the CI
    spelling ``--fail-on "$VAR"`` with the variable unset) is refused, never read as
    "no condition": that would turn the gate off without a word.

    Raises:
        typer.BadParameter: a value not in ``known``, or a value naming no condition
            (exit 2 naming the option and the valid conditions).
    """
    for raw in values or ():
        if not raw.replace(",", "").strip():
            raise typer.BadParameter(f"names no condition ({raw!r}); use "
                                     f"{', '.join(known)}, or drop --fail-on",
                                     param_hint="--fail-on")
    out = {v.strip() for raw in values or () for v in raw.split(",") if v.strip()}
    bad = sorted(out - set(known))
    if bad:
        raise typer.BadParameter(f"unknown condition(s) {', '.join(bad)}; use "
                                 f"{', '.join(known)}", param_hint="--fail-on")
    return frozenset(out)


def positive_seconds(value: float) -> float:
    """Typer callback: a duration option must be a finite number of seconds ``> 0``.

    Typer's ``min=`` cannot refuse NaN or infinity (both pass a range check, and an
    infinite or NaN deadline makes a measuring loop run forever), nor express ``> 0``.

    Raises:
        typer.BadParameter: NaN, infinite or ``<= 0`` (typer exits 2 naming the option).
    """
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise typer.BadParameter(f"must be a finite number of seconds > 0, got {value}")
    return value


def positive_seconds_or_none(value: float | None) -> float | None:
    """Typer callback for an optional duration in seconds.

    None (not given) passes; anything else must pass :func:`positive_seconds`.

    Raises:
        typer.BadParameter: NaN, infinite or ``<= 0`` (typer exits 2 naming the option).
    """
    return None if value is None else positive_seconds(value)


def int_list(text: str, flag: str) -> tuple[int, ...]:
    """Parse a given comma-separated integer option (``--seeds 0,1,2``): at least one.

    An empty or blank value (``--seeds ''``, ``--seeds ,``) names no integer: refused,
    never read as "the option was not given".

    Raises:
        typer.BadParameter: not integers, or none (typer exits 2 naming ``flag``).
    """
    try:
        out = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"use comma-separated integers, e.g. 1,2,3; got {text!r}",
                                 param_hint=flag) from exc
    if not out:
        raise typer.BadParameter(f"names no value ({text!r}); use comma-separated "
                                 f"integers, e.g. 1,2,3, or drop {flag}", param_hint=flag)
    return out


def nonempty_path(value: str | Path) -> Path:
    """Typer ``parser=`` of a path argument or option: the empty string is refused.

    ``Path("")`` is ``Path(".")``, so an empty path (a shell variable that was not set:
    ``icore audit "$RUNS"``) would silently mean the current folder, read (every trace
    below it) or written into. A default (already a :class:`~pathlib.Path`) passes.

    Raises:
        typer.BadParameter: the value is empty or blank (typer exits 2 naming the
            argument or option).
    """
    if isinstance(value, Path):
        return value
    if not value.strip():
        raise typer.BadParameter("an empty path names no file or folder (it would mean "
                                 "the current folder); give a path, e.g. ./runs")
    return Path(value)


def refuse_special_file(path: Path, *, what: str, dir_ok: bool = False) -> None:
    """Exit 2 when ``path`` exists but is not a regular file (or, with ``dir_ok``, a dir).

    The ``error:`` message names the path.

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


class OutputFile:
    """Where a command writes its ``--json`` (or similar) output, checked up front.

    An existing FIFO is opened for writing at once with ``O_NONBLOCK``: with no reader
    the open fails with ENXIO instead of blocking, and the command stops before doing
    its work. With a reader (a pipe to another process, ``/dev/stdout`` piped) the
    descriptor is held until :meth:`write`, so the reader does not see an early EOF.
    Any other path (missing, regular file, character device) is written at the end as
    before, its missing folders created then (as ``--out`` creates its folder); a folder,
    or a path that cannot be created or written (:func:`unwritable`: a file on the way,
    a read-only file system, a name too long), is refused up front (exit 2). Use through
    :func:`output_file`. ``-`` is refused (exit 2): a file named ``-`` is not the stdout
    the user meant.
    """

    def __init__(self, path: Path, *, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None
        if str(path) == "-":  # the stdout convention: a file named '-' would be written
            typer.echo(f"error: {what} -: stdout is not supported (the console output "
                       "goes there); give a file name, or /dev/stdout with the console "
                       "redirected", err=True)
            raise typer.Exit(2)
        if (problem := too_long(path)) is not None:  # before a stat that would raise
            typer.echo(f"error: {what} {shown_path(path)}: {problem}", err=True)
            raise typer.Exit(2)
        try:
            mode: int | None = os.stat(path).st_mode
        except OSError:
            mode = None
        # refuse what the final write would refuse, before the command does its work (a
        # missing folder on the way is created at the write, as --out creates its own;
        # one that cannot be - a file on the way, a read-only place - is refused here)
        if mode is not None and stat.S_ISDIR(mode):
            typer.echo(f"error: {what} {path} is a folder; give a file name", err=True)
            raise typer.Exit(2)
        self._stream = is_stream(path)
        if not self._stream and (why := output_refusal(path)) is not None:  # the user's
            typer.echo(f"error: {what} {shown_path(path)} {why}; icore never overwrites a "
                       "file it did not write: move it away or give another path", err=True)
            raise typer.Exit(2)
        if mode is None or stat.S_ISREG(mode) or stat.S_ISCHR(mode):  # /proc, /dev/full ...
            problem = unwritable(path, folder=False)
            if problem is not None:
                typer.echo(f"error: {what} {shown_path(path)}: {problem}", err=True)
                raise typer.Exit(2)
        if mode is None or not stat.S_ISFIFO(mode):
            return
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                typer.echo(f"error: {what} {path} is a FIFO with no reader; writing to it "
                           "would block forever (start the reader first, or give a "
                           "regular file)", err=True)
                raise typer.Exit(2) from exc
            typer.echo(f"error: cannot open {what} {path}: {exc}", err=True)
            raise typer.Exit(2) from exc

    def write(self, text: str) -> None:
        """Write ``text`` (UTF-8) to the path; a held FIFO is written in blocking mode.

        Raises:
            typer.Exit: code 1 when the write fails (message on stderr).
        """
        data = text.encode()
        try:
            if self._stream and self._fd is None:  # /dev/stdout to a file: after the console
                write_stream(self.path, data)
                return
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists() and not self.path.is_file():  # a device
                    self.path.write_bytes(data)
                else:  # listed in the folder's ledger: the next run may replace it
                    write_owned(self.path, data)
                return
            fd, self._fd = self._fd, None
            try:
                os.set_blocking(fd, True)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            typer.echo(f"error: cannot write {self.what} {self.path}: {exc}", err=True)
            raise typer.Exit(1) from exc

    def close(self) -> None:
        """Release a held FIFO descriptor that was never written. Idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def check_otlp_endpoint(endpoint: str | None, *, best_effort: bool = False) -> None:
    """Refuse an ``--otlp-endpoint`` that cannot be used, before the command does any work.

    Usage errors: a value that is neither an http(s) URL nor ``file:PATH``; ``file:`` with
    no path, or a path that is a folder or whose folder does not exist; and
    ``--otlp-best-effort`` without ``--otlp-endpoint`` (a flag that cannot apply). The
    exporter checks the URL again. Messages show the URL with its credentials redacted.

    Raises:
        typer.BadParameter: exit 2, naming the option and the value.
    """
    if best_effort and not endpoint:
        raise typer.BadParameter("applies only with --otlp-endpoint",
                                 param_hint="--otlp-best-effort")
    if not endpoint:
        return
    _check_otel_env()
    if not endpoint.strip().startswith(("http://", "https://", "file:")):
        raise typer.BadParameter(f"use an http(s):// OTLP/HTTP URL or file:PATH, not "
                                 f"{redact(endpoint)!r}", param_hint="--otlp-endpoint")
    target = otlp_file_target(endpoint)
    if target is None:
        if (problem := _url_problem(endpoint.strip())) is not None:
            raise typer.BadParameter(f"{problem}: {redact(endpoint)!r}",
                                     param_hint="--otlp-endpoint")
        return
    if not endpoint.strip().removeprefix("file://").removeprefix("file:").strip():
        raise typer.BadParameter("file: needs a path (file:spans.otlp.jsonl)",
                                 param_hint="--otlp-endpoint")
    if (problem := too_long(target)) is not None:  # before a stat that would raise
        raise typer.BadParameter(f"file:{shown_path(target)}: {problem}",
                                 param_hint="--otlp-endpoint")
    if target.is_dir():
        raise typer.BadParameter(f"file:{target} is a folder; give a file name",
                                 param_hint="--otlp-endpoint")
    if not target.exists() and not target.parent.is_dir():
        raise typer.BadParameter(f"file:{target}: folder {target.parent} does not exist",
                                 param_hint="--otlp-endpoint")
    if (problem := unwritable(target, folder=False)) is not None:
        raise typer.BadParameter(f"file:{shown_path(target)}: {problem}",
                                 param_hint="--otlp-endpoint")


def _check_otel_env() -> None:
    """A bad ``$OTEL_BSP_*`` (or non-UTF-8 OTEL text) is a usage error before any work.

    The SDK logged a traceback and went on, or raised a bare ValueError once the spans
    were made (issue 29).
    """
    from icore.errors import MissingExtra
    try:
        from icore.adapters import ExportError, otel_env_settings
    except MissingExtra:  # the exporter says so itself
        return
    try:
        otel_env_settings()
    except ExportError as exc:
        raise typer.BadParameter(exc.problem, param_hint=f"${exc.field}") from None


def check_llm_options(base_url: str | None, mode: str) -> None:
    """Refuse ``--llm-base-url`` / ``--llm-mode`` values that cannot work, before any work.

    Raises:
        typer.BadParameter: exit 2; a base URL that is not an http(s) URL with a host, or
            a mode other than ``all-at-once``, ``step-by-step`` or ``hybrid``.
    """
    from icore.attribution import LLM_MODES

    if mode not in LLM_MODES:
        raise typer.BadParameter(f"unknown mode {mode!r}; use one of {', '.join(LLM_MODES)}",
                                 param_hint="--llm-mode")
    if base_url and (problem := _url_problem(base_url.strip())) is not None:
        raise typer.BadParameter(f"{problem}: {redact(base_url)!r}",
                                 param_hint="--llm-base-url")


def _url_problem(url: str) -> str | None:
    """What is wrong with an http(s) URL a flag gives, or None (no request is made).

    Refused: another scheme, no host, a port that is not a number in 1-65535, and an
    unclosed IPv6 bracket.
    """
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as exc:
        return f"not a URL ({exc})"
    if u.scheme not in ("http", "https"):
        return "use an http:// or https:// URL"
    if not u.hostname:
        return "the URL names no host"
    if port == 0:
        return "port 0 is not a port"
    return None


def otlp_undelivered(endpoint: str, delivery: Any, *, best_effort: bool) -> str:
    """The one-line report of spans an ``--otlp-endpoint`` export could not deliver.

    Args:
        endpoint: the ``--otlp-endpoint`` value (printed with its credentials redacted).
        delivery: the exporter's :class:`icore.adapters.DeliveryCheck` (or None).
        best_effort: ``--otlp-best-effort`` (the line is then a warning, not an error).

    Returns:
        ``""`` when every span was delivered; else ``"error --otlp-endpoint URL: N
        span(s) could not be delivered (M delivered); <last error>"`` (``warning`` with
        ``best_effort``), redacted.
    """
    if delivery is None or not delivery.failed:
        return ""
    last = f"; {delivery.last_error}" if delivery.last_error else ""
    return redact(f"{'warning' if best_effort else 'error'} --otlp-endpoint {endpoint}: "
                  f"{delivery.failed} span(s) could not be delivered ({delivery.delivered} "
                  f"delivered){last}")


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file (see :func:`refuse_input_as_output`)."""
    return file_identity(a) == file_identity(b)


def drop_repeated_inputs(files: list[Path]) -> list[Path]:
    """``files`` with each file kept once (:func:`icore._files.file_identity`).

    The others are said on stderr (``DIR DIR/t.jsonl`` was two runs, each count doubled).
    """
    seen: dict[tuple[object, ...], Path] = {}
    for f in files:
        if (first := seen.setdefault(file_identity(f), f)) is not f:
            same = "is named twice" if str(f) == str(first) else \
                f"is the same file as {printable(str(first))}"
            typer.echo(f"warning: {printable(str(f))} {same}: audited once", err=True)
    return list(seen.values())


def refuse_input_as_output(outputs: list[tuple[str, Path]], inputs: list[Path]) -> None:
    """Exit 2 when an output path is one of the inputs, or two outputs are one file.

    The one check every command that writes runs before it writes (issue 29): writing an
    input would destroy it, and two outputs on one path would leave only the last.
    Compared by file identity (device and inode, following symlinks, so a symlink, a
    symlinked folder, ``x/../input`` or a hard link of an input is caught), else, for a
    path that does not exist yet, by real path. Linear in the number of paths.

    Args:
        outputs: ``(what, path)`` pairs, e.g. ``("--json", Path("t.jsonl"))``.
        inputs: the files the command reads.

    Raises:
        typer.Exit: code 2, naming the option, the path and the input (or the other
            output) it would replace.
    """
    by_id = {file_identity(src): src for src in reversed(inputs)}
    seen: dict[tuple[Any, ...], tuple[str, Path]] = {}
    for what, out in outputs:
        key = file_identity(out)
        src = by_id.get(key)
        if src is not None:
            typer.echo(f"error: {what} {out} is the input {src}; writing it would "
                       "destroy the input; give another path", err=True)
            raise typer.Exit(2)
        first = seen.setdefault(key, (what, out))
        if first != (what, out):
            typer.echo(f"error: {what} {out} and {first[0]} {first[1]} are the same file; "
                       "the second would overwrite the first; give two paths", err=True)
            raise typer.Exit(2)


def refuse_inputs_inside(folder: Path, inputs: list[Path], *, what: str) -> None:
    """Exit 2 when an input lies inside ``folder``, which the command moves or replaces.

    Raises:
        typer.Exit: code 2, naming the option, the folder and the input.
    """
    try:
        top = Path(os.path.realpath(folder))
    except (OSError, ValueError):
        return
    for src in inputs:
        try:
            real = Path(os.path.realpath(src))
        except (OSError, ValueError):
            continue
        if real == top or top in real.parents:
            typer.echo(f"error: {what} {folder} holds the input {src}; the earlier run in "
                       "it would be moved aside with the input; give another folder",
                       err=True)
            raise typer.Exit(2)


def refuse_trace_outputs_in(outputs: list[tuple[str, Path]], folders: list[Path]) -> None:
    """Exit 2 when an output named like a trace (``.json``/``.jsonl``) lies in an input folder.

    ``icore audit FOLDER`` reads every ``.json``/``.jsonl`` file below FOLDER, so a
    ``--json`` summary or an ``--otlp-endpoint file:`` export written there would be read
    as a trace by the next audit of FOLDER (a Who&When import error, or a run audited
    twice). Reports (``.html``) and PROV (``.prov.json``) are never read back.

    Raises:
        typer.Exit: code 2, naming the option, the path and the input folder.
    """
    tops = []
    for f in folders:
        try:
            tops.append((f, Path(os.path.realpath(f))))
        except (OSError, ValueError):
            continue
    for what, out in outputs:
        if out.suffix.lower() not in (".json", ".jsonl") or out.name.endswith(".prov.json"):
            continue
        try:
            real = Path(os.path.realpath(out))
        except (OSError, ValueError):
            continue
        for shown, top in tops:
            if top in real.parents:
                typer.echo(f"error: {what} {out} is inside the input folder {shown}; the "
                           f"next audit of {shown} would read it as a trace; write it "
                           "outside the folder", err=True)
                raise typer.Exit(2)


def refuse_foreign_otlp_file(endpoint: str | None) -> None:
    """Refuse ``--otlp-endpoint file:PATH`` on a file icore must not append spans to.

    Spans are appended: only to a new or empty file or one icore wrote (its folder's
    ledger lists it as it is), never to the user's notes or trace or icore's ledger.
    Called after :func:`refuse_input_as_output` (which names the input it would be).

    Raises:
        typer.BadParameter: exit 2, naming the option, the file and why.
    """
    target = otlp_file_target(endpoint)
    if target is not None and (why := append_refusal(target)) is not None:
        raise typer.BadParameter(f"file:{shown_path(target)} {why}; icore appends spans "
                                 "only to a new or empty file or one it wrote",
                                 param_hint="--otlp-endpoint")


def adopt_otlp_file(endpoint: str | None) -> None:
    """After an export to ``file:PATH``: list the file in its folder's ledger.

    icore wrote all of it, so the next run may append to it (:func:`check_otlp_endpoint`
    refuses a non-empty file icore did not write). One that cannot be listed stays not.
    """
    target = otlp_file_target(endpoint)
    if target is not None:
        with contextlib.suppress(OSError):
            record_written(target)


def otlp_file_target(endpoint: str | None) -> Path | None:
    """The file an ``--otlp-endpoint file:PATH`` appends to (None for a URL)."""
    if not endpoint or not endpoint.strip().startswith("file:"):
        return None
    return Path(endpoint.strip().removeprefix("file://").removeprefix("file:"))


def positive_number(value: float | None) -> float | None:
    """Typer callback: an optional size or count option must be finite and ``> 0``.

    Raises:
        typer.BadParameter: NaN, infinite or ``<= 0`` (exit 2 naming the option).
    """
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise typer.BadParameter(f"must be a finite number > 0, got {value}")
    return value


def size_or_zero(value: float) -> float:
    """Typer callback: a size option where 0 means "skip" must be finite and ``>= 0``.

    Raises:
        typer.BadParameter: NaN (was "should be >= 0"), infinite or negative.
    """
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter(f"must be a finite number >= 0 (0 skips it), got {value}")
    return value


def refuse_non_folder(path: Path, *, what: str) -> None:
    """Exit 2 with an ``error:`` message when ``path`` cannot be the output folder.

    For output folders (``--out``): checked before any work, so a typo naming a file is
    a usage error, not an OS error after the run (the file is left as it was). Refused:
    a path that exists and is not a folder, and one that cannot be created or written
    (see :func:`unwritable`: a name or the whole path too long for the file system, a
    folder on the way that is a file, ``/proc/...``, a read-only file system).

    Raises:
        typer.Exit: code 2, after the message (naming ``what`` and the reason) is
            printed on stderr.
    """
    problem = unwritable(path, folder=True)
    if problem is not None:
        typer.echo(f"error: {what} {shown_path(path)}: {problem}", err=True)
        raise typer.Exit(2)


@contextmanager
def output_file(path: Path | None, *, what: str) -> Iterator[OutputFile | None]:
    """Check an output path up front (see :class:`OutputFile`); None passes through.

    Raises:
        typer.Exit: code 2 when ``path`` is an existing FIFO with no reader (ENXIO) or
            cannot be opened for writing, is a folder, or cannot be created (a file on
            the way, a read-only file system); the message names ``path`` on stderr.
            Missing folders on the way are created when the output is written.
    """
    if path is None:
        yield None
        return
    out = OutputFile(path, what=what)
    try:
        yield out
    finally:
        out.close()


__all__ = [
    "FAIL_EXIT",
    "OutputFile",
    "adopt_otlp_file",
    "check_llm_options",
    "check_otlp_endpoint",
    "fail_conditions",
    "int_list",
    "nonempty_path",
    "otlp_file_target",
    "otlp_undelivered",
    "output_file",
    "positive_number",
    "positive_seconds",
    "positive_seconds_or_none",
    "refuse_foreign_otlp_file",
    "refuse_input_as_output",
    "refuse_inputs_inside",
    "refuse_non_folder",
    "refuse_special_file",
    "refuse_trace_outputs_in",
    "same_file",
    "shown_path",
    "too_long",
    "unwritable",
]
