"""The AG2 1.x drop-in: real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig``."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResultEvent
from ag2.middleware.builtin import approval_required
from pydantic import BaseModel

from icore.adapters import load_jsonl
from icore.errors import ActionBlocked, IntegrationError, MissingExtra
from icore.fence import bind_action
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.records import derive

from .conftest import audit_cli, load_example

REQ, PLAN = "req/trip-17", "plan/trip-17"


def _app() -> Any:
    return load_example("ag2_app")


def _run(agent: Agent, msg: str = "go") -> tuple[Any, list[ToolResultEvent]]:
    async def go() -> tuple[Any, list[ToolResultEvent]]:
        reply = await agent.ask(msg)
        events = [e for e in await reply.history.get_events()
                  if isinstance(e, ToolResultEvent)]
        return reply, events

    return asyncio.run(go())


def _agent(turns: Any, tools: list[Any], roots: list[str], **kw: Any) -> Agent:
    return Agent("executor", config=_app().ScriptedWorld(iter(turns)), tools=tools,
                 variables={"plan_roots": roots}, **kw)


def _plan(trip: Any, action: str, args: dict[str, Any]) -> Any:
    """The planner commits a plan binding ``action(args)`` from the current requirement."""
    req = trip.stores["traveler"].get(trip.stores["traveler"].head(REQ).record_id)
    head = trip.stores["planner"].head(PLAN)
    plan = derive(key=PLAN, owner="planner", seq=trip.stores["planner"].next_seq(),
                  content=bind_action(action, args), inputs=[req])
    trip.replicator.commit(plan, expected_head=head.record_id if head else None)
    return plan


def test_schema_and_registered_name_kept_async_tool_and_replanner(trip: Any) -> None:
    """The tool's name, description and JSON schema stay AG2's; no second ``name=``;
    an ``async def`` tool and replanner; the fresh roots land in ``context.variables``."""

    @tool(name="reserve", description="Book a hotel.")
    async def book(destination: str, nights: int = 1) -> str:
        await asyncio.sleep(0)
        return trip.book(destination)

    async def areplan(rq: Any) -> Any:
        return trip.replan(rq)

    seen: list[Any] = []

    async def spy(call_next: Any, event: Any, context: Any) -> Any:
        seen.append(context.variables["plan_roots"])
        return await call_next(event, context)

    # the plan binds "reserve", the registered name (not the function's)
    plan = _plan(trip, "reserve", {"destination": "Lisbon"})
    w = fenced_tool(book.with_middleware(spy), fence=trip.fence, depends_on={REQ},
                    replan=areplan)
    assert (w.name, w.schema) == ("reserve", book.schema)
    trip.revise("Porto")
    trip.make_plan = lambda: _plan(trip, "reserve", {"destination": "Porto"})  # type: ignore
    agent = _agent([ToolCallEvent("reserve", arguments='{"destination": "Lisbon"}'), "ok"],
                   [w], [plan.id])
    _, results = _run(agent)
    assert trip.booked == ["Porto"] and not isinstance(results[0], ToolErrorEvent)
    assert seen == [[plan.id]]  # the tool's own hooks run before the gate (innermost)


def test_block_is_the_tools_error_and_nothing_runs(trip: Any) -> None:
    """No replanner: a changed requirement blocks; the model gets a ToolErrorEvent
    carrying ActionBlocked with the reason and the key named."""

    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    trip.revise("Porto")
    w = fenced_tool(book, fence=trip.fence, depends_on={REQ}, replicator=trip.replicator)
    agent = _agent([ToolCallEvent("book", arguments='{"destination": "Lisbon"}'), "ok"],
                   [w], [trip.first_plan.id])
    _, results = _run(agent)
    err = results[0]
    assert isinstance(err, ToolErrorEvent) and isinstance(err.error, ActionBlocked)
    assert "stale" in str(err.error) and REQ in str(err.error) and trip.booked == []


def test_typed_arguments_and_defaults_compared_as_the_models_json(trip: Any) -> None:
    """``date``, ``UUID``, a nested pydantic model and an omitted default: the model's JSON
    equals the plan's, so the call runs with AG2's typed values (no PydanticUserError);
    a different date is refused."""

    class Address(BaseModel):
        city: str
        zip: str = "00000"

    got: list[Any] = []

    def ship(order_id: uuid.UUID, when: datetime.date, to: Address,
             express: bool = False) -> str:
        """Ship an order."""
        got.append((order_id, when, to, express))
        return f"shipped to {to.city} on {when}"

    oid = "12345678-1234-5678-1234-567812345678"
    args = {"order_id": oid, "when": "2026-12-03", "to": {"city": "Berlin"}}
    plan = _plan(trip, "ship", args)
    w = fenced_tool(ship, fence=trip.fence, depends_on={REQ})
    import json

    agent = _agent([ToolCallEvent("ship", arguments=json.dumps(args)),
                    ToolCallEvent("ship", arguments=json.dumps({**args, "when": "2026-12-04"})),
                    "ok"], [w], [plan.id])
    _, results = _run(agent)
    assert got == [(uuid.UUID(oid), datetime.date(2026, 12, 3), Address(city="Berlin"), False)]
    assert isinstance(results[1], ToolErrorEvent) and "args_mismatch" in str(results[1].error)


def test_variadic_tools_and_wrong_objects_refused_when_wrapped(trip: Any) -> None:
    """``**kwargs`` / ``*args`` tools and non-tools are refused when wrapped, naming the fix."""

    def loose(**kwargs: Any) -> str:
        """Anything."""
        return "x"

    def star(*cities: str) -> str:
        """Anything."""
        return "x"

    with pytest.raises(IntegrationError, match="kwargs"):
        fenced_tool(loose, fence=trip.fence, depends_on={REQ})
    with pytest.raises(IntegrationError, match="cities"):
        fenced_tool(tool(star), fence=trip.fence, depends_on={REQ})
    with pytest.raises(IntegrationError, match="ag2 tool or a function"):
        fenced_tool("book", fence=trip.fence, depends_on={REQ})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   "])
def test_a_tool_without_a_name_is_refused_when_wrapped(trip: Any, name: str) -> None:
    """An empty tool name is refused when wrapped, as LangGraph and the Agents SDK do."""

    def book(city: str) -> str:
        """Book."""
        return city

    good = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    assert good.name == "book"
    book.__name__ = name
    with pytest.raises(IntegrationError, match="needs a tool with a name") as exc:
        fenced_tool(book, fence=trip.fence, depends_on={REQ})
    assert exc.value.fields["framework"] == "ag2"
    with pytest.raises(IntegrationError, match="needs a tool with a name"):
        fenced_tool(tool(book), fence=trip.fence, depends_on={REQ})


def test_approval_covers_exactly_the_approved_arguments(trip: Any) -> None:
    """AG2's own ``approval_required`` asks the human before the gate; while the human
    decides, the requirement changes; the replan's fresh arguments (Porto) are not what
    was approved (Lisbon): nothing runs, and the model's next call with Porto is put to
    the human again."""
    asked: list[str] = []

    def human(request: Any) -> str:
        asked.append(str(getattr(request, "content", request)))
        if len(asked) == 1:
            trip.revise("Porto")  # the traveler changes the trip while the human decides
        return "y"

    @tool(middleware=[approval_required(allow_always=False)])
    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ}, replan=trip.replan)
    agent = _agent([ToolCallEvent("book", arguments='{"destination": "Lisbon"}'),
                    ToolCallEvent("book", arguments='{"destination": "Porto"}'), "ok"],
                   [w], [trip.first_plan.id], hitl_hook=human)
    # the model's second call needs a plan binding Porto: the replan made one
    _, results = _run(agent)
    assert isinstance(results[0], ToolErrorEvent)
    assert "approval_changed" in str(results[0].error) and "Porto" in str(results[0].error)
    assert len(asked) == 2 and "Lisbon" in asked[0] and "Porto" in asked[1]
    assert trip.booked == ["Porto"]  # only after the human approved Porto


def test_calling_agent_named_and_plain_tools_recorded() -> None:
    """record_agents: the task, the model's tool calls, plain tool results and errors,
    the answer; a fenced tool's gate events name the calling agent."""
    trip = load_example("_trip").Trip()
    rec = RunRecorder("plain")

    def weather(city: str) -> str:
        """Weather in a city."""
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"sunny in {city}"

    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    safe = fenced_tool(book, fence=trip.fence, depends_on={REQ}, recorder=rec)
    agent = Agent("concierge", config=_app().ScriptedWorld(iter([
        [ToolCallEvent("weather", arguments='{"city": "Porto"}'),
         ToolCallEvent("weather", arguments='{"city": "Atlantis"}')],
        ToolCallEvent("book", arguments='{"destination": "Lisbon"}'),
        "Porto is sunny."])), tools=[weather, safe],
        variables={"plan_roots": [trip.first_plan.id]})
    record_agents(rec, agent)
    _run(agent, "weather?")
    tools = [e for e in rec.events if e["kind"] == "tool_output"]
    got = [(e["args"], e["exitcode"]) for e in tools]
    # the model's two weather calls of one response may finish in either order
    assert sorted(got[:2], key=repr) == sorted(
        [({"city": "Porto"}, 0), ({"city": "Atlantis"}, 1)], key=repr)
    assert got[2:] == [({"destination": "Lisbon"}, 0)]
    assert {e["agent"] for e in rec.events if e["kind"] == "thought"} == {"concierge"}
    assert rec.events[0]["kind"] == "task" and rec.events[0]["content"] == "weather?"
    assert rec.events[-1]["kind"] == "termination"
    assert rec.events[-1]["final_answer"] == "Porto is sunny."
    with pytest.raises(IntegrationError, match=r"ag2\.Agent"):
        record_agents(rec, object())


