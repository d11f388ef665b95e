"""One validation helper for the numbers, times and sizes every importer reads (issue 29).

Every trace importer (OTLP, Phoenix, Langfuse, Jaeger, JSONL, Who&When) reads numbers
and times through these functions, so a NaN, an infinity, an overflowing integer, a
non-ASCII digit (``"²"``), a naive ISO time or a file over the size limit is an
:class:`AdapterError` naming the file and the field, never a Python exception.

Times are nanoseconds since the Unix epoch, in ``[0, 2**63)`` (OTLP's ``fixed64`` as the
OpenTelemetry SDKs hold it). A file larger than :func:`max_input_bytes` is refused before
it is read; the limit is ``ICORE_MAX_INPUT_MB`` (MiB) in the environment, else
:data:`DEFAULT_MAX_INPUT_MB`.
"""

from __future__ import annotations

import gc
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from icore._files import path_problem
from icore.adapters._errors import AdapterError

MAX_NS = 2**63 - 1
"""Largest time accepted, in ns since the epoch (int64, year 2262)."""
DEFAULT_MAX_INPUT_MB = 1024
"""Default largest trace file read, in MiB (``ICORE_MAX_INPUT_MB`` overrides it)."""
ENV_MAX_INPUT = "ICORE_MAX_INPUT_MB"
"""Environment variable holding the largest trace file to read, in MiB."""

_DIGITS = re.compile(r"[0-9]+")
_INT = re.compile(r"[+-]?[0-9]{1,40}")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def finite_float(v: Any, *, file: str, field: str) -> float:
    """A finite float from a JSON number or a decimal string (``"1.5"``, ``"2e3"``).

    Raises:
        AdapterError: a bool, NaN, an infinity, an overflowing value or anything else
            that is not a decimal number.
    """
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise AdapterError(f"not a number: {_short(v)}", file=file, field=field)
    if isinstance(v, str):
        s = v.strip()
        if not _NUMBER.fullmatch(s):
            raise AdapterError(f"not a number: {_short(v)}", file=file, field=field)
        v = s
    try:
        x = float(v)
    except (OverflowError, ValueError):
        raise AdapterError(f"number out of range: {_short(v)}", file=file,
                           field=field) from None
    if not math.isfinite(x):
        raise AdapterError(f"not a finite number: {_short(v)}", file=file, field=field)
    return x


def integer(v: Any, *, file: str, field: str, lo: int | None = None,
            hi: int | None = None) -> int:
    """An integer from a JSON integer, an integral float or a string of ASCII digits.

    Args:
        v: the value read.
        file: the file it was read from, for the error.
        field: the field it was read from, for the error.
        lo: inclusive lower bound (None: unbounded).
        hi: inclusive upper bound (None: unbounded).

    Raises:
        AdapterError: a bool, NaN, an infinity, a fraction, non-ASCII digits, or a value
            outside ``[lo, hi]``.
    """
    if type(v) is str and v.isascii() and v.isdigit() and len(v) <= 18:  # fast path
        n = int(v)
    elif isinstance(v, bool):
        raise AdapterError(f"not an integer: {_short(v)}", file=file, field=field)
    elif isinstance(v, int):
        n = v
    elif isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise AdapterError(f"not an integer: {_short(v)}", file=file, field=field)
        n = int(v)
    elif isinstance(v, str) and _INT.fullmatch(v.strip()):
        n = int(v.strip())
    else:
        raise AdapterError(f"not an integer: {_short(v)}", file=file, field=field)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise AdapterError(f"integer out of range [{lo}, {hi}]: {_short(v)}", file=file,
                           field=field)
    return n


