"""AG2 approvals cover exactly what the human approved (issue 28 item 5, QA r4-ag2).

Real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig`` and its own
``approval_required()``; the human hook changes a fact while "the human decides".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolErrorEvent, ToolResultEvent
from ag2.middleware.builtin import approval_required
from typer.testing import CliRunner

from icore.cli import app as cli
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents

from .ag2_world import call, orders, run
from .conftest import load_example

REQ = "req/trip-17"


def _world(turns: Any) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))


def audit(rec: RunRecorder, tmp: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``icore audit`` of the recorded run (``--json``): (exit code, the run's JSON)."""
    path = rec.write(tmp / f"{rec.run_id}.jsonl")
    js = tmp / f"{rec.run_id}.json"
    res = CliRunner().invoke(cli, ["audit", str(path), "--no-report", "--json", str(js),
                                   *args], env={"COLUMNS": "200"})
    assert res.exit_code in (0, 3), res.output
    return res.exit_code, json.loads(js.read_text(encoding="utf-8"))["runs"][0]


def _errors(results: list[ToolResultEvent]) -> list[str]:
    return [str(r.error) for r in results if isinstance(r, ToolErrorEvent)]


def _ship_tool(shipped: list[tuple[str, str]]) -> Any:
    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return f"shipped {order_id} to {city}"

    return tool(ship, middleware=[approval_required()])


def _same_args_world(answer: str = "yes") -> tuple[Any, list[tuple[str, str]], list[str],
                                                   RunRecorder]:
    """The human approves Berlin on v1; sales adds a note (v2) while the human decides; the
    replanner returns the same arguments from v2."""
    ws, shipper, shipped = orders()
    asked: list[str] = []

    def human(request: Any) -> str:
        asked.append(str(getattr(request, "content", request)))
        if len(asked) == 1:
            ws.put("order/42", {"city": "Berlin", "note": "fragile"}, by="sales")
        return answer

    same = lambda st: {"order_id": "42", "city": st.fresh["order/42"]["city"]}  # noqa: E731
    w = fenced_tool(_ship_tool(shipped), agent=shipper, depends_on={"order/42"}, replan=same)
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([
        call("ship", order_id="42", city="Berlin"),
        call("ship", order_id="42", city="Berlin"), "ok"]), tools=[w], hitl_hook=human)
    rec = RunRecorder("ag2-same-args")
    record_agents(rec, agent)
    return agent, shipped, asked, rec


@pytest.mark.usefixtures("one_chat")
def test_an_approval_on_old_versions_never_runs_the_same_call_on_new_ones() -> None:
    """D1: the approval was given on order/42 v1; the replan returns the same arguments
    from v2: the call is refused ``approval_changed`` (nothing runs, the keys named); the
    model's next call is put to the human again and runs."""
    agent, shipped, asked, _ = _same_args_world()
    errors = _errors(run(agent))
    assert len(errors) == 1 and "(approval_changed)" in errors[0]
    assert "newer versions of order/42" in errors[0]
    assert len(asked) == 2 and shipped == [("42", "Berlin")]


@pytest.mark.usefixtures("one_chat")
def test_approval_changed_is_recorded_with_its_decisions_and_replan(tmp_path: Path) -> None:
    """D2: the refused call is in the trace (both decisions, the replan, the blocked
    output); the audit counts the replan and raises no hard flag."""
    agent, _, _, rec = _same_args_world()
    run(agent)
    gates = [(e["gate"]["outcome"], e["gate"]["reason"]) for e in rec.events if e.get("gate")]
    assert gates[:2] == [("replan_required", "stale"), ("authorized", "valid")]
    assert any(e["kind"] == "plan" and e.get("replan") for e in rec.events)
    outs = [(e["exitcode"], e.get("blocked", False), e["content"][:30]) for e in rec.events
            if e["kind"] == "tool_output" and e["tool"] == "ship"]
    assert outs[0][:2] == (1, True) and "approval_changed" in outs[0][2]
    assert outs[1][:2] == (0, False)
    code, summary = audit(rec, tmp_path, "--fail-on", "invalid,unsound,hard-flags")
    assert code == 0 and summary["summary"]["replans"] == 1
    assert summary["summary"]["hard_flags"] == 0
    assert summary["diagnoses"] == []  # the gate's one replan: counted, not a defect


def test_low_level_replanned_plan_needs_a_new_approval(trip: Any) -> None:
    """D1/D2, ``fence=``: the traveler re-commits Lisbon while the human decides; the fresh
    plan binds the same arguments but is another request: refused ``approval_changed``,
    nothing booked, and the refusal is recorded with its decisions."""
    booked: list[str] = []

    def human(request: Any) -> str:
        trip.revise("Lisbon")
        return "yes"

    def book(destination: str) -> str:
        """Book a hotel."""
        booked.append(destination)
        return "booked"

    rec = RunRecorder("ag2-fence-same")
    w = fenced_tool(tool(book, middleware=[approval_required()]), fence=trip.fence,
                    depends_on={REQ}, replan=trip.replan, recorder=rec)
    agent = Agent("executor", config=_world([call("book", destination="Lisbon"), "ok"]),
                  tools=[w], variables={"plan_roots": [trip.first_plan.id]},
                  hitl_hook=human)
    errors = _errors(run(agent))
    assert "(approval_changed)" in errors[0] and booked == []
    assert "same arguments from other versions" in errors[0]
    outs = [e for e in rec.events if e["kind"] == "tool_output"]
    assert len(outs) == 1 and outs[0]["exitcode"] == 1 and outs[0].get("blocked")
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    assert gates[:2] == ["stale", "valid"]


def test_a_human_no_is_recorded_as_a_refused_call(tmp_path: Path) -> None:
    """D3: the human answers "no" to ``approval_required()``: nothing runs, and the trace
    has a refused call (exit code 1, blocked, ``decision: reject``, ``ran: false``), once,
    recorded through ``record_agents`` and through ``recorder=`` alike."""
    for own in (False, True):
        _, shipper, shipped = orders()
        rec = RunRecorder("ag2-reject")
        w = fenced_tool(_ship_tool(shipped), agent=shipper, depends_on={"order/42"},
                        recorder=rec if own else None)
        shipper.read("order/42")
        agent = Agent("shipper", config=_world([call("ship", order_id="42", city="Berlin"),
                                                "ok"]), tools=[w], hitl_hook=lambda r: "no")
        if not own:
            record_agents(rec, agent)
        run(agent)
        assert shipped == []
        outs = [e for e in rec.events if e["kind"] == "tool_output"]
        assert len(outs) == 1, outs
        out = outs[0]
        assert (out["exitcode"], out["blocked"], out["decision"], out["ran"]) == (
            1, True, "reject", False)
        assert "User denied" in out["content"] and out["agent"] == "shipper"
        # a blocked protected action, as the gateway counts its pre-gate refusals (D7)
        assert [(x["planfence"]["decision"]["outcome"], x["planfence"]["decision"]["reason"])
                for x in rec.planfence] == [("blocked", "approval_rejected")]
        if not own:
            code, summary = audit(rec, tmp_path, "--fail-on", "invalid,unsound,hard-flags")
            assert code == 0 and summary["summary"]["hard_flags"] == 0
