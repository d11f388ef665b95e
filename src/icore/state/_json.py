"""Plain-JSON checks for what X stores (event fields, payloads; design.md 4.2)."""

from __future__ import annotations

import json
import math
from typing import Any

from icore.state._errors import StateInputError

_STRICT = json.JSONEncoder(allow_nan=False)
"""``json.dumps(value, allow_nan=False)`` without building an encoder per call."""


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not plain JSON (NaN and infinities included), or None."""
    try:
        _STRICT.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


_STR_BOOL = (str, bool)  # tuples: a union type (str | bool) is built at each call
_SEQ = (list, tuple)
_INT_BOUND = 10**4000
"""Integers below this in magnitude always encode (the encoder refuses > 4300 digits)."""


def _plain(value: object, depth: int) -> bool:
    """True only if the strict encoder surely accepts ``value`` (checked without encoding).

    Strings, ints, bools, None, finite floats, and lists/tuples/str-keyed dicts of them,
    up to 32 levels deep. False means "not sure": the caller then asks the encoder, so the
    answer is always the encoder's (a text of 20 000 characters is not escaped just to be
    checked; issue 29).
    """
    t = type(value)
    if t is dict and depth < 32:  # the common case: flat str-keyed fields, checked inline
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(k) is not str:
                return False
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if tv is int:
                if -_INT_BOUND < v < _INT_BOUND:
                    continue
                return False
            if tv is float:
                if math.isfinite(v):
                    continue
                return False
            if not _plain(v, depth + 1):
                return False
        return True
    if value is None or isinstance(value, _STR_BOOL):
        return True
    if isinstance(value, int):
        return -_INT_BOUND < value < _INT_BOUND
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= 32:
        return False
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not _plain(v, depth + 1):
                return False
        return True
    if isinstance(value, _SEQ):
        for v in value:  # type: ignore[attr-defined]  # all(...) without a generator
            if not _plain(v, depth + 1):
                return False
        return True
    return False


def is_plain(value: object) -> bool:
    """``value`` is surely plain JSON, checked without encoding (False: not sure).

    True only for strings, ints, bools, None, finite floats and lists/tuples/str-keyed
    dicts of them, up to 32 levels deep: what the strict encoder surely accepts.
    """
    return _plain(value, 0)


def is_json(value: object) -> bool:
    """``value`` is plain JSON (plain values are checked without encoding)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if _plain(value, 0):
        return True
    try:
        _STRICT.encode(value)
    except (TypeError, ValueError):
        return False
    return True


def check_json(value: Any, what: str) -> None:
    """Raise unless ``value`` is plain JSON.

    Raises:
        StateInputError: ``value`` is not JSON (``what`` names it).
    """
    if _plain(value, 0):
        return
    try:
        _STRICT.encode(value)
    except (TypeError, ValueError) as exc:
        raise StateInputError(f"{what} is not JSON: {exc}") from None
