"""The JSONL importer's fast path reads every line as the checked path does (issue 29).

A line is scanned without :func:`json.loads`' wrappers, and the fields of an event are
checked only when they are not a plain string or integer; both must give exactly the
value, or the error, of the full checks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, parse_jsonl
from icore.adapters._jsonl import _decode
from icore.adapters._trace_values import (
    name_key,
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_SPACE = st.sampled_from(["", " ", "\t", "\n", "\r\n", "  \n", "\x0b", "\u2028", "\ufeff",
                          "x", "}", "#", " ,"])


def _loads(line: str) -> tuple[str, Any]:
    try:
        return "ok", json.loads(line)
    except ValueError as exc:  # JSONDecodeError and the digit limit
        return "error", getattr(exc, "msg", str(exc))


@settings(max_examples=300, deadline=None)
@given(value=_JSON, before=_SPACE, after=_SPACE, indent=st.none() | st.just(1))
def test_decode_is_json_loads(value: Any, before: str, after: str, indent: int | None) -> None:
    """Any line: the value json.loads gives, or its error message with the line named."""
    line = before + json.dumps(value, indent=indent) + after
    how, want = _loads(line)
    if how == "ok":
        assert repr(_decode(line, "f.jsonl", 7)) == repr(want)
        return
    with pytest.raises(AdapterError) as err:
        _decode(line, "f.jsonl", 7)
    assert want in str(err.value) and "line 7" in str(err.value)


@pytest.mark.parametrize("line", ["", "{", '{"a": 1} {"b": 2}', '{"a": NaN}', "[1, 2",
                                  '"\\ud800"', "1e400", "-", '{"a": 1}\x00'])
def test_decode_odd_lines(line: str) -> None:
    """Truncated, doubled, non-finite and control-character lines as json.loads reads them."""
    how, want = _loads(line)
    if how == "ok":
        assert repr(_decode(line, "f.jsonl", 1)) == repr(want)
    else:
        with pytest.raises(AdapterError, match="line 1"):
            _decode(line, "f.jsonl", 1)


def _run(event: dict[str, Any]) -> str:
    return "\n".join(json.dumps(x) for x in [
        {"run": {"id": "r"}}, {"agent": "user", "kind": "task", "content": "q"}, event])


_ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**54), st.floats(allow_nan=True),
                 st.text(max_size=6), st.sampled_from(["Output", " output ", "3", "3.0",
                                                       "", "  ", "true", "no"]),
                 st.lists(st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(["agent", "kind", "step", "content", "to", "terminates",
                              "final_answer"]), value=_ODD)
def test_fields_checked_as_before(field: str, value: Any) -> None:
    """A field of any type: the step the checkers make, or an error naming the field."""
    event: dict[str, Any] = {"agent": "a", "kind": "output", "content": "c", field: value}
    try:
        t = parse_jsonl(_run(event), file="f.jsonl")
    except AdapterError as exc:
        failed = str(exc)
    else:
        failed = ""
    if failed:
        assert f"line 3.{field}" in failed
        return
    step = t.steps[-1]
    blank = isinstance(value, str) and not value.strip()  # "", "  ", "\r": no step given
    if field == "step" and value is not None and not blank:
        assert step.index == int(float(value))
    if field == "content":
        assert step.content == ("" if value is None else str(value))
    if field == "kind":
        assert step.kind.value == str(value).strip().lower()
    if field == "terminates":
        assert step.terminates in (True, False)
    if field == "final_answer":
        assert step.final_answer == (None if value is None else str(value))
    if field == "to":  # an agent name: canonical (an earlier spelling, stripped)
        assert (step.to is None) == (not value)
        assert value is None or step.to is None or name_key(step.to) == name_key(value)
