"""The CrewAI drop-in: a real Crew with a scripted ``BaseLLM`` (no network).

CrewAI pins ``openai<3`` while the OpenAI Agents SDK needs ``openai>=3``, so these tests
run in the second venv that ``make test-crewai`` (part of ``make test``) installs with
``icore[crewai-dev]``; in the main venv they are skipped.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    # skip before touching the environment: OTEL_SDK_DISABLED would switch off the
    # OpenTelemetry SDK for every later test in this process (tests/adapters/test_otel.py)
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
crewai_tools = pytest.importorskip("crewai.tools", reason="icore[crewai] runs in .venv-crewai")

from crewai.tools.tool_failure import ToolFailure  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from icore.adapters import load_jsonl  # noqa: E402
from icore.errors import ActionBlocked  # noqa: E402
from icore.integrations.crewai import FencedCrewTool, fenced_crewai_tool  # noqa: E402

from .conftest import audit_cli, load_example  # noqa: E402

REQ = "req/trip-17"


class Address(BaseModel):
    """A nested model argument (module level: CrewAI resolves the tool's annotations)."""

    city: str
    zip: str = "00000"


def _book(trip: Any) -> Any:
    @crewai_tools.tool("book")
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return str(trip.book(destination))

    return book


def test_schema_kept_and_context_updated(trip: Any) -> None:
    """Name, description and args schema are the original's; a replan updates the context."""
    book = _book(trip)
    ctx: dict[str, Any] = {"plan_roots": [trip.first_plan.id]}
    w = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                           replan=trip.replan)
    assert isinstance(w, FencedCrewTool)
    assert (w.name, w.description) == (book.name, book.description)
    assert w.args_schema.model_json_schema() == book.args_schema.model_json_schema()
    trip.revise("Porto")
    assert w.run(destination="Lisbon") == "booked Porto"
    assert ctx["plan_roots"] != [trip.first_plan.id]
    assert asyncio.run(w.arun(destination="Porto")) == "booked Porto"


def test_block_is_a_tool_failure_or_raises(trip: Any) -> None:
    """Blocked: CrewAI's ToolFailure (the tool's error result); ``raise`` raises."""
    book = _book(trip)
    trip.revise("Porto")
    ctx = {"plan_roots": [trip.first_plan.id]}
    w = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx)
    out = w.run(destination="Lisbon")
    assert isinstance(out, ToolFailure) and out.code == "stale" and trip.booked == []
    strict = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                                on_block="raise")
    with pytest.raises(ActionBlocked):
        strict.run(destination="Lisbon")


def _plan(trip: Any, action: str, args: dict[str, Any]) -> Any:
    from icore.fence import bind_action
    from icore.records import derive

    req = trip.stores["traveler"].get(trip.stores["traveler"].head(REQ).record_id)
    head = trip.stores["planner"].head("plan/trip-17")
    plan = derive(key="plan/trip-17", owner="planner", seq=trip.stores["planner"].next_seq(),
                  content=bind_action(action, args), inputs=[req])
    trip.replicator.commit(plan, expected_head=head.record_id if head else None)
    return plan


def test_typed_arguments_and_defaults_run_when_the_json_equals_the_plans(trip: Any) -> None:
    """``date``, ``UUID``, a nested model and defaulted parameters: CrewAI's own parsing
    (the structured tool's ``invoke`` with the model's JSON) types them and fills the
    defaults; the call is still the plan's call (bound with or without the defaults) and
    the tool gets exactly what it gets without the fence; a different date is refused
    ``args_mismatch``."""
    got: list[Any] = []

    def ship_fn(order_id: uuid.UUID, when: datetime.date, to: Address,
                express: bool = False) -> str:
        """Ship an order."""
        got.append((order_id, when, to, express))
        return f"shipped to {to['city']}"  # type: ignore[index]  # CrewAI passes a dict

    # CrewAI builds the schema from the raw annotations: real types, not this module's
    # postponed strings
    ship_fn.__annotations__ = {"order_id": uuid.UUID, "when": datetime.date, "to": Address,
                               "express": bool, "return": str}
    ship = crewai_tools.tool("ship")(ship_fn)

    oid = "12345678-1234-5678-1234-567812345678"
    sent = {"order_id": oid, "when": "2026-12-03", "to": {"city": "Berlin"}}
    assert ship.to_structured_tool().invoke(json.dumps(sent)) == "shipped to Berlin"
    plain = got.pop()  # what the tool gets from CrewAI without the fence
    assert plain[:2] == (uuid.UUID(oid), datetime.date(2026, 12, 3))
    for bound in (sent, {**sent, "express": False, "to": {"city": "Berlin", "zip": "00000"}}):
        plan = _plan(trip, "ship", bound)
        ctx = {"plan_roots": [plan.id]}
        w = fenced_crewai_tool(ship, fence=trip.fence, depends_on={REQ}, context=ctx)
        assert w.to_structured_tool().invoke(json.dumps(sent)) == "shipped to Berlin"
    assert got == [plain, plain]
    out = w.to_structured_tool().invoke(json.dumps({**sent, "when": "2026-12-04"}))
    assert isinstance(out, ToolFailure) and out.code == "args_mismatch" and len(got) == 2


