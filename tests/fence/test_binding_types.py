"""``bind_action`` with Python values that have a JSON form only through a schema (#28 QA
LangGraph D11): refused at bind time naming the argument, its type and the fix."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from typing import Any

import pytest

from icore.errors import MalformedRecord
from icore.fence import bind_action


class Tier(enum.Enum):
    GOLD = "gold"


@pytest.mark.parametrize(("value", "got", "fix"), [
    (datetime.date(2026, 12, 10), "date", "'2026-12-10' (.isoformat())"),
    (datetime.datetime(2026, 12, 10, 9, tzinfo=datetime.UTC), "datetime",
     "'2026-12-10T09:00:00+00:00'"),
    (uuid.UUID(int=7), "UUID", "'00000000-0000-0000-0000-000000000007' (str(...))"),
    (decimal.Decimal("12.50"), "Decimal", "'12.50' (str(...))"),
    (Tier.GOLD, "Tier", "'gold' (Tier.GOLD.value)"),
    ({1, 2}, "set", "normalize_args"),
])
def test_typed_values_are_refused_at_bind_time_with_the_argument(value: Any, got: str,
                                                                 fix: str) -> None:
    with pytest.raises(MalformedRecord) as ei:
        bind_action("reserve", {"room": "R1", "stay": {"day": value}})
    err = ei.value
    assert err.fields["argument"] == "stay.day" and err.fields["got"] == got
    assert fix in err.fields["fix"] and "normalize_args" in err.fields["fix"]


def test_json_values_bind_as_they_are() -> None:
    args = {"a": [1, 2.5, None, True, "x"], "b": {"c": ("t", 1)}}
    assert bind_action("r", args) == {"planfence.action": {"name": "r", "args": {
        "a": [1, 2.5, None, True, "x"], "b": {"c": ["t", 1]}}}}
    with pytest.raises(MalformedRecord, match="no JSON form"):
        bind_action("r", {"x": float("nan")})
