"""An AG2 1.x order-shipping agent fenced by PlanFence with the high-level API.

The shipper agent looks an order up (``get_order``) and ships it (``ship``). While it
works, the sales agent changes orders. Fencing it took the lines marked ``# icore``
(recording the run for ``icore audit``: the ones marked ``# icore (recording)``):
the orders live in a :class:`~icore.workspace.Workspace` owned by ``sales``, the
shipper's reads go through its workspace handle, and ``ship`` is wrapped with
:func:`~icore.integrations.ag2.fenced_tool`. The model's own ``ship`` call is the plan:

* order 42: the model read Berlin and calls ``ship(42, "Berlin")``; sales has changed the
  order to Munich in between, so the stale call never runs; the model gets the tool's
  error with the fresh value and its next call, ``ship(42, "Munich")``, is the one replan;
  it runs.
* order 7: read Hamburg, changed to Bonn before the call (refused, Bonn handed over),
  changed again to Cologne before the replan: blocked ``second_change``, AG2's own tool
  error; nothing shipped.

The model is AG2's own scripted ``ag2.testing.TestConfig`` (no network).

Run: ``python examples/ag2_app.py [out.jsonl]``
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

from ag2 import Agent
from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResultEvent
from ag2.testing import TestClient, TestConfig

from icore.integrations import RunRecorder  # icore (recording)
from icore.integrations.ag2 import fenced_tool, record_agents  # icore
from icore.workspace import Workspace  # icore


class ScriptedWorld(TestConfig):
    """AG2's scripted model reading its turns lazily from an iterator, so the world can
    change between turns. A failed tool call is handed to the model as a result, as a
    real provider does."""

    def __init__(self, turns: Iterator[Any]) -> None:
        super().__init__(raise_tool_errors=False)
        self.turns = turns

    def create(self) -> TestClient:
        """A client whose script is the shared iterator."""
        client = TestClient(raise_tool_errors=False)
        client.events = self.turns
        return client


def _call(name: str, **args: Any) -> ToolCallEvent:
    return ToolCallEvent(name, arguments=json.dumps(args))


def script(ws: Workspace) -> Iterator[Any]:
    """The model's turns; the sales agent changes orders between them."""
    yield _call("get_order", order_id="42")
    ws.put("order/42", {"city": "Munich"}, by="sales")  # after the read, before the call
    yield _call("ship", order_id="42", city="Berlin")  # stale: refused, Munich handed over
    yield _call("ship", order_id="42", city="Munich")  # the one replan: runs
    yield _call("get_order", order_id="7")
    ws.put("order/7", {"city": "Bonn"}, by="sales")
    yield _call("ship", order_id="7", city="Hamburg")  # stale: refused, Bonn handed over
    ws.put("order/7", {"city": "Cologne"}, by="sales")  # a second change
    yield _call("ship", order_id="7", city="Bonn")  # blocked: second_change
    yield "Order 42 shipped to Munich; order 7 changed twice and was not shipped."


def main(out: str | None = None) -> dict[str, Any]:
    """Run the shipper once; print and return what happened."""
    shipped: list[tuple[str, str]] = []
    ws = Workspace({"order/*": "sales"})  # icore
    ws.put("order/42", {"city": "Berlin"}, by="sales")  # icore
    ws.put("order/7", {"city": "Hamburg"}, by="sales")  # icore
    shipper = ws.agent("shipper")  # icore
    rec = RunRecorder("ag2-orders", question="Ship orders 42 and 7")  # icore (recording)

    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up: its destination city."""
        return shipper.read(f"order/{order_id}")  # type: ignore[return-value]  # icore

    def ship(order_id: str, city: str) -> str:
        """Ship an order to a city."""
        shipped.append((order_id, city))
        return f"shipped order {order_id} to {city}"

    safe_ship = fenced_tool(ship, agent=shipper, recorder=rec,  # icore
                            depends_on=lambda a: {f"order/{a['order_id']}"})  # icore
    agent = Agent("shipper", config=ScriptedWorld(script(ws)), tools=[get_order, safe_ship])
    record_agents(rec, agent)  # icore (recording)
    try:
        reply = asyncio.run(agent.ask("Ship orders 42 and 7"))
    finally:  # the trace reaches disk also when the run stops (Ctrl-C, no human answer)
        if out:
            rec.write(out)
    results = asyncio.run(_ship_results(reply))
    summary = {
        "shipped": shipped,
        "ship_results": results,
        "final": reply.body,
        "events": rec.kinds(),
        "audited_steps": len(rec.audit().trace.steps),
    }
    print(json.dumps(summary, indent=1))
    return summary


async def _ship_results(reply: Any) -> list[str]:
    out = []
    for e in await reply.history.get_events():
        if isinstance(e, ToolErrorEvent):
            out.append(f"error: {e.error}")
        elif isinstance(e, ToolResultEvent) and e.name == "ship":
            out.append("\n".join(str(getattr(p, "content", p)) for p in e.result.parts))
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