def test_old_ag2_gets_an_upgrade_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ag2 0.x installed the error says upgrade (never an install that downgrades)."""
    import importlib.metadata

    from icore import _extras

    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "0.14.0")
    with pytest.raises(MissingExtra) as exc:
        _extras.require_version("ag2", "ag2", "1.2", feature="icore.integrations.ag2")
    assert "pip install -U 'ag2>=1.2'" in str(exc.value) and "0.14.0" in str(exc.value)
    assert "icore[ag2]" not in str(exc.value)
    assert importlib.import_module("icore.integrations.ag2").fenced_tool is fenced_tool


def test_two_protected_calls_in_one_model_turn_each_gated(trip: Any) -> None:
    """One model response with two calls of the fenced tool: each is gated on its own
    (the one the plan binds runs; the other is refused ``args_mismatch``)."""

    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    agent = _agent([[ToolCallEvent("book", arguments='{"destination": "Lisbon"}'),
                     ToolCallEvent("book", arguments='{"destination": "Faro"}')], "ok"],
                   [w], [trip.first_plan.id])
    _, results = _run(agent)
    by_error = {isinstance(r, ToolErrorEvent): r for r in results}
    assert set(by_error) == {True, False} and trip.booked == ["Lisbon"]
    assert "args_mismatch" in str(by_error[True].error)


# --- the high-level API (a workspace agent: the model's call is the plan) -------------

def _orders() -> tuple[Any, Any, list[tuple[str, str]]]:
    from icore.workspace import Workspace

    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    ws.put("order/7", {"city": "Hamburg"}, by="sales")
    return ws, ws.agent("shipper"), []


def _call(name: str, **args: Any) -> ToolCallEvent:
    import json

    return ToolCallEvent(name, arguments=json.dumps(args))


def _world(turns: Any) -> Any:
    return _app().ScriptedWorld(iter(turns))


def test_order_shipping_app_fenced_in_at_most_ten_lines(tmp_path: Path) -> None:
    """examples/ag2_app.py: the stale Berlin call never runs, one replan ships Munich, a
    second change blocks with AG2's tool error; <= 10 icore lines; the run audits."""
    from .conftest import icore_lines

    out = _app().main(str(tmp_path / "run.jsonl"))
    assert out["shipped"] == [["42", "Munich"]] or out["shipped"] == [("42", "Munich")]
    res = out["ship_results"]
    assert res[0].startswith("error: PlanFence blocked ship (stale)") and "Munich" in res[0]
    assert res[1] == "shipped order 42 to Munich"
    assert "(stale)" in res[2] and "Bonn" in res[2]
    assert res[3].startswith("error: PlanFence blocked ship (second_change)")
    assert len(icore_lines("ag2_app")) <= 10
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "ag2-orders" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")


