"""Where in a JSON document a byte is: its field path, for errors (issue 29).

A malformed number, bad UTF-8 or a nesting too deep is found by a parser that knows only
a byte offset; the error then named the document (``<root>``), not the field the user
has to fix. :func:`path_at` reads the text before that byte once more and returns the
path of the value it falls in (``resourceSpans[0].scopeSpans[0].spans[3].attributes[1]
.value.intValue``); :func:`path_at_depth` the path where a nesting first goes past a
limit. Both run on the error path only, over at most :data:`SCAN_LIMIT` bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO

from icore.adapters._errors import AdapterError

SCAN_LIMIT = 32 << 20
"""Most bytes read to name a place (a later place is named by its byte only)."""

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|"(?:[^"\\]|\\.)*\\?$|[{}\[\],:\n]', re.DOTALL)
_SHOWN = 24
"""Levels shown at most; a deeper path keeps its first and last levels."""


def _key(tok: bytes) -> str:
    try:
        k = json.loads(tok)
    except ValueError:
        k = tok[1:-1].decode("utf-8", "replace")
    k = str(k)
    return k if len(k) <= 60 else k[:57] + "..."


def _scan(data: bytes, *, stop_depth: int | None) -> tuple[list[list[object]], int, int]:
    """The open containers at the end of ``data`` (or where the depth passes ``stop_depth``).

    Each frame is ``["{", key, expecting_key]`` or ``["[", index]``. Also returns the
    number of top-level values begun and the line of the last one (JSON lines).
    """
    stack: list[list[object]] = []
    tops, line, top_line = 0, 1, 1
    began = False  # a top-level scalar has no bracket: counted at its line
    for m in _TOKEN.finditer(data):
        t = m.group()
        c = t[:1]
        if c == b"\n":
            line += 1
            began = False
            continue
        if not stack and not began and c in (b"{", b"[", b'"'):
            tops, top_line, began = tops + 1, line, True
        if c == b"{":
            if stack and stack[-1][0] == "{":
                stack[-1][2] = False
            stack.append(["{", None, True])
        elif c == b"[":
            if stack and stack[-1][0] == "{":
                stack[-1][2] = False
            stack.append(["[", 0])
        elif c in (b"}", b"]"):
            if stack:
                stack.pop()
        elif c == b",":
            if stack and stack[-1][0] == "[":
                stack[-1][1] = int(stack[-1][1]) + 1  # type: ignore[call-overload]
            elif stack:
                stack[-1][2] = True
        elif c == b":":
            if stack and stack[-1][0] == "{":
                stack[-1][2] = False
        elif c == b'"' and stack and stack[-1][0] == "{" and stack[-1][2]:
            stack[-1][1] = _key(t)
        if stop_depth is not None and len(stack) > stop_depth:
            break
    return stack, tops, top_line


def _format(stack: list[list[object]], tops: int, top_line: int) -> str:
    parts: list[str] = []
    for fr in stack:
        if fr[0] == "[":
            parts.append(f"[{fr[1]}]")
        elif fr[1] is not None:
            parts.append(f".{fr[1]}" if parts else str(fr[1]))
    if len(parts) > _SHOWN:  # a runaway nesting: its start and its end
        parts = [*parts[:_SHOWN // 2], f"...({len(parts) - _SHOWN} levels)...",
                 *parts[-_SHOWN // 2:]]
    path = "".join(parts)
    if tops > 1:
        return f"line {top_line}.{path.lstrip('.')}" if path else f"line {top_line}"
    return path


def path_at(src: IO[bytes] | bytes | str | Path, byte: int) -> str | None:
    """The field path of the value at ``byte`` of a JSON document (or JSON lines).

    Args:
        src: the document: a binary file (read from its start; its position is left at
            an unspecified place), its bytes, or its text (``byte`` is then a character
            index).
        byte: the offset of the bad place.

    Returns:
        ``a.b[2].c`` (``line 3.a.b`` in a file of several top-level values), or None
        when the place is at the top level, past :data:`SCAN_LIMIT` or cannot be read.
    """
    data = _head(src, min(max(byte, 0), SCAN_LIMIT))
    if data is None or byte > SCAN_LIMIT:
        return None
    return _format(*_scan(data, stop_depth=None)) or None


def path_at_depth(src: IO[bytes] | bytes | str | Path, limit: int) -> str | None:
    """The field path where the document's nesting first goes deeper than ``limit``.

    Same ``src`` and return value as :func:`path_at` (None too for a nesting of arrays
    from the top level: no member names it).
    """
    data = _head(src, SCAN_LIMIT)
    if data is None:
        return None
    stack, tops, line = _scan(data, stop_depth=limit)
    if len(stack) <= limit or not any(fr[0] == "{" for fr in stack):
        return None  # not that deep, or brackets from the top: no field to name
    return _format(stack, tops, line) or None


def _head(src: IO[bytes] | bytes | str | Path, n: int) -> bytes | None:
    if isinstance(src, Path):
        try:
            with src.open("rb") as f:
                return f.read(n)
        except OSError:
            return None
    if isinstance(src, str):
        return src[:n].encode("utf-8", "surrogatepass")
    if isinstance(src, bytes | bytearray):
        return bytes(src[:n])
    try:
        src.seek(0)
        return src.read(n)
    except (OSError, ValueError):
        return None


def located(exc: AdapterError, src: IO[bytes] | bytes | str | Path, *,
            depth: int) -> AdapterError:
    """``exc`` naming the field it is about instead of ``<root>``, when that can be told.

    The place comes from the error's ``byte`` (bytes or a file) or ``line`` and ``column``
    (text) field, or, for a nesting error, from where the nesting passes ``depth``.
    Returns ``exc`` itself when it names a field already or no place is found.
    """
    if exc.field != "<root>":
        return exc
    got = exc.fields
    where: str | None = None
    if isinstance(got.get("byte"), int) and not isinstance(src, str):
        where = path_at(src, got["byte"])
    elif isinstance(got.get("line"), int) and isinstance(got.get("column"), int) and \
            isinstance(src, str):
        lines = src.split("\n", got["line"] - 1)
        at = len(src) - len(lines[-1]) + got["column"] - 1 if len(lines) == got["line"] else -1
        where = path_at(src, at) if at >= 0 else None
    elif "nested" in exc.problem:
        where = path_at_depth(src, depth)
    if not where:
        return exc
    kept = {k: v for k, v in got.items() if k not in ("file", "field")}
    return type(exc)(exc.problem, file=exc.file, field=where, **kept)


__all__ = ["SCAN_LIMIT", "located", "path_at", "path_at_depth"]
