"""A killed gateway's cut trace, audited (QA qa-new15b S2, S3).

A gateway killed mid-call whose file lost the call's decision line (its plan line, gate
thought and action record remain) made the call vanish from the audit; it is counted
``outcome unknown`` now, with the arguments its gate thought carries. A trace whose
protected actions cannot be counted (gate activity, no PlanFence line) fails
``--fail-on invalid`` and ``--fail-on unknown`` (fail closed). Real records
(:meth:`icore.records.Record.create`), lines as the gateway writes them, audited
through the command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.adapters import load_jsonl, trace_lineages
from icore.cli import app
from icore.fence import ACTION_FIELD, DecisionEntry
from icore.records import Record

pytestmark = pytest.mark.timeout(120)
ARGS = {"ms": 400, "steps": 6}


def _trace(tmp_path: Path, *, cut: bool) -> Path:
    fact = Record.create(key="fact://policy/refunds", owner="manager", seq=1,
                         content="open", type="fact")
    act = Record.create(key="planfence.act/hal/slow_report", owner="hal", seq=1,
                        content={ACTION_FIELD: {"name": "slow_report", "args": ARGS}},
                        parents=[fact.id], type="action")
    rec = {"planfence": {"record": {"id": fact.id, "key": fact.key, "owner": fact.owner,
                                    "seq": 1, "type": "fact", "parents": [],
                                    "role": "input"}}}
    arec = {"planfence": {"record": {"id": act.id, "key": act.key, "owner": "hal",
                                     "seq": 1, "type": "action", "parents": [fact.id],
                                     "role": "plan"}}}
    decision = {"planfence": {"decision": DecisionEntry.from_dict({
        "action": "slow_report", "task": "hal/2", "outcome": "authorized",
        "reason": "valid", "roots": [act.id], "deps": [fact.key],
        "frontier": {fact.key: fact.id}, "heads": {fact.key: fact.id}, "fresh": {},
        "point": 1, "policy": "planfence", "replanned": False, "detail": "",
        "at_ms": 1.0}).to_dict(digest=True)}}
    lines: list[dict[str, Any]] = [
        {"run": {"id": "gw", "agents": {"gateway": "", "hal": ""}}}, rec,
        {"agent": "hal", "kind": "task", "content": "session hal connected"},
        {"agent": "hal", "kind": "plan", "content": f"plan for slow_report: {json.dumps(ARGS)}",
         "plan_id": "hal/2", "roots": [act.id]},
        {"agent": "hal", "kind": "thought", "content": "gate authorized/valid for slow_report",
         "gate": {"outcome": "authorized", "point": 1, "reason": "valid",
                  "replanned": False, "tool": "slow_report"}, "task": "hal/2", "args": ARGS},
        arec, *([] if cut else [decision])]
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def _audit(*argv: str) -> Any:
    return CliRunner().invoke(app, ["audit", "--no-report", *argv])


@pytest.mark.parametrize("cut", [False, True])
def test_a_call_whose_decision_line_was_cut_is_outcome_unknown(tmp_path: Path,
                                                                cut: bool) -> None:
    trace = _trace(tmp_path, cut=cut)
    t = load_jsonl(trace)
    (a,) = trace_lineages(t.planfence, t.steps)
    assert a.action == "hal/2" and a.outcome_unknown and a.agent == "hal"
    assert json.loads(a.args or "null") == ARGS  # from the gate thought (QA S3)
    js = tmp_path / "a.json"
    res = _audit(str(trace), "--json", str(js), "--fail-on", "unknown")
    assert res.exit_code == 3, res.output
    assert "1 (1 outcome unknown)" in res.output, res.output
    (lv,) = json.loads(js.read_text())["runs"][0]["lineage"]
    assert (lv["tool"], lv["outcome"], lv["args"]) == ("slow_report", "unknown", ARGS)
    if cut:
        assert "decision line is missing" in lv["reason"], lv["reason"]
        assert "1 call(s) the gate authorized have no decision line (hal/2)" in res.output
    else:
        assert "have no decision line" not in res.output


def test_a_blocked_gate_thought_without_decision_adds_nothing(tmp_path: Path) -> None:
    trace = _trace(tmp_path, cut=True)
    trace.write_text(trace.read_text().replace('"outcome": "authorized"',
                                               '"outcome": "blocked"'), encoding="utf-8")
    t = load_jsonl(trace)
    assert trace_lineages(t.planfence, t.steps) == ()


@pytest.mark.parametrize("cond", ["invalid", "unknown"])
def test_a_trace_whose_actions_cannot_be_counted_fails_closed(tmp_path: Path,
                                                             cond: str) -> None:
    """Gate activity and no PlanFence line (a trace cut before them): exit 3."""
    trace = _trace(tmp_path, cut=True)
    kept = [x for x in trace.read_text().splitlines() if '"planfence"' not in x]
    trace.write_text("\n".join(kept) + "\n", encoding="utf-8")
    res = _audit(str(trace), "--fail-on", cond)
    assert res.exit_code == 3, res.output
    assert "cannot be counted or checked" in res.output
    assert _audit(str(trace), "--fail-on", "hard-flags").exit_code == 0