@pytest.mark.usefixtures("one_chat")
def test_agent_mode_typed_arguments_defaults_and_a_user_replanner() -> None:
    """``date``, ``UUID``, an enum-like nested model and a defaulted parameter: the action
    record binds their JSON form (defaults applied), the tool gets AG2's typed values; a
    user replanner's arguments go through the same normal form and run."""
    ws, shipper, _ = _orders()
    got: list[Any] = []

    class Address(BaseModel):
        city: str
        zip: str = "00000"

    def ship(order_id: uuid.UUID, when: datetime.date, to: Address,
             express: bool = False) -> str:
        """Ship an order."""
        got.append((order_id, when, to, express))
        return f"shipped to {to.city}"

    ship.__annotations__ = {"order_id": uuid.UUID, "when": datetime.date, "to": Address,
                            "express": bool, "return": str}  # local class: real types
    oid = "12345678-1234-5678-1234-567812345678"

    def replan(stale: Any) -> dict[str, Any]:
        return {"order_id": uuid.UUID(oid), "when": datetime.date(2026, 12, 4),
                "to": Address(city=stale.fresh["order/42"]["city"])}

    w = fenced_tool(ship, agent=shipper, depends_on={"order/42"}, replan=replan)
    shipper.read("order/42")

    def turns() -> Any:
        yield _call("ship", order_id=oid, when="2026-12-03", to={"city": "Berlin"})
        ws.put("order/42", {"city": "Munich"}, by="sales")
        yield _call("ship", order_id=oid, when="2026-12-03", to={"city": "Berlin"})
        yield "ok"

    agent = Agent("shipper", config=_world(turns()), tools=[w])
    _, results = _run(agent)
    assert not any(isinstance(r, ToolErrorEvent) for r in results)
    assert got == [(uuid.UUID(oid), datetime.date(2026, 12, 3), Address(city="Berlin"), False),
                   (uuid.UUID(oid), datetime.date(2026, 12, 4), Address(city="Munich"), False)]
    bound = [d for d in shipper.log if d.outcome.value == "authorized"]
    assert len(bound) == 2