def time_ns(v: Any, *, file: str, field: str, unit_ns: int = 1) -> int:
    """A time (or duration) in ns from a number in ``unit_ns`` units or an ISO string.

    Accepted: None or ``""`` (unknown: 0); a non-negative integer, an integral float or a
    string of ASCII digits, scaled by ``unit_ns`` (1 for OTLP ns, 1000 for Jaeger's µs);
    an ISO 8601 string with a timezone (``Z`` or ``+hh:mm``).

    Raises:
        AdapterError: a bool, NaN, an infinity, a fraction of the unit, a negative
            value, non-ASCII digits (``"²"``), an ISO time without a timezone (it would
            be read in this machine's zone) or a time past :data:`MAX_NS`.
    """
    if v is None or v == "":
        return 0
    if type(v) is str and v.isascii() and v.isdigit() and len(v) <= 19:  # fast path: ns
        n = int(v) * unit_ns
        if n <= MAX_NS:
            return n
    if type(v) is int and 0 <= v <= MAX_NS // unit_ns:
        return v * unit_ns
    if isinstance(v, str) and not _DIGITS.fullmatch(v.strip()):
        s = v.strip()
        try:
            dt = datetime.fromisoformat(s[:-1] + "+00:00" if s[-1:] in "Zz" else s)
        except ValueError:
            raise AdapterError(f"not a time: {_short(v)} (want ns since the epoch or an "
                               "ISO 8601 time with a timezone)", file=file,
                               field=field) from None
        if dt.tzinfo is None:
            raise AdapterError(f"ISO time without a timezone: {_short(v)} (add Z or "
                               "+hh:mm)", file=file, field=field)
        try:
            ns = int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000
        except (OverflowError, ValueError, OSError):
            raise AdapterError(f"time out of range: {_short(v)}", file=file,
                               field=field) from None
        if not 0 <= ns <= MAX_NS:
            raise AdapterError(f"time out of range (before 1970 or after 2262): "
                               f"{_short(v)}", file=file, field=field)
        return ns
    try:
        n = integer(v, file=file, field=field, lo=0)
    except AdapterError:
        raise AdapterError(f"not a time: {_short(v)} (want a non-negative integer of "
                           f"{'ns' if unit_ns == 1 else 'µs'} or an ISO 8601 time)",
                           file=file, field=field) from None
    ns = n * unit_ns
    if ns > MAX_NS:
        raise AdapterError(f"time out of range (after 2262): {_short(v)}", file=file,
                           field=field)
    return ns


# a JSON number of 4301+ digits: after ':', '[' or ',' (a string of digits is no match)
_LONG_INT = re.compile(r"[:\[,]\s*(-?[0-9]{4301,})")
_LONG_INT_B = re.compile(rb"[:\[,]\s*(-?[0-9]{4301,})")


