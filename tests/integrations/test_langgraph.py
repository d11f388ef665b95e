"""The LangGraph drop-in: fenced tools in a real ToolNode / ReAct graph, recorded runs.

Everything runs real LangGraph and LangChain objects with LangChain's scripted chat
model (no network).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from icore.adapters import load_jsonl
from icore.errors import ActionBlocked
from icore.integrations import RunRecorder
from icore.integrations.langgraph import fenced_tool, is_fenced, recorded_node

from .conftest import audit_cli, load_example

REQ = "req/trip-17"


class _S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan_roots: list[str]
    destination: str


def _tool_graph(t: Any) -> Any:
    g = StateGraph(_S)
    g.add_node("tools", ToolNode([t]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def _calls(*dests: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "book", "args": {"destination": d},
                                      "id": f"c{i}"} for i, d in enumerate(dests)])


def test_schema_name_description_kept(trip: Any) -> None:
    """The model sees the original name, description and parameters (no injected arg)."""

    @tool
    def book(destination: str, nights: int = 1) -> str:
        """Book a hotel."""
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    assert (w.name, w.description) == ("book", "Book a hotel.")
    assert w.tool_call_schema.model_json_schema()["properties"] == \
        book.tool_call_schema.model_json_schema()["properties"]
    assert is_fenced(w) and not is_fenced(book)

    def plain(destination: str, nights: int = 2) -> str:
        """Book from a plain function."""
        return destination

    wp = fenced_tool(plain, fence=trip.fence, depends_on={REQ})
    assert set(wp.tool_call_schema.model_json_schema()["properties"]) == {"destination",
                                                                          "nights"}


def test_tool_node_replans_into_state_then_blocks_as_error(trip: Any) -> None:
    """Stale plan: one replan, Command writes the fresh roots; a second change: error."""
    rec = RunRecorder("t")

    @tool
    def book(destination: str) -> str:
        """Book."""
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ}, replan=trip.replan,
                    recorder=rec, replicator=trip.replicator,
                    state_update=lambda g: {"destination": g.result.args["destination"]})
    app = _tool_graph(w)
    trip.revise("Porto")
    out = app.invoke({"messages": [_calls("Lisbon")], "plan_roots": [trip.first_plan.id]})
    assert trip.booked == ["Porto"] and out["destination"] == "Porto"
    assert out["plan_roots"] != [trip.first_plan.id]
    msg = out["messages"][-1]
    assert isinstance(msg, ToolMessage) and msg.status == "success"
    trip.revise("Faro")
    trip.race.append("Madrid")
    out2 = app.invoke({"messages": [_calls("Porto")], "plan_roots": out["plan_roots"]})
    err = out2["messages"][-1]
    assert isinstance(err, ToolMessage) and err.status == "error"
    assert "second_change" in str(err.content) and REQ in str(err.content)
    assert trip.booked == ["Porto"]
    assert rec.kinds().count("tool_output") == 2


def test_async_tool_under_ainvoke_and_invoke(trip: Any) -> None:
    """An ``async def`` tool runs under ``ainvoke`` (async replanner too) and ``invoke``."""

    @tool
    async def book(destination: str) -> str:
        """Book."""
        await asyncio.sleep(0)
        return trip.book(destination)

    async def areplan(rq: Any) -> Any:
        await asyncio.sleep(0)
        return trip.replan(rq)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ}, replan=areplan)
    app = _tool_graph(w)
    trip.revise("Porto")
    out = asyncio.run(app.ainvoke({"messages": [_calls("Lisbon")],
                                   "plan_roots": [trip.first_plan.id]}))
    assert trip.booked == ["Porto"] and out["messages"][-1].status == "success"
    sync = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    res = _tool_graph(sync).invoke({"messages": [_calls("Porto")],
                                    "plan_roots": out["plan_roots"]})
    assert res["messages"][-1].status == "success" and trip.booked == ["Porto", "Porto"]


def test_injected_tool_call_id_is_passed_through(trip: Any) -> None:
    """A tool that takes ``InjectedToolCallId`` still gets it."""
    seen: list[str] = []

    @tool
    def book(destination: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Book."""
        seen.append(tool_call_id)
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    out = _tool_graph(w).invoke({"messages": [_calls("Lisbon")],
                                 "plan_roots": [trip.first_plan.id]})
    assert seen == ["c0"] and out["messages"][-1].status == "success"


def test_no_plan_and_raise_mode(trip: Any) -> None:
    """No roots in state blocks (a tool error); ``on_block='raise'`` raises ActionBlocked."""

    @tool
    def book(destination: str) -> str:
        """Book."""
        return trip.book(destination)

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    out = _tool_graph(w).invoke({"messages": [_calls("Lisbon")]})
    assert out["messages"][-1].status == "error" and trip.booked == []
    assert "no plan authorizes this call yet" in str(out["messages"][-1].content)
    trip.revise("Porto")
    strict = fenced_tool(book, fence=trip.fence, depends_on={REQ}, on_block="raise")
    with pytest.raises(ActionBlocked):
        strict.invoke({"destination": "Lisbon"})
    roots_from_args = fenced_tool(book, fence=trip.fence, depends_on={REQ},
                                  roots=lambda state, args: [trip.first_plan.id])
    assert "stale" in str(roots_from_args.invoke({"destination": "Lisbon"}))


