"""Two approval-requiring calls in one model message, documented ToolNode graph (#28).

LangGraph re-runs the whole tools node on each resume: an approved call must run once,
its replay returns the recorded result, and each answer reaches the question it was
given for (sync and async, bare and id-bearing answers).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from icore.integrations.langgraph import fenced_tool
from icore.workspace import APPROVAL_FIELD, Workspace


class _Fake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> _Fake:
        return self


class _S(TypedDict):
    messages: Annotated[list[Any], add_messages]


def _app() -> tuple[Any, list[int]]:
    ws = Workspace({"order/*": "sales"})
    ws.put("order/1", {"c": "A"})
    ws.put("order/2", {"c": "B"})
    shipper = ws.agent("shipper")
    shipped: list[int] = []

    @tool
    def get_order(order_id: int) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    @tool
    def ship(order_id: int) -> str:
        """Ship an order."""
        shipped.append(order_id)
        return f"shipped {order_id}"

    fenced = fenced_tool(ship, agent=shipper, approval=True,
                         depends_on=lambda a: {f"order/{a['order_id']}"})
    llm = _Fake(messages=iter([
        AIMessage("", tool_calls=[{"name": "get_order", "args": {"order_id": 1}, "id": "r1"},
                                  {"name": "get_order", "args": {"order_id": 2}, "id": "r2"}]),
        AIMessage("", tool_calls=[{"name": "ship", "args": {"order_id": 1}, "id": "s1"},
                                  {"name": "ship", "args": {"order_id": 2}, "id": "s2"}]),
        AIMessage("done")]))
    g = StateGraph(_S)
    g.add_node("agent", lambda s: {"messages": [llm.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([get_order, fenced]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver()), shipped


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("mode", ["bare", "ids"])
def test_each_approved_call_runs_once(is_async: bool, mode: str) -> None:
    app, shipped = _app()
    cfg: Any = {"configurable": {"thread_id": "t"}}

    def inv(x: Any) -> Any:
        return asyncio.run(app.ainvoke(x, cfg)) if is_async else app.invoke(x, cfg)

    out = inv({"messages": [HumanMessage("ship 1 and 2")]})
    asked = []
    while out.get("__interrupt__") and len(asked) < 5:
        ints = out["__interrupt__"]
        asked.append([i.value[APPROVAL_FIELD]["args"]["order_id"] for i in ints])
        ans = ({i.id: {APPROVAL_FIELD: i.value[APPROVAL_FIELD]["id"], "approved": True}
                for i in ints} if mode == "ids" else True)
        out = inv(Command(resume=ans))
    assert shipped == [1, 2]
    assert asked == [[1], [2]]  # each question once, in the message's order
    results = {m.tool_call_id: m.content for m in out["messages"]
               if isinstance(m, ToolMessage) and m.name == "ship"}
    assert results == {"s1": "shipped 1", "s2": "shipped 2"}


def test_each_answer_reaches_its_own_question() -> None:
    app, shipped = _app()
    cfg: Any = {"configurable": {"thread_id": "t"}}
    out = app.invoke({"messages": [HumanMessage("ship 1 and 2")]}, cfg)
    answers = {1: True, 2: False}  # approve order 1, reject order 2 (bare answers)
    for _ in range(4):
        if not out.get("__interrupt__"):
            break
        (it,) = out["__interrupt__"]
        out = app.invoke(Command(resume=answers[it.value[APPROVAL_FIELD]["args"]["order_id"]]),
                         cfg)
    assert shipped == [1]
    errs = {m.tool_call_id for m in out["messages"]
            if isinstance(m, ToolMessage) and m.status == "error"}
    assert errs == {"s2"}
