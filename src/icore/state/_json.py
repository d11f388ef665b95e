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


def is_json(value: object) -> bool:
    """``value`` is plain JSON (scalars are checked without encoding)."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
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
    try:
        _STRICT.encode(value)
    except (TypeError, ValueError) as exc:
        raise StateInputError(f"{what} is not JSON: {exc}") from None
