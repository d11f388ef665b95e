"""Integers past JavaScript's safe range in a protected tool's arguments (h32seam, #29).

The gate compares a protected call's arguments as the tool sees them; a JSON tool that
reads numbers as doubles holds ``2**53`` for ``2**53 + 1``. Where the schema says
``integer`` or ``number``, such an int is refused for a protected tool, naming its path;
an unprotected tool's arguments (and a schema without a number type) pass as before.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._gateway_args import MAX_SAFE_INTEGER, ArgChecks

SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "n": {"type": "number"}, "any": {},
    "ids": {"type": "array", "items": {"type": "integer"}}}}
CHECKS = ArgChecks(lambda: {"t": SimpleNamespace(input_schema=SCHEMA)})


@given(st.integers(), st.sampled_from(["id", "n", "ids"]))
def test_protected_refuses_exactly_the_unsafe_ints(value: int, field: str) -> None:
    args = {field: [1, value]} if field == "ids" else {field: value}
    said = CHECKS.problem("t", args, protected=True)
    assert (said is None) == (abs(value) <= MAX_SAFE_INTEGER)
    if said is not None:
        assert said.startswith("ids/1: " if field == "ids" else f"{field}: ")
        assert "safe range" in said and str(value) in said
    assert CHECKS.problem("t", args) is None  # unprotected: forwarded as before


def test_an_untyped_argument_keeps_its_big_int() -> None:
    assert CHECKS.problem("t", {"any": 2**64}, protected=True) is None
