"""The AG2 drop-in: a real two-agent ConversableAgent chat with a scripted reply."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from autogen.agentchat.group import ContextVariables

from icore.adapters import load_jsonl
from icore.errors import ActionBlocked
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_function

from .conftest import audit_cli, load_example

REQ = "req/trip-17"


def test_signature_kept_sync_and_async(trip: Any) -> None:
    """Name, docstring, signature kept; async functions and replanners work."""

    async def book(destination: str, nights: int = 1) -> str:
        """Book a hotel."""
        await asyncio.sleep(0)
        return trip.book(destination)

    async def areplan(rq: Any) -> Any:
        return trip.replan(rq)

    ctx = ContextVariables(data={"plan_roots": [trip.first_plan.id]})
    w = fenced_function(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                        replan=areplan)
    import inspect

    assert w.__name__ == "book" and w.__doc__ == "Book a hotel."
    assert list(inspect.signature(w).parameters) == ["destination", "nights"]
    assert inspect.iscoroutinefunction(w)
    trip.revise("Porto")
    assert asyncio.run(w("Lisbon")) == "booked Porto"
    assert ctx.get("plan_roots") != [trip.first_plan.id]


def test_blocked_call_raises_for_the_error_reply(trip: Any) -> None:
    """No replanner: a changed requirement blocks with a reason naming the key."""
    trip.revise("Porto")
    w = fenced_function(lambda destination: trip.book(destination), fence=trip.fence,
                        depends_on={REQ}, context={"plan_roots": [trip.first_plan.id]},
                        name="book")
    with pytest.raises(ActionBlocked, match="stale"):
        w(destination="Lisbon")
    assert trip.booked == []


def test_example_chat_runs_and_audits(tmp_path: Path) -> None:
    """examples/ag2_app.py: replan then block as the function's error reply; audits."""
    out = load_example("ag2_app").main(str(tmp_path / "run.jsonl"))
    assert out["booked"] == ["Porto"] and out["tool_replies"][0] == "booked Porto"
    assert out["tool_replies"][1].startswith("Error: PlanFence blocked book (second_change)")
    assert out["plan_in_context"]
    assert out["schema"]["properties"] == {"destination": {"type": "string",
                                                           "description": "destination"}}
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "ag2-trip" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")
    assert out["events"][0] == "task" and out["events"][-1] == "termination"
    assert RunRecorder  # the recorder type the example uses


def test_hooks_record_plain_tools_turns_and_the_answer() -> None:
    """An unfenced function and ordinary turns go through the message hooks."""
    from autogen import ConversableAgent, register_function

    from icore.integrations.ag2 import record_agents

    mod = load_example("ag2_app")

    def weather(city: str) -> str:
        """Weather in a city."""
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"sunny in {city}"

    a = ConversableAgent("asker", llm_config=mod.OFFLINE_LLM, human_input_mode="NEVER")
    b = ConversableAgent("runner", llm_config=False, human_input_mode="NEVER",
                         is_termination_msg=lambda m: "TERMINATE" in str(m.get("content")))
    register_function(weather, caller=a, executor=b, description="Weather in a city.")
    script = iter([
        {"content": None, "tool_calls": [
            {"id": "w1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Porto"}'}},
            {"id": "w2", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Atlantis"}'}}]},
        {"content": "Porto is sunny. TERMINATE"}])
    a.register_reply([ConversableAgent, None], lambda *args, **kw: (True, next(script)),
                     position=0)
    rec = RunRecorder("plain")
    record_agents(rec, a, b)
    b.initiate_chat(a, message="weather?", max_turns=3, silent=True)
    tools = [e for e in rec.events if e["kind"] == "tool_output"]
    assert [(e["args"]["city"], e["exitcode"]) for e in tools] == [("Porto", 0),
                                                                  ("Atlantis", 1)]
    assert rec.events[0]["kind"] == "task" and rec.events[0]["content"] == "weather?"
    assert rec.events[-1] == {**rec.events[-1], "kind": "termination",
                              "final_answer": "Porto is sunny."}
