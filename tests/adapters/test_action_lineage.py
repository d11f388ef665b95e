"""``AuditResult.lineage`` / ``invalid_actions`` (issue 26): the one verdict per recorded action.

Adapters judge every protected action of a recorded run with ``icore.fence.judge_action``
/ ``action_status``; the report only renders the result (same status), and ``--fail-on
invalid`` counts ``invalid_actions``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from icore.adapters import (
    ActionLineage,
    AdapterError,
    audit_trace,
    lineage_of,
    parse_jsonl,
    trace_lineages,
)
from icore.fence import DecisionEntry, DecisionFormatError, KeyCheck
from icore.report import trace_lineage, view_from_audit

R0, R1, PLAN, REPLAN, ACT = ("0" * 64, "1" * 64, "2" * 64, "3" * 64, "4" * 64)
REQ0 = {"id": R0, "key": "req/t", "owner": "rev", "seq": 1, "type": "requirement",
        "parents": [], "role": "requirement"}
PLAN0 = {"id": PLAN, "key": "plan/t", "owner": "pl", "seq": 1, "type": "plan",
         "parents": [R0], "role": "plan"}
REQ1 = {"id": R1, "key": "req/t", "owner": "rev", "seq": 2, "type": "requirement",
        "parents": [R0], "role": "revision"}


def _d(task: str, outcome: str, reason: str, frontier: dict[str, str],
       heads: dict[str, str], **kw: Any) -> dict[str, Any]:
    return {"outcome": outcome, "reason": reason, "action": "book", "roots": [PLAN],
            "deps": kw.get("deps", ["req/t"]), "frontier": frontier, "heads": heads,
            "policy": kw.get("policy", "planfence"), "point": kw.get("point", 1),
            "task": task}


def _trace(*decisions: dict[str, Any], records: tuple[dict[str, Any], ...] = (
        REQ0, PLAN0, REQ1)) -> str:
    lines: list[Any] = [{"agent": "u", "kind": "task", "content": "book a flight"}]
    lines += [{"planfence": {"record": r}} for r in records]
    lines += [{"planfence": {"decision": d}} for d in decisions]
    lines.append({"agent": "e", "kind": "output", "content": "done"})
    return "\n".join(json.dumps(x) for x in lines)


def test_statuses_and_invalid_count() -> None:
    """Stale-and-authorized is INVALID, a block is blocked, F = H is valid, a policy
    with neither frontier nor cited parents is unchecked; invalid_actions counts one."""
    t = parse_jsonl(_trace(
        _d("a-1", "authorized", "not_validated", {"req/t": R0}, {"req/t": R1}),
        _d("b-1", "blocked", "second_change", {"req/t": R0}, {"req/t": R1}),
        _d("c-1", "replan_required", "stale", {"req/t": R0}, {"req/t": R1}),
        _d("c-1", "authorized", "valid", {"req/t": R1}, {"req/t": R1}, point=2),
        {**_d("d-1", "authorized", "not_validated", {}, {"req/t": R1}, deps=["req/x"])}))
    res = audit_trace(t)
    got = {a.action: a.status for a in res.lineage}
    assert got == {"a-1": "INVALID", "b-1": "blocked", "c-1": "valid", "d-1": "unchecked"}
    assert res.invalid_actions == 1
    (a,) = [x for x in res.lineage if x.action == "a-1"]
    assert a.invalid and a.title == "a-1 · book"
    assert a.points[-1].verdict.keys == (("req/t", KeyCheck.STALE),)
    # the report renders the same statuses (it judges nothing itself)
    view = view_from_audit(res)
    assert {lv.id: lv.status for lv in view.lineage} == got
    assert {lv.id: lv.status for lv in trace_lineage(t.extras["planfence"])} == got


def test_plan_parents_stand_in_for_a_missing_frontier() -> None:
    """owner_head_freshness records no F(x): the roots' cited parents are judged."""
    (a,) = trace_lineages({"records": [REQ0, PLAN0, REQ1], "decisions": [
        _d("a-1", "authorized", "not_validated", {}, {"req/t": R1},
           policy="owner_head_freshness")]})
    p = a.points[0]
    assert p.frontier_source == "plan parents" and dict(p.frontier) == {"req/t": R0}
    assert a.status == "INVALID" and p.verdict.stale == ("req/t",)


def test_no_planfence_lines_no_lineage() -> None:
    res = audit_trace(parse_jsonl(_trace(records=())))
    assert res.lineage == () and res.invalid_actions == 0
    assert trace_lineages(None) == () and trace_lineages({"decisions": [1, "x"]}) == ()


def test_known_status_is_kept_and_nothing_issued() -> None:
    e = DecisionEntry.from_dict(_d("a-1", "authorized", "valid", {"req/t": R1},
                                   {"req/t": R1}))
    assert lineage_of("a", "a", [], [e], status="INVALID").status == "INVALID"
    none = lineage_of("a", "a", [], [])
    assert isinstance(none, ActionLineage) and none.status == "not issued"


def test_malformed_decisions_are_named() -> None:
    """The JSONL importer rejects them with the decision's own checks; a hand-built
    extras dict fails typed."""
    with pytest.raises(AdapterError) as exc:
        parse_jsonl(_trace({"outcome": "authorized", "reason": "valid", "point": -2}))
    assert exc.value.field.endswith("planfence.decision.point")
    assert "must be an integer >= 0" in exc.value.problem
    with pytest.raises(DecisionFormatError):
        trace_lineages({"decisions": [{"outcome": "authorized"}]})


