"""Fence mode (``fence=``, plans in graph state) keeps the re-run rules of agent mode (#28).

LangGraph runs a node again in the same step with the same tool-call ids: the whole
``ToolNode`` on ``Command(resume=...)``, a node's ``RetryPolicy`` after it raised. A
protected call of such a re-run is never decided or run twice, in both modes, by the
same code (``_replays.StepMemory``): it ran -> its result again; refused -> the same
refusal; its tool raised after it started (a timeout) -> refused
``earlier_outcome_unknown``. Real LangGraph graphs (``ToolNode``, ``InMemorySaver``,
``RetryPolicy``, ``interrupt``), the examples' trip world and a scripted chat model.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, RetryPolicy, interrupt

from icore.integrations import RunRecorder
from icore.integrations.langgraph import fenced_tool
from icore.workspace import Workspace

from .test_langgraph_workspace import Scripted

REQ = "req/trip-17"


class _S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan_roots: list[str]
    destination: str


def _calls(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


def _graph(tools: list[Any], retry: RetryPolicy | None = None) -> Any:
    g = StateGraph(_S)
    g.add_node("tools", ToolNode(tools), retry_policy=retry)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile(checkpointer=InMemorySaver())


def _said(out: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in out["messages"]
            if isinstance(m, ToolMessage)}


def _decisions(rec: RunRecorder, name: str) -> int:
    return sum(1 for e in rec.events if (e.get("gate") or {}).get("tool") == name)


def _replays(rec: RunRecorder, name: str) -> list[dict[str, Any]]:
    return [e for e in rec.events if e.get("replay") and e.get("tool") == name]


@tool
def ask(question: str) -> str:
    """Ask the traveler (pauses the graph)."""
    return f"traveler: {interrupt(question)}"


@pytest.mark.parametrize("world", ["fresh", "stale-replanned", "stale-refused"])
def test_a_fence_mode_call_is_not_run_again_when_its_tool_node_resumes(
        trip: Any, world: str) -> None:
    """book(Lisbon) and ask() in one message: ask pauses, the resume re-runs the node."""
    rec = RunRecorder("trip")

    @tool
    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    fenced = fenced_tool(book, fence=trip.fence, depends_on={REQ}, recorder=rec,
                         replan=trip.replan if world == "stale-replanned" else None)
    app = _graph([fenced, ask])
    if world != "fresh":
        trip.revise("Porto")  # after the plan: the plan is stale
    cfg: Any = {"configurable": {"thread_id": f"t-{world}"}}
    out = app.invoke({"messages": [_calls(("book", {"destination": "Lisbon"}, "b1"),
                                          ("ask", {"question": "ok?"}, "a1"))],
                      "plan_roots": [trip.first_plan.id]}, cfg)
    assert "__interrupt__" in out
    booked = list(trip.booked)
    out = app.invoke(Command(resume="yes"), cfg)
    assert trip.booked == booked == {"fresh": ["Lisbon"], "stale-replanned": ["Porto"],
                                     "stale-refused": []}[world]
    said = _said(out)
    assert said["a1"] == "traveler: yes"
    if world == "stale-refused":
        assert "PlanFence blocked book (stale)" in said["b1"]
    else:
        assert said["b1"] == f"booked {booked[0]}"
    if world == "stale-replanned":  # the replan's Command wrote the fresh roots, once
        assert out["plan_roots"] != [trip.first_plan.id]
    assert _decisions(rec, "book") == (2 if world == "stale-replanned" else 1), rec.events
    [again] = _replays(rec, "book")
    assert again["tool_call_id"] == "b1" and again["kind"] == "thought"
    assert sum(1 for e in rec.events if e["kind"] == "tool_output"
               and e.get("tool") == "book") == 1


def test_async_fence_mode_replays_too(trip: Any) -> None:
    @tool
    async def book(destination: str) -> str:
        """Book a hotel."""
        await asyncio.sleep(0)
        return trip.book(destination)

    app = _graph([fenced_tool(book, fence=trip.fence, depends_on={REQ}), ask])
    cfg: Any = {"configurable": {"thread_id": "t-async"}}

    async def go() -> dict[str, Any]:
        await app.ainvoke({"messages": [_calls(("book", {"destination": "Lisbon"}, "b1"),
                                               ("ask", {"question": "ok?"}, "a1"))],
                           "plan_roots": [trip.first_plan.id]}, cfg)
        return await app.ainvoke(Command(resume="yes"), cfg)

    out = asyncio.run(go())
    assert trip.booked == ["Lisbon"]
    assert _said(out)["b1"] == "booked Lisbon"


class _Timeout(TimeoutError):
    """The carrier's API timed out after taking the booking."""


def _retry() -> RetryPolicy:
    return RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False,
                       retry_on=TimeoutError)


def test_a_fence_mode_call_that_timed_out_is_not_retried_by_the_node(trip: Any) -> None:
    """A ``RetryPolicy`` re-runs the tool node: the booking is refused, not made twice."""
    rec = RunRecorder("trip")

    @tool
    def book(destination: str) -> str:
        """Book a hotel."""
        trip.book(destination)
        if len(trip.booked) == 1:
            raise _Timeout("no answer within 30 s")
        return f"booked {destination}"

    app = _graph([fenced_tool(book, fence=trip.fence, depends_on={REQ}, recorder=rec)],
                 _retry())
    out = app.invoke({"messages": [_calls(("book", {"destination": "Lisbon"}, "b1"))],
                      "plan_roots": [trip.first_plan.id]},
                     {"configurable": {"thread_id": "t-retry"}})
    assert trip.booked == ["Lisbon"]
    said = _said(out)["b1"]
    assert "PlanFence refused book (earlier_outcome_unknown)" in said
    assert "_Timeout: no answer within 30 s" in said
    assert _decisions(rec, "book") == 1
    [again] = _replays(rec, "book")
    assert "earlier_outcome_unknown" in again["content"]
    [lv] = rec.audit().lineage
    assert lv.counted == "outcome unknown"


def test_agent_mode_shares_the_rule_under_a_retry_policy() -> None:
    """The same node retry in agent mode: the same refusal (one code path)."""
    ws = Workspace({"dock/*": "dockmaster"})
    ws.put("dock/D", {"free_slots": 2})
    me = ws.agent("worker")
    made: list[str] = []

    @tool
    def look() -> str:
        """The dock."""
        return str(me.read("dock/D"))

    @tool
    def book_slot(sku: str) -> str:
        """Book a dock slot."""
        made.append(sku)
        if len(made) == 1:
            raise _Timeout("no answer within 30 s")
        return f"booked {sku}"

    tools = [look, fenced_tool(book_slot, agent=me, depends_on={"dock/D"})]
    llm = Scripted(messages=iter([_calls(("look", {}, "l1")),
                                  _calls(("book_slot", {"sku": "C"}, "b1")),
                                  AIMessage("done")]))

    def agent(state: _S) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(_S)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools), retry_policy=_retry())
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    app = g.compile(checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("book C")]},
                     {"configurable": {"thread_id": "t-agent"}})
    assert made == ["C"]
    assert "(earlier_outcome_unknown)" in _said(out)["b1"]
