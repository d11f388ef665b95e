"""OpenAI Agents SDK drop-in, QA report items 4, 5, 9, 11, 12 (issue 28).

A real ``Agent`` / ``Runner`` with the examples' scripted ``Model`` (no network).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, function_tool
from agents.exceptions import AgentsException, UserError
from agents.testing import assistant_message, function_call

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace, WorkspaceError

from .conftest import load_example


def _model(turns: Any) -> Any:
    return load_example("openai_agents_app").ScriptModel(iter(turns))


def _outputs(result: Any) -> dict[str, str]:
    return {i.raw_item["call_id"]: str(i.output) for i in result.new_items
            if i.type == "tool_call_output_item"}


def _rooms() -> tuple[Any, Any, list[tuple[str, int]]]:
    ws = Workspace({"room/*": "facilities"})
    ws.put("room/R1", {"floor": 1}, by="facilities")
    ws.put("room/R2", {"floor": 2}, by="facilities")
    return ws, ws.agent("booker"), []


def _book(booked: list[tuple[str, int]]) -> Any:
    def book_room(room_id: str, floor: int) -> str:
        """Book a room."""
        booked.append((room_id, floor))
        return f"booked {room_id}@{floor}"

    return book_room


@pytest.mark.parametrize(("depends_on", "match"), [
    (lambda a: {f"rooms/{a['room_id']}"}, "did you mean 'room/R1'"),
    (lambda a: {f"room/{a['roomid']}"}, "failed on the call's arguments"),
    (lambda a: f"room/{a['room_id']}", "returned a str"),
])
def test_setup_error_at_the_first_call_leaves_runner_run_as_ours(depends_on: Any,
                                                                 match: str) -> None:
    """A setup mistake found at the call leaves ``Runner.run`` as the icore error itself
    (``except WorkspaceError`` / ``except IntegrationError`` catch it), also an
    ``AgentsException`` (so not the SDK's ``UserError``), chained to the original, same
    message and fields; nothing ran."""
    _ws, booker, booked = _rooms()
    w = fenced_function_tool(_book(booked), agent=booker, depends_on=depends_on)
    agent = Agent(name="booker", tools=[w], model=_model([
        [function_call("book_room", {"room_id": "R1", "floor": 1}, call_id="c1")],
        [assistant_message("never")]]))
    with pytest.raises(WorkspaceError, match=match) as exc:
        asyncio.run(Runner.run(agent, "book R1"))
    err = exc.value
    assert isinstance(err, IntegrationError) and isinstance(err, AgentsException)
    assert not isinstance(err, UserError)
    cause = err.__cause__
    assert isinstance(cause, WorkspaceError) and not isinstance(cause, AgentsException)
    assert (str(err), err.fields) == (str(cause), cause.fields) and booked == []


def test_schema_error_names_the_field_and_why() -> None:
    """Arguments that do not fit the schema: the model reads which field and why."""
    _ws, booker, booked = _rooms()
    w = fenced_function_tool(_book(booked), agent=booker,
                             depends_on=lambda a: {f"room/{a['room_id']}"})
    agent = Agent(name="booker", tools=[w], model=_model([
        [function_call("book_room", {"room_id": "R1"}, call_id="c1")],
        [function_call("book_room", {"room_id": "R1", "floor": "high"}, call_id="c2")],
        [function_call("book_room", {"room_id": "R1", "floor": 1}, call_id="c3")],
        [assistant_message("done")]]))
    with booker.scope("conv"):  # the read before the run counts in the run's scope
        booker.read("room/R1")
        outs = _outputs(asyncio.run(Runner.run(agent, "book R1")))
    assert "floor: Field required" in outs["c1"]
    assert "floor: Input should be a valid integer" in outs["c2"]
    assert '(got "high")' in outs["c2"] and outs["c3"] == "booked R1@1"
    assert booked == [("R1", 1)]


def test_shared_tool_in_a_handoff_names_the_calling_agent() -> None:
    """One fenced tool (one workspace agent) on ``triage`` and ``booker`` with a handoff:
    each gate event and call is recorded under the SDK agent that called the tool."""
    _ws, handle, booked = _rooms()

    @function_tool
    def get_room(room_id: str) -> str:
        """Look a room up."""
        return json.dumps(handle.read(f"room/{room_id}"))

    shared = fenced_function_tool(_book(booked), agent=handle,
                                  depends_on=lambda a: {f"room/{a['room_id']}"})
    booker = Agent(name="booker", tools=[get_room, shared], model=_model([
        [function_call("book_room", {"room_id": "R1", "floor": 1}, call_id="b1")],
        [assistant_message("booked by booker")]]))
    triage = Agent(name="triage", tools=[get_room, shared], handoffs=[booker],
                   model=_model([
                       [function_call("get_room", {"room_id": "R1"}, call_id="t1"),
                        function_call("get_room", {"room_id": "R2"}, call_id="t2")],
                       [function_call("book_room", {"room_id": "R2", "floor": 2},
                                      call_id="t3")],
                       [function_call("transfer_to_booker", {}, call_id="t4")]]))
    rec = RunRecorder("handoff")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(triage, "book R1 and R2"))
    gates = [(e["agent"], e["gate"]["reason"]) for e in rec.events if e.get("gate")]
    calls = [(e["agent"], e["args"]["room_id"]) for e in rec.events
             if e["kind"] == "tool_output" and e["tool"] == "book_room"]
    assert gates == [("triage", "valid"), ("booker", "valid")]
    assert calls == [("triage", "R2"), ("booker", "R1")] and booked == [("R2", 2), ("R1", 1)]


@pytest.mark.parametrize("task_spans", [True, False])
def test_approval_run_recorded_once_with_its_end(task_spans: bool) -> None:
    """A recorded run with the SDK's approval (tool built without ``recorder=``): no
    tool output before the gate (the pending approval's span is not a call), the task
    once, and the end recorded when the resumed run finishes (with the SDK's task spans,
    and without them: the resumed run's agent span in its already ended trace)."""
    from agents import RunConfig

    config = RunConfig(tracing={"include_task_and_turn_spans": task_spans})
    ws = Workspace({"order/*": "billing"})
    ws.put("order/7", {"amount": 40}, by="billing")
    desk = ws.agent("desk")

    @function_tool
    def get_order(order_id: str) -> str:
        """Read an order."""
        return json.dumps(desk.read(f"order/{order_id}"))

    def refund(order_id: str, amount: int) -> str:
        """Refund an amount."""
        return f"refunded {amount}"

    safe = fenced_function_tool(function_tool(refund, needs_approval=True), agent=desk,
                                depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent(name="desk", tools=[get_order, safe], model=_model([
        [function_call("get_order", {"order_id": "7"}, call_id="c1")],
        [function_call("refund", {"order_id": "7", "amount": 40}, call_id="c2")],
        [assistant_message("Refunded 40 on order 7.")]]))
    rec = RunRecorder("approval", question="Refund order 7")

    async def go() -> Any:
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "Refund order 7", run_config=config)
            assert [e["kind"] for e in rec.events].count("termination") == 0
            state = result.to_state()
            for item in result.interruptions:
                state.approve(item)
            return await Runner.run(agent, state, run_config=config)

    assert asyncio.run(go()).final_output == "Refunded 40 on order 7."
    refunds = [(e["content"], e["exitcode"]) for e in rec.events
               if e["kind"] == "tool_output" and e["tool"] == "refund"]
    assert refunds == [("refunded 40", 0)]
    assert rec.kinds().count("task") == 1 and rec.kinds().count("termination") == 1
    assert rec.events[-1]["kind"] == "termination"
    assert rec.events[-1]["final_answer"] == "Refunded 40 on order 7."


@pytest.mark.parametrize("kept", [True, False])
def test_restart_with_sqlite_approved_call(tmp_path: Path, kept: bool) -> None:
    """Phase 1 stops at the human approval and saves the ``RunState``; phase 2 is a new
    workspace on the same SQLite folder (a restart: reads are in memory). The request
    put to the human was kept in the folder (QA qa-new16 S3): the call approved in phase
    2 runs once. Its kept row lost (``kept=False``): the approved call is refused
    ``not_read`` saying so (not "which you had not read"), nothing ran; the model's new
    call is put to the human again and runs once. Recorded, the task comes first."""
    facts = {"order/*": "billing"}
    paid: list[int] = []

    def tools(ws: Any) -> Any:
        desk = ws.agent("desk")

        @function_tool
        def get_order(order_id: str) -> str:
            """Read an order."""
            return json.dumps(desk.read(f"order/{order_id}"))

        def refund(order_id: str, amount: int) -> str:
            """Refund an amount."""
            paid.append(amount)
            return f"refunded {amount}"

        return [get_order, fenced_function_tool(function_tool(refund, needs_approval=True),
                                                agent=desk, depends_on=lambda a: {
                                                    f"order/{a['order_id']}"})]

    with Workspace.sqlite(facts, tmp_path) as ws1:
        ws1.put("order/7", {"amount": 40}, by="billing")
        agent1 = Agent(name="desk", tools=tools(ws1), model=_model([
            [function_call("get_order", {"order_id": "7"}, call_id="c1")],
            [function_call("refund", {"order_id": "7", "amount": 40}, call_id="c2")]]))
        first = asyncio.run(Runner.run(agent1, "Refund order 7"))
        saved = first.to_state().to_string()
    assert [i.name for i in first.interruptions] == ["refund"]
    if not kept:
        with closing(sqlite3.connect(tmp_path / "icore-attempts.sqlite")) as con:
            con.execute("DELETE FROM pending_approvals")
            con.commit()

    with Workspace.sqlite(facts, tmp_path) as ws2:
        agent2 = Agent(name="desk", tools=tools(ws2), model=_model([
            [function_call("refund", {"order_id": "7", "amount": 40}, call_id="c3")],
            [assistant_message("done")]][kept:]))  # kept: c2 ran, the model is done

        async def resume() -> tuple[int, Any]:
            state = await RunState.from_string(agent2, saved)
            asked = 0
            while True:
                for item in state.get_interruptions():
                    state.approve(item)
                    asked += 1
                result = await Runner.run(agent2, state)
                if not result.interruptions:
                    return asked, result
                state = result.to_state()

        rec = RunRecorder("phase2")
        with recording(rec, exclusive=True):
            asked, result = asyncio.run(resume())
    assert rec.kinds()[0] == "task"  # before the refusal the resumed run's tool recorded
    outs = _outputs(result)
    if kept:
        assert outs["c2"] == "refunded 40" and paid == [40] and asked == 1, outs
        return
    assert "(not_read)" in outs["c2"] and "holds no read" in outs["c2"]
    assert "which you had not read" not in outs["c2"] and '"amount": 40' in outs["c2"]
    assert outs["c3"] == "refunded 40" and paid == [40] and asked == 2