@pytest.mark.usefixtures("one_chat")
def test_agent_mode_parallel_calls_each_their_own_root() -> None:
    """One model response with three protected calls after order 42 changed: the two on
    order 42 are refused stale (a sibling's hand-over never authorizes the other), the
    one on order 7 runs."""
    ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    def label(order_id: str, city: str) -> str:
        """Print a label."""
        shipped.append(("label", city))
        return "labelled"

    scope = {"depends_on": lambda a: {f"order/{a['order_id']}"}}
    tools = [fenced_tool(ship, agent=shipper, **scope), fenced_tool(label, agent=shipper,
                                                                       **scope)]
    shipper.read("order/42")
    shipper.read("order/7")
    ws.put("order/42", {"city": "Munich"}, by="sales")
    agent = Agent("shipper", config=_world([
        [_call("ship", order_id="42", city="Berlin"), _call("label", order_id="42",
                                                            city="Berlin"),
         _call("ship", order_id="7", city="Hamburg")], "ok"]), tools=tools)
    _, results = _run(agent)
    errors = sorted(str(r.error).split(":")[0] for r in results
                    if isinstance(r, ToolErrorEvent))
    assert errors == ["PlanFence blocked label (stale)", "PlanFence blocked ship (stale)"]
    assert shipped == [("7", "Hamburg")]


def test_agent_mode_unread_fact_is_handed_over_then_runs() -> None:
    """A call depending on a fact the agent never read: refused ``not_read`` with the
    value; the next call (from that value) runs."""
    _ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent("shipper", config=_world([
        _call("ship", order_id="42", city="Paris"), _call("ship", order_id="42",
                                                          city="Berlin"), "ok"]), tools=[w])
    _, results = _run(agent)
    assert isinstance(results[0], ToolErrorEvent) and "not_read" in str(results[0].error)
    assert "Berlin" in str(results[0].error) and shipped == [("42", "Berlin")]


