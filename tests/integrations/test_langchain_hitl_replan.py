"""``HumanInTheLoopMiddleware`` with a fenced tool's ``replan=`` (issue 28 item 5).

The user's app: ``create_agent`` with LangChain's human-in-the-loop middleware on
``book_room`` and a fenced ``book_room`` with a replanner. The human approves booking at
100; facilities reprice to 175 while the human decides. Before the fix the replanner's
call (175) ran inside the tool, after the middleware: the human's "yes" to 100 booked
175. Now the approval covers only what the human saw: the replanned call is refused
``approval_changed`` (nothing runs), the model calls again, the middleware asks the
human again, and the approved fresh call runs. The replan is counted once; the trace
shows the pauses, the human's decisions and the replan. Real langchain / langgraph, a
scripted chat model, both interrupt modes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler
from icore.workspace import Stale

from .test_recording_truthful import Brain, Hotel, _audit, _lines, _tool_results

_MARK = "the fresh call "


def _brain(hotel: Hotel) -> Any:
    """Read, book at the read price; on ``approval_changed`` book the fresh call named."""
    plain = hotel.brain()

    def think(messages: list[BaseMessage]) -> Any:
        res = _tool_results(messages)
        if res and res[-1].status == "error" and _MARK in str(res[-1].content):
            text = str(res[-1].content)
            fresh = json.JSONDecoder().raw_decode(text[text.index(_MARK) + len(_MARK):])[0]
            return [("book_room", fresh)]
        return plain(messages)

    return think


def _approve(out: dict[str, Any], mode: str) -> Command:  # type: ignore[type-arg]
    if mode == "batched":
        return Command(resume={"decisions": [{"type": "approve"}]})
    return Command(resume={i.id: {"type": "approve"} for i in out["__interrupt__"]})


def _asked(hotel: Hotel, book: Any) -> tuple[Any, Any]:
    """A ``create_agent`` reviewing ``book`` with the middleware, run to its question."""
    agent = create_agent(
        Brain(brain=_brain(hotel)), [hotel.get_room, book], name="booker",
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})])
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    return agent, cfg


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_a_replan_after_the_middlewares_approval_is_put_to_the_human_again(
        tmp_path: Path, mode: str, use_async: bool) -> None:
    hotel = Hotel()
    replanned: list[dict[str, Any]] = []

    def replan(stale: Stale) -> dict[str, Any]:
        replanned.append(dict(stale.fresh))
        return {**stale.args, "price": stale.fresh["room/R101"]["price"]}

    agent = create_agent(
        Brain(brain=_brain(hotel)), [hotel.get_room, hotel.fenced(replan=replan)],
        name="booker", checkpointer=InMemorySaver(), middleware=[HumanInTheLoopMiddleware(
            interrupt_on={"book_room": True}, interrupt_mode=mode)])
    rec = RunRecorder("hitl-replan", question="Book room R101")
    cfg: Any = {"configurable": {"thread_id": "t1"}, "callbacks": [RecordingHandler(rec)]}

    def invoke(arg: Any) -> Any:
        return asyncio.run(agent.ainvoke(arg, cfg)) if use_async else agent.invoke(arg, cfg)

    out = invoke({"messages": [HumanMessage("Book room R101")]})
    assert "__interrupt__" in out and hotel.booked == []
    hotel.reprice("175")  # while the human decides on booking at 100
    out = invoke(_approve(out, mode))
    assert hotel.booked == []  # the "yes" to 100 never books 175
    assert len(replanned) == 1  # the replanner ran once: the fence's one replan
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)
               and m.status == "error"]
    assert len(refused) == 1 and "(approval_changed)" in str(refused[0].content)
    assert '"price": "175"' in str(refused[0].content)  # the model is told the fresh call
    assert "__interrupt__" in out  # the model's fresh call: the middleware asks again
    asked = json.dumps([i.value for i in out["__interrupt__"]], default=str)
    assert "175" in asked and "100" not in asked
    out = invoke(_approve(out, mode))
    assert hotel.booked == ["175"]  # approved by the human for exactly this call

    lines = _lines(rec)
    said = [x for x in lines if x.get("answered_by") == "human"]
    assert [(x["decision"], x["tool"], x["args"]["price"]) for x in said] == [
        ("approve", "book_room", "100"), ("approve", "book_room", "175")]
    blocked = [x for x in lines if x.get("blocked")]
    assert len(blocked) == 1 and "approval_changed" in blocked[0]["content"]
    code, _, run = _audit(rec.write(tmp_path / "hitl.jsonl"), "--fail-on", "invalid",
                          "--fail-on", "hard-flags")
    assert code == 0 and run["summary"]["replans"] == 1
    assert run["diagnoses"] == []  # the gate's one replan: counted, not a defect
    assert [x["status"] for x in run["lineage"]] == ["blocked", "valid"]


def test_the_middlewares_approval_with_unchanged_facts_runs_the_call_once() -> None:
    """Nothing changed while the human decided: the approved call runs as it was."""
    hotel = Hotel()
    agent = create_agent(
        Brain(brain=_brain(hotel)),
        [hotel.get_room, hotel.fenced(replan=lambda s: dict(s.args))], name="booker",
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})])
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    out = agent.invoke(_approve(out, "batched"), cfg)
    assert hotel.booked == ["100"] and "__interrupt__" not in out


def test_the_humans_edit_runs_as_edited_and_a_replan_of_it_is_asked_again() -> None:
    """The human edits the price to 120 (the middleware substitutes it); facilities
    reprice meanwhile; the replanner's call is not the edited one: refused, asked again."""
    hotel = Hotel()
    agent = create_agent(
        Brain(brain=_brain(hotel)),
        [hotel.get_room, hotel.fenced(replan=lambda s: {**s.args, "price": "175"})],
        name="booker", checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_room": True})])
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    hotel.reprice("175")
    edit = {"type": "edit", "edited_action": {"name": "book_room",
                                              "args": {"room_id": "R101", "price": "120"}}}
    out = agent.invoke(Command(resume={"decisions": [edit]}), cfg)
    assert hotel.booked == [] and "__interrupt__" in out


def test_a_same_arguments_replan_after_the_middlewares_approval_is_asked_again() -> None:
    """The replanner returns the approved arguments, now derived from the newer price:
    the human said yes on the old values, so it is refused and asked again; the
    ``depends_on`` function runs once per call."""
    hotel = Hotel()
    asked: list[dict[str, Any]] = []

    def scope(a: dict[str, Any]) -> set[str]:
        asked.append(dict(a))
        return {f"room/{a['room_id']}"}

    from icore.integrations.langgraph import fenced_tool
    book = fenced_tool(hotel.book_room, agent=hotel.booker, depends_on=scope,
                       replan=lambda s: dict(s.args))
    agent, cfg = _asked(hotel, book)
    hotel.reprice("175")
    asked.clear()
    out = agent.invoke(_approve({}, "batched"), cfg)
    assert hotel.booked == []
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)
               and m.status == "error"]
    assert "newer versions of room/R101" in str(refused[-1].content)
    assert len(asked) == 1  # once per call (the replan's arguments are the same)


def test_a_broken_depends_on_under_the_middleware_is_the_guards_typed_error() -> None:
    """A ``depends_on`` function that fails on the arguments (``a['dya']``) raises the
    same typed ``WorkspaceError`` naming the fix under the middleware's review as
    without it (it escaped as the user's raw ``KeyError``); nothing is booked."""
    from icore.integrations.langgraph import fenced_tool
    from icore.workspace import WorkspaceError

    hotel = Hotel()
    book = fenced_tool(hotel.book_room, agent=hotel.booker,
                       depends_on=lambda a: {f"room/{a['rom_id']}"})
    agent, cfg = _asked(hotel, book)
    with pytest.raises(WorkspaceError, match="rom_id"):
        agent.invoke(_approve({}, "batched"), cfg)
    assert hotel.booked == []
