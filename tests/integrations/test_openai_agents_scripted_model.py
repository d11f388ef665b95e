"""The Agents SDK's own ``agents.testing.ScriptedModel`` under ``recording()`` (QA qa-fw7).

The model fills no generation or response span, so the tracing processor cannot see the
task, the model turns or the final answer (S3): the trace says so in one line naming the
fix, and the run audits as terminated once the app records its answer. A call put to the
human is attributed to the agent whose span is open, not to a made-up ``agent`` (S4).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents.testing")
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace


def _run(ran: list[str]) -> tuple[RunRecorder, Any]:
    ws = Workspace({"pay/*": "billing"})
    ws.put("pay/A1", {"paid": 80.0}, by="billing")
    desk = ws.agent("desk")

    @function_tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look a payment up."""
        return desk.read(f"pay/{order_id}")  # type: ignore[return-value]

    def refund(order_id: str, amount: float) -> str:
        """Refund part of the payment."""
        ran.append(order_id)
        return f"refunded {amount}"

    safe = fenced_function_tool(function_tool(refund, needs_approval=True), agent=desk,
                                depends_on=lambda a: {f"pay/{a['order_id']}"})
    model = ScriptedModel([
        [function_call("lookup", {"order_id": "A1"}, call_id="c1")],
        [function_call("refund", {"order_id": "A1", "amount": 10.5}, call_id="c2")],
        [assistant_message("refunded 10.50")]])
    clerk = Agent(name="clerk", instructions="Refund.", tools=[lookup, safe], model=model)
    rec = RunRecorder("scripted", question="Refund A1")

    async def main() -> Any:
        with recording(rec, exclusive=True):
            result = await Runner.run(clerk, "Refund A1")
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:
                    state.approve(item)
                result = await Runner.run(clerk, state)
        return result

    return rec, asyncio.run(main())


def test_a_model_without_span_data_is_named_and_the_answer_can_be_recorded() -> None:
    ran: list[str] = []
    rec, result = _run(ran)
    assert ran == ["A1"] and result.final_output == "refunded 10.50"
    lines = [e for e in rec.events if e.get("unseen_model")]
    assert len(lines) == 1 and "rec.finish(" in lines[0]["content"]
    assert lines[0]["agent"] == "clerk"
    assert rec.audit().terminated is False  # what the SDK's spans hold: no answer
    rec.task("Refund A1")
    rec.finish(result.last_agent.name, result.final_output)
    assert rec.audit().terminated is True


def test_the_pause_names_the_agent_asking() -> None:
    rec, _result = _run([])
    pauses = [e for e in rec.events if e.get("pause")]
    assert [p["agent"] for p in pauses] == ["clerk"]
    assert "agent" not in rec.header()["run"]["agents"]
