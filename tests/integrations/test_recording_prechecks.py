"""Refusals before the gate counted as protected actions (QA r6-oa D7).

A fenced call refused before its gate decided (``not_read``; a human's "no" through the
framework's approval) is a blocked protected action in the in-process audit, as the
``icore mcp`` gateway's audit counts its own pre-gate refusals: the recorders write a
``blocked`` PlanFence decision for it (shared code path,
``icore.integrations._refusals.refused_call``). Real frameworks, scripted models.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from agents import Agent, Runner, function_tool
from agents.testing import assistant_message, function_call
from langchain_core.messages import AIMessage, HumanMessage

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.report import trace_lineage

from .test_openai_agents_issue28 import _model


def _actions(rec: RunRecorder) -> Counter[str]:
    """The protected actions of the recorded run per status, as ``icore audit`` counts."""
    return Counter(v.status for v in trace_lineage(rec.trace().extras.get("planfence")))


def _shipper() -> tuple[Any, list[str]]:
    from icore.workspace import Workspace
    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    return ws.agent("shipper"), []


def _tools(shipper: Any, shipped: list[str], *, approval: bool = False) -> tuple[Any, Any]:
    """The read tool and the fenced ship tool (put to the human with ``approval``)."""
    @function_tool
    def get_order(order_id: str) -> str:
        """Read an order."""
        return json.dumps(shipper.read(f"order/{order_id}"))

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append(city)
        return "shipped"

    return get_order, fenced_function_tool(
        function_tool(ship, needs_approval=approval), agent=shipper,
        depends_on=lambda a: {f"order/{a['order_id']}"})


def test_openai_agents_not_read_is_a_blocked_action() -> None:
    """A sibling read of the same model response does not authorize the call: refused
    ``not_read`` before the gate, counted as a blocked action beside the valid one."""
    shipper, shipped = _shipper()

    get_order, w = _tools(shipper, shipped)
    agent = Agent(name="a", tools=[get_order, w], model=_model([
        [function_call("get_order", {"order_id": "42"}, call_id="c1"),
         function_call("ship", {"order_id": "42", "city": "Paris"}, call_id="c2")],
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c3")],
        [assistant_message("done")]]))
    rec = RunRecorder("sibling")

    async def go() -> None:
        with recording(rec, exclusive=True):
            await Runner.run(agent, "ship")

    asyncio.run(go())
    assert shipped == ["Berlin"]
    assert _actions(rec) == Counter({"valid": 1, "blocked": 1})
    refused = [e for e in rec.events if e.get("blocked")]
    assert [(e["tool"], e["reason"], e["exitcode"]) for e in refused] == [
        ("ship", "not_read", 1)]


def test_openai_agents_a_humans_no_to_a_fenced_call_is_a_blocked_action() -> None:
    """The SDK asks the human before the gate; a rejected fenced call is a blocked
    protected action (policy ``approval``), not only a refused tool output."""
    shipper, shipped = _shipper()

    get_order, w = _tools(shipper, shipped, approval=True)
    agent = Agent(name="a", tools=[get_order, w], model=_model([
        [function_call("get_order", {"order_id": "42"}, call_id="c1")],
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c2")],
        [assistant_message("not shipped")]]))
    rec = RunRecorder("rejected")

    async def go() -> None:
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "ship")
            state = result.to_state()
            state.reject(result.interruptions[0])
            await Runner.run(agent, state)

    asyncio.run(go())
    assert shipped == []
    assert _actions(rec) == Counter({"blocked": 1})
    decisions = [x["planfence"]["decision"] for x in rec.planfence]
    assert [(d["reason"], d["policy"]) for d in decisions] == [("approval_rejected", "approval")]


def test_langgraph_not_read_is_a_blocked_action() -> None:
    """The same rule in a LangGraph run recorded by ``RecordingHandler``."""
    from icore.integrations.langgraph import RecordingHandler

    from .test_langgraph_workspace import Shop, _msg, _react

    shop = Shop()
    n = [0]
    turns = iter([_msg(("ship", {"order_id": 42, "city": "Paris"}), n=n),
                  _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n),
                  AIMessage("done")])
    rec = RunRecorder("lg-not-read")
    _react([shop.get_order, shop.safe_ship()], turns).invoke(
        {"messages": [HumanMessage("ship")]}, {"callbacks": [RecordingHandler(rec)]})
    assert shop.shipped == ["Berlin"]
    assert _actions(rec) == Counter({"valid": 1, "blocked": 1})
