"""``icore audit`` after QA qa-new10b (#28): a run of two kickoffs (a CrewAI Flow) ends
only when its last kickoff ends; a call CrewAI's schema refused is no result of an
authorized call.

Every trace is built from real records (:meth:`icore.records.Record.create`), written as
the CrewAI recorder writes a Flow of two crews, and audited through the command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.adapters import load_jsonl, trace_lineages
from icore.adapters._trace import Step, StepKind, run_ended
from icore.cli import app
from icore.fence import ACTION_FIELD
from icore.records import Record

pytestmark = pytest.mark.timeout(120)


def _rec(r: Record, role: str) -> dict[str, Any]:
    return {"planfence": {"record": {
        "id": r.id, "key": r.key, "owner": r.owner, "seq": r.seq, "type": r.type,
        "parents": list(r.parents), "role": role, "content": r.content}}}


def _flow(tmp_path: Path, tail: list[dict[str, Any]], name: str = "flow") -> Path:
    """A planner crew that ended, then a booking crew: one authorized ``pay`` and
    ``tail`` (what the booking crew recorded after the gate authorized it)."""
    fact = Record.create(key="budget/travel", owner="finance", seq=1,
                         content={"limit_eur": 900}, type="fact")
    act = Record.create(key="planfence.act/travel/pay", owner="travel", seq=2,
                        content={ACTION_FIELD: {"name": "pay", "args": {"eur": 300.0}}},
                        parents=[fact.id], type="action")
    decision = {"planfence": {"decision": {
        "action": "pay", "task": "pay-1", "outcome": "authorized", "reason": "valid",
        "roots": [act.id], "deps": [fact.key], "frontier": {fact.key: fact.id},
        "heads": {fact.key: fact.id}, "fresh": {}, "point": 1, "policy": "planfence",
        "replanned": False, "detail": "", "at_ms": 1.0}}}
    lines: list[dict[str, Any]] = [
        {"run": {"id": name, "agents": {"planner": "", "booker": "", "crew": "",
                                         "user": ""}}},
        _rec(act, "action"), _rec(fact, "fact"), decision,
        {"agent": "user", "kind": "task", "content": "kickoff"},
        {"agent": "planner", "kind": "output", "content": "Final Answer: pay 300"},
        {"agent": "crew", "kind": "termination", "content": "pay 300",
         "final_answer": "pay 300"},
        {"agent": "user", "kind": "task", "content": "kickoff"},
        {"agent": "booker", "kind": "output", "content": "Action: pay"},
        {"agent": "booker", "kind": "thought", "content": "gate authorized/valid for pay",
         "gate": {"outcome": "authorized", "point": 1, "reason": "valid",
                  "replanned": False, "tool": "pay"}},
        *tail]
    p = tmp_path / f"{name}.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


_PAID = {"agent": "booker", "kind": "tool_output", "tool": "pay", "exitcode": 0,
         "args": {"eur": 300.0}, "content": "paid"}
_END = {"agent": "crew", "kind": "termination", "content": "done", "final_answer": "done"}
_SCHEMA_NO = {"agent": "booker", "kind": "tool_output", "tool": "pay", "exitcode": 1,
              "args": {"eur": "lots"}, "reason": "invalid_arguments",
              "content": "Arguments validation failed: eur: Input should be a valid number"}


def _audit(*argv: str) -> Any:
    return CliRunner().invoke(app, ["audit", "--no-report", *argv])


def test_a_flow_whose_second_crew_dies_did_not_end(tmp_path: Path) -> None:
    """QA qa-new10b S2 (run_dies.jsonl): the planner crew's ``termination`` is not the
    end of the run; the booking crew died after its paid call: ``not-ended`` fails (exit
    3), the summary says not terminated; with the booking crew's end it passes."""
    dies = _flow(tmp_path, [_PAID], "dies")
    res = _audit(str(dies), "--fail-on", "not-ended,unknown")
    assert res.exit_code == 3, res.output
    assert "--fail-on not-ended: 1 run(s): dies" in res.output
    assert "--fail-on unknown" not in res.output  # the paid call's result is recorded
    t = load_jsonl(dies)
    assert not run_ended(t.steps)
    ok = _flow(tmp_path, [_PAID, _END], "ok")
    assert _audit(str(ok), "--fail-on", "not-ended,unknown").exit_code == 0, ok
    assert run_ended(load_jsonl(ok).steps)


def test_a_cut_after_the_authorized_call_is_outcome_unknown_across_kickoffs(
        tmp_path: Path) -> None:
    """QA qa-new10b S2 (cut2.jsonl): cut right after the gate authorized the booking
    crew's call: its outcome is unknown though the planner crew ended (``unknown``
    returned early on the first ``termination``)."""
    cut = _flow(tmp_path, [], "cut")
    res = _audit(str(cut), "--fail-on", "unknown")
    assert res.exit_code == 3, res.output
    assert "1 outcome unknown" in res.output
    t = load_jsonl(cut)
    assert [a.outcome_unknown for a in trace_lineages(t.planfence, t.steps)] == [True]


