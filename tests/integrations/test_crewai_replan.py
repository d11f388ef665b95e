"""A broken ``replan=`` under CrewAI (#28; the rule: tests/integrations/test_replan_failed.py).

CrewAI hands every exception a tool raises to the model as text; the fenced CrewAI tool
delivers an application error found at a call out of ``kickoff()`` instead, as
``CrewSetupError`` (an ``IntegrationError``). So a broken replanner: the call never
runs, ``ReplanFailed`` is logged at ERROR (``icore.integrations``) and ``kickoff()``
raises ``CrewSetupError`` whose ``__cause__`` is the ``ReplanFailed`` (whose own
``__cause__`` is the replanner's exception). Runs in ``.venv-crewai``
(``make test-crewai``).
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

from icore.errors import IntegrationError  # noqa: E402
from icore.integrations.crewai import CrewSetupError, fenced_crewai_tool  # noqa: E402
from icore.workspace import ReplanFailed, Workspace  # noqa: E402

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


@pytest.mark.parametrize("policy", [None, "raise"])
@pytest.mark.parametrize(("replan", "words"), [(_boom, "raised"),
                                               (lambda st: None, "no arguments"),
                                               (lambda st: {"cty": "x"}, "do not fit")])
def test_broken_replanner_leaves_kickoff_chained_and_logged(
        replan: Any, words: str, policy: str | None,
        caplog: pytest.LogCaptureFixture) -> None:
    crew, _, shipped = _crew(replan, policy)
    with caplog.at_level(logging.ERROR, logger="icore.integrations"), \
            pytest.raises(CrewSetupError, match=words) as ei:
        crew.kickoff()
    assert shipped == [] and isinstance(ei.value, IntegrationError)
    cause = ei.value.__cause__
    assert isinstance(cause, ReplanFailed) and cause.call is not None
    if replan is _boom:
        assert isinstance(cause.__cause__, ValueError)
    assert any("fenced tool ship" in r.getMessage() for r in caplog.records)


def test_crew_action_blocked_keeps_the_gates_reason() -> None:
    """CrewAI's ``HookAborted`` sets ``reason`` to the message; ``ActionBlocked.reason``
    stays the gate's reason (the documented attribute)."""
    from icore.errors import ActionBlocked
    from icore.integrations.crewai import CrewActionBlocked

    e = CrewActionBlocked("PlanFence blocked ship (stale): ...", action="ship",
                          reason="stale", detail="order/42 changed")
    assert isinstance(e, ActionBlocked)
    assert (e.action, e.reason, e.detail) == ("ship", "stale", "order/42 changed")
