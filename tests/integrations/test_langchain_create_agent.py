"""LangChain 1.x ``create_agent`` (the successor of ``create_prebuilt create_react_agent``).

A LangGraph user today builds an agent with ``langchain.agents.create_agent(model, tools,
name=...)``, often with ``HumanInTheLoopMiddleware`` for approvals. A fenced tool works
there unchanged; the recording names the agent (not its ``model`` / ``tools`` nodes), the
one replan is counted, and an approval given while the fact changed never lets the stale
call run (the gate runs when the tool runs, after the human). Real packages, a scripted
chat model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_recording_truthful import Brain, Hotel, _audit, _lines


def test_create_agent_run_is_recorded_under_its_name(tmp_path: Path) -> None:
    """``create_agent(..., name="booker")``: the stale booking is refused and handed the
    fresh price, the model's next call is the one replan; every event is the booker's
    and the recording audits clean."""
    hotel = Hotel()
    agent = create_agent(Brain(brain=hotel.brain(change_to="150")),
                         [hotel.get_room, hotel.fenced()], name="booker")
    rec = RunRecorder("create-agent", question="Book room R101")
    out = agent.invoke({"messages": [HumanMessage("Book room R101")]},
                       {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["150"]
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)
               and m.status == "error"]
    assert len(refused) == 1 and "(stale)" in str(refused[0].content)
    assert set(rec.agents) == {"user", "booker"}
    assert {x["agent"] for x in _lines(rec) if "gate" in x} == {"booker"}
    code, _, run = _audit(rec.write(tmp_path / "ca.jsonl"), "--fail-on", "hard-flags",
                          "--fail-on", "unsound", "--fail-on", "invalid")
    assert code == 0 and run["summary"]["replans"] == 1
    assert [x["status"] for x in run["lineage"]] == ["blocked", "valid"]


def test_human_in_the_loop_middleware_approval_never_runs_a_stale_call(
        tmp_path: Path) -> None:
    """``HumanInTheLoopMiddleware`` pauses before ``book_room``; facilities reprice while
    the human decides; the human approves the old call. The gate runs with the tool,
    after the answer: the approved call is refused stale, nothing is booked at the old
    price, and the model's next call books at the fresh one (asked again)."""
    hotel = Hotel()
    agent = create_agent(
        Brain(brain=hotel.brain()), [hotel.get_room, hotel.fenced()], name="booker",
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})],
        checkpointer=InMemorySaver())
    rec = RunRecorder("hitl", question="Book room R101")
    cfg: Any = {"configurable": {"thread_id": "t1"}, "callbacks": [RecordingHandler(rec)]}
    out = agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    assert "__interrupt__" in out and hotel.booked == []
    hotel.reprice("175")  # while the human decides
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    out = agent.invoke(approve, cfg)
    assert hotel.booked == []  # the approved call was stale: refused at the tool
    assert "__interrupt__" in out  # the replanned call is asked again
    out = agent.invoke(approve, cfg)
    assert hotel.booked == ["175"]
    code, _, run = _audit(rec.write(tmp_path / "hitl.jsonl"), "--fail-on", "invalid",
                          "--fail-on", "hard-flags")
    assert code == 0 and run["summary"]["replans"] == 1


