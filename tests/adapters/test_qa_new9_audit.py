"""``icore audit`` after QA qa-new9 (#29): approvals, edited records, gate without records,
one-agent runs, ``--fail-on unknown`` / ``not-ended``.

Every trace is built from real records (:meth:`icore.records.Record.create`) and the
real approval binding (:class:`icore.workspace.ApprovalRequest`), written as the
recorders write them, and audited through the command.
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
from icore.integrations._call_lines import lineage_lines
from icore.records import Record
from icore.workspace import ApprovalRequest, Workspace

pytestmark = pytest.mark.timeout(120)


def _rec(r: Record, role: str) -> dict[str, Any]:
    line = {"id": r.id, "key": r.key, "owner": r.owner, "seq": r.seq, "type": r.type,
            "parents": list(r.parents), "role": role, "content": r.content}
    if r.supersedes is not None:
        line["supersedes"] = r.supersedes
    return {"planfence": {"record": line}}


def _decision(task: str, tool: str, fact: Record, root: Record, *, outcome: str = "authorized",
              reason: str = "valid", policy: str = "planfence") -> dict[str, Any]:
    return {"planfence": {"decision": DecisionEntry.from_dict({  # with its digest (#29)
        "action": tool, "task": task, "outcome": outcome, "reason": reason,
        "roots": [root.id], "deps": [fact.key], "frontier": {fact.key: fact.id},
        "heads": {fact.key: fact.id}, "fresh": {}, "point": 1, "policy": policy,
        "replanned": False, "detail": "", "at_ms": 1.0}).to_dict(digest=True)}}


def _refund_run(tmp_path: Path, *, approval: dict[str, Any] | None, name: str = "r.jsonl",
                end: bool = True, ran: bool = True) -> tuple[Path, Record]:
    """One agent, one protected ``refund`` call (optionally approved), as recorded."""
    fact = Record.create(key="room/101", owner="frontdesk", seq=1,
                         content={"free": True, "price": 100}, type="fact")
    args = {"amount": 100.0, "room_id": "101"}
    act = Record.create(key="planfence.act/desk/refund", owner="desk", seq=2,
                        content={ACTION_FIELD: {"name": "refund", "args": args}},
                        parents=[fact.id], type="action")
    lines: list[dict[str, Any]] = [
        {"run": {"id": name.split(".")[0], "agents": {"concierge": "", "user": ""}}},
        _rec(act, "action"), _rec(fact, "fact"), _decision("refund-1", "refund", fact, act),
        {"agent": "user", "kind": "task", "content": "refund 101"},
        {"agent": "concierge", "kind": "tool_output", "tool": "get_room", "exitcode": 0,
         "content": "{\"free\": true}"},
    ]
    if approval is not None:
        lines.append({"agent": "concierge", "kind": "thought", "content": "a human answered",
                      **approval})
    if ran:
        lines.append({"agent": "concierge", "kind": "tool_output", "tool": "refund",
                      "exitcode": 0, "content": "refunded"})
    if end:
        lines.append({"agent": "concierge", "kind": "termination", "content": "done",
                      "final_answer": "refunded"})
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p, act


def _request(act: Record, fact_key: str = "room/101") -> str:
    a = act.content[ACTION_FIELD]
    return ApprovalRequest.of(a["name"], a["args"], {fact_key: act.parents[0]}).id


def _audit(*argv: str) -> Any:
    return CliRunner().invoke(app, ["audit", *argv])


def test_an_approval_is_part_of_the_actions_lineage_in_every_output(tmp_path: Path) -> None:
    """QA qa-new9 S3: the human's yes, named by its request id (the Agents SDK recorder),
    shows in the console line, in ``--json`` lineage and on the report card, not only as a
    thought of the timeline."""
    trace, act = _refund_run(tmp_path, approval={"approval": {
        "tool": "refund", "approved": True, "request": None}})
    text = trace.read_text(encoding="utf-8").replace(
        '"request": null', f'"request": "{_request(act)}"')
    trace.write_text(text, encoding="utf-8")
    out, js = tmp_path / "rep", tmp_path / "a.json"
    res = _audit(str(trace), "--out", str(out), "--json", str(js))
    assert res.exit_code == 0, res.output
    assert "protected actions of r: 1 (1 valid); 1 approved by a human" in res.output
    (lv,) = json.loads(js.read_text())["runs"][0]["lineage"]
    assert lv["human"] == "approved" and lv["human_step"] == 2
    assert lv["reason"].startswith("valid: F(x) = H(x)")
    assert lv["reason"].endswith("(approved by a human at step 2, before the gate).")
    page = (out / "r.html").read_text(encoding="utf-8")
    assert "approved by a human</span>" in page and "approved by a human at step 2" in page


def test_an_answer_without_a_request_id_links_by_tool_and_arguments(tmp_path: Path) -> None:
    """LangGraph / AG2 record ``answered_by: human``, ``decision``, ``tool`` and ``args``;
    a rejection of that form marks the action ``rejected``; an answer about another tool
    links nothing."""
    trace, _ = _refund_run(tmp_path, approval={
        "answered_by": "human", "decision": "approve", "tool": "refund",
        "args": {"room_id": "101", "amount": 100.0}})
    (a,) = trace_lineages(load_jsonl(trace).planfence, load_jsonl(trace).steps)
    assert (a.human, a.human_step) == ("approved", 2)
    other, _ = _refund_run(tmp_path, name="o.jsonl", approval={
        "answered_by": "human", "decision": "approve", "tool": "book", "args": {}})
    t = load_jsonl(other)
    assert trace_lineages(t.planfence, t.steps)[0].human is None
    no, _ = _refund_run(tmp_path, name="n.jsonl", approval={"approval": {
        "tool": "refund", "approved": False, "request": None}})
    t = load_jsonl(no)
    assert trace_lineages(t.planfence, t.steps)[0].human == "rejected"


def test_fail_on_unknown_and_not_ended(tmp_path: Path) -> None:
    """QA qa-new9 S3: a run stopped mid-tool (its authorized call has no recorded result,
    no terminal marker) passed every ``--fail-on``; ``unknown`` and ``not-ended`` fail it
    (exit 3), a clean run passes both."""
    cut, _ = _refund_run(tmp_path, approval=None, name="cut.jsonl", end=False, ran=False)
    clean, _ = _refund_run(tmp_path, approval=None, name="clean.jsonl")
    for cond in ("unknown", "not-ended"):
        res = _audit(str(cut), "--no-report", "--fail-on", cond)
        assert res.exit_code == 3, res.output
        assert f"--fail-on {cond}: 1 run(s): cut" in res.output
        assert _audit(str(clean), "--no-report", "--fail-on", cond).exit_code == 0
    assert _audit(str(cut), "--no-report", "--fail-on", "unsound,invalid").exit_code == 0


def test_an_edited_record_is_invalid_naming_its_line(tmp_path: Path) -> None:
    """QA qa-new9 S3 (edit/e1_args): an action record's price changed, its id kept: the
    id no longer is the record's digest, so the action is INVALID (fail closed) and a
    warning names the record and its line; ``--fail-on invalid`` exits 3."""
    trace, act = _refund_run(tmp_path, approval=None)
    trace.write_text(trace.read_text(encoding="utf-8").replace('"amount": 100.0',
                                                               '"amount": 999.0'),
                     encoding="utf-8")
    js = tmp_path / "e.json"
    res = _audit(str(trace), "--no-report", "--json", str(js), "--fail-on", "invalid")
    assert res.exit_code == 3, res.output
    run = json.loads(js.read_text())["runs"][0]
    (lv,) = run["lineage"]
    assert lv["status"] == "INVALID" and act.id[:12] in lv["reason"]
    assert any(f"record {act.id[:12]}... ('planfence.act/desk/refund', line 2) does not "
               "match its id" in w for w in run["warnings"])
    assert "warning" in res.output and "line 2" in res.output


def test_a_revision_carries_supersedes_and_checks_out(tmp_path: Path) -> None:
    """A ``ws.put`` over an existing value makes a record whose id covers ``supersedes``:
    the recorder writes it (QA qa-new9 S3: run1.jsonl room/102 seq 5 lacked it), so the
    audit recomputes the id; with it dropped, the other version of the key in the trace
    is tried (traces of earlier recorders still check out)."""
    ws = Workspace({"room/*": "frontdesk"})
    old = ws.put("room/102", {"price": 120}, by="frontdesk")
    new = ws.put("room/102", {"price": 150}, by="frontdesk")
    assert new.supersedes == old.id
    lines = lineage_lines({old.id: (old, "fact"), new.id: (new, "revision")}, [], "t",
                          None, set())
    assert lines[1]["planfence"]["record"]["supersedes"] == old.id
    head = {"run": {"id": "rev"}}
    step = {"agent": "a", "kind": "termination", "content": "done", "final_answer": "x"}
    p = tmp_path / "rev.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in [head, *lines, step]))
    assert not load_jsonl(p).warnings
    for x in lines:
        x["planfence"]["record"].pop("supersedes", None)
    p.write_text("".join(json.dumps(x) + "\n" for x in [head, *lines, step]))
    assert not load_jsonl(p).warnings
    lines = [lines[1]]  # the version it replaced is not in the trace: cannot be its id
    p.write_text("".join(json.dumps(x) + "\n" for x in [head, *lines, step]))
    assert any("does not match its id" in w for w in load_jsonl(p).warnings)


def test_gate_activity_without_planfence_lines_is_warned(tmp_path: Path) -> None:
    """QA qa-new9 S3 (edit/e6_nopf): every PlanFence line removed, the gate thoughts and
    refused outputs kept: the audit says so instead of reporting no protected action."""
    trace, _ = _refund_run(tmp_path, approval=None)
    kept = [x for x in trace.read_text(encoding="utf-8").splitlines()
            if '"planfence"' not in x]
    kept.insert(3, json.dumps({"agent": "concierge", "kind": "tool_output", "tool": "refund",
                               "blocked": True, "reason": "stale", "exitcode": 1,
                               "content": "BLOCKED: stale: room/101 changed"}))
    trace.write_text("\n".join(kept) + "\n", encoding="utf-8")
    res = _audit(str(trace), "--no-report")
    assert res.exit_code == 0, res.output
    assert "line 4 shows a PlanFence gate at work" in res.output.replace("\n", " ")
    clean, _ = _refund_run(tmp_path, approval=None, name="c.jsonl")
    # hand-written: its tool outputs carry no digest, its lines no chain: only noted (#29)
    assert [w for w in load_jsonl(clean).warnings
            if "carry no digest" not in w and "carry no chain" not in w] == []


def test_a_one_agent_run_with_no_plan_is_stable(tmp_path: Path) -> None:
    """QA qa-new9 S4: a clean one-agent run with no plan step read astab 0.000, cq 0.500
    (the task was never assigned: open work nobody holds is unstable, icore Def. 9). The
    agent seen working on it takes it: astab 1.000 at the end; the task's first state
    (before anyone works on it) keeps cq 0.500, the run's cq min."""
    trace, _ = _refund_run(tmp_path, approval=None)
    js = tmp_path / "s.json"
    assert _audit(str(trace), "--no-report", "--json", str(js)).exit_code == 0
    s = json.loads(js.read_text())["runs"][0]["summary"]
    assert (s["astab"], s["cq"], s["cq_min"]) == (1.0, 1.0, 0.5)
