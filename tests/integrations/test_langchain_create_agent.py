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
