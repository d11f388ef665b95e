"""Trace data: a framework's values as the JSON a trace line holds (never a Python repr).

Shared by :class:`~icore.integrations.RunRecorder` and the framework hooks that build
event fields (LangGraph's handler, AG2's hooks). Pure: no I/O, no framework import.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

from icore._strict_json import finite_data
from icore.errors import brief

MAX_CONTENT_CHARS = 20_000
"""Longer contents (a tool's raw output) are cut to this many characters in the trace."""

_MAX_DEPTH = 32

MAX_ARG_CHARS = 2_000
"""A refused call's argument strings are cut to this many characters in the trace."""
_MAX_ITEMS = 100


def plain_data(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON data, not a Python repr.

    Mappings, sequences, dataclasses and pydantic models (``model_dump(mode="json")``)
    field by field, enums as their value, other objects (dates, UUIDs, decimals ...) as
    ``str``. What a trace line holds for a framework's result object. Nesting deeper
    than 32 levels is kept as its ``str`` (:data:`DEEP` when even that recurses too
    deeply): never raises ``RecursionError``.
    """
    if isinstance(value, int) and value.bit_length() > 4000:
        return brief(value)  # past Python's int/str limit: json.dumps would raise
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if _depth > _MAX_DEPTH:
        return _str(value)
    if isinstance(value, Mapping):
        return {_str(k): plain_data(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain_data(v, _depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name), _depth + 1)
                for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return plain_data(dump(mode="json"), _depth + 1)
        except Exception:
            return _str(value)
    if isinstance(value, enum.Enum):
        return plain_data(value.value, _depth + 1)
    return _str(value)


def finite(x: float) -> bool:
    """``math.isfinite``, False for an int too large for a float (not an OverflowError)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


DEEP = "<nested too deeply to record>"
"""What a trace line holds for a value whose text needs more stack than there is."""


def _str(value: Any) -> str:
    """``str(value)``, never raising.

    :data:`DEEP` when its repr recurses past the interpreter's stack, ``<TypeName>`` when
    its ``__str__`` raises or it is an int past the 4300-digit limit.
    """
    try:
        return str(value)
    except RecursionError:
        return DEEP
    except Exception:
        return brief(value)


def text_of(value: Any) -> str:
    """A line's ``content``: a message's text, a string, or any value as JSON.

    Cut to :data:`MAX_CONTENT_CHARS` characters.
    """
    inner = getattr(value, "content", None)  # a framework message object: its text
    if isinstance(inner, str):
        value = inner
    if isinstance(value, str):
        s = value
    else:
        try:
            s = json.dumps(plain_data(value), default=str, sort_keys=True)
        except (TypeError, ValueError, RecursionError):
            s = _str(value)
    return s if len(s) <= MAX_CONTENT_CHARS else s[:MAX_CONTENT_CHARS] + "...[cut]"


def _is_plain_json(value: Any, depth: int = 0) -> bool:
    """Exact JSON types only (str keys): what a JSON round trip would give back."""
    t = type(value)
    if t is list and depth <= _MAX_DEPTH + 1:
        return all(_is_plain_json(v, depth + 1) for v in value)
    if t is dict and depth <= _MAX_DEPTH + 1:
        return all(type(k) is str and _is_plain_json(v, depth + 1) for k, v in value.items())
    return t is str or t is int or t is float or t is bool or value is None


def jsonable(value: Any) -> Any:
    """``value`` as exact JSON data (a field of a trace line); its ``str`` if it has none."""
    try:
        data = finite_data(plain_data(value))  # fresh containers: no round trip when plain
        return data if _is_plain_json(data) else json.loads(json.dumps(data, default=str))
    except (TypeError, ValueError, RecursionError):
        return _str(value)


def bounded_args(args: Any) -> dict[str, Any]:
    """The arguments a refused call was given, as bounded JSON data for its trace line.

    What the model sent, even when it has no JSON form: a non-finite float as its text
    (``"nan"``, ``"inf"``), a string cut to :data:`MAX_ARG_CHARS` characters (its length
    said), at most 100 items per mapping or list, nesting cut at depth 32 (QA qa-crew
    S4: an ``args_not_json`` call used to be recorded with ``"args": {}``). A value that
    is not a mapping is ``{"input": value}``.
    """
    data = plain_data(args)
    out = _bounded(data if isinstance(data, dict) else {"input": data}, 0)
    return out if isinstance(out, dict) else {"input": out}


def _bounded(value: Any, depth: int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        if len(value) <= MAX_ARG_CHARS:
            return value
        return f"{value[:MAX_ARG_CHARS]}...[cut: {len(value)} characters]"
    if depth > _MAX_DEPTH and isinstance(value, dict | list):
        return _bounded(json.dumps(value, default=str)[:MAX_ARG_CHARS], depth)
    if isinstance(value, dict):
        items = list(value.items())
        out = {_bounded(str(k), depth): _bounded(v, depth + 1) for k, v in items[:_MAX_ITEMS]}
        if len(items) > _MAX_ITEMS:
            out["...[cut]"] = f"{len(items) - _MAX_ITEMS} more items"
        return out
    if isinstance(value, list):
        out_l = [_bounded(v, depth + 1) for v in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            out_l.append(f"...[cut: {len(value) - _MAX_ITEMS} more items]")
        return out_l
    return value
