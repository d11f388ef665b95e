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
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    after_model,
    before_agent,
    before_model,
)
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


# ------------------------------------------------------------------ middleware nodes (D3)
@before_agent
def greet(state: Any, runtime: Any) -> None:
    return None


@before_model
def trim(state: Any, runtime: Any) -> None:
    return None


@after_model
def audit_log(state: Any, runtime: Any) -> None:
    return None


class Closing(AgentMiddleware):
    """A class middleware with an ``after_agent`` hook (its node: ``Closing.after_agent``)."""

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


@pytest.mark.parametrize("name", ["booker", None])
def test_middleware_nodes_are_steps_of_the_agent(tmp_path: Path, name: str | None) -> None:
    """Middleware hooks (``greet.before_agent``, ``trim.before_model``,
    ``audit_log.after_model``, ``Closing.after_agent``) are nodes of ``create_agent``'s
    graph, not agents: every event, the final answer and a wrong answer's blame are the
    agent's (``name=``; without it the agent ``agent``)."""
    hotel = Hotel()
    agent = create_agent(Brain(brain=hotel.brain()), [hotel.get_room, hotel.fenced()],
                         name=name, middleware=[greet, trim, audit_log, Closing()])
    rec = RunRecorder("mw", ground_truth="Booked R102")
    agent.invoke({"messages": [HumanMessage("Book room R101")]},
                 {"callbacks": [RecordingHandler(rec)]})
    who = name or "agent"
    lines = _lines(rec)
    assert {x["node"] for x in lines if "node" in x} >= {
        "greet.before_agent", "trim.before_model", "audit_log.after_model",
        "Closing.after_agent"}
    # (the fenced tool's workspace agent is "booker" too)
    assert set(rec.agents) <= {"user", who, "booker"} and who in rec.agents
    assert {x["agent"] for x in lines if "node" in x or x["kind"] == "termination"} == {who}
    _, _, run = _audit(rec.write(tmp_path / "mw.jsonl"))
    assert [(d["defect"], d["proposer"], d["responsible"]) for d in run["diagnoses"]] == [
        ("terminal", who, who)]


def _hitl(hotel: Hotel, mode: str, name: str = "booker") -> Any:
    kw: dict[str, Any] = {} if mode == "batched" else {"interrupt_mode": mode}
    try:
        mw = HumanInTheLoopMiddleware(interrupt_on={"book_room": True}, **kw)
    except TypeError:  # an older langchain: batched only
        pytest.skip(f"HumanInTheLoopMiddleware has no interrupt_mode={mode!r}")
    return create_agent(Brain(brain=hotel.brain()), [hotel.get_room, hotel.fenced()],
                        name=name, middleware=[mw], checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_hitl_pause_and_end_are_the_agents(tmp_path: Path, mode: str) -> None:
    """The HITL pause (its ``after_model`` node in batched mode, the ``tools`` node per
    call) and the end are the booker's: the trace has no middleware agent."""
    hotel = Hotel()
    agent = _hitl(hotel, mode)
    rec = RunRecorder("hitl-agents")
    cfg: Any = {"configurable": {"thread_id": mode}, "callbacks": [RecordingHandler(rec)]}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}) if mode == "batched"
                 else Command(resume={"type": "approve"}), cfg)
    assert hotel.booked == ["100"]
    lines = _lines(rec)
    assert set(rec.agents) == {"user", "booker"}
    assert [x["agent"] for x in lines if x.get("pause") or x["kind"] == "termination"] == [
        "booker", "booker"]


