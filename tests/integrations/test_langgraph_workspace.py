"""LangGraph with the high-level API (issue 28 items 1-5): the model's call is the plan.

Real LangGraph graphs (ToolNode, checkpointer, interrupt / Command(resume=...)) with
LangChain's scripted chat model; the facts live in an icore Workspace.
"""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, TypedDict
from uuid import UUID

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from icore.errors import ActionBlocked, IntegrationError
from icore.integrations.langgraph import fenced_tool
from icore.workspace import Stale, Workspace

ORDER = "order/42"


class S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


class Scripted(GenericFakeChatModel):
    """LangChain's fake chat model; tools are bound by the graph."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _msg(*calls: tuple[str, dict[str, Any]], n: list[int] | None = None) -> AIMessage:
    n = n if n is not None else [0]
    out = []
    for name, args in calls:
        n[0] += 1
        out.append({"name": name, "args": args, "id": f"{name}-{n[0]}"})
    return AIMessage("", tool_calls=out)


def _react(tools: list[Any], turns: Iterator[AIMessage], checkpointer: Any = None) -> Any:
    llm = Scripted(messages=turns).bind_tools(tools)

    def agent(state: S) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(S)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def _tool_msgs(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


class Shop:
    """An order-shipping app: a sales agent owns the orders, a shipper ships them."""

    def __init__(self) -> None:
        self.ws = Workspace({"order/*": "sales"})
        self.ws.put(ORDER, {"city": "Berlin"})
        self.shipper = self.ws.agent("shipper")
        self.shipped: list[str] = []

        @tool
        def get_order(order_id: int) -> dict[str, Any]:
            """Read an order."""
            return self.shipper.read(f"order/{order_id}")  # type: ignore[return-value]

        @tool
        def ship(order_id: int, city: str) -> str:
            """Ship an order to a city."""
            self.shipped.append(city)
            return f"shipped order {order_id} to {city}"

        self.get_order, self.ship = get_order, ship

    def move(self, city: str, key: str = ORDER) -> None:
        """Another agent changes the order."""
        self.ws.update(key, lambda o: {**(o or {}), "city": city}, by="sales")  # type: ignore[dict-item]

    def safe_ship(self, **kw: Any) -> Any:
        return fenced_tool(self.ship, agent=self.shipper,
                           depends_on=lambda a: {f"order/{a['order_id']}"}, **kw)


def test_order_app_stale_never_runs_one_replan_then_second_change_blocks() -> None:
    """The issue's story in a ReAct graph: Berlin -> Munich before the tool runs."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        shop.move("Munich")  # another agent, after the plan, before the tool runs
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)  # the one replan
        shop.move("Hamburg")
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)  # stale: hand-over
        shop.move("Bonn")  # a second change before the replanned call
        yield _msg(("ship", {"order_id": 42, "city": "Hamburg"}), n=n)
        yield AIMessage("done")

    app = _react([shop.get_order, shop.safe_ship()], turns())
    out = app.invoke({"messages": [HumanMessage("ship order 42")]})
    msgs = _tool_msgs(out)
    assert shop.shipped == ["Munich"]
    assert [m.status for m in msgs] == ["success", "error", "success", "error", "error"]
    assert "(stale)" in str(msgs[1].content) and '"Munich"' in str(msgs[1].content)
    assert "(second_change)" in str(msgs[4].content)


def test_two_protected_calls_in_one_message_validate_independently() -> None:
    """One AIMessage, two orders: the fresh one ships, the stale one is refused as stale."""
    shop = Shop()
    shop.ws.put("order/43", {"city": "Rome"})
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), ("get_order", {"order_id": 43}), n=n)
        shop.move("Munich")  # only order 42 changes
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}),
                   ("ship", {"order_id": 43, "city": "Rome"}), n=n)
        yield AIMessage("done")

    out = _react([shop.get_order, shop.safe_ship()], turns()).invoke(
        {"messages": [HumanMessage("ship both")]})
    by_id = {m.tool_call_id: m for m in _tool_msgs(out)}
    assert shop.shipped == ["Rome"]
    assert by_id["ship-3"].status == "error" and "(stale)" in str(by_id["ship-3"].content)
    assert "arguments differ" not in str(by_id["ship-3"].content)
    assert by_id["ship-4"].status == "success"


