"""A CrewAI crew whose tool is fenced by PlanFence and whose run is audited.

One agent, one task, a ``@tool`` and a scripted ``BaseLLM`` (CrewAI's custom-LLM
interface: its replies are scripted ReAct steps, no network). ``fenced_crewai_tool``
gates every ``book`` call against the plan in the crew's shared context
(``plan_roots``): the first call's plan is stale, so it replans once, books the fresh
destination and writes the fresh plan back; the second call meets a second change and
is blocked: the agent reads the tool's ``ToolFailure``. ``recording`` records the run
through CrewAI's event bus; ``icore audit`` reads the file.

Run (in an env with ``icore[crewai]``): ``python examples/crewai_app.py [out.jsonl]``
"""

from __future__ import annotations

import os

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # no network from the example
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM, llm_call_context
from crewai.tools import tool
from pydantic import PrivateAttr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trip import REQ, Trip

from icore.integrations import RunRecorder
from icore.integrations.crewai import fenced_crewai_tool, recording


class ScriptedLLM(BaseLLM):
    """A custom CrewAI LLM: each call returns the next scripted ReAct step and emits the
    call events a real LLM emits."""

    _turns: Iterator[str] = PrivateAttr()

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
             response_model: Any = None) -> str:
        with llm_call_context():
            self._emit_call_started_event(messages=messages, tools=tools,
                                          callbacks=callbacks,
                                          available_functions=available_functions,
                                          from_task=from_task, from_agent=from_agent)
            text = next(self._turns)
            self._emit_call_completed_event(response=text, call_type=LLMCallType.LLM_CALL,
                                            from_task=from_task, from_agent=from_agent,
                                            messages=messages)
        return text

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def _act(dest: str) -> str:
    return ("Thought: I should book the hotel.\nAction: book\n"
            f'Action Input: {{"destination": "{dest}"}}')


def build(trip: Trip, recorder: RunRecorder, ctx: dict[str, Any]) -> Crew:
    """The crew (fenced tool, scripted LLM)."""

    @tool("book")
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    safe_book = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                                   replan=trip.replan, recorder=recorder,
                                   replicator=trip.replicator)
    llm = ScriptedLLM(model="scripted")
    llm._turns = trip.script(_act("Lisbon"), _act("Porto"),
                             "Thought: I now know the final answer\nFinal Answer: Booked "
                             "Porto; the second booking was refused by PlanFence.")
    agent = Agent(role="travel agent", goal="book hotels", backstory="careful",
                  tools=[safe_book], llm=llm, verbose=False, allow_delegation=False,
                  max_iter=5)
    task = Task(description="Book a hotel for trip 17", expected_output="a booking",
                agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def main(out: str | None = None) -> dict[str, Any]:
    """Run the crew once; print and return what happened."""
    trip = Trip()
    rec = RunRecorder("crewai-trip", question="Book a hotel for trip 17")
    ctx: dict[str, Any] = {"plan_roots": [trip.first_plan.id]}
    crew = build(trip, rec, ctx)
    with recording(rec):
        result = crew.kickoff()
    if out:
        rec.write(out)
    audit = rec.audit()
    blocked = [e for e in rec.events if e.get("blocked")]
    summary = {
        "booked": trip.booked,
        "blocked_reason": blocked[0]["content"] if blocked else "",
        "plan_in_context": ctx["plan_roots"] != [trip.first_plan.id],
        "final": str(getattr(result, "raw", result)),
        "events": rec.kinds(),
        "audited_steps": len(audit.trace.steps),
    }
    print(summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
