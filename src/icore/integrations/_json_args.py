"""The model's JSON arguments text, read without ever raising (issue 28, QA qa-ag2).

A tool call's arguments are text the model controls. Python's JSON reader raises more
than ``json.JSONDecodeError`` on it: ``ValueError`` for an integer over the interpreter's
digit limit (4300 digits by default), ``RecursionError`` for nesting deeper than its
stack. A framework answers such a call with a tool error the model reads; an integration
that parses the same text (to record the call, to gate it) must not crash the run
instead. Nor may a value the reader accepted crash what handles it later (canonical JSON,
the trace's lines recurse once per level): :func:`read_json` refuses nesting deeper than
:data:`MAX_NESTING` levels. Every integration reads the model's arguments here:
:func:`read_json` tells the value from the reason it does not read, :func:`given_args`
keeps what a trace line holds. Pure: no I/O.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from icore.integrations._arg_problems import non_finite

MAX_NESTING = 200
"""Deepest nesting of arrays and objects :func:`read_json` accepts (#28: a value ~900
levels deep read, then ``json.dumps`` and the recorder raised ``RecursionError`` inside
the framework's run)."""


def _too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """True when ``value`` nests arrays/objects more than ``limit`` levels (no recursion)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, dict | list):
            if depth > limit:
                return True
            todo.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def read_json(text: str | bytes | bytearray | None) -> tuple[Any, str | None]:
    """The JSON value of the model's arguments text, or why it does not read.

    Args:
        text: the arguments as the model sent them; empty or None reads as ``{}``.

    Returns:
        ``(value, None)``, or ``(None, why)`` where ``why`` is one sentence for the
        model: the JSON error (``"Expecting value"``), ``"a number has more than 4300
        digits"`` or ``"nested too deeply"`` (deeper than :data:`MAX_NESTING` levels,
        or than the interpreter's stack). Never raises on any text.
    """
    try:
        return bounded_value(json.loads(text or "{}"))
    except json.JSONDecodeError as exc:
        return None, exc.msg
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:  # e.g. an integer over sys.get_int_max_str_digits()
        if "digits" not in str(exc):
            return None, str(exc)[:200]
        return None, f"a number has more than {sys.get_int_max_str_digits()} digits"


def bounded_value(value: Any) -> tuple[Any, str | None]:
    """A value already read held to :func:`read_json`'s nesting bound.

    For a framework's parsed arguments: ``(value, None)``, or ``(None, "nested too
    deeply ...")`` past :data:`MAX_NESTING` levels.
    """
    if _too_deep(value):
        return None, f"nested too deeply (more than {MAX_NESTING} levels)"
    return value, None


def given_args(text: str | None) -> dict[str, Any]:
    """The model's arguments as given: its JSON object, else ``{"raw": <its text>}``.

    Text that does not read (:func:`read_json`), or JSON that is not an object (an
    array, a string, a number), is kept as the model sent it, so a trace line always
    holds an object. An object holding a NaN or an infinity (``NaN``, ``1e999``) is kept
    as its text too: the trace is strict JSON, where the number would become the string
    ``"nan"`` the model never sent (QA qa-new13a S4).
    """
    args, _why = read_json(text)
    if isinstance(args, dict) and non_finite(args):
        return {"raw": text}
    return args if isinstance(args, dict) else {"raw": text}
