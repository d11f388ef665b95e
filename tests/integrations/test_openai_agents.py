"""The OpenAI Agents SDK drop-in: a real Agent and Runner with a custom scripted Model."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, Runner, function_tool
from agents.testing import assistant_message, function_call
from agents.tool_context import ToolContext
from pydantic import BaseModel

from icore.adapters import load_jsonl
from icore.errors import ActionBlocked, IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording

from .conftest import audit_cli, load_example

REQ = "req/trip-17"


class Address(BaseModel):
    """A nested model argument."""

    city: str
    zip: str = "00000"


@dataclass
class Ctx:
    plan_roots: list[str] = field(default_factory=list)
    destination: str = ""


def _tool_ctx(ctx: Any, name: str, args: dict[str, Any]) -> ToolContext[Any]:
    return ToolContext(context=ctx, tool_name=name, tool_call_id="t1",
                       tool_arguments=json.dumps(args))


def test_schema_kept_and_context_updated(trip: Any) -> None:
    """Name, description and JSON schema are the original's; a replan updates the context."""

    @function_tool
    async def book(destination: str, nights: int = 1) -> str:
        """Book a hotel."""
        await asyncio.sleep(0)
        return trip.book(destination)

    w = fenced_function_tool(book, fence=trip.fence, depends_on={REQ}, replan=trip.replan,
                             state_update=lambda g: {"destination": g.result.args[
                                 "destination"]})
    assert (w.name, w.description, w.params_json_schema) == (
        book.name, book.description, book.params_json_schema)
    ctx = Ctx(plan_roots=[trip.first_plan.id])
    trip.revise("Porto")
    out = asyncio.run(w.on_invoke_tool(_tool_ctx(ctx, "book", {"destination": "Lisbon"}),
                                       json.dumps({"destination": "Lisbon"})))
    assert out == "booked Porto" and ctx.destination == "Porto"
    assert ctx.plan_roots != [trip.first_plan.id]


def test_block_is_the_tool_output_or_raises(trip: Any) -> None:
    """Blocked: the reason is the tool's output; ``on_block='raise'`` raises."""
    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    trip.revise("Porto")
    w = fenced_function_tool(book, fence=trip.fence, depends_on={REQ})
    ctx = {"plan_roots": [trip.first_plan.id]}
    out = asyncio.run(w.on_invoke_tool(_tool_ctx(ctx, "book", {}),
                                       '{"destination": "Lisbon"}'))
    assert "PlanFence blocked book (stale)" in out and trip.booked == []
    strict = fenced_function_tool(book, fence=trip.fence, depends_on={REQ}, on_block="raise")
    with pytest.raises(ActionBlocked):
        asyncio.run(strict.on_invoke_tool(_tool_ctx(ctx, "book", {}),
                                          '{"destination": "Lisbon"}'))


def test_tracing_processor_records_plain_tools_and_handoff(trip: Any) -> None:
    """Unfenced tool calls and handoffs come through the tracing processor."""
    mod = load_example("openai_agents_app")

    @function_tool
    def weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    helper = Agent(name="helper", instructions="help", model=mod.ScriptModel(iter([
        [assistant_message("done")]])))
    front = Agent(name="front", instructions="route", tools=[weather], handoffs=[helper],
                  model=mod.ScriptModel(iter([
                      [function_call("weather", {"city": "Porto"}, call_id="w1")],
                      [function_call("transfer_to_helper", {}, call_id="h1")]])))
    rec = RunRecorder("handoff")
    with recording(rec, exclusive=True):
        res = asyncio.run(Runner.run(front, "what is the weather?",
                                     context=RunContextWrapper(context=None).context))
    assert res.final_output == "done"
    tools = [e for e in rec.events if e["kind"] == "tool_output"]
    assert tools[0]["tool"] == "weather" and tools[0]["args"] == {"city": "Porto"}
    assert any(e["kind"] == "instruction" and e["to"] == "helper" for e in rec.events)
    assert rec.events[0]["kind"] == "task" and rec.events[-1]["kind"] == "termination"


def test_recording_restores_the_installed_processors() -> None:
    """``recording`` leaves the SDK's processors as it found them."""
    from agents.tracing import get_trace_provider

    multi = get_trace_provider()._multi_processor  # type: ignore[attr-defined]
    before = list(multi._processors)
    with recording(RunRecorder("x")) as proc:
        assert proc in multi._processors and len(multi._processors) == len(before) + 1
    assert list(multi._processors) == before and proc.active is False
    with recording(RunRecorder("y"), exclusive=True) as proc2:
        assert list(multi._processors) == [proc2]
    assert list(multi._processors) == before


def _book_tool(trip: Any, **kw: Any) -> Any:
    @function_tool(**kw)
    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    return book


