"""An AG2 two-agent chat whose tool is fenced by PlanFence and whose chat is audited.

A planner agent (its replies come from a scripted reply function: no model, no network)
asks an executor agent to run ``book``. ``fenced_function`` gates every call against
the plan in the chat's ``ContextVariables`` (``plan_roots``): the first call's plan is
stale, so it replans once, books the fresh destination and writes the fresh plan back
into the context; the second call meets a second change and is blocked: the planner
gets the function's error reply. ``record_agents`` records the chat through message
hooks; ``icore audit`` reads the file.

Run: ``python examples/ag2_app.py [out.jsonl]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autogen import ConversableAgent, register_function
from autogen.agentchat.group import ContextVariables

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trip import REQ, Trip

from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_function, record_agents

# a placeholder model entry: the scripted reply function answers before any model call
OFFLINE_LLM = {"config_list": [{"model": "scripted", "api_key": "offline"}]}


def _call(dest: str, n: int) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": f"call-{n}", "type": "function",
            "function": {"name": "book", "arguments": f'{{"destination": "{dest}"}}'}}]}


def build(trip: Trip, recorder: RunRecorder, ctx: ContextVariables
          ) -> tuple[ConversableAgent, ConversableAgent]:
    """The two agents, the fenced tool, the scripted replies and the hooks."""

    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    planner = ConversableAgent("planner", llm_config=OFFLINE_LLM, human_input_mode="NEVER")
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER",
                                is_termination_msg=lambda m: "TERMINATE" in str(
                                    m.get("content") or ""))
    safe_book = fenced_function(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                                replan=trip.replan, recorder=recorder,
                                replicator=trip.replicator)
    register_function(safe_book, caller=planner, executor=executor,
                      description="Book a hotel in the destination city.")
    script = trip.script(_call("Lisbon", 1), _call("Porto", 2),
                         {"content": "Booked Porto; the second booking was refused by "
                          "PlanFence. TERMINATE"})

    def scripted(recipient: Any, messages: Any = None, sender: Any = None,
                 config: Any = None) -> tuple[bool, Any]:
        return True, next(script)

    planner.register_reply([ConversableAgent, None], scripted, position=0)
    record_agents(recorder, planner, executor)
    return planner, executor


def main(out: str | None = None) -> dict[str, Any]:
    """Run the chat once; print and return what happened."""
    trip = Trip()
    rec = RunRecorder("ag2-trip", question="Book a hotel for trip 17")
    ctx = ContextVariables(data={"plan_roots": [trip.first_plan.id]})
    planner, executor = build(trip, rec, ctx)
    chat = executor.initiate_chat(planner, message="Book a hotel for trip 17", max_turns=4,
                                  silent=True)
    replies = [str(r.get("content")) for m in chat.chat_history
               for r in (m.get("tool_responses") or [])]
    if out:
        rec.write(out)
    audit = rec.audit()
    summary = {
        "booked": trip.booked,
        "tool_replies": replies,
        "plan_in_context": ctx.get("plan_roots") != [trip.first_plan.id],
        "schema": planner.llm_config["tools"][0]["function"]["parameters"],
        "events": rec.kinds(),
        "audited_steps": len(audit.trace.steps),
    }
    print(summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