@pytest.mark.usefixtures("one_chat")
def test_agent_mode_approval_then_change_asks_again() -> None:
    """The human approves Berlin; sales changes the order while the human decides; the
    approved call is stale and never runs; the model's Munich call is asked again and
    runs only after that "yes". With a user replanner the changed arguments are refused
    (``approval_changed``) instead of running unapproved."""
    ws, shipper, shipped = _orders()
    asked: list[str] = []

    def human(request: Any) -> str:
        asked.append(str(getattr(request, "content", request)))
        if len(asked) == 1:
            ws.put("order/42", {"city": "Munich"}, by="sales")
        return "y"

    @tool(middleware=[approval_required(allow_always=False)])
    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([
        _call("ship", order_id="42", city="Berlin"), _call("ship", order_id="42",
                                                           city="Munich"), "ok"]),
        tools=[w], hitl_hook=human)
    _, results = _run(agent)
    assert isinstance(results[0], ToolErrorEvent) and "(stale)" in str(results[0].error)
    assert len(asked) == 2 and "Berlin" in asked[0] and "Munich" in asked[1]
    assert shipped == [("42", "Munich")]

    ws2, shipper2, shipped2 = _orders()
    asked.clear()

    def human2(request: Any) -> str:
        asked.append("x")
        ws2.put("order/42", {"city": "Munich"}, by="sales")
        return "y"

    w2 = fenced_tool(ship, agent=shipper2, depends_on={"order/42"},
                     replan=lambda st: {"order_id": "42", "city": st.fresh["order/42"]["city"]})
    shipper2.read("order/42")
    agent2 = Agent("shipper", config=_world([_call("ship", order_id="42", city="Berlin"),
                                             "ok"]), tools=[w2], hitl_hook=human2)
    _, results2 = _run(agent2)
    assert "approval_changed" in str(results2[0].error) and "Munich" in str(results2[0].error)
    assert shipped == [("42", "Munich")] and shipped2 == []


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"depends_on": "order/42"}, "not a str"),
    ({"depends_on": {"orders/42"}}, "no owner is declared"),
    ({"depends_on": set()}, "empty"),
    ({"agent": None}, "needs agent="),
    ({"agent": 42}, "workspace agent"),
])
def test_agent_mode_setup_mistakes_raise_when_wrapped(kwargs: dict[str, Any],
                                                      match: str) -> None:
    """Setup mistakes are typed errors naming the fix, raised by ``fenced_tool``."""
    _ws, shipper, _ = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        return "x"

    args: dict[str, Any] = {"agent": shipper, "depends_on": {"order/42"}, **kwargs}
    with pytest.raises(IntegrationError, match=match):
        fenced_tool(ship, **args)

    def positional(order_id: str, /, city: str) -> str:
        """Ship."""
        return "x"

    with pytest.raises(IntegrationError, match="positional-only"):
        fenced_tool(positional, agent=shipper, depends_on={"order/42"})


@pytest.mark.usefixtures("one_chat")
def test_agent_mode_injected_context_parameter_left_out_of_the_binding() -> None:
    """A tool taking AG2's injected ``Context`` still wraps: the action record binds only
    the model's arguments, and the tool gets its context."""
    from ag2 import Context

    _ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str, context: Context) -> str:
        """Ship."""
        shipped.append((order_id, city, context.variables.get("carrier")))
        return "shipped"

    ship.__annotations__ = {"order_id": str, "city": str, "context": Context, "return": str}
    w = fenced_tool(ship, agent=shipper, depends_on={"order/42"})
    assert "context" not in w.schema.function.parameters["properties"]
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([_call("ship", order_id="42", city="Berlin"),
                                            "ok"]), tools=[w], variables={"carrier": "dhl"})
    _, results = _run(agent)
    assert not isinstance(results[0], ToolErrorEvent) and shipped == [("42", "Berlin", "dhl")]
    bound = [r for r in shipper.log if r.outcome.value == "authorized"]
    assert len(bound) == 1