def test_raise_leaves_runner_run_as_action_blocked(trip: Any) -> None:
    """``on_block="raise"`` inside a real ``Runner.run``: the documented ActionBlocked
    (an AgentsActionBlocked), not the SDK's UserError; nothing ran."""
    from agents.exceptions import AgentsException, UserError

    from icore.integrations.openai_agents import AgentsActionBlocked

    mod = load_example("openai_agents_app")
    trip.revise("Porto")
    strict = fenced_function_tool(_book_tool(trip), fence=trip.fence, depends_on={REQ},
                                  on_block="raise")
    agent = Agent(name="a", instructions="book", tools=[strict], model=mod.ScriptModel(iter([
        [function_call("book", {"destination": "Lisbon"}, call_id="c1")],
        [assistant_message("never")]])))
    with pytest.raises(ActionBlocked) as exc:
        asyncio.run(Runner.run(agent, "book", context=Ctx(plan_roots=[trip.first_plan.id])))
    assert isinstance(exc.value, AgentsActionBlocked) and isinstance(exc.value, AgentsException)
    assert not isinstance(exc.value, UserError)
    assert exc.value.fields["reason"] == "stale" and trip.booked == []
    with pytest.raises(IntegrationError, match="on_block"):
        fenced_function_tool(_book_tool(trip), fence=trip.fence, depends_on={REQ},
                             on_block="ignore")  # type: ignore[arg-type]


def test_approval_covers_exactly_the_approved_arguments(trip: Any) -> None:
    """The SDK's tool approval (``needs_approval``, interruptions, ``RunState.approve``):
    the human approves Lisbon; the trip changes before the run resumes; the replan's
    Porto is not what was approved, so nothing runs and the model is told; its call with
    Porto is put to the human again and runs only after that second "yes"."""
    mod = load_example("openai_agents_app")
    w = fenced_function_tool(_book_tool(trip, needs_approval=True), fence=trip.fence,
                             depends_on={REQ}, replan=trip.replan)
    agent = Agent(name="a", instructions="book", tools=[w], model=mod.ScriptModel(iter([
        [function_call("book", {"destination": "Lisbon"}, call_id="c1")],
        [function_call("book", {"destination": "Porto"}, call_id="c2")],
        [assistant_message("done")]])))
    ctx = Ctx(plan_roots=[trip.first_plan.id])

    async def go() -> list[str]:
        asked: list[str] = []
        result = await Runner.run(agent, "book", context=ctx)
        while result.interruptions:
            item = result.interruptions[0]
            asked.append(json.loads(item.raw_item.arguments)["destination"])
            if len(asked) == 1:
                trip.revise("Porto")  # while the human decides
            state = result.to_state()
            state.approve(item)
            result = await Runner.run(agent, state)
        outputs = [str(i.output) for i in result.new_items
                   if i.type == "tool_call_output_item"]
        assert result.final_output == "done"
        return asked + outputs

    got = asyncio.run(go())
    assert got[:2] == ["Lisbon", "Porto"]
    assert any("approval_changed" in o and '"Porto"' in o for o in got[2:])
    assert trip.booked == ["Porto"]


def test_two_protected_calls_in_one_model_turn_each_gated(trip: Any) -> None:
    """One model message with two calls of the fenced tool: each is gated on its own
    (the one the plan binds runs, the other is refused as args_mismatch)."""
    mod = load_example("openai_agents_app")
    w = fenced_function_tool(_book_tool(trip), fence=trip.fence, depends_on={REQ})
    agent = Agent(name="a", instructions="book", tools=[w], model=mod.ScriptModel(iter([
        [function_call("book", {"destination": "Lisbon"}, call_id="c1"),
         function_call("book", {"destination": "Faro"}, call_id="c2")],
        [assistant_message("done")]])))
    result = asyncio.run(Runner.run(agent, "book",
                                    context=Ctx(plan_roots=[trip.first_plan.id])))
    outs = {i.raw_item["call_id"]: str(i.output) for i in result.new_items
            if i.type == "tool_call_output_item"}
    assert outs["c1"] == "booked Lisbon" and "args_mismatch" in outs["c2"]
    assert trip.booked == ["Lisbon"]


# --- the high-level API (a workspace agent: the model's call is the plan) -------------

def _orders() -> tuple[Any, Any, list[tuple[str, str]]]:
    from icore.workspace import Workspace

    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    ws.put("order/7", {"city": "Hamburg"}, by="sales")
    return ws, ws.agent("shipper"), []


def _outputs(result: Any) -> dict[str, str]:
    return {i.raw_item["call_id"]: str(i.output) for i in result.new_items
            if i.type == "tool_call_output_item"}


