"""An OpenAI Agents SDK order-shipping agent fenced by PlanFence with the high-level API.

The shipper agent looks an order up (``get_order``) and ships it (``ship``). While it
works, the sales agent changes orders. Fencing it took the lines marked ``# icore``
(recording the run for ``icore audit``: the ones marked ``# icore (recording)``): the
orders live in a :class:`~icore.workspace.Workspace` owned by ``sales``, the shipper's
reads go through its workspace handle, and ``ship`` is wrapped with
:func:`~icore.integrations.openai_agents.fenced_function_tool`. The model's own ``ship``
call is the plan:

* order 42: the model read Berlin and calls ``ship(42, "Berlin")``; sales has changed the
  order to Munich in between, so the stale call never runs; the model gets the fresh
  value as the tool's output and its next call, ``ship(42, "Munich")``, is the one
  replan; it runs.
* order 7: read Hamburg, changed to Bonn before the call (refused, Bonn handed over),
  changed again to Cologne before the replan: blocked ``second_change`` (the tool's
  output); nothing shipped.

The model is a custom ``Model`` returning scripted turns (no network).

Run: ``python examples/openai_agents_app.py [out.jsonl]``
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from agents.testing import assistant_message, function_call
from agents.tracing import generation_span

from icore.integrations import RunRecorder  # icore (recording)
from icore.integrations.openai_agents import fenced_function_tool, recording  # icore
from icore.workspace import Workspace  # icore


class ScriptModel(Model):
    """A custom ``Model``: each call returns the next scripted output, traced like a
    real model (a generation span with input and output)."""

    def __init__(self, turns: Iterator[list[Any]]) -> None:
        self.turns = turns

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        with generation_span(model="scripted", input=[{"role": "user", "content": input}]
                             if isinstance(input, str) else list(input)) as span:
            output = next(self.turns)
            span.span_data.output = [o.model_dump() for o in output]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def script(ws: Workspace) -> Iterator[list[Any]]:
    """The model's turns; the sales agent changes orders between them."""
    yield [function_call("get_order", {"order_id": "42"}, call_id="c1")]
    ws.put("order/42", {"city": "Munich"}, by="sales")  # after the read, before the call
    yield [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c2")]
    yield [function_call("ship", {"order_id": "42", "city": "Munich"}, call_id="c3")]
    yield [function_call("get_order", {"order_id": "7"}, call_id="c4")]
    ws.put("order/7", {"city": "Bonn"}, by="sales")
    yield [function_call("ship", {"order_id": "7", "city": "Hamburg"}, call_id="c5")]
    ws.put("order/7", {"city": "Cologne"}, by="sales")  # a second change
    yield [function_call("ship", {"order_id": "7", "city": "Bonn"}, call_id="c6")]
    yield [assistant_message("Order 42 shipped to Munich; order 7 changed twice and was "
                             "not shipped.")]


async def arun(out: str | None = None) -> dict[str, Any]:
    """Run the shipper once; return what happened."""
    shipped: list[tuple[str, str]] = []
    ws = Workspace({"order/*": "sales"})  # icore
    ws.put("order/42", {"city": "Berlin"}, by="sales")  # icore
    ws.put("order/7", {"city": "Hamburg"}, by="sales")  # icore
    shipper = ws.agent("shipper")  # icore
    rec = RunRecorder("openai-agents-orders", question="Ship orders 42 and 7")  # icore (recording)

    @function_tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up: its destination city."""
        return shipper.read(f"order/{order_id}")  # type: ignore[return-value]  # icore

    def ship(order_id: str, city: str) -> str:
        """Ship an order to a city."""
        shipped.append((order_id, city))
        return f"shipped order {order_id} to {city}"

    safe_ship = fenced_function_tool(ship, agent=shipper, recorder=rec,  # icore
                                     depends_on=lambda a: {f"order/{a['order_id']}"})  # icore
    agent = Agent(name="shipper", instructions="Ship orders.", tools=[get_order, safe_ship],
                  model=ScriptModel(script(ws)))
    with recording(rec, exclusive=True):  # icore (recording)
        result = await Runner.run(agent, "Ship orders 42 and 7")
    outputs = [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"
               and i.raw_item["call_id"] in ("c2", "c3", "c5", "c6")]
    if out:
        rec.write(out)
    summary = {
        "shipped": shipped,
        "ship_results": outputs,
        "final": result.final_output,
        "events": rec.kinds(),
        "audited_steps": len(rec.audit().trace.steps),
    }
    print(json.dumps(summary, indent=1))
    return summary


def main(out: str | None = None) -> dict[str, Any]:
    """Synchronous entry point."""
    return asyncio.run(arun(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
