"""A recorder line's fields equal what a JSON round trip gives (issue 25 item 7).

``RunRecorder.add`` skips the round trip for values made of exact JSON types; the result
must be the same as with it, for plain data and for subclasses (``IntEnum``, ``str``).
"""

from __future__ import annotations

import enum
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from icore._strict_json import strict_dumps
from icore.integrations import RunRecorder
from icore.integrations._trace_data import bounded_args, plain_data


class _Level(enum.IntEnum):
    LOW = 1


class _Name(str):
    pass


_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                  st.floats(allow_nan=False), st.just(_Level.LOW),
                  st.builds(_Name, st.text(max_size=3)), st.tuples(st.integers()))
_value = st.recursive(_leaf, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.one_of(st.text(max_size=3), st.integers()),
                                             c, max_size=3)), max_leaves=12)


def _round_trip(v: Any) -> Any:
    # strict JSON (#28, QA qa-new10b S3): a non-finite float is written as its text
    return json.loads(strict_dumps(plain_data(v), default=str))


@given(_value)
@example(float("inf"))
@example({"x": [float("-inf")]})
def test_fields_equal_the_json_round_trip(v: Any) -> None:
    line = RunRecorder("r").add("a", "thought", "x", field=[v])  # None is dropped
    got, want = line["field"], _round_trip([v])
    assert json.dumps(got) == json.dumps(want)
    assert type(got) is type(want)


def test_fields_do_not_alias_the_callers_value() -> None:
    heads, k = ["a" * 64], [1]
    v: dict[str, Any] = {"heads": heads, "n": {"k": k}}
    line = RunRecorder("r").add("a", "thought", "x", gate=v)
    assert line["gate"] == v
    heads.append("b")
    k.append(2)
    assert line["gate"] == {"heads": ["a" * 64], "n": {"k": [1]}}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                    | st.text(max_size=50),
                    lambda c: st.lists(c, max_size=150) | st.dictionaries(st.text(max_size=5),
                                                                          c, max_size=150),
                    max_leaves=400))
def test_bounded_args_are_strict_json_and_bounded(value: object) -> None:
    """A refused call's given arguments (QA qa-crew S4): whatever the model sent, the
    recorded form is strict JSON (no NaN / Infinity) with at most 101 items per level."""
    out = bounded_args({"a": value, "big": "x" * 5000})
    json.dumps(out, allow_nan=False)
    assert out["big"].endswith("[cut: 5000 characters]") and len(out["big"]) < 2100

    def widths(v: object) -> list[int]:
        if isinstance(v, dict):
            return [len(v), *(w for x in v.values() for w in widths(x))]
        if isinstance(v, list):
            return [len(v), *(w for x in v for w in widths(x))]
        return []

    assert max(widths(out)) <= 101