def json_value_error(exc: ValueError, text: str | bytes, *, file: str, field: str,
                     what: str = "malformed JSON", first_line: int | None = 1
                     ) -> AdapterError:
    """The error of a ``json.loads`` ValueError that is no JSONDecodeError.

    Python refuses integers over 4300 digits (``sys.get_int_max_str_digits``) with a
    ValueError that names no place and suggests changing the interpreter; this error
    names the number's line and column in ``text`` and its length. Another ValueError
    (``NaN`` refused by a ``parse_constant``) keeps its message.

    Args:
        exc: the ValueError raised while parsing ``text``.
        text: the JSON text that was parsed (str or UTF-8 bytes).
        file: the file, for the error.
        field: the field (``<root>``, ``line 3``), for the error.
        what: the first words of the message.
        first_line: the line number of ``text``'s first line in the file (None: the
            position is not known, e.g. a window of a streamed file). The text just
            before the number (its key) is shown either way.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    m = _LONG_INT.search(text)
    if m is None or "digits" not in str(exc):
        return AdapterError(f"{what}: {exc}", file=file, field=field)
    at = m.start(1)
    digits = len(m.group(1).lstrip("-"))
    # the text just before the number names its key ('"step": ')
    why = f"after {text[max(0, at - 30):at]!r}; numbers over 4300 digits are refused"
    if first_line is None:
        return AdapterError(f"{what}: an integer of {digits} digits ({why})", file=file,
                            field=field)
    line = text.count("\n", 0, at) + first_line
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return AdapterError(f"{what}: an integer of {digits} digits at line {line}, column "
                        f"{column} ({why})", file=file, field=field, line=line, column=column)


def long_int_in_file(f: IO[bytes], *, file: str, field: str) -> AdapterError | None:
    """Where a streamed file holds its first integer over 4300 digits (None: none).

    A streaming parser (ijson) refuses such a number with a message that names no
    place; this reads ``f`` again from its start, 1 MiB at a time, and names the byte.
    """
    f.seek(0)
    at, carry = 0, b""
    while chunk := f.read(1 << 20):
        buf = carry + chunk
        m = _LONG_INT_B.search(buf)
        if m is not None:
            byte = at - len(carry) + m.start(1)
            digits = f"{len(m.group(1).lstrip(b'-'))}{'+' if m.end() == len(buf) else ''}"
            return AdapterError(f"malformed JSON: an integer of {digits} digits at byte "
                                f"{byte} (numbers over 4300 digits are refused)", file=file,
                                field=field, byte=byte)
        carry = buf[-4400:]
        at += len(chunk)
    return None


def trace_path(path: Any) -> Path:
    """``path`` as a :class:`~pathlib.Path`, checked to be a path at all.

    Raises:
        AdapterError: ``path`` is not a ``str`` or ``os.PathLike`` (``None``, a number,
            bytes), or names no file at all (empty, a NUL byte, a lone surrogate, a name
            over 255 bytes), field ``path``.
    """
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike):
        raise AdapterError(f"a trace path must be a str or os.PathLike, not "
                           f"{type(path).__name__}", file="<argument>", field="path")
    if (problem := path_problem(path)) is not None:  # NUL, a lone surrogate, too long
        raise AdapterError(f"the trace path {problem}", file=repr(os.fspath(path))[:200],
                           field="path")
    return Path(path)


def max_input_bytes() -> int:
    """The largest trace file an importer reads, in bytes (``ICORE_MAX_INPUT_MB``).

    Raises:
        AdapterError: the environment variable is set but is not a positive number.
    """
    raw = os.environ.get(ENV_MAX_INPUT, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_MB * 1024 * 1024
    mb = finite_float(raw, file=f"${ENV_MAX_INPUT}", field="<value>")
    if mb <= 0:
        raise AdapterError(f"must be a number of MiB > 0, got {raw!r}",
                           file=f"${ENV_MAX_INPUT}", field="<value>")
    return int(mb * 1024 * 1024)


def check_size(path: str | os.PathLike[str]) -> int:
    """Refuse a file over :func:`max_input_bytes` before reading it; return its size.

    Args:
        path: the file (a str or path-like; a path that cannot be ``stat``-ed is 0 bytes:
            its reader reports it).

    Raises:
        AdapterError: ``path`` is no path at all (None, a number, bytes, a NUL byte;
            field ``path``), or the file is larger than the limit (field ``<root>``),
            naming the size, the limit and how to raise it.
    """
    if (why := path_problem(path)) is not None:
        raise AdapterError(f"path {why}", file=repr(path)[:80], field="path")
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return 0  # the reader reports it
    limit = max_input_bytes()
    if size > limit:
        sizes = (f"{size} bytes, over the {limit}-byte" if limit < 2**20 else
                 f"{size / 2**20:.1f} MiB, over the {limit / 2**20:.4g} MiB")
        raise AdapterError(f"file is {sizes} input limit (raise it with --max-input-mb or "
                           f"{ENV_MAX_INPUT})",
                           file=str(path), field="<root>")
    return size


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a big input is parsed (issue 29).

    An import allocates millions of acyclic containers (parsed JSON, spans, steps) and
    keeps them; each generation-2 collection walks all of them, so with the collector on
    the import's time grows faster than its size. Reference counting still frees
    everything that is dropped; the collector is re-enabled (if it was on) on exit, even
    when the import raises.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


__all__ = ["DEFAULT_MAX_INPUT_MB", "ENV_MAX_INPUT", "MAX_NS", "check_size", "finite_float",
           "gc_paused", "integer", "json_value_error", "long_int_in_file", "max_input_bytes",
           "time_ns", "trace_path"]
