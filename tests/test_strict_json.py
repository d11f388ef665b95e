"""Strict JSON text for every file icore writes (#28, QA qa-new10b S3: a bare ``NaN``)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore._strict_json import finite_data, strict_dumps

pytestmark = pytest.mark.timeout(120)

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=20)


def _bare(token: str) -> Any:
    raise AssertionError(f"bare {token}")


@given(_VALUES)
def test_no_bare_nan_or_infinity_and_finite_values_unchanged(value: Any) -> None:
    """Any value: the text is strict JSON; with no non-finite float it is what
    ``json.dumps`` writes (the same bytes for every trace icore wrote before)."""
    text = strict_dumps(value, sort_keys=True)
    back = json.loads(text, parse_constant=_bare)
    assert back == json.loads(json.dumps(finite_data(value), sort_keys=True))
    if "nan" not in text and "inf" not in text:
        assert text == json.dumps(value, sort_keys=True)


def test_non_finite_floats_are_their_text() -> None:
    got = json.loads(strict_dumps({"a": [math.nan, math.inf, -math.inf, 1.5]}))
    assert got == {"a": ["nan", "inf", "-inf", 1.5]}


def test_a_circular_value_is_still_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        strict_dumps(loop)
