"""An AG2 1.x agent whose tool is fenced by PlanFence and whose run is audited.

The agent's model is AG2's own scripted ``TestConfig`` (no network). ``fenced_tool`` gates
every ``book`` call in a tool middleware against the plan in the conversation's
``variables`` (``plan_roots``): the first call's plan is stale, so it replans once, books
the fresh destination and writes the fresh plan back; the second call meets a second
change and is blocked: the model gets the tool's error. ``record_agents`` records the run
through agent middleware; ``icore audit`` reads the file.

Run: ``python examples/ag2_app.py [out.jsonl]``
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ag2 import Agent
from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResultEvent
from ag2.testing import TestClient, TestConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trip import REQ, Trip

from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents


class ScriptedWorld(TestConfig):
    """AG2's scripted model (``ag2.testing``) reading its turns lazily from an iterator,
    so the world can change between turns (``Trip.script``). A failed tool call is
    handed to the model as a result, as a real provider does."""

    def __init__(self, turns: Iterator[Any]) -> None:
        super().__init__(raise_tool_errors=False)
        self.turns = turns

    def create(self) -> TestClient:
        """A client whose script is the shared iterator."""
        client = TestClient(raise_tool_errors=False)
        client.events = self.turns
        return client


def _result_text(e: ToolResultEvent) -> str:
    if isinstance(e, ToolErrorEvent):
        return f"{type(e.error).__name__}: {e.error}"
    return "\n".join(str(getattr(p, "content", p)) for p in e.result.parts)


async def _tool_results(reply: Any) -> list[ToolResultEvent]:
    return [e for e in await reply.history.get_events() if isinstance(e, ToolResultEvent)]


def main(out: str | None = None) -> dict[str, Any]:
    """Run the agent once; print and return what happened."""
    trip = Trip()
    rec = RunRecorder("ag2-trip", question="Book a hotel for trip 17")

    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    turns = trip.script(ToolCallEvent("book", arguments='{"destination": "Lisbon"}'),
                        ToolCallEvent("book", arguments='{"destination": "Porto"}'),
                        "Booked Porto; the second booking was refused by PlanFence.")
    safe_book = fenced_tool(book, fence=trip.fence, depends_on={REQ}, replan=trip.replan,
                            recorder=rec, replicator=trip.replicator)
    agent = Agent("executor", config=ScriptedWorld(turns), tools=[safe_book],
                  variables={"plan_roots": [trip.first_plan.id]})
    record_agents(rec, agent)
    reply = asyncio.run(agent.ask("Book a hotel for trip 17"))
    results = asyncio.run(_tool_results(reply))
    if out:
        rec.write(out)
    audit = rec.audit()
    summary = {
        "booked": trip.booked,
        "tool_results": [_result_text(e) for e in results],
        "blocked": [isinstance(e, ToolErrorEvent) for e in results],
        "final": reply.body,
        "schema": safe_book.schema.function.parameters,
        "events": rec.kinds(),
        "audited_steps": len(audit.trace.steps),
    }
    print(summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
