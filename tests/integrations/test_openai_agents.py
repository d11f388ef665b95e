"""The OpenAI Agents SDK drop-in: a real Agent and Runner with a custom scripted Model."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, Runner, function_tool
from agents.testing import assistant_message, function_call
from agents.tool_context import ToolContext

from icore.adapters import load_jsonl
from icore.errors import ActionBlocked, IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording

from .conftest import audit_cli, load_example

REQ = "req/trip-17"


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


def test_example_app_runs_and_audits(tmp_path: Path) -> None:
    """examples/openai_agents_app.py: replan then block; the recorded run audits."""
    out = load_example("openai_agents_app").main(str(tmp_path / "run.jsonl"))
    assert out["booked"] == ["Porto"] and out["tool_outputs"][0] == "booked Porto"
    assert "second_change" in out["tool_outputs"][1] and out["plan_in_context"]
    assert out["final"].startswith("Booked Porto")
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "openai-agents-trip" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")


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