def test_siblings_of_a_stale_call_in_one_message_never_run_from_its_hand_over() -> None:
    """Two calls of one message on the same fact: both stale, neither runs."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        shop.move("Munich")
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}),
                   ("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield AIMessage("done")

    out = _react([shop.get_order, shop.safe_ship()], turns()).invoke(
        {"messages": [HumanMessage("ship")]})
    assert shop.shipped == [] and [m.status for m in _tool_msgs(out)][1:] == ["error",
                                                                               "error"]


def test_a_read_in_the_same_message_never_counts_for_the_call() -> None:
    """[get_order, ship] in one message: the sibling read happens first but the model made
    the call from the earlier read (Berlin); the order is Munich now: refused as stale."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        shop.move("Munich")
        yield _msg(("get_order", {"order_id": 42}),
                   ("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)
        yield AIMessage("done")

    out = _react([shop.get_order, shop.safe_ship()], turns()).invoke(
        {"messages": [HumanMessage("ship")]})
    by_id = {m.tool_call_id: m for m in _tool_msgs(out)}
    assert "Munich" in str(by_id["get_order-2"].content)
    assert by_id["ship-3"].status == "error" and "(stale)" in str(by_id["ship-3"].content)
    assert shop.shipped == ["Munich"]


def test_prebuilt_react_agent_with_a_sibling_read() -> None:
    """LangGraph's own ``create_react_agent`` (tool calls as parallel tasks): the sibling
    read does not authorize the stale call; the replan ships."""
    import warnings

    from langgraph.prebuilt import create_react_agent

    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        shop.move("Munich")
        yield _msg(("get_order", {"order_id": 42}),
                   ("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)
        yield AIMessage("done")

    with warnings.catch_warnings():  # deprecated in favour of langchain's create_agent
        warnings.simplefilter("ignore")
        app = create_react_agent(Scripted(messages=turns()),
                                 [shop.get_order, shop.safe_ship()])
    out = app.invoke({"messages": [HumanMessage("ship")]})
    assert shop.shipped == ["Munich"]
    assert [m.status for m in _tool_msgs(out)] == ["success", "success", "error", "success"]


def test_unread_fact_is_handed_over_in_the_same_message() -> None:
    """A call whose fact the model never read: refused not_read with the value; the next
    turn's call derived from it runs."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("ship", {"order_id": 42, "city": "Paris"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield AIMessage("done")

    out = _react([shop.get_order, shop.safe_ship()], turns()).invoke(
        {"messages": [HumanMessage("ship")]})
    msgs = _tool_msgs(out)
    assert msgs[0].status == "error" and "(not_read)" in str(msgs[0].content)
    assert '"Berlin"' in str(msgs[0].content) and shop.shipped == ["Berlin"]


class Room(enum.Enum):
    """Room kinds."""

    SINGLE = "single"
    DOUBLE = "double"


class Guest(BaseModel):
    """A nested argument."""

    name: str
    vip: bool = False


def test_typed_and_defaulted_arguments_are_not_blocked() -> None:
    """A calendar app (not the examples'): date, UUID, Enum, Decimal, a nested model and
    a defaulted parameter, as the model sends them (JSON), pass and reach the tool typed."""
    ws = Workspace({"calendar/*": "frontdesk"})
    ws.put("calendar/porto", {"free": ["2026-03-01"]})
    clerk = ws.agent("clerk")
    got: list[tuple[Any, ...]] = []

    @tool
    def reserve(hotel: UUID, night: date, guest: Guest, room: Room = Room.SINGLE,
                deposit: Decimal = Decimal("20.00")) -> str:
        """Reserve a room."""
        got.append((hotel, night, guest, room, deposit))
        return f"reserved {night} for {guest.name}"

    safe = fenced_tool(reserve, agent=clerk, depends_on={"calendar/porto"})
    call = {"name": "reserve", "id": "r1", "args": {
        "hotel": "12345678-1234-5678-1234-567812345678", "night": "2026-03-01",
        "guest": {"name": "Ada"}}}
    g = StateGraph(S)
    g.add_node("tools", ToolNode([safe]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    with clerk.scope("porto"):  # the read outside the graph run, in its conversation
        clerk.read("calendar/porto")
        out = g.compile().invoke({"messages": [AIMessage("", tool_calls=[call])]})
    assert out["messages"][-1].status == "success", out["messages"][-1].content
    hotel, night, guest, room, deposit = got[0]
    assert isinstance(hotel, UUID) and night == date(2026, 3, 1)
    assert isinstance(guest, Guest) and room is Room.SINGLE and deposit == Decimal("20.00")
    # a user replanner's JSON arguments reach the tool typed as well
    ws.put("calendar/porto", {"free": ["2026-03-02"]})

    def replan(st_: Stale) -> dict[str, Any]:
        return {**st_.args, "night": st_.fresh["calendar/porto"]["free"][0]}  # type: ignore[index, call-overload]

    safe2 = fenced_tool(reserve, agent=clerk, depends_on={"calendar/porto"}, replan=replan)
    with clerk.scope("porto"):
        res = safe2.invoke({**call, "type": "tool_call"})
    assert res.status == "success" and got[1][1] == date(2026, 3, 2)
    assert isinstance(got[1][2], Guest)


def test_a_basetool_subclass_runs_once_through_its_run() -> None:
    """A ``BaseTool`` subclass (own ``_run`` with ``run_manager`` and ``config``): fenced,
    it runs exactly once per authorized call, with its config."""
    from langchain_core.callbacks import CallbackManagerForToolRun
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool

    shop = Shop()
    runs: list[tuple[str, bool]] = []

    class ShipArgs(BaseModel):
        order_id: int
        city: str

    class ShipTool(BaseTool):
        name: str = "ship"
        description: str = "Ship an order."
        args_schema: type[BaseModel] = ShipArgs

        def _run(self, order_id: int, city: str, config: RunnableConfig,
                 run_manager: CallbackManagerForToolRun | None = None) -> str:
            runs.append((city, isinstance(config, dict)))
            return f"shipped {order_id} to {city}"

    safe = fenced_tool(ShipTool(), agent=shop.shipper, depends_on={ORDER})
    shop.shipper.read(ORDER)
    res = safe.invoke({"type": "tool_call", "name": "ship", "id": "s1",
                       "args": {"order_id": 42, "city": "Berlin"}})
    assert res.status == "success" and runs == [("Berlin", True)]


def test_async_graph_and_raise_mode() -> None:
    """``ainvoke`` with an ``async def`` tool; ``on_block='raise'`` raises ActionBlocked."""
    shop = Shop()

    @tool
    async def ship(order_id: int, city: str) -> str:
        """Ship."""
        await asyncio.sleep(0)
        shop.shipped.append(city)
        return city

    safe = fenced_tool(ship, agent=shop.shipper, depends_on={ORDER})
    scope = shop.shipper.scope("order-42")  # the read outside the run, in its conversation
    scope.__enter__()
    shop.shipper.read(ORDER)
    g = StateGraph(S)
    g.add_node("tools", ToolNode([safe]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    msg = _msg(("ship", {"order_id": 42, "city": "Berlin"}))
    out = asyncio.run(g.compile().ainvoke({"messages": [msg]}))
    assert out["messages"][-1].status == "success" and shop.shipped == ["Berlin"]
    shop.move("Munich")
    strict = fenced_tool(shop.ship, agent=shop.shipper, depends_on={ORDER}, on_block="raise")
    with pytest.raises(ActionBlocked):
        strict.invoke({"order_id": 42, "city": "Berlin"})
    scope.__exit__(None, None, None)


def test_async_react_graph_two_calls_per_message() -> None:
    """The order story under ``ainvoke``: calls of one message run concurrently (tasks),
    each validated on its own; the stale one hands over, the fresh one ships."""
    shop = Shop()
    shop.ws.put("order/43", {"city": "Rome"})
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), ("get_order", {"order_id": 43}), n=n)
        shop.move("Munich")
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}),
                   ("ship", {"order_id": 43, "city": "Rome"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)
        yield AIMessage("done")

    app = _react([shop.get_order, shop.safe_ship()], turns(), InMemorySaver())
    out = asyncio.run(app.ainvoke({"messages": [HumanMessage("ship")]},
                                  {"configurable": {"thread_id": "a"}}))
    assert sorted(shop.shipped) == ["Munich", "Rome"]
    assert [m.status for m in _tool_msgs(out)] == ["success", "success", "error", "success",
                                                   "success"]


def test_recording_on_without_recorder_still_records_the_fenced_tool() -> None:
    """A fenced tool built without ``recorder=`` in a run recorded by RecordingHandler:
    its gate decisions and calls are in the trace anyway."""
    from icore.integrations import RunRecorder
    from icore.integrations.langgraph import RecordingHandler

    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        shop.move("Munich")
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)
        yield AIMessage("done")

    rec = RunRecorder("r")
    _react([shop.get_order, shop.safe_ship()], turns()).invoke(
        {"messages": [HumanMessage("ship")]}, {"callbacks": [RecordingHandler(rec)]})
    ship_events = [e for e in rec.events if e.get("tool") == "ship"]
    assert [e["exitcode"] for e in ship_events if e["kind"] == "tool_output"] == [1, 0]
    assert any(e.get("gate") for e in rec.events)


# -- approvals with interrupt / Command(resume=...) and a checkpointer ------------------------

def _approval_graph(shop: Shop, turns: Iterator[AIMessage], **kw: Any) -> Any:
    return _react([shop.get_order, shop.safe_ship(**kw)], turns, InMemorySaver())


def test_approval_for_berlin_never_ships_munich_default_replan() -> None:
    """The human says yes to Berlin while the order moves to Munich: Berlin is not
    shipped (stale), the model replans, and Munich is put to the human again."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Munich"}), n=n)
        yield AIMessage("done")

    app = _approval_graph(shop, turns(), approval=True)
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    out = app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    asked = out["__interrupt__"][0].value["planfence.approval"]
    assert asked["args"] == {"order_id": 42, "city": "Berlin"} and shop.shipped == []
    shop.move("Munich")  # while the human decides
    out = app.invoke(Command(resume="yes"), cfg)
    asked2 = out["__interrupt__"][0].value["planfence.approval"]
    assert asked2["args"] == {"order_id": 42, "city": "Munich"} and shop.shipped == []
    assert asked2["basis"][0]["id"] != asked["basis"][0]["id"]
    out = app.invoke(Command(resume=True), cfg)
    assert shop.shipped == ["Munich"] and "__interrupt__" not in out


def test_approval_with_a_user_replanner_is_asked_again() -> None:
    """With a replanner the changed call runs in the resumed task: the "yes" for Berlin
    does not cover Munich; the human is asked about Munich; a "no" stops it."""
    shop = Shop()
    n = [0]

    def turns() -> Iterator[AIMessage]:
        yield _msg(("get_order", {"order_id": 42}), n=n)
        yield _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n)
        yield AIMessage("done")

    def replan(st_: Stale) -> dict[str, Any]:
        return {**st_.args, "city": st_.fresh[ORDER]["city"]}  # type: ignore[index, call-overload]

    app = _approval_graph(shop, turns(), approval=True, replan=replan)
    cfg: Any = {"configurable": {"thread_id": "t2"}}
    app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    shop.move("Munich")
    out = app.invoke(Command(resume="yes"), cfg)
    assert out["__interrupt__"][0].value["planfence.approval"]["args"]["city"] == "Munich"
    assert shop.shipped == []
    out = app.invoke(Command(resume="no"), cfg)
    msg = _tool_msgs(out)[-1]
    assert msg.status == "error" and "approval_rejected" in str(msg.content)
    assert shop.shipped == []


def test_interrupt_inside_the_tool_body_is_bound_to_the_call() -> None:
    """The issue's setup: the tool itself calls ``interrupt``. An answer given while the
    call was ship(Berlin) never lets ship(Munich) run after a replan."""
    ws = Workspace({"order/*": "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    shipper = ws.agent("shipper")
    shipped: list[str] = []

    @tool
    def ship(order_id: int, city: str) -> str:
        """Ship after a human says yes."""
        if interrupt({"question": f"ship order {order_id} to {city}?"}) != "yes":
            return "not shipped"
        shipped.append(city)
        return f"shipped to {city}"

    def replan(st_: Stale) -> dict[str, Any]:
        return {**st_.args, "city": st_.fresh[ORDER]["city"]}  # type: ignore[index, call-overload]

    safe = fenced_tool(ship, agent=shipper, depends_on={ORDER}, replan=replan)
    g = StateGraph(S)
    g.add_node("tools", ToolNode([safe]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    app = g.compile(checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t3"}}
    with shipper.scope("t3"):  # the read before the run counts in the thread's runs
        _interrupt_in_body(ws, app, cfg, shipper, shipped)


def _interrupt_in_body(ws: Workspace, app: Any, cfg: Any, shipper: Any,
                       shipped: list[str]) -> None:
    shipper.read(ORDER)
    out = app.invoke({"messages": [_msg(("ship", {"order_id": 42, "city": "Berlin"}))]}, cfg)
    assert "Berlin" in out["__interrupt__"][0].value["question"]
    ws.update(ORDER, lambda o: {"city": "Munich"})
    out = app.invoke(Command(resume="yes"), cfg)  # "yes" was for Berlin
    assert shipped == [] and "__interrupt__" in out
    assert out["__interrupt__"][0].value["planfence.approval"]["args"]["city"] == "Munich"
    out = app.invoke(Command(resume="yes"), cfg)  # yes to Munich (icore's question)
    assert shipped == [] and "Munich" in out["__interrupt__"][0].value["question"]
    out = app.invoke(Command(resume="yes"), cfg)  # and the tool's own question again
    assert shipped == ["Munich"]


# -- setup mistakes raise when the tool is wrapped ---------------------------------------------

class NotATool:
    """A class is not a tool."""


@pytest.mark.parametrize(("make", "match"), [
    (lambda shop: fenced_tool(shop.ship, depends_on={ORDER}), "needs agent="),
    (lambda shop: fenced_tool(shop.ship, fence=None, depends_on={ORDER}), "needs agent="),
    (lambda shop: fenced_tool(NotATool, agent=shop.shipper, depends_on={ORDER}), "class"),
    (lambda shop: fenced_tool(lambda **kw: kw, agent=shop.shipper, depends_on={ORDER}),
     "kwargs"),
    (lambda shop: fenced_tool(functools.partial(lambda a, b: a, 1), agent=shop.shipper,
                              depends_on={ORDER}), "partial"),
    (lambda shop: fenced_tool(shop.ship, agent=shop.shipper, depends_on=ORDER), "not a str"),
    (lambda shop: fenced_tool(shop.ship, agent=shop.shipper, depends_on={"orders/42"}),
     "no owner is declared"),
    (lambda shop: fenced_tool(shop.ship, agent="shipper", fence=shop.shipper.fence,
                              depends_on={ORDER}, roots=["abc"]), "roots="),
    (lambda shop: fenced_tool(shop.ship, agent="x", fence=shop.shipper.fence,
                              depends_on={ORDER}, approval=True), "approval=True"),
])
def test_setup_mistakes_are_typed_errors_at_wrap_time(make: Any, match: str) -> None:
    """Each mistake is an IntegrationError naming the fix, before the model sees anything."""
    with pytest.raises(IntegrationError, match=match):
        make(Shop())


def test_kwargs_tool_refused_even_as_a_langchain_tool() -> None:
    """A ``StructuredTool`` over a ``**kwargs`` function is refused too."""
    from langchain_core.tools import StructuredTool

    def anything(**kwargs: Any) -> str:
        return "x"

    t = StructuredTool.from_function(anything, name="anything", description="x")
    with pytest.raises(IntegrationError, match="kwargs"):
        fenced_tool(t, agent=Shop().shipper, depends_on={ORDER})


def test_fence_mode_roots_str_in_state_is_an_error(trip: Any) -> None:
    """A single id in the roots state key raises (no 64 one-character roots)."""
    w = fenced_tool(_book(trip), fence=trip.fence,
                    depends_on={"req/trip-17"})
    g = StateGraph(_TripS)
    g.add_node("tools", ToolNode([w]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    msg = AIMessage("", tool_calls=[{"name": "book", "args": {"destination": "Lisbon"},
                                     "id": "b1"}])
    with pytest.raises(IntegrationError, match="list of record ids"):
        g.compile().invoke({"messages": [msg], "plan_roots": trip.first_plan.id})


class _TripS(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan_roots: Any


def _book(trip: Any) -> Any:
    @tool
    def book(destination: str, nights: int = 1) -> str:
        """Book."""
        return trip.book(destination)

    return book


def test_fence_mode_default_arguments_match_the_plan(trip: Any) -> None:
    """The plan binds what the model sent; the framework fills a default: still valid."""
    w = fenced_tool(_book(trip), fence=trip.fence, depends_on={"req/trip-17"},
                    roots=lambda s, a: [trip.first_plan.id])
    res = w.invoke({"type": "tool_call", "name": "book", "id": "b",
                    "args": {"destination": "Lisbon"}})
    assert res.status == "success" and trip.booked == ["Lisbon"]
