"""The one comparison of a model's tool-call arguments with the arguments a gate judged.

Used by the audit (:mod:`icore.adapters._turn_args`: a protected call held against the
model turn that asked for it, QA qa-new14 S3) and by the recorders (which note a tool
call's normal form only when it differs by this comparison). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _text(v: Any) -> str:
    try:
        return json.dumps(v, sort_keys=True, ensure_ascii=False)[:80]
    except (TypeError, ValueError):
        return repr(v)[:80]


def arg_difference(asked: Mapping[str, Any], judged: Mapping[str, Any]) -> str | None:
    """The first argument the model gave that the judged arguments do not hold, or None.

    Keys in sorted order; a key must be in ``judged`` with an equal JSON value (key order
    does not matter; ``1`` and ``1.0`` are equal, ``true`` and ``1`` are not). A key only
    ``judged`` has is a default the tool's schema filled in: not a difference. Returns
    ``"amount 10 vs 1000"`` (the model's value first) or ``"amount 10 vs (missing)"``.
    """
    for k in sorted(asked, key=str):
        if k not in judged:
            return f"{k} {_text(asked[k])} vs (missing)"
        a, j = asked[k], judged[k]
        if a != j or isinstance(a, bool) != isinstance(j, bool):
            return f"{k} {_text(a)} vs {_text(j)}"
    return None


__all__ = ["arg_difference"]
