"""The LangGraph adapter and the example app (examples/langgraph_app.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from icore.agents._langgraph import GraphRecorder, fenced_tool, last_result
from icore.errors import ActionBlocked
from icore.fence import Fence, bind_action
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_app.py"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("langgraph_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_app_runs() -> None:
    """The example graph replans once through the gate and books the fresh destination."""
    out = _load_example().main()
    assert out["booked"] == "booked Porto" and out["tool_calls"] == ["Porto"]
    assert out["replanned"] is True
    assert out["gate"] == ["replan_required/stale", "authorized/valid"]
    assert out["events"].count("node_step") == 3 and "tool_call" in out["events"]
    assert out["icore_events"] == len(out["events"])


def _setup() -> tuple[Fence, list[str], Record]:
    om = OwnershipMap({"req/a": "owner", "plan/a": "planner"})
    owner, ex = MemoryStore(om, "owner"), MemoryStore(om, "executor")
    planner = MemoryStore(om, "planner")
    r1 = Record.create(key="req/a", owner="owner", seq=1, content={"v": 1})
    owner.commit(r1, writer="owner")
    ex.install(r1)
    plan = derive(key="plan/a", owner="planner", seq=1,
                  content={"v": 1, **bind_action("act", {"value": 1})}, inputs=[r1])
    planner.commit(plan, writer="planner")
    ex.install(plan)
    r2 = derive(key="req/a", owner="owner", seq=2, content={"v": 2}, inputs=[r1])
    owner.commit(r2, writer="owner")
    calls: list[str] = []
    return Fence.for_store(ex, LocalOwners({"owner": owner, "planner": planner})), calls, plan


def test_fenced_tool_blocks_a_stale_plan_without_replanner() -> None:
    """No replanner: a changed dependency blocks; the tool never runs; events recorded."""
    fence, calls, plan = _setup()

    @tool
    def act(value: int) -> str:
        """Act."""
        calls.append(str(value))
        return "done"

    rec = GraphRecorder()
    wrapped = fenced_tool(act, fence=fence, depends_on={"req/a"}, roots=lambda: [plan.id],
                          recorder=rec)
    assert wrapped.name == "act" and wrapped.args_schema is act.args_schema
    out = wrapped.invoke({"value": 1})
    assert str(out).startswith("BLOCKED: stale") and calls == []
    res = last_result(wrapped)
    assert res is not None and not res.executed
    assert [e["type"] for e in rec.events] == ["gate_decision"]
    strict = fenced_tool(act, fence=fence, depends_on={"req/a"}, roots=lambda: [plan.id],
                         on_block="raise")
    with pytest.raises(ActionBlocked):
        strict.invoke({"value": 1})
    with pytest.raises(ValueError, match="on_block"):
        fenced_tool(act, fence=fence, depends_on={"req/a"}, roots=lambda: [], on_block="x")