def test_recorded_node_config_async_and_command() -> None:
    """Nodes taking config, async nodes and Command returns are recorded exactly."""
    rec = RunRecorder("nodes")

    def first(state: _S, config: RunnableConfig) -> Command[Any]:
        assert config["configurable"]["thread_id"] == "x"
        return Command(update={"destination": state["destination"] + "!"}, goto="second")

    async def second(state: _S) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"plan_roots": []}

    g = StateGraph(_S)
    g.add_node("first", recorded_node(first, recorder=rec))
    g.add_node("second", recorded_node(second, recorder=rec, agent="planner"))
    g.add_edge(START, "first")
    g.add_edge("second", END)
    out = asyncio.run(g.compile().ainvoke({"destination": "Porto", "messages": []},
                                          {"configurable": {"thread_id": "x"}}))
    assert out["destination"] == "Porto!"
    turns = [e for e in rec.events if e["kind"] == "output"]
    assert turns[0]["read"] == ["destination"] and turns[0]["wrote"] == ["destination"]
    assert turns[1]["agent"] == "planner" and turns[1]["wrote"] == ["plan_roots"]
    assert {"kind": "instruction", "to": "second"}.items() <= rec.events[1].items()


def test_example_app_runs_and_audits(tmp_path: Path) -> None:
    """examples/langgraph_app.py: stale never runs, one replan ships, a second change
    blocks; the recorded run audits."""
    out = load_example("langgraph_app").main(str(tmp_path / "run.jsonl"))
    assert out["shipped"] == ["42:Munich"]
    assert out["ship_status"] == ["error", "error", "success", "error"]
    assert [r.split("(")[1].rstrip(")") for r in out["refusals"]] == [
        "stale", "stale", "second_change"]
    assert out["checkpoints"] > 0 and "thought" in out["events"]
    trace = load_jsonl(tmp_path / "run.jsonl")
    assert len(trace.steps) == out["audited_steps"]
    assert "langgraph-orders" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")


def test_react_graph_under_ainvoke_with_the_record_checkpointer() -> None:
    """The same ReAct graph run async: async checkpointer, async fenced tool path."""
    mod = load_example("langgraph_app")
    shop = mod.Shop()
    rec = RunRecorder("async")
    app = mod.build(shop, rec)
    cfg: Any = {"configurable": {"thread_id": "a"}, "callbacks": [mod.RecordingHandler(rec)]}
    final = asyncio.run(app.ainvoke({"messages": [mod.HumanMessage("ship")]}, cfg))
    assert shop.shipped == ["42:Munich"]
    assert [m.status for m in final["messages"] if m.type == "tool" and m.name == "ship"] \
        == ["error", "error", "success", "error"]
    tup = asyncio.run(app.checkpointer.aget_tuple(cfg))
    assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == \
        len(final["messages"])


def test_content_and_artifact_tool_keeps_its_artifact(trip: Any) -> None:
    """A ``response_format='content_and_artifact'`` tool's ToolMessage keeps the artifact."""

    @tool(response_format="content_and_artifact")
    def book(destination: str) -> tuple[str, dict[str, str]]:
        """Book."""
        return trip.book(destination), {"city": destination}

    w = fenced_tool(book, fence=trip.fence, depends_on={REQ})
    out = _tool_graph(w).invoke({"messages": [_calls("Lisbon")],
                                 "plan_roots": [trip.first_plan.id]})
    msg = out["messages"][-1]
    assert msg.status == "success" and msg.artifact == {"city": "Lisbon"}


def test_handler_records_plain_tools_and_errors() -> None:
    """Unfenced tools: the callback handler records arguments, results and errors."""
    from icore.integrations.langgraph import RecordingHandler

    @tool
    def weather(city: str) -> str:
        """Weather."""
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"sunny in {city}"

    g = StateGraph(_S)
    g.add_node("tools", ToolNode([weather], handle_tool_errors=True))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    rec = RunRecorder("plain")
    msg = AIMessage("", tool_calls=[
        {"name": "weather", "args": {"city": "Porto"}, "id": "w1"},
        {"name": "weather", "args": {"city": "Atlantis"}, "id": "w2"}])
    g.compile().invoke({"messages": [msg]}, {"callbacks": [RecordingHandler(rec)]})
    tools = sorted((e for e in rec.events if e["kind"] == "tool_output"),
                   key=lambda e: e["args"]["city"])
    assert [(e["args"]["city"], e["exitcode"]) for e in tools] == [("Atlantis", 1),
                                                                  ("Porto", 0)]
    assert tools[1]["content"] == "sunny in Porto" and tools[0]["agent"] == "tools"