# ------------------------------------------------------------------ a rejected call (D5)
def _decided(hotel: Hotel, mode: str, decision: dict[str, Any]
             ) -> tuple[RunRecorder, list[ToolMessage]]:
    """Run to the HITL pause, answer with ``decision``: (the recording, the
    ``book_room`` messages the model got)."""
    agent = _hitl(hotel, mode)
    rec = RunRecorder(str(decision["type"]))
    cfg: Any = {"configurable": {"thread_id": mode}, "callbacks": [RecordingHandler(rec)]}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    out = agent.invoke(Command(resume={"decisions": [decision]}) if mode == "batched"
                       else Command(resume=decision), cfg)
    return rec, [m for m in out["messages"]
                 if isinstance(m, ToolMessage) and m.name == "book_room"]


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_hitl_reject_is_recorded_as_the_agents_refused_call(tmp_path: Path,
                                                            mode: str) -> None:
    """The human rejects ``book_room``: the tool never runs, and the trace records the
    call as refused (exit code 1) under the booker, with the middleware's message (what
    the model read) and the human's decision; the read that ran is recorded once. The
    fenced call is a blocked protected action (policy approval) in the audit, though its
    tool never ran in this run before (issue 28)."""
    hotel = Hotel()
    rec, told = _decided(hotel, mode, {"type": "reject", "message": "not today"})
    assert hotel.booked == []
    outs = [x for x in _lines(rec) if x["kind"] == "tool_output"]
    assert [(x["agent"], x["tool"], x["exitcode"]) for x in outs] == [
        ("booker", "get_room", 0), ("booker", "book_room", 1)]
    refused = outs[1]
    assert refused["content"] == told[0].content and "not today" in refused["content"]
    assert refused["decision"] == "reject" and refused["source"] == "hitl_interrupt_decision"
    assert refused["args"] == {"room_id": "R101", "price": "100"}
    code, out, run = _audit(rec.write(tmp_path / "reject.jsonl"), "--fail-on", "hard-flags",
                            "--fail-on", "unsound")
    # a human's "no" to a fenced call is a protected action that did not run (issue 28)
    assert code == 0 and [(lv["status"], lv["reason"].split(" (")[0]) for lv in
                          run["lineage"]] == [("blocked", "REJECTED by a human")]
    assert run["actions"]["blocked"] == run["actions"]["total"] == 1
    assert "1 (1 blocked)" in out


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_hitl_respond_is_recorded_as_answered_by_the_human_not_run(tmp_path: Path,
                                                                   mode: str) -> None:
    """The human answers ``book_room`` in its place (``respond``): the fenced tool never
    runs (nothing booked, no gate decision), and the trace says so: the call's line has
    ``ran: false``, the human's decision and no exit code (nothing ran), a note "book_room
    did not run: a human answered in its place" precedes it, and the report shows the
    note; the audit is clean and has no lineage for a call that never ran."""
    hotel = Hotel()
    said = {"type": "respond", "message": "I booked it by phone at 100"}
    rec, told = _decided(hotel, mode, said)
    assert hotel.booked == []
    assert [m.status for m in told] == ["success"]
    lines = _lines(rec)
    assert not [x for x in lines if "gate" in x or x.get("planfence")]
    book = [x for x in lines if x.get("tool") == "book_room"]
    assert [x["kind"] for x in book] == ["thought", "thought", "tool_output"]
    decided, note, answer = book  # the human's answer at the resume, then the call's
    assert decided["answered_by"] == "human" and decided["decision"] == "respond"
    assert note["content"].startswith("book_room did not run: a human answered in its place")
    assert answer["content"] == told[0].content == said["message"]
    assert answer["ran"] is False and "exitcode" not in answer
    assert answer["decision"] == "respond" and answer["source"] == "hitl_interrupt_decision"
    assert answer["agent"] == note["agent"] == "booker"
    assert answer["args"] == {"room_id": "R101", "price": "100"}
    code, _, run = _audit(rec.write(tmp_path / "respond.jsonl"), "--fail-on", "hard-flags",
                          "--fail-on", "unsound", "--fail-on", "invalid")
    assert code == 0 and run["lineage"] == [] and run["diagnoses"] == []
    html = (tmp_path / "respond-rep" / "respond.html").read_text(encoding="utf-8")
    assert "book_room did not run: a human answered in its place" in html


