"""AG2: one workspace agent serving two conversations, kept apart by ``agent.scope`` (#28).

Each ``Agent.ask`` is a conversation of its own (tests/integrations/
test_ag2_conversations.py); the explicit scope (a context variable) wins over it and
reaches the tools AG2 runs for ``Agent.ask``, so three asks are two conversations here.
Real ``ag2.Agent`` with AG2's scripted ``TestConfig`` (examples/ag2_app.py), no network.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ag2 import Agent
from ag2.events import ToolErrorEvent, ToolResultEvent

from icore.integrations.ag2 import fenced_tool

from .ag2_world import call, orders
from .conftest import load_example


def test_explicit_scopes_keep_two_conversations_apart() -> None:
    """X reads Berlin; the order moves to Munich; Y reads Munich through the same
    shipper; X's ship(Berlin) is judged by X's read: stale, nothing shipped."""
    ws, shipper, shipped = orders()

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[return-value]

    def ship(order_id: str, city: str) -> str:
        """Ship."""
        shipped.append((order_id, city))
        return "shipped"

    safe = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    world = load_example("ag2_app").ScriptedWorld

    def ask(turns: list[Any]) -> list[Any]:
        agent = Agent("shipper", config=world(iter(turns)), tools=[get_order, safe])

        async def go() -> list[Any]:
            reply = await agent.ask("go")
            return [e for e in await reply.history.get_events()
                    if isinstance(e, (ToolResultEvent, ToolErrorEvent))]

        return asyncio.run(go())

    with shipper.scope("X"):
        ask([call("get_order", order_id="42"), "ok"])
    ws.put("order/42", {"city": "Munich"}, by="sales")
    with shipper.scope("Y"):
        ask([call("get_order", order_id="42"), "ok"])
    with shipper.scope("X"):
        out = ask([call("ship", order_id="42", city="Berlin"), "ok"])
    errors = [e for e in out if isinstance(e, ToolErrorEvent)]
    assert shipped == [] and len(errors) == 1 and "(stale)" in str(errors[0].error)
