"""The audit tells a protected action's outcome beside its lineage verdict (issue 28).

A fenced tool that fails after the gate authorized it stays lineage-valid; raising
``NoEffect`` (it did nothing), ``icore audit`` counts it "failed after authorization" (console line,
``--json``, report index) and its card reads "authorized → executed, failed: <error>". A
human's "no" to a fenced LangGraph call (``HumanInTheLoopMiddleware``) is a blocked
protected action, and a rejected replan is counted as a replan. Real LangGraph /
LangChain runs (a scripted ``BaseChatModel``) and a real OpenAI Agents SDK run (a
scripted ``Model``), recorded and audited by the CLI.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from agents import Agent, Runner
from agents.testing import assistant_message, function_call
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.adapters import FAILED_AFTER_AUTHORIZATION, counted_as
from icore.fence import DecisionEntry, DecisionFormatError
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.langgraph import RecordingHandler
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace

from .conftest import load_example
from .test_recording_h28 import _dep, _desk
from .test_recording_truthful import Brain, Hotel, _audit, _graph


def _raising_hotel(error: str, kind: type[Exception] = NoEffect) -> Hotel:
    hotel = Hotel()

    def book_room(room_id: str, price: str) -> str:
        """Book a room at the quoted price."""
        raise kind(error)

    hotel.book_room = book_room  # type: ignore[method-assign]
    return hotel


def test_langgraph_tool_failing_after_authorization_is_counted_failed(tmp_path: Path
                                                                      ) -> None:
    """The gate authorized ``book_room`` from a current read; the tool then raised
    ``NoEffect`` (it says it did nothing). The lineage stays ``valid`` (not INVALID); the
    counts, card and index say it failed."""
    hotel = _raising_hotel("payment gateway down")
    app = _graph(hotel, Brain(brain=hotel.brain()))
    rec = RunRecorder("failed")
    out = app.invoke({"messages": [HumanMessage("Book room R101")]},  # the model reads
                     {"callbacks": [RecordingHandler(rec)]})  # it (QA qa-new14 S2)
    assert "payment gateway down" in str([m.content for m in out["messages"]
                                          if m.type == "tool"])
    path = rec.write(tmp_path / "failed.jsonl")
    code, out, run = _audit(path, "--fail-on", "invalid")
    assert code == 0  # a failed call is no stale plan: --fail-on invalid stays quiet
    assert "protected actions of failed: 1 (1 failed after authorization)" in out
    (lv,) = run["lineage"]
    assert lv["status"] == "valid" and lv["error"] == "NoEffect: payment gateway down"
    assert lv["reason"].endswith("; the tool then failed: NoEffect: payment gateway down.")
    assert run["actions"] == {"valid": 0, FAILED_AFTER_AUTHORIZATION: 1, "outcome unknown": 0,
                              "INVALID": 0, "unchecked": 0, "blocked": 0, "not issued": 0,
                              "total": 1}
    page = (tmp_path / "failed-rep" / "failed.html").read_text(encoding="utf-8")
    assert "authorized → executed, failed: NoEffect: payment gateway down" in page
    index = (tmp_path / "failed-rep" / "index.html").read_text(encoding="utf-8")
    assert "failed after authorization</th>" in index


def test_successful_and_blocked_actions_are_counted_as_before(tmp_path: Path) -> None:
    """The same graph with a tool that works: valid, no error, no failed count."""
    hotel = Hotel()
    app = _graph(hotel, Brain(brain=hotel.brain(change_to="120")))
    rec = RunRecorder("fine")
    app.invoke({"messages": [HumanMessage("Book room R101")]},
               {"callbacks": [RecordingHandler(rec)]})
    _code, out, run = _audit(rec.write(tmp_path / "fine.jsonl"))
    assert hotel.booked == ["120"]
    assert "protected actions of fine: 2 (1 valid, 1 blocked)" in out
    assert run["actions"][FAILED_AFTER_AUTHORIZATION] == 0
    assert all("error" not in lv for lv in run["lineage"])


def test_openai_agents_tool_failing_after_authorization_is_counted_failed(
        tmp_path: Path) -> None:
    """The SDK hands the model an error text (``exitcode`` 1 in the trace); the audit
    counts the call failed after authorization (the tool raised ``NoEffect``: it did
    nothing), its lineage valid."""
    _ws, desk, get_fare = _desk()

    def book(flight: str) -> str:
        """Explodes after authorization."""
        raise NoEffect("carrier down")

    agent = Agent(name="booker", tools=[get_fare, fenced_function_tool(
        book, agent=desk, depends_on=_dep)],
        model=load_example("openai_agents_app").ScriptModel(iter([
            [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
            [function_call("book", {"flight": "LH100"}, call_id="c2")],
            [assistant_message("could not book")]])))
    rec = RunRecorder("sdk-failed")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(agent, "book LH100"))
    _code, out, run = _audit(rec.write(tmp_path / "sdk.jsonl"))
    assert "1 (1 failed after authorization)" in out
    (lv,) = run["lineage"]
    # the error as the SDK handed it over (it may redact the exception's text)
    assert lv["status"] == "valid" and lv["error"]


def test_rejected_replan_is_a_blocked_action_and_a_replan(tmp_path: Path) -> None:
    """HITL approves a call the gate finds stale; the model replans; the human rejects
    the replan. Two protected actions, both blocked (the second by the human), and one
    replan counted."""
    hotel = Hotel()
    agent = create_agent(
        Brain(brain=hotel.brain(change_to="120")), [hotel.get_room, hotel.fenced()],
        name="booker", middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})],
        checkpointer=InMemorySaver())
    rec = RunRecorder("rejected-replan")
    cfg: Any = {"configurable": {"thread_id": "t"}, "callbacks": [RecordingHandler(rec)]}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), cfg)
    assert hotel.booked == []
    _code, out, run = _audit(rec.write(tmp_path / "rr.jsonl"))
    assert [lv["status"] for lv in run["lineage"]] == ["blocked", "blocked"]
    assert run["lineage"][1]["reason"].startswith("REJECTED by a human")
    assert run["summary"]["replans"] == 1
    assert "2 (2 blocked)" in out


def test_decision_error_round_trips_and_is_checked() -> None:
    """``error`` is written only when set, read back, and must be text."""
    e = DecisionEntry("authorized", "valid", "book", task="book-1", error="X: y")
    assert DecisionEntry.from_dict(e.to_dict()) == e
    assert "error" not in DecisionEntry("authorized", "valid").to_dict()
    with pytest.raises(DecisionFormatError) as info:
        DecisionEntry.from_dict({"outcome": "authorized", "reason": "valid", "error": True})
    assert info.value.fields["field"] == "decision.error"


@pytest.mark.parametrize(("status", "error", "counted"), [
    ("valid", None, "valid"), ("valid", "E", FAILED_AFTER_AUTHORIZATION),
    ("unchecked", "E", FAILED_AFTER_AUTHORIZATION), ("INVALID", "E", "INVALID"),
    ("blocked", None, "blocked")])
def test_a_stale_plan_stays_counted_invalid_when_its_tool_failed(
        status: str, error: str | None, counted: str) -> None:
    assert counted_as(status, error) == counted


def test_not_read_refusal_names_another_run_or_conversation() -> None:
    """A fact read in another conversation (scope) is not this one's read: the refusal
    says so; the docs are named in its detail (the developer's), never to the model (QA
    qa-new15a S4)."""
    ws = Workspace({"fare/*": "airline"})
    ws.put("fare/LH100", {"price": 200}, by="airline")
    desk = ws.agent("desk")
    with desk.scope("chat-1"):
        desk.read("fare/LH100")
    with desk.scope("chat-2"):
        call = desk.execute("book", lambda flight: "ok", {"flight": "LH100"},
                            depends_on=["fare/LH100"])
    assert not call.executed and call.reason == "not_read"
    assert "read in another run or conversation" in call.message
    assert "docs/" not in call.message
    assert "docs/workspace.md#runs-and-scopes" in call.detail
