"""QA qa-new17c (a LangGraph agent behind an HTTP service): approval answers.

* #7 (S4): ``{"approved": true, "planfence.approval": null}`` approved as a bare yes and
  the call ran; an id that is no str, ``null`` included, is a rejection.
* #4 (S3): two conversations (threads) making the same call (same arguments, same fact
  versions, even the same tool-call id) were asked with one approval id, so an answer
  naming thread r1's id approved thread r4's call. The id now covers the thread and the
  model's tool-call id: another conversation's id is not taken (the call is asked
  again), and the same pending call asked again keeps its id.

Real LangGraph graphs (a chat model that picks its turn from the conversation, as a
service's model does after a restart), real ``InMemorySaver`` checkpoints.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from .test_langgraph_workspace import S, Shop, _tool_msgs

pytestmark = pytest.mark.timeout(120)


class ByConversation(GenericFakeChatModel):
    """Reads the order, then ships it; the tool-call ids are numbered per conversation
    (``call_0``, ``call_1``), as some local models do: equal in every thread."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        n_ai = sum(1 for m in messages if m.type == "ai")
        turns = [("get_order", {"order_id": 42}),
                 ("ship", {"order_id": 42, "city": "Berlin"})]
        msg = AIMessage("", tool_calls=[{"name": turns[n_ai][0], "args": turns[n_ai][1],
                                         "id": f"call_{n_ai}"}]) \
            if n_ai < len(turns) else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _app(shop: Shop) -> Any:
    tools = [shop.get_order, shop.safe_ship(approval=True)]
    llm = ByConversation(messages=iter(())).bind_tools(tools)

    def agent(state: S) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(S)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _asked(out: dict[str, Any]) -> dict[str, Any]:
    [itr] = out["__interrupt__"]
    return itr.value["planfence.approval"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("answer", [
    {"approved": True, "planfence.approval": None}, {"approved": True, "id": None}])
def test_a_null_approval_id_is_a_rejection(answer: dict[str, Any]) -> None:
    """#7: the s6 answer: the call is refused ``approval_rejected``; nothing ships."""
    shop = Shop()
    app = _app(shop)
    assert _asked(app.invoke({"messages": [HumanMessage("ship")]}, _cfg("s6")))
    out = app.invoke(Command(resume=answer), _cfg("s6"))
    assert shop.shipped == [] and "__interrupt__" not in out
    msg = _tool_msgs(out)[-1]
    assert msg.status == "error" and "approval_rejected" in str(msg.content)


def test_approval_ids_differ_per_conversation_and_another_ones_id_is_not_taken() -> None:
    """#4: r1 and r4 pend the same call (same arguments, versions and tool-call id):
    two ids. r1's id rejected on r1, then sent as a yes on r4, is asked again on r4 (with
    r4's same id); r4's own id approves it; it ships once."""
    shop = Shop()
    app = _app(shop)
    r1 = _asked(app.invoke({"messages": [HumanMessage("ship")]}, _cfg("r1")))
    r4 = _asked(app.invoke({"messages": [HumanMessage("ship")]}, _cfg("r4")))
    assert (r1["args"], r1["basis"]) == (r4["args"], r4["basis"])
    assert r1["id"] != r4["id"]
    out1 = app.invoke(Command(resume={"planfence.approval": r1["id"], "approved": False}),
                      _cfg("r1"))
    assert "approval_rejected" in str(_tool_msgs(out1)[-1].content)
    again = _asked(app.invoke(
        Command(resume={"planfence.approval": r1["id"], "approved": True}), _cfg("r4")))
    assert shop.shipped == [] and again["id"] == r4["id"]  # asked again, same request
    out4 = app.invoke(Command(resume={"planfence.approval": r4["id"], "approved": True}),
                      _cfg("r4"))
    assert shop.shipped == ["Berlin"] and "__interrupt__" not in out4


def test_the_same_pending_call_keeps_its_id_in_a_new_app() -> None:
    """The id is a function of the thread, the tool-call id and the call: a process
    that builds the app again asks the same pending call under the same id, so an answer
    in flight still matches (here: a second app over the same workspace and saver)."""
    shop = Shop()
    app = _app(shop)
    first = _asked(app.invoke({"messages": [HumanMessage("ship")]}, _cfg("k1")))
    other = _asked(_app(shop).invoke({"messages": [HumanMessage("ship")]}, _cfg("k1")))
    assert other["id"] == first["id"]