def test_variadic_tools_and_non_tools_refused_when_wrapped(trip: Any) -> None:
    """``**kwargs`` tools and non-tools are refused when wrapped, naming the fix."""
    from icore.errors import IntegrationError

    @crewai_tools.tool("loose")
    def loose(**kwargs: Any) -> str:
        """Anything."""
        return "x"

    with pytest.raises(IntegrationError, match="kwargs"):
        fenced_crewai_tool(loose, fence=trip.fence, depends_on={REQ}, context={})
    with pytest.raises(IntegrationError, match="BaseTool"):
        fenced_crewai_tool(lambda: 1, fence=trip.fence, depends_on={REQ},  # type: ignore
                           context={})


# --- the high-level API (a workspace agent: the agent's call is the plan) -------------

def _orders() -> tuple[Any, Any]:
    from icore.workspace import Workspace

    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    return ws, ws.agent("shipper")


def test_order_shipping_crew_fenced_in_at_most_ten_lines(tmp_path: Path) -> None:
    """examples/crewai_app.py: the stale Berlin call never runs, one replan ships Munich,
    a second change blocks as CrewAI's ToolFailure the agent reads; <= 10 icore lines."""
    from .conftest import icore_lines

    out = load_example("crewai_app").main(str(tmp_path / "run.jsonl"))
    assert [tuple(x) for x in out["shipped"]] == [("42", "Munich")]
    seen = out["observations"]
    assert "ship (stale)" in seen[0] and "Munich" in seen[0]
    assert "ship (stale)" in seen[1] and "Bonn" in seen[1]
    assert "ship (second_change)" in seen[2] and len(seen) == 3
    assert out["final"].startswith("Order 42 shipped to Munich")
    assert out["events"][0] == "task" and out["events"][-1] == "termination"
    assert len(icore_lines("crewai_app")) <= 10
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "crewai-orders" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")


def test_agent_mode_typed_defaults_stale_then_replan_and_raise() -> None:
    """CrewAI's parsing types the model's JSON and fills defaults; the action record binds
    the normal form; a stale call is a ToolFailure with the fresh value, the next call is
    the replan; a second change with ``on_block="raise"`` raises ActionBlocked."""
    ws, shipper = _orders()
    got: list[Any] = []

    def ship_fn(order_id: uuid.UUID, when: datetime.date, to: Address,
                express: bool = False) -> str:
        """Ship an order."""
        got.append((order_id, when, to["city"], express))  # type: ignore[index]
        return f"shipped to {to['city']}"  # type: ignore[index]

    ship_fn.__annotations__ = {"order_id": uuid.UUID, "when": datetime.date, "to": Address,
                               "express": bool, "return": str}
    ship = crewai_tools.tool("ship")(ship_fn)
    oid = "12345678-1234-5678-1234-567812345678"
    w = fenced_crewai_tool(ship, agent=shipper, depends_on={"order/42"})
    run = w.to_structured_tool().invoke
    shipper.read("order/42")
    assert run(json.dumps({"order_id": oid, "when": "2026-12-03",
                           "to": {"city": "Berlin"}})) == "shipped to Berlin"
    ws.put("order/42", {"city": "Munich"}, by="sales")
    out = run(json.dumps({"order_id": oid, "when": "2026-12-03", "to": {"city": "Berlin"}}))
    assert isinstance(out, ToolFailure) and out.code == "stale" and "Munich" in out.message
    assert run(json.dumps({"order_id": oid, "when": "2026-12-03", "to": {"city": "Munich"},
                           "express": True})) == "shipped to Munich"
    assert got == [(uuid.UUID(oid), datetime.date(2026, 12, 3), "Berlin", False),
                   (uuid.UUID(oid), datetime.date(2026, 12, 3), "Munich", True)]
    strict = fenced_crewai_tool(ship, agent=shipper, depends_on={"order/42"},
                                on_block="raise")
    ws.put("order/42", {"city": "Bonn"}, by="sales")
    with pytest.raises(ActionBlocked):
        strict.run(order_id=oid, when="2026-12-03", to={"city": "Munich"})
    assert len(got) == 2


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"depends_on": "order/42"}, "not a str"),
    ({"depends_on": {"orders/42"}}, "no owner is declared"),
    ({"agent": 42}, "workspace agent"),
    ({"agent": "executor"}, "needs agent="),
])
def test_agent_mode_setup_mistakes_raise_when_wrapped(kwargs: dict[str, Any],
                                                      match: str) -> None:
    """Setup mistakes are typed errors naming the fix, raised by the wrapper."""
    from icore.errors import IntegrationError

    _ws, shipper = _orders()

    @crewai_tools.tool("ship")
    def ship(order_id: str, city: str) -> str:
        """Ship."""
        return "x"

    with pytest.raises(IntegrationError, match=match):
        fenced_crewai_tool(ship, **{"agent": shipper, "depends_on": {"order/42"}, **kwargs})


def test_fenced_tool_without_recorder_records_into_the_recording_block() -> None:
    """A fenced tool built without ``recorder=`` inside ``recording(rec)``: its gate
    decisions and calls land in ``rec``."""
    from icore.integrations import RunRecorder
    from icore.integrations.crewai import recording

    ws, shipper = _orders()

    @crewai_tools.tool("ship")
    def ship(order_id: str, city: str) -> str:
        """Ship."""
        return "shipped"

    w = fenced_crewai_tool(ship, agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    ws.put("order/42", {"city": "Munich"}, by="sales")
    rec = RunRecorder("no-recorder")
    with recording(rec):
        assert isinstance(w.run(order_id="42", city="Berlin"), ToolFailure)
        assert w.run(order_id="42", city="Munich") == "shipped"
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    assert gates == ["stale", "valid"] and "ship" in rec.fenced_tools