def test_otel_attributes_take_the_typed_entry() -> None:
    """The exporter's decision attributes are the same for the entry and its dict."""
    pytest.importorskip("opentelemetry.sdk")
    from icore.adapters import decision_attributes

    e = DecisionEntry.from_dict(_d("a-1", "authorized", "valid", {"req/t": R1},
                                   {"req/t": R1}))
    assert decision_attributes(e) == decision_attributes(e.to_dict())
    assert decision_attributes(e)["icore.gate.frontier.keys"] == ["req/t"]


def test_trace_carries_typed_parts_and_the_old_extras_view() -> None:
    """Trace.planfence is typed (DecisionEntry); Trace.extras rebuilds the old dict."""
    text = _trace(_d("a-1", "authorized", "valid", {"req/t": R1}, {"req/t": R1}))
    text = json.dumps({"run": {"id": "r", "orchestrator": "e"}}) + "\n" + text
    t = parse_jsonl(text)
    assert t.orchestrator == "e" and t.planfence is not None
    assert all(isinstance(d, DecisionEntry) for d in t.planfence.decisions)
    assert len(t.planfence.records) == 3 and t.live is None
    # a decision line without a digest (written before #29): audited as recorded, noted
    assert len(t.warnings) == 1 and "carries no digest" in t.warnings[0]
    ex = t.extras
    assert list(ex) == ["orchestrator", "planfence", "warnings"]
    assert ex["planfence"]["decisions"] == [d.to_dict() for d in t.planfence.decisions]
    assert ex["planfence"]["records"] == [REQ0, PLAN0, REQ1]
    assert audit_trace(t).lineage[0].status == "valid"


def _out(content: str, **kw: Any) -> dict[str, Any]:
    return {"agent": "e", "kind": "tool_output", "tool": "book", "content": content, **kw}


def test_only_a_refused_calls_own_output_saying_it_ran_is_invalid() -> None:
    """A refused call's own output (its ``task`` and tool) saying it ran contradicts the
    refusal: INVALID. Outputs of another tool or of a task some decision authorized flag
    nothing (#28); untagged ones only beyond the authorized calls (#29)."""
    ok = _d("a-1", "authorized", "valid", {"req/t": R1}, {"req/t": R1})
    stale = _d("b-1", "replan_required", "stale", {"req/t": R0}, {"req/t": R1})
    blocked = _out("BLOCKED: stale", exitcode=1, blocked=True, task="b-1")

    def lineage(*outs: dict[str, Any], decisions: tuple[dict[str, Any], ...] = (ok, stale)
                ) -> dict[str, str]:
        text = _trace(*decisions) + "\n" + "\n".join(json.dumps(o) for o in outs)
        return {a.action: a.status for a in audit_trace(parse_jsonl(text)).lineage}

    honest = {"a-1": "valid", "b-1": "blocked"}
    assert lineage(_out("booked", exitcode=0), blocked) == honest
    assert lineage(blocked, _out("booked", exitcode=0)) == honest
    # an output no decision covers, beyond the calls the gate authorized, flags the
    # refused call (fail closed, #29: an edited trace could hide an unauthorized run)
    assert lineage(_out("booked", exitcode=0), _out("booked", exitcode=0)) == {
        "a-1": "valid", "b-1": "INVALID"}
    assert lineage(_out("booked", exitcode=0, task="a-1"),
                   _out("booked again", exitcode=0, task="a-1"), blocked) == honest
    assert lineage(blocked, _out("booked", exitcode=0, task="b-1", tool="other")) == honest
    assert lineage(blocked, {**_out("booked", exitcode=0), "agent": "other"}) == honest
    no_task = ({k: v for k, v in ok.items() if k != "task"},
               {k: v for k, v in stale.items() if k != "task"})
    assert lineage(_out("booked", exitcode=0), _out("booked", exitcode=0),
                   _out("BLOCKED", exitcode=1, blocked=True),
                   decisions=no_task + no_task[:1]) == {"book": "valid"}
    # a retry under one task: a decision of it authorized, so its outputs may be its own
    retry = _d("b-1", "authorized", "valid", {"req/t": R1}, {"req/t": R1})
    assert lineage(blocked, _out("booked", exitcode=0, task="b-1"),
                   decisions=(ok, stale, retry)) == {"a-1": "valid", "b-1": "valid"}
    # the refused call's own output says it ran
    assert lineage(_out("booked", exitcode=0),
                   _out("booked", exitcode=0, task="b-1")) == {"a-1": "valid",
                                                                "b-1": "INVALID"}
    assert lineage(_out("x", ran=True, exitcode=1, task="b-1")) == {"a-1": "valid",
                                                                     "b-1": "INVALID"}
    t = parse_jsonl(_trace(ok, stale) + "\n" + "\n".join(
        json.dumps(o) for o in (_out("booked", exitcode=0, task="a-1"),
                                _out("booked twice", exitcode=0, task="b-1"))))
    (bad,) = [lv for lv in trace_lineage(t.planfence, t.steps) if lv.status == "INVALID"]
    assert "yet a recorded tool output says the call ran: 'booked twice'" in bad.reason
