"""LangGraph after QA qa-new14 S3: a checkpoint the saver cannot write is named as such.

A model sends an integer over 64 bits to a fenced tool of a checkpointed graph:
LangGraph's msgpack cannot save the step's checkpoint, so the call's reads cannot be
placed on its line and it is refused (fail closed), as before; the refusal now names the
cause it blamed on concurrency before. Real parts: a LangGraph ``StateGraph`` with
``ToolNode`` and ``InMemorySaver``, a fake chat model.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from icore.errors import IntegrationError
from icore.integrations.langgraph import fenced_tool
from icore.workspace import Workspace

pytestmark = pytest.mark.timeout(60)


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class _Model(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


def test_a_checkpoint_the_saver_cannot_write_is_named_in_the_refusal() -> None:
    ws = Workspace({"dock/*": "yard"})
    ws.put("dock/d1", {"free": 2})
    clerk = ws.agent("clerk")
    booked: list[int] = []

    @tool
    def get_dock(day: str) -> dict[str, Any]:
        """Read a dock's day."""
        return clerk.read(f"dock/{day}")  # type: ignore[no-any-return]

    @tool
    def book_dock(day: str, pallets: int = 1) -> str:
        """Book a dock."""
        booked.append(pallets)
        return f"booked {pallets}"

    llm = _Model(messages=iter([
        AIMessage("", tool_calls=[{"name": "get_dock", "args": {"day": "d1"}, "id": "r1"}]),
        AIMessage("", tool_calls=[{"name": "book_dock", "id": "b1",
                                   "args": {"day": "d1", "pallets": 2**64}}]),
        AIMessage("done")]))
    g = StateGraph(_State)
    g.add_node("clerk", lambda s: {"messages": [llm.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([get_dock, fenced_tool(
        book_dock, agent=clerk, depends_on=lambda a: {f"dock/{a['day']}"})]))
    g.add_edge(START, "clerk")
    g.add_conditional_edges("clerk", tools_condition)
    g.add_edge("tools", "clerk")
    app = g.compile(checkpointer=InMemorySaver())
    with pytest.raises(IntegrationError, match="cannot serialize") as got:
        app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert "failed to save it" in str(got.value)
    assert booked == []  # fail closed: nothing ran
