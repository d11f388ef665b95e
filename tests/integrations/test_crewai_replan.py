"""A broken ``replan=`` under CrewAI (#28; the rule: tests/integrations/test_replan_failed.py).

CrewAI hands every exception a tool raises to the model as text and records it as the
agent's tool failure; its own ``tool_failure_policy="raise"`` turns that into
``ToolExecutionFailedError`` out of ``kickoff``. So a broken replanner: the call never
runs, ``ReplanFailed`` is logged at ERROR (``icore.integrations``), it is the failure's
``code`` in ``agent.last_tool_failures``, and with ``tool_failure_policy="raise"`` the
crew stops with it. Runs in ``.venv-crewai`` (``make test-crewai``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
tool = pytest.importorskip("crewai.tools", reason="icore[crewai] runs in .venv-crewai").tool

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.tools.tool_failure import ToolExecutionFailedError  # noqa: E402

from icore.errors import IntegrationError  # noqa: E402
from icore.integrations.crewai import fenced_crewai_tool  # noqa: E402
from icore.workspace import Workspace  # noqa: E402

from .conftest import load_example  # noqa: E402


def _crew(replan: Any, policy: str | None) -> tuple[Crew, Agent, list[str]]:
    app = load_example("crewai_app")
    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    shipper, shipped = ws.agent("shipper"), []

    @tool("get_order")
    def get_order(order_id: str) -> str:
        """Look an order up."""
        return json.dumps(shipper.read(f"order/{order_id}"))

    @tool("ship")
    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append(city)
        return "shipped"

    with pytest.raises(IntegrationError, match="replan= must be a function"):
        fenced_crewai_tool(ship, agent=shipper, depends_on={"order/42"}, replan="yes")
    safe = fenced_crewai_tool(ship, agent=shipper, depends_on={"order/42"}, replan=replan)

    def script() -> Iterator[str]:
        yield app._act("get_order", order_id="42")
        ws.put("order/42", {"city": "Munich"}, by="sales")
        for _ in range(3):  # CrewAI may retry the failed tool: never runs
            yield app._act("ship", order_id="42", city="Berlin")
        yield "Thought: done\nFinal Answer: done"

    llm = app.ScriptedLLM(model="scripted")
    llm._turns = script()
    kw = {"tool_failure_policy": policy} if policy else {}
    agent = Agent(role="shipper", goal="ship", backstory="b", llm=llm,
                  tools=[get_order, safe], max_iter=6, **kw)
    crew = Crew(agents=[agent], tasks=[Task(description="ship 42", expected_output="x",
                                            agent=agent)])
    return crew, agent, shipped


def _boom(stale: Any) -> Any:
    raise ValueError("replanner bug")


@pytest.mark.parametrize("replan", [_boom, lambda st: None, lambda st: {"cty": "x"}])
def test_broken_replanner_is_a_recorded_tool_failure_and_logged(
        replan: Any, caplog: pytest.LogCaptureFixture) -> None:
    crew, agent, shipped = _crew(replan, None)
    with caplog.at_level(logging.ERROR, logger="icore.integrations"):
        crew.kickoff()
    assert shipped == []
    codes = [f.failure.code for f in agent.last_tool_failures]
    assert "ReplanFailed" in codes
    assert any("fenced tool ship" in r.getMessage() for r in caplog.records)


def test_with_crewais_raise_policy_the_crew_stops_with_it() -> None:
    crew, _, shipped = _crew(_boom, "raise")
    with pytest.raises(ToolExecutionFailedError, match="ReplanFailed"):
        crew.kickoff()
    assert shipped == []