def _model(turns: Any) -> Any:
    return load_example("openai_agents_app").ScriptModel(iter(turns))


def test_order_shipping_app_fenced_in_at_most_ten_lines(tmp_path: Path) -> None:
    """examples/openai_agents_app.py: the stale Berlin call never runs, one replan ships
    Munich, a second change blocks as the tool's output; <= 10 icore lines; audits."""
    from .conftest import icore_lines

    out = load_example("openai_agents_app").main(str(tmp_path / "run.jsonl"))
    assert [tuple(x) for x in out["shipped"]] == [("42", "Munich")]
    res = out["ship_results"]
    assert res[0].startswith("PlanFence blocked ship (stale)") and "Munich" in res[0]
    assert res[1] == "shipped order 42 to Munich"
    assert "(stale)" in res[2] and res[3].startswith("PlanFence blocked ship (second_change)")
    assert out["final"].startswith("Order 42 shipped to Munich")
    assert len(icore_lines("openai_agents_app")) <= 10
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "openai-agents-orders" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")


def test_agent_mode_typed_arguments_defaults_and_raise() -> None:
    """``date``/``UUID``/nested-model/defaulted parameters through the SDK's own parsing:
    the call runs; a stale call with ``on_block="raise"`` leaves ``Runner.run`` as
    ActionBlocked (not the SDK's UserError), nothing ran."""
    ws, shipper, _ = _orders()
    got: list[Any] = []

    @function_tool
    def ship(order_id: uuid.UUID, when: datetime.date, to: Address,
             express: bool = False) -> str:
        """Ship an order."""
        got.append((order_id, when, to, express))
        return f"shipped to {to.city}"

    oid = "12345678-1234-5678-1234-567812345678"
    call = {"order_id": oid, "when": "2026-12-03", "to": {"city": "Berlin"}}
    w = fenced_function_tool(ship, agent=shipper, depends_on={"order/42"}, on_block="raise")
    agent = Agent(name="a", tools=[w], model=_model([
        [function_call("ship", call, call_id="c1")],
        [function_call("ship", call, call_id="c2")], [assistant_message("never")]]))

    def change_then_raise() -> None:
        with shipper.scope("conv"):  # the read before the run counts in the run's scope
            shipper.read("order/42")
            asyncio.run(Runner.run(agent, "ship"))

    # the first call runs; sales changes the order before the second
    orig = agent.model.turns  # type: ignore[union-attr]

    def turns() -> Any:
        yield next(orig)
        ws.put("order/42", {"city": "Munich"}, by="sales")
        yield next(orig)
        yield next(orig)

    agent.model.turns = turns()  # type: ignore[union-attr]
    with pytest.raises(ActionBlocked) as exc:
        change_then_raise()
    assert exc.value.fields["reason"] == "stale"
    assert got == [(uuid.UUID(oid), datetime.date(2026, 12, 3), Address(city="Berlin"), False)]


def test_agent_mode_parallel_calls_of_one_response_each_their_own_root() -> None:
    """One model response with three protected calls after order 42 changed: both calls
    on order 42 are refused stale (a sibling's hand-over never authorizes the other); the
    call on order 7 runs; the next response's call from the fresh value is the replan."""
    ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    scope = {"agent": shipper, "depends_on": lambda a: {f"order/{a['order_id']}"}}
    w = fenced_function_tool(ship, **scope)
    agent = Agent(name="a", tools=[w], model=_model([
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c1"),
         function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c2"),
         function_call("ship", {"order_id": "7", "city": "Hamburg"}, call_id="c3")],
        [function_call("ship", {"order_id": "42", "city": "Munich"}, call_id="c4")],
        [assistant_message("done")]]))
    with shipper.scope("conv"):  # reads before the run, in the run's scope
        shipper.read("order/42")
        shipper.read("order/7")
        ws.put("order/42", {"city": "Munich"}, by="sales")
        outs = _outputs(asyncio.run(Runner.run(agent, "ship")))
    assert "(stale)" in outs["c1"] and "(stale)" in outs["c2"] and outs["c3"] == "shipped"
    assert outs["c4"] == "shipped" and shipped == [("7", "Hamburg"), ("42", "Munich")]