def test_hitl_approve_and_reject_record_each_call_once(tmp_path: Path) -> None:
    """Two calls in one message, one approved (runs through the fence, recorded by it),
    one rejected (recorded from the middleware's message): one line per call."""
    hotel = Hotel()
    hotel.ws.put("room/R102", {"price": "90"})
    turns = iter([[("get_room", {"room_id": "R101"}), ("get_room", {"room_id": "R102"})],
                  [("book_room", {"room_id": "R101", "price": "100"}),
                   ("book_room", {"room_id": "R102", "price": "90"})], "done"])
    agent = create_agent(
        Brain(brain=lambda _m: next(turns)), [hotel.get_room, hotel.fenced()],
        name="booker", checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})])
    rec = RunRecorder("two")
    cfg: Any = {"configurable": {"thread_id": "two"}, "callbacks": [RecordingHandler(rec)]}
    agent.invoke({"messages": [HumanMessage("Book both")]}, cfg)
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}),
                 cfg)
    assert hotel.booked == ["100"]
    books = [(x["args"]["room_id"], x["exitcode"], x.get("decision"))
             for x in _lines(rec) if x.get("tool") == "book_room"
             and x["kind"] == "tool_output"]
    assert books == [("R102", 1, "reject"), ("R101", 0, None)]


def test_call_of_an_unknown_tool_is_recorded_as_refused(tmp_path: Path) -> None:
    """The model names a tool the agent does not have: ``ToolNode`` answers with an
    error and runs nothing; the trace records that refusal under the agent, and the
    sibling call that ran once."""
    hotel = Hotel()
    turns = iter([[("get_rooom", {"room_id": "R101"}), ("get_room", {"room_id": "R101"})],
                  "R101 costs 100"])
    agent = create_agent(Brain(brain=lambda _m: next(turns)), [hotel.get_room],
                         name="booker")
    rec = RunRecorder("unknown")
    agent.invoke({"messages": [HumanMessage("Price of R101?")]},
                 {"callbacks": [RecordingHandler(rec)]})
    outs = sorted((x["agent"], x["tool"], x["exitcode"], str(x.get("answered_by")))
                  for x in _lines(rec) if x["kind"] == "tool_output")
    assert outs == [("booker", "get_room", 0, "None"), ("booker", "get_rooom", 1, "tools")]


# ------------------------------------------------------------------ a paused trace (D6)
def test_trace_written_at_an_interrupt_is_paused_not_unended(tmp_path: Path) -> None:
    """Written while the human has not answered: the run is paused (text, JSON, HTML),
    with no "ended without a terminal marker" diagnosis; the same run resumed and
    written again ends, and its JSON has no ``paused`` field."""
    hotel = Hotel()
    agent = _hitl(hotel, "batched")
    rec = RunRecorder("paused")
    cfg: Any = {"configurable": {"thread_id": "p"}, "callbacks": [RecordingHandler(rec)]}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    code, text, run = _audit(rec.write(tmp_path / "paused.jsonl"), "--fail-on", "unsound")
    s = run["summary"]
    assert code == 0 and run["diagnoses"] == [] and s["paused"] is True
    assert s["terminated"] is False and "waiting for a human" in text
    html = (tmp_path / "paused-rep" / "paused.html").read_text(encoding="utf-8")
    assert "the run is paused, waiting for a human" in html
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    code, text, run = _audit(rec.write(tmp_path / "ended.jsonl"), "--fail-on", "unsound")
    assert code == 0 and "paused" not in run["summary"] and run["summary"]["terminated"]
    assert "waiting for a human" not in text


def test_approval_true_with_a_same_args_replanner_asks_the_human_again() -> None:
    """icore's own ``approval=True`` binds the human's answer to the arguments *and* the
    versions: facilities reprice while the human decides, the replanner returns the same
    arguments from the new version, and that call is put to the human again before it
    runs (docs/integrations-langgraph.md)."""
    hotel = Hotel()
    agent = create_agent(
        Brain(brain=hotel.brain()),
        [hotel.get_room, hotel.fenced(replan=lambda stale: dict(stale.args), approval=True)],
        name="booker", checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    first = out["__interrupt__"][0].value["planfence.approval"]
    hotel.reprice("175")  # while the human decides
    out = agent.invoke(Command(resume=True), cfg)
    assert hotel.booked == []  # the "yes" covered the old version only
    again = out["__interrupt__"][0].value["planfence.approval"]
    assert again["args"] == first["args"] and again["id"] != first["id"]
    assert again["basis"] != first["basis"]
    agent.invoke(Command(resume=True), cfg)
    assert hotel.booked == ["100"]  # asked again and approved on the new version
