"""An OpenAI Agents SDK agent whose tool is fenced by PlanFence and whose run is audited.

A plain ``Agent`` with a ``@function_tool``, driven by a custom ``Model`` that returns
scripted tool calls (no network). ``fenced_function_tool`` gates every ``book`` call
against the plan in the run context (``TripContext.plan_roots``): the first call's plan
is stale, so it replans once, books the fresh destination and writes the fresh plan back
into the context; the second call meets a second change and is blocked: the model gets
the reason as the tool's output. ``recording`` records the run through a tracing
processor; ``icore audit`` reads the file.

Run: ``python examples/openai_agents_app.py [out.jsonl]``
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from agents.testing import assistant_message, function_call
from agents.tracing import generation_span

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trip import REQ, Trip

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording


@dataclass
class TripContext:
    """The run context: the plan's record ids."""

    plan_roots: list[str] = field(default_factory=list)


class ScriptModel(Model):
    """A custom ``Model``: each call returns the next scripted output, traced like a
    real model (a generation span with input and output)."""

    def __init__(self, turns: Iterator[list[Any]]) -> None:
        self.turns = turns

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        with generation_span(model="scripted", input=[{"role": "user", "content": input}]
                             if isinstance(input, str) else list(input)) as span:
            output = next(self.turns)
            span.span_data.output = [o.model_dump() for o in output]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def build(trip: Trip, recorder: RunRecorder) -> Agent[TripContext]:
    """The agent (fenced tool, scripted model)."""

    @function_tool
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    safe_book = fenced_function_tool(book, fence=trip.fence, depends_on={REQ},
                                     roots="plan_roots", replan=trip.replan,
                                     recorder=recorder, replicator=trip.replicator)
    model = ScriptModel(trip.script(
        [function_call("book", {"destination": "Lisbon"}, call_id="call-1")],
        [function_call("book", {"destination": "Porto"}, call_id="call-2")],
        [assistant_message("Booked Porto; the second booking was refused by PlanFence.")]))
    return Agent(name="travel_agent", instructions="Book hotels.", tools=[safe_book],
                 model=model)


async def arun(out: str | None = None) -> dict[str, Any]:
    """Run the agent once; return what happened."""
    trip = Trip()
    rec = RunRecorder("openai-agents-trip", question="Book a hotel for trip 17")
    agent = build(trip, rec)
    ctx = TripContext(plan_roots=[trip.first_plan.id])
    with recording(rec, exclusive=True):
        result = await Runner.run(agent, "Book a hotel for trip 17", context=ctx)
    outputs = [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]
    if out:
        rec.write(out)
    audit = rec.audit()
    summary = {
        "booked": trip.booked,
        "tool_outputs": outputs,
        "plan_in_context": ctx.plan_roots != [trip.first_plan.id],
        "final": result.final_output,
        "events": rec.kinds(),
        "audited_steps": len(audit.trace.steps),
    }
    print(summary)
    return summary


def main(out: str | None = None) -> dict[str, Any]:
    """Synchronous entry point."""
    return asyncio.run(arun(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
