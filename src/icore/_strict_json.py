"""Strict JSON text for every file icore writes (#28, QA qa-new10b S3).

Python's ``json.dumps`` writes a non-finite float as the bare token ``NaN``,
``Infinity`` or ``-Infinity``, which is no JSON: strict readers (``jq``, a browser, Go,
Rust) refuse the whole line. :func:`strict_dumps` never writes one: a non-finite float
becomes its text (``"nan"``, ``"inf"``, ``"-inf"``), as a refused call's ``args_not_json``
arguments are recorded. Pure.
"""

from __future__ import annotations

import json
import math
from typing import Any

_MAX_DEPTH = 200
"""Containers deeper than this are written as they are (a trace line is never that deep)."""


def finite_data(value: Any, depth: int = 0) -> Any:
    """``value`` with every non-finite float in it replaced by its text (fresh containers).

    Mappings, lists and tuples are walked (to :data:`_MAX_DEPTH`); anything else is
    returned as it is.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: finite_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_data(v, depth + 1) for v in value]
    return value


def strict_dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` that never writes ``NaN`` / ``Infinity``.

    Raises:
        TypeError, RecursionError: as ``json.dumps`` (an object with no JSON form and no
            ``default=``, nesting past the stack).
        ValueError: a circular reference.
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Circular" in str(exc):
            raise
        return json.dumps(finite_data(value), allow_nan=False, **options)
