"""A LangGraph ReAct graph whose tool is fenced by PlanFence and whose run is audited.

An ordinary graph (agent -> tools -> agent, a checkpointer) with LangChain's own scripted
chat model. ``fenced_tool`` gates every ``book`` call against the plan in graph state
(``plan_roots``): the first call's plan is stale, so it replans once and books the fresh
destination, writing the fresh plan back into graph state; the second call meets a
second change and is blocked: the model gets a ``ToolMessage`` with ``status="error"``.
``RecordingHandler`` records the run; ``icore audit`` reads the file.

Run: ``python examples/langgraph_app.py [out.jsonl]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trip import REQ, Trip

from icore.integrations import RunRecorder
from icore.integrations.langgraph import (
    RecordCheckpointSaver,
    RecordingHandler,
    fenced_tool,
)


class TripState(TypedDict):
    """Graph state: the conversation and the plan's record ids."""

    messages: Annotated[list[AnyMessage], add_messages]
    plan_roots: list[str]


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model; tools are bound by the graph, turns come scripted."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _call(dest: str, n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "book", "args": {"destination": dest},
                                      "id": f"call-{n}"}])


def build(trip: Trip, recorder: RunRecorder) -> Any:
    """The compiled graph (fenced tool, scripted model, icore checkpointer)."""

    @tool
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    safe_book = fenced_tool(book, fence=trip.fence, depends_on={REQ}, roots="plan_roots",
                            replan=trip.replan, recorder=recorder,
                            replicator=trip.replicator)
    model = ScriptedChat(messages=trip.script(
        _call("Lisbon", 1), _call("Porto", 2),
        AIMessage("Booked Porto; the second booking was refused by PlanFence.")))
    llm = model.bind_tools([safe_book])

    def agent(state: TripState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(TripState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([safe_book]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=RecordCheckpointSaver.in_memory())


def main(out: str | None = None) -> dict[str, Any]:
    """Run the graph once; print and return what happened."""
    trip = Trip()
    rec = RunRecorder("langgraph-trip", question="Book a hotel for trip 17")
    app = build(trip, rec)
    cfg: Any = {"configurable": {"thread_id": "trip-17"},
                "callbacks": [RecordingHandler(rec)]}
    final = app.invoke({"messages": [HumanMessage("Book a hotel for trip 17")],
                        "plan_roots": [trip.first_plan.id]}, cfg)
    tool_msgs = [m for m in final["messages"] if m.type == "tool"]
    if out:
        rec.write(out)
    audit = rec.audit()
    summary = {
        "booked": trip.booked,
        "tool_status": [m.status for m in tool_msgs],
        "blocked_reason": tool_msgs[-1].content if tool_msgs else "",
        "plan_in_state": final["plan_roots"] != [trip.first_plan.id],
        "checkpoints": len(list(app.checkpointer.list(cfg))),
        "events": rec.kinds(),
        "audited_steps": len(audit.trace.steps),
    }
    print(summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
