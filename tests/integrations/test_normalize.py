"""Arguments in the tool's normal form (issue 28 item 2) and wrap-time refusals (item 4)."""

from __future__ import annotations

import enum
import functools
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

from icore.errors import IntegrationError
from icore.integrations import ArgNormalizer, check_tool_function, normalize_args

U = UUID("12345678-1234-5678-1234-567812345678")


class Speed(enum.Enum):
    """Shipping speed."""

    FAST = "fast"
    SLOW = "slow"


class Address(BaseModel):
    """A nested model."""

    city: str
    zip: str = "00000"


def ship(order: UUID, on: date, address: Address, speed: Speed = Speed.SLOW,
         at: datetime | None = None, fee: Decimal = Decimal("1.50")) -> str:
    """Ship an order."""
    return f"{order} {on} {address.city} {speed.value}"


def test_python_values_and_model_json_meet_in_one_form() -> None:
    """What the model sends (JSON) and what the framework parsed (Python) normalise equal,
    defaults included."""
    norm = ArgNormalizer.for_function(ship)
    from_json = norm({"order": str(U), "on": "2026-03-01", "address": {"city": "Berlin"}})
    from_py = norm({"order": U, "on": date(2026, 3, 1), "address": Address(city="Berlin"),
                    "speed": Speed.SLOW})
    assert from_json == from_py == {
        "order": str(U), "on": "2026-03-01", "address": {"city": "Berlin", "zip": "00000"},
        "speed": "slow", "at": None, "fee": "1.50"}
    py = norm.to_python(from_json)
    assert py["order"] == U and py["on"] == date(2026, 3, 1)
    assert isinstance(py["address"], Address) and py["speed"] is Speed.SLOW
    assert ship(**py).startswith(str(U))


def test_schema_model_and_one_off_helper() -> None:
    """A pydantic schema works directly; invalid arguments are a typed error."""

    class Args(BaseModel):
        on: date
        n: int = 1

    assert normalize_args(Args, {"on": date(2026, 1, 2)}) == {"on": "2026-01-02", "n": 1}
    assert normalize_args(ship, {"order": U, "on": "2026-01-02",
                                 "address": {"city": "x"}})["fee"] == "1.50"
    with pytest.raises(IntegrationError, match="do not fit"):
        normalize_args(Args, {"on": "not a date"})
    with pytest.raises(IntegrationError, match="mapping"):
        ArgNormalizer(Args, name="a")(["on"])  # type: ignore[arg-type]
    with pytest.raises(IntegrationError, match="pydantic model"):
        ArgNormalizer(dict, name="a")  # type: ignore[arg-type]


def _kw(**kwargs: Any) -> None:
    """Takes anything."""


def _star(*args: Any) -> None:
    """Takes positionals."""


def _pos(a: int, /) -> None:
    """Positional-only."""


class Tool:
    """A class is not a tool function."""


@pytest.mark.parametrize(("fn", "match"), [
    (None, "needs a function"), (42, "needs a function"), (Tool, "not a class"),
    (functools.partial(ship, U), "partial"), (_kw, r"\*\*kwargs"), (_star, r"\*args"),
    (_pos, "positional-only"), (lambda **kw: kw, r"\*\*kwargs"), (lambda x: x, "lambda")])
def test_unusable_tool_functions_are_refused(fn: Any, match: str) -> None:
    """Refused with a typed error naming the fix, before any call."""
    with pytest.raises(IntegrationError, match=match) as ei:
        check_tool_function(fn, framework="test")
    assert "fix" in ei.value.fields or "got" in ei.value.fields


def test_injected_parameters_may_be_variadic_when_skipped() -> None:
    """A framework's injected parameter is not a model argument."""

    def tool(city: str, runtime: Any = None) -> str:
        return city

    check_tool_function(tool, framework="t", skip={"runtime"})
    assert ArgNormalizer.for_function(tool, skip={"runtime"})({"city": "x"}) == {"city": "x"}


def test_lambdas_and_nameless_callables_are_refused_when_wrapped() -> None:
    """OpenAI Agents 8, AG2 6: ``<lambda>`` is no tool name; a callable object has none."""
    from icore.integrations import check_tool_function

    class Booker:
        def __call__(self, room: str) -> str:
            return room

    with pytest.raises(IntegrationError, match="lambda") as ei:
        check_tool_function(lambda room: room, framework="openai_agents")
    assert "def ship" in str(ei.value)
    with pytest.raises(IntegrationError, match="callable object"):
        check_tool_function(Booker(), framework="ag2")
    check_tool_function(Booker().__call__, framework="ag2")  # a bound method is fine
    check_tool_function(lambda room: room, framework="x", tool="book")  # named by tool=