def test_a_replan_with_the_same_arguments_audits_clean(tmp_path: Path) -> None:
    """A change that leaves the model's arguments as they were (another field of the
    room): the stale call is refused, the model resends the same call from the fresh
    values (its one replan), and the audit has no flag for the resend."""
    hotel = Hotel()
    brain = hotel.brain()

    def think(messages: list[Any]) -> Any:
        out = brain(messages)
        if isinstance(out, list) and out[0][0] == "book_room" and not hotel.booked and \
                "note" not in (hotel.ws.value("room/R101") or {}):
            hotel.ws.update("room/R101", lambda v: {**(v or {}), "note": "sea view"})
        return out

    # the framework agent is not the workspace agent serving the tool ("booker")
    agent = create_agent(Brain(brain=think), [hotel.get_room, hotel.fenced()],
                         name="receptionist")
    rec = RunRecorder("same-args", question="Book room R101")
    agent.invoke({"messages": [HumanMessage("Book room R101")]},
                 {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["100"]
    code, _, run = _audit(rec.write(tmp_path / "same.jsonl"), "--fail-on", "invalid",
                          "--fail-on", "unsound", "--fail-on", "hard-flags")
    assert code == 0 and run["summary"]["replans"] == 1
    assert run["summary"]["hard_flags"] == 0 and set(rec.agents) == {"user", "receptionist"}


def test_two_refused_siblings_replanned_count_two_replans(tmp_path: Path) -> None:
    """Two bookings of one room in one message, refused stale together (neither is the
    other's replan), then both replanned in the next message: replans 2."""
    hotel = Hotel()
    state = {"n": 0}

    def think(messages: list[Any]) -> Any:
        state["n"] += 1
        if state["n"] == 1:
            return [("get_room", {"room_id": "R101"})]
        if state["n"] == 2:
            hotel.reprice("120")
            return [("book_room", {"room_id": "R101", "price": "100"}),
                    ("book_room", {"room_id": "R101", "price": "100"})]
        if state["n"] == 3:
            return [("book_room", {"room_id": "R101", "price": "120"}),
                    ("book_room", {"room_id": "R101", "price": "120"})]
        return "Booked twice."

    agent = create_agent(Brain(brain=think), [hotel.get_room, hotel.fenced()], name="booker")
    rec = RunRecorder("siblings", question="Book room R101 twice")
    agent.invoke({"messages": [HumanMessage("Book room R101 twice")]},
                 {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["120", "120"]
    code, _, run = _audit(rec.write(tmp_path / "sib.jsonl"), "--fail-on", "invalid")
    assert code == 0 and run["summary"]["replans"] == 2


def test_a_handoff_names_who_was_refused_and_who_replanned(tmp_path: Path) -> None:
    """Two ``create_agent`` agents share one fenced tool: triage's call is refused stale
    and hands over; booker's call from the fresh price is the replan. The trace names
    triage for the refusal and booker for the replan and the booking (not the
    workspace agent serving the tool)."""
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph

    hotel = Hotel()
    book = hotel.fenced()

    @tool
    def transfer_to_booker() -> Command:  # type: ignore[type-arg]
        """Hand the booking over to the booker."""
        return Command(goto="booker", graph=Command.PARENT, update={"messages": []})

    def triage(messages: list[Any]) -> Any:
        last = [m for m in messages if isinstance(m, ToolMessage)]
        if not last:
            return [("get_room", {"room_id": "R101"})]
        if last[-1].name == "get_room":
            hotel.reprice("130")
            return [("book_room", {"room_id": "R101", "price": "100"})]
        return [("transfer_to_booker", {})]

    def booker(messages: list[Any]) -> Any:
        done = [m for m in messages if isinstance(m, ToolMessage) and m.name == "book_room"
                and m.status != "error"]
        if done:
            return "Booked."
        # the price the refusal handed over (triage's messages stay in triage)
        return [("book_room", {"room_id": "R101",
                               "price": (hotel.ws.value("room/R101") or {})["price"]})]

    g = StateGraph(MessagesState)
    g.add_node("triage", create_agent(Brain(brain=triage),
                                      [hotel.get_room, book, transfer_to_booker],
                                      name="triage"))
    g.add_node("booker", create_agent(Brain(brain=booker), [book], name="booker"))
    g.add_edge(START, "triage")
    rec = RunRecorder("handoff", question="Book room R101")
    g.compile().invoke({"messages": [HumanMessage("Book room R101")]},
                       {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["130"]
    lines = _lines(rec)
    refused = [x["agent"] for x in lines if x["kind"] == "tool_output"
               and str(x["content"]).startswith("BLOCKED")]
    booked = [x["agent"] for x in lines if x["kind"] == "tool_output"
              and str(x["content"]).startswith("booked")]
    replans = [x["agent"] for x in lines if x["kind"] == "plan" and x.get("replan")]
    assert refused == ["triage"] and booked == ["booker"] and replans == ["booker"]
    assert set(rec.agents) == {"user", "triage", "booker"}
    code, _, run = _audit(rec.write(tmp_path / "handoff.jsonl"), "--fail-on", "invalid")
    assert code == 0 and run["summary"]["replans"] == 1