def test_agent_mode_approval_then_change_is_asked_again() -> None:
    """SDK tool approval in the high-level API: the human approves Berlin, sales changes
    the order before the run resumes; the approved call is stale and never runs; the
    model's Munich call is a new call the SDK puts to the human again; with a user
    replanner the changed arguments are refused (approval_changed), never run."""
    ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    async def drive(agent: Any, ws: Any) -> tuple[list[str], dict[str, str]]:
        asked: list[str] = []
        result = await Runner.run(agent, "ship")
        while result.interruptions:
            item = result.interruptions[0]
            asked.append(json.loads(item.raw_item.arguments)["city"])
            if len(asked) == 1:
                ws.put("order/42", {"city": "Munich"}, by="sales")  # while deciding
            state = result.to_state()
            state.approve(item)
            result = await Runner.run(agent, state)
        return asked, _outputs(result)

    tool = function_tool(ship, needs_approval=True)
    w = fenced_function_tool(tool, agent=shipper, depends_on={"order/42"})
    agent = Agent(name="a", tools=[w], model=_model([
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c1")],
        [function_call("ship", {"order_id": "42", "city": "Munich"}, call_id="c2")],
        [assistant_message("done")]]))
    with shipper.scope("conv"):  # the read and both runs (asked, resumed): one scope
        shipper.read("order/42")
        asked, outs = asyncio.run(drive(agent, ws))
    assert asked == ["Berlin", "Munich"] and "(stale)" in outs["c1"]
    assert outs["c2"] == "shipped" and shipped == [("42", "Munich")]

    ws2, shipper2, _ = _orders()
    w2 = fenced_function_tool(tool, agent=shipper2, depends_on={"order/42"},
                              replan=lambda st: {"order_id": "42",
                                                 "city": st.fresh["order/42"]["city"]})
    agent2 = Agent(name="a", tools=[w2], model=_model([
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c1")],
        [assistant_message("done")]]))
    with shipper2.scope("conv"):
        shipper2.read("order/42")
        asked2, outs2 = asyncio.run(drive(agent2, ws2))
    assert asked2 == ["Berlin"] and "approval_changed" in outs2["c1"]
    assert "Munich" in outs2["c1"] and shipped == [("42", "Munich")]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"depends_on": "order/42"}, "not a str"),
    ({"depends_on": {"orders/42"}}, "no owner is declared"),
    ({"agent": 42}, "workspace agent"),
    ({"agent": "executor"}, "needs agent="),
])
def test_agent_mode_setup_mistakes_raise_when_wrapped(kwargs: dict[str, Any],
                                                      match: str) -> None:
    """Setup mistakes are typed errors naming the fix, raised by the wrapper."""
    _ws, shipper, _ = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        return "x"

    with pytest.raises(IntegrationError, match=match):
        fenced_function_tool(ship, **{"agent": shipper, "depends_on": {"order/42"},
                                      **kwargs})

    def loose(order_id: str, **extra: Any) -> str:
        """Ship."""
        return "x"

    with pytest.raises(IntegrationError, match="kwargs"):
        fenced_function_tool(loose, agent=shipper, depends_on={"order/42"})


def test_agent_mode_a_sibling_read_of_the_same_response_never_counts() -> None:
    """One model response calls ``get_order`` and ``ship``: the sibling read does not
    authorize the call (refused ``not_read`` with the value); the next response's call
    runs."""
    _ws, shipper, shipped = _orders()

    @function_tool
    def get_order(order_id: str) -> str:
        """Read an order."""
        return json.dumps(shipper.read(f"order/{order_id}"))

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_function_tool(ship, agent=shipper,
                             depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent(name="a", tools=[get_order, w], model=_model([
        [function_call("get_order", {"order_id": "42"}, call_id="c1"),
         function_call("ship", {"order_id": "42", "city": "Paris"}, call_id="c2")],
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c3")],
        [assistant_message("done")]]))
    outs = _outputs(asyncio.run(Runner.run(agent, "ship")))
    assert "not_read" in outs["c2"] and outs["c3"] == "shipped"
    assert shipped == [("42", "Berlin")]


def test_fenced_tool_without_recorder_records_into_the_recording_block() -> None:
    """A fenced tool built without ``recorder=`` inside ``recording(rec)``: its gate
    decisions and calls land in ``rec``, once (the function span is not recorded twice)."""
    ws, shipper, _ = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        return "shipped"

    w = fenced_function_tool(ship, agent=shipper, depends_on={"order/42"})
    agent = Agent(name="a", tools=[w], model=_model([
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c1")],
        [function_call("ship", {"order_id": "42", "city": "Munich"}, call_id="c2")],
        [assistant_message("done")]]))
    rec = RunRecorder("no-recorder")
    with recording(rec, exclusive=True), shipper.scope("conv"):
        shipper.read("order/42")
        ws.put("order/42", {"city": "Munich"}, by="sales")
        asyncio.run(Runner.run(agent, "ship"))
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    outs = [(e["args"]["city"], e["exitcode"]) for e in rec.events
            if e["kind"] == "tool_output"]
    assert gates == ["stale", "valid"] and outs == [("Berlin", 1), ("Munich", 0)]
