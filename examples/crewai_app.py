"""A CrewAI order-shipping crew fenced by PlanFence with the high-level API.

The shipper agent looks an order up (``get_order``) and ships it (``ship``). While it
works, the sales agent changes orders. Fencing it took the lines marked ``# icore``
(recording the run for ``icore audit``: the ones marked ``# icore (recording)``): the
orders live in a :class:`~icore.workspace.Workspace` owned by ``sales``, the shipper's
reads go through its workspace handle, and ``ship`` is wrapped with
:func:`~icore.integrations.crewai.fenced_crewai_tool`. The agent's own ``ship`` call is
the plan:

* order 42: the agent read Berlin and calls ``ship(42, "Berlin")``; sales has changed the
  order to Munich in between, so the stale call never runs; the agent reads the tool's
  ``ToolFailure`` with the fresh value, and its next call, ``ship(42, "Munich")``, is the
  one replan; it runs.
* order 7: read Hamburg, changed to Bonn before the call (refused, Bonn handed over),
  changed again to Cologne before the replan: blocked ``second_change`` (CrewAI's
  ``ToolFailure``); nothing shipped.

The LLM is a scripted ``BaseLLM`` (CrewAI's custom-LLM interface: scripted ReAct steps,
no network).

Run (in an env with ``icore[crewai]``): ``python examples/crewai_app.py [out.jsonl]``
"""

from __future__ import annotations

import os

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # no network from the example
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import json
import sys
from collections.abc import Iterator
from typing import Any

from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM, llm_call_context
from crewai.tools import tool
from pydantic import PrivateAttr

from icore.integrations import RunRecorder  # icore (recording)
from icore.integrations.crewai import fenced_crewai_tool, recording  # icore
from icore.workspace import Workspace  # icore


class ScriptedLLM(BaseLLM):
    """A custom CrewAI LLM: each call returns the next scripted ReAct step and emits the
    call events a real LLM emits."""

    _turns: Iterator[str] = PrivateAttr()
    _inbox: list[str] = PrivateAttr(default_factory=list)

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
             response_model: Any = None) -> str:
        with llm_call_context():
            self._emit_call_started_event(messages=messages, tools=tools,
                                          callbacks=callbacks,
                                          available_functions=available_functions,
                                          from_task=from_task, from_agent=from_agent)
            self._inbox.extend(str(m.get("content", "")) if isinstance(m, dict) else str(m)
                               for m in (messages if isinstance(messages, list) else [messages]))
            text = next(self._turns)
            self._emit_call_completed_event(response=text, call_type=LLMCallType.LLM_CALL,
                                            from_task=from_task, from_agent=from_agent,
                                            messages=messages)
        return text

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def _act(name: str, **args: Any) -> str:
    return (f"Thought: I should use {name}.\nAction: {name}\n"
            f"Action Input: {json.dumps(args)}")


def script(ws: Workspace) -> Iterator[str]:
    """The LLM's ReAct steps; the sales agent changes orders between them."""
    yield _act("get_order", order_id="42")
    ws.put("order/42", {"city": "Munich"}, by="sales")  # after the read, before the call
    yield _act("ship", order_id="42", city="Berlin")  # stale: refused, Munich handed over
    yield _act("ship", order_id="42", city="Munich")  # the one replan: runs
    yield _act("get_order", order_id="7")
    ws.put("order/7", {"city": "Bonn"}, by="sales")
    yield _act("ship", order_id="7", city="Hamburg")  # stale: refused, Bonn handed over
    ws.put("order/7", {"city": "Cologne"}, by="sales")  # a second change
    yield _act("ship", order_id="7", city="Bonn")  # blocked: second_change
    yield ("Thought: I now know the final answer\nFinal Answer: Order 42 shipped to Munich; "
           "order 7 changed twice and was not shipped.")


def main(out: str | None = None) -> dict[str, Any]:
    """Run the crew once; print and return what happened."""
    shipped: list[tuple[str, str]] = []
    ws = Workspace({"order/*": "sales"})  # icore
    ws.put("order/42", {"city": "Berlin"}, by="sales")  # icore
    ws.put("order/7", {"city": "Hamburg"}, by="sales")  # icore
    shipper = ws.agent("shipper")  # icore
    rec = RunRecorder("crewai-orders", question="Ship orders 42 and 7")  # icore (recording)

    @tool("get_order")
    def get_order(order_id: str) -> str:
        """Look an order up: its destination city."""
        return json.dumps(shipper.read(f"order/{order_id}"))  # icore

    @tool("ship")
    def ship(order_id: str, city: str) -> str:
        """Ship an order to a city."""
        shipped.append((order_id, city))
        return f"shipped order {order_id} to {city}"

    safe_ship = fenced_crewai_tool(ship, agent=shipper, recorder=rec,  # icore
                                   depends_on=lambda a: {f"order/{a['order_id']}"})  # icore
    llm = ScriptedLLM(model="scripted")
    llm._turns = script(ws)
    agent = Agent(role="shipper", goal="ship orders", backstory="careful", llm=llm,
                  tools=[get_order, safe_ship], verbose=False, allow_delegation=False,
                  max_iter=10)
    task = Task(description="Ship orders 42 and 7", expected_output="what was shipped",
                agent=agent)
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    with recording(rec):  # icore (recording)
        result = crew.kickoff()
    if out:
        rec.write(out)
    seen = list(dict.fromkeys(  # what the agent read back from the fenced tool
        ln.strip() for m in llm._inbox for ln in m.splitlines() if "PlanFence blocked" in ln))
    summary = {
        "shipped": shipped,
        "blocked": [e["content"] for e in rec.events if e.get("blocked")],
        "observations": seen,
        "final": str(getattr(result, "raw", result)),
        "events": rec.kinds(),
        "audited_steps": len(rec.audit().trace.steps),
    }
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
