"""An order-shipping LangGraph app fenced with icore's high-level API (issue 28).

A sales agent owns the orders; the shipper is a ReAct graph (agent -> tools -> agent)
with LangChain's scripted chat model. The model reads order 42 (Berlin) and plans to
ship it there; before the tool runs another agent changes the order to Munich. The stale
Berlin call never runs: the model gets the fresh order as the tool error, and its one
replan ships to Munich. Order 43 changes twice (the second time while the model
replans): that call is blocked. Lines marked ``# icore`` are all it takes (the rest is
the plain app); ``RecordingHandler`` additionally records the run for ``icore audit``.

Run: ``python examples/langgraph_app.py [out.jsonl]``
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from icore.integrations import RunRecorder
from icore.integrations.langgraph import (
    RecordCheckpointSaver,
    RecordingHandler,
    fenced_tool,  # icore
)
from icore.workspace import Workspace  # icore


class State(TypedDict):
    """Graph state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model; tools are bound by the graph, turns come scripted."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


_IDS = iter(range(1, 1_000_000))


def _calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"call-{next(_IDS)}"}
                                     for n, a in calls])


class Shop:
    """The app: orders owned by sales, a shipper agent with two tools."""

    def __init__(self) -> None:
        self.ws = Workspace({"order/*": "sales"})  # icore: shared facts and their owner
        self.ws.put("order/42", {"city": "Berlin"})  # icore (was ORDERS[42] = {...})
        self.ws.put("order/43", {"city": "Rome"})  # icore
        self.shipper = self.ws.agent("shipper")  # icore
        self.shipped: list[str] = []

    def change(self, order_id: int, city: str) -> None:
        """Another agent changes an order (a compare-and-set write with retries)."""
        self.ws.update(f"order/{order_id}", lambda o: {**o, "city": city})  # icore

    def tools(self, recorder: RunRecorder | None = None) -> list[Any]:
        """``get_order`` reads through the shipper's handle; ``ship`` is fenced."""

        @tool
        def get_order(order_id: int) -> dict[str, Any]:
            """Read an order."""
            return self.shipper.read(f"order/{order_id}")  # type: ignore[return-value]  # icore

        @tool
        def ship(order_id: int, city: str) -> str:
            """Ship an order to a city."""
            self.shipped.append(f"{order_id}:{city}")
            return f"shipped order {order_id} to {city}"

        safe_ship = fenced_tool(ship, agent=self.shipper,  # icore
                                depends_on=lambda a: {f"order/{a['order_id']}"},  # icore
                                recorder=recorder)  # records its gate decisions
        return [get_order, safe_ship]

    def script(self) -> Iterator[AIMessage]:
        """The model's turns; the other agent acts between them."""
        yield _calls(("get_order", {"order_id": 42}), ("get_order", {"order_id": 43}))
        self.change(42, "Munich")  # after the plan, before the tool runs
        self.change(43, "Paris")
        yield _calls(("ship", {"order_id": 42, "city": "Berlin"}),
                     ("ship", {"order_id": 43, "city": "Rome"}))  # both stale
        self.change(43, "Milan")  # a second change while the model replans
        yield _calls(("ship", {"order_id": 42, "city": "Munich"}),
                     ("ship", {"order_id": 43, "city": "Paris"}))
        yield AIMessage("Order 42 shipped to Munich; order 43 changed again and was not "
                        "shipped.")


def build(shop: Shop, recorder: RunRecorder | None = None) -> Any:
    """The compiled ReAct graph (with icore's checkpointer: checkpoints are records)."""
    tools = shop.tools(recorder)
    llm = ScriptedChat(messages=shop.script()).bind_tools(tools)

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(State)
    g.add_node("shipper", agent)  # a node is an agent in the recording: name it so
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "shipper")
    g.add_conditional_edges("shipper", tools_condition)
    g.add_edge("tools", "shipper")
    return g.compile(checkpointer=RecordCheckpointSaver.in_memory())


def main(out: str | None = None) -> dict[str, Any]:
    """Run the graph once; print and return what happened."""
    shop = Shop()
    rec = RunRecorder("langgraph-orders", question="Ship orders 42 and 43")
    app = build(shop, rec)
    cfg: Any = {"configurable": {"thread_id": "orders"}, "callbacks": [RecordingHandler(rec)]}
    final = app.invoke({"messages": [HumanMessage("Ship orders 42 and 43")]}, cfg)
    tool_msgs = [m for m in final["messages"] if m.type == "tool" and m.name == "ship"]
    if out:
        rec.write(out)
    summary = {
        "shipped": shop.shipped,
        "ship_status": [m.status for m in tool_msgs],
        "refusals": [str(m.content).split(":")[0] for m in tool_msgs if m.status == "error"],
        "checkpoints": len(list(app.checkpointer.list(cfg))),
        "events": rec.kinds(),
        "audited_steps": len(rec.audit().trace.steps),
    }
    print(summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