def test_agent_mode_a_sibling_read_of_the_same_response_never_counts() -> None:
    """One model response calls ``get_order`` and ``ship``: the model chose the city
    before it read the order, so the sibling read does not authorize the call (refused
    ``not_read`` with the value); the next response's call, made after the read, runs."""
    _ws, shipper, shipped = _orders()

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[return-value]

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent("shipper", config=_world([
        [_call("get_order", order_id="42"), _call("ship", order_id="42", city="Paris")],
        _call("ship", order_id="42", city="Berlin"), "ok"]), tools=[get_order, w])
    _, results = _run(agent)
    errors = [r for r in results if isinstance(r, ToolErrorEvent)]
    assert len(errors) == 1 and "not_read" in str(errors[0].error)
    assert shipped == [("42", "Berlin")]


@pytest.mark.usefixtures("one_chat")
def test_fenced_tool_without_recorder_records_into_the_recorded_run() -> None:
    """A fenced tool built without ``recorder=`` in a run recorded by ``record_agents``:
    its gate decisions and calls land in that run's recorder, once, naming the AG2 agent
    whose turn called the tool (``front``, not the workspace agent ``shipper``)."""
    ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    ws.put("order/42", {"city": "Munich"}, by="sales")
    agent = Agent("front", config=_world([_call("ship", order_id="42", city="Berlin"),
                                          _call("ship", order_id="42", city="Munich"),
                                          "ok"]), tools=[w])
    rec = RunRecorder("no-recorder")
    record_agents(rec, agent)
    _run(agent)
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    outs = [(e["args"]["city"], e["exitcode"]) for e in rec.events
            if e["kind"] == "tool_output"]
    assert gates == ["stale", "valid"] and outs == [("Berlin", 1), ("Munich", 0)]
    assert {e["agent"] for e in rec.events if e.get("gate")} == {"front"}

@pytest.mark.usefixtures("one_chat")
def test_sibling_stale_calls_of_one_message_record_no_replan(tmp_path: Path) -> None:
    """Two calls of one tool on the same changed order in one model message are both
    refused stale (planned from the same old read); neither is the other's replan: the
    recording counts replans 0 after that message and 1 once the model's next message
    ships from the fresh value."""
    ws, shipper, shipped = _orders()
    rec = RunRecorder("siblings")

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, recorder=rec,
                    depends_on=lambda a: {f"order/{a['order_id']}"})
    shipper.read("order/42")
    ws.put("order/42", {"city": "Munich"}, by="sales")
    agent = Agent("shipper", config=_world([
        [_call("ship", order_id="42", city="Berlin"),
         _call("ship", order_id="42", city="Bremen")], "ok"]), tools=[w])
    _run(agent)
    assert shipped == []
    assert _replans(rec, tmp_path / "a") == 0
    agent = Agent("shipper", config=_world([
        _call("ship", order_id="42", city="Munich"), "ok"]), tools=[w])
    _run(agent)
    assert shipped == [("42", "Munich")]
    assert _replans(rec, tmp_path / "b") == 1


def _replans(rec: RunRecorder, out: Path) -> int:
    import json

    from typer.testing import CliRunner

    from icore.cli import app

    path = rec.write(out.with_suffix(".jsonl"))
    res = CliRunner().invoke(app, ["audit", str(path), "--json", str(out) + ".json",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    runs = json.loads(Path(str(out) + ".json").read_text())["runs"]
    return int(runs[0]["summary"]["replans"])


@pytest.mark.usefixtures("one_chat")
def test_a_broken_replanner_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """A replanner that raises: the call does not run, AG2's tool error reaches the
    model, and the developer's log holds the error once (not once per layer)."""
    ws, shipper, shipped = _orders()

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    def broken(_stale: Any) -> Any:
        raise RuntimeError("boom")

    w = fenced_tool(ship, agent=shipper, replan=broken,
                    depends_on=lambda a: {f"order/{a['order_id']}"})
    shipper.read("order/42")
    ws.put("order/42", {"city": "Munich"}, by="sales")
    agent = Agent("shipper", config=_world([[_call("ship", order_id="42", city="Berlin")],
                                            "ok"]), tools=[w])
    with caplog.at_level("ERROR", logger="icore"):
        _, results = _run(agent)
    assert shipped == [] and isinstance(results[0], ToolErrorEvent)
    logged = [r for r in caplog.records if "replanner raised" in r.getMessage()]
    assert len(logged) == 1 and "boom" in logged[0].getMessage()
