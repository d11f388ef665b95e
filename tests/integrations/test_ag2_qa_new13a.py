"""QA qa-new13a (a new AG2 user): the model told an outcome is unknown, Ctrl-C at an
approval, a tool name that does not exist, non-finite arguments.

Real AG2 1.x agents driven by its scripted model (``ag2.testing.TestConfig``), recorded
by ``record_agents``; a real subprocess for Ctrl-C.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ag2 import Agent
from ag2.events import ToolCallEvent, ToolErrorEvent
from ag2.testing import TestConfig

from icore.integrations import NoEffect, RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace

from .ag2_world import call, run

pytestmark = pytest.mark.timeout(120)


def _budget() -> Any:
    ws = Workspace({"budget/*": "finance"})
    ws.put("budget/T1", {"left": 100.0}, by="finance")
    return ws.agent("clerk")


def _told(results: list[Any], tool: str) -> list[str]:
    """The texts AG2 hands the model for the errors of ``tool``."""
    return ["\n".join(str(getattr(p, "content", p)) for p in e.result.parts)
            for e in results if isinstance(e, ToolErrorEvent) and e.name == tool]


@pytest.mark.parametrize("kind", [TimeoutError, NoEffect])
def test_a_body_that_raised_is_told_to_the_model_as_outcome_unknown(
        kind: type[Exception]) -> None:
    """S3 (raise_body.py): ``pay`` charges the card, then raises TimeoutError. The model
    read only "TimeoutError: bank gateway timed out" and paid again; now it reads that
    the call may have run and to check its effect first (``NoEffect``: its own text)."""
    h = _budget()
    charged: list[float] = []

    async def pay(trip_id: str, amount: float) -> str:
        """Pay."""
        charged.append(amount)
        raise kind("bank gateway timed out")

    safe = fenced_tool(pay, agent=h, depends_on=lambda a: {f"budget/{a['trip_id']}"})

    def get_budget(trip_id: str) -> dict[str, Any]:
        """Read a budget."""
        return dict(h.read(f"budget/{trip_id}"))

    cfg = TestConfig(call("get_budget", trip_id="T1"), call("pay", trip_id="T1", amount=50),
                     "ok", raise_tool_errors=False)
    agent = Agent("clerk", config=cfg, tools=[get_budget, safe])
    rec = RunRecorder("rb")
    record_agents(rec, agent)
    [text] = _told(run(agent), "pay")
    assert charged == [50]
    [out] = [e for e in rec.events if e.get("tool") == "pay" and e["kind"] == "tool_output"]
    if kind is TimeoutError:
        assert text.startswith("pay failed with TimeoutError: bank gateway timed out; it "
                               "may have run")
        assert "its outcome is unknown: check its effect before calling pay again" in text
        assert "Traceback" not in text and text in out["content"]
    else:
        assert "bank gateway timed out" in text and "outcome is unknown" not in text