def test_a_cut_mid_line_warning_and_the_summary_agree(tmp_path: Path) -> None:
    """QA qa-new10b S2 (trunc3.jsonl): the last line cut mid-way warns "did not end" and
    the run is not ended in the ``--json`` summary either."""
    p = _flow(tmp_path, [_PAID], "trunc")
    p.write_text(p.read_text(encoding="utf-8") + json.dumps(_END)[:30], encoding="utf-8")
    js = tmp_path / "a.json"
    res = _audit(str(p), "--json", str(js), "--fail-on", "not-ended")
    assert res.exit_code == 3, res.output
    assert "did not end" in res.output
    run = json.loads(js.read_text(encoding="utf-8"))["runs"][0]
    assert run["summary"]["terminated"] is False


def test_schema_refused_attempts_are_no_result_of_the_authorized_call(
        tmp_path: Path) -> None:
    """QA qa-new10b S2 (cut_dates.jsonl vs cut_ok1.jsonl): three attempts CrewAI's schema
    refused (``reason: invalid_arguments``, no gate decision), then the authorized call,
    then the cut: the call's outcome is unknown (exit 3), as with no refused attempt."""
    cut = _flow(tmp_path, [_SCHEMA_NO, _SCHEMA_NO, _SCHEMA_NO], "dates")
    res = _audit(str(cut), "--fail-on", "unknown")
    assert res.exit_code == 3, res.output
    steps = list(load_jsonl(cut).steps)
    assert [s.invalid_args for s in steps if s.kind == StepKind.TOOL_OUTPUT] == [True] * 3
    paid = _flow(tmp_path, [_SCHEMA_NO, _PAID], "paid")
    assert _audit(str(paid), "--fail-on", "unknown").exit_code == 0


def test_a_refusal_with_that_reason_still_answers_its_refused_call(tmp_path: Path) -> None:
    """A gate-side refusal of arguments (``blocked: true``, the gateway's and AG2's) is
    its refused call's output, not a schema attempt: the step is not ``invalid_args``."""
    p = _flow(tmp_path, [{**_SCHEMA_NO, "blocked": True}, _PAID, _END], "blocked")
    outs = [s for s in load_jsonl(p).steps if s.kind == StepKind.TOOL_OUTPUT]
    assert [s.invalid_args for s in outs] == [False, False]
    assert Step(0, "a", StepKind.TOOL_OUTPUT, "x", invalid_args=True).invalid_args
    assert Step(0, "a", StepKind.TOOL_OUTPUT, "x") != Step(0, "a", StepKind.TOOL_OUTPUT, "x",
                                                           invalid_args=True)


def test_a_claim_after_failed_calls_is_not_said_to_have_no_tool_output(
        tmp_path: Path) -> None:
    """QA qa-new10b S4 (br_ids.jsonl): the flag of a conclusion after calls that all
    failed said "(no tool output)"; there were outputs, none succeeded."""
    lines = [{"run": {"id": "ids", "agents": {"booker": "", "user": ""}}},
             {"agent": "user", "kind": "task", "content": "book"},
             {"agent": "booker", "kind": "tool_output", "tool": "book", "exitcode": 1,
              "content": "ERROR: no such event"},
             {"agent": "booker", "kind": "output",
              "content": "Thought: I now know the final answer\nFinal Answer: Booked."}]
    p = tmp_path / "ids.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    js = tmp_path / "ids.json"
    res = _audit(str(p), "--json", str(js))
    assert res.exit_code == 0, res.output
    details = [f["detail"] for f in json.loads(js.read_text())["runs"][0]["flags"]]
    assert any("no tool output that succeeded" in d for d in details), details
    assert not any("(no tool output)" in d for d in details)


def test_validations_are_numbered_per_run(tmp_path: Path) -> None:
    """QA qa-new10b S4 (conc_A.jsonl): two crews at once on one agent handle share the
    gate's counter; a run's only decision read "valid at validation #8". The audit numbers
    the run's own validations 1, 2, ..."""
    p = _flow(tmp_path, [_PAID, _END], "conc")
    p.write_text(p.read_text(encoding="utf-8").replace('"point": 1', '"point": 8'),
                 encoding="utf-8")
    js = tmp_path / "c.json"
    assert _audit(str(p), "--json", str(js)).exit_code == 0
    (lv,) = json.loads(js.read_text(encoding="utf-8"))["runs"][0]["lineage"]
    assert "at validation #1;" in lv["reason"] and "#8" not in lv["reason"]


def test_the_old_reason_name_audits_as_invalid_arguments(tmp_path: Path) -> None:
    """Traces written before the one vocabulary name schema-refused calls ``args_invalid``
    (LangGraph, the Agents SDK): read as ``invalid_arguments``, the same audit (the
    exit code, the steps, the ``--json`` summary) as the trace with the new name."""
    old = {**_SCHEMA_NO, "reason": "args_invalid"}
    got = {}
    for name, line in (("new", _SCHEMA_NO), ("old", old)):
        p = _flow(tmp_path, [line, line, line], name)
        js = tmp_path / f"{name}.json"
        res = _audit(str(p), "--fail-on", "unknown", "--json", str(js))
        outs = [s.invalid_args for s in load_jsonl(p).steps
                if s.kind == StepKind.TOOL_OUTPUT]
        run = json.loads(js.read_text(encoding="utf-8"))["runs"][0]
        run["summary"].pop("run")
        got[name] = (res.exit_code, outs, run["summary"],
                     json.dumps(run["flags"], sort_keys=True).replace(name, "NAME"))
    assert got["old"][0] == 3 and got["old"][1] == [True] * 3
    assert got["old"] == got["new"]
