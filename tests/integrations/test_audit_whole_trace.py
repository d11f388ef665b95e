"""The audit tells the truth when lines outside the old chain are edited (QA qa-new14 S3).

Every line an icore writer writes now carries a whole-line digest and its link in the
writer's chain (model turns and their ``tool_calls`` too), and the audit holds a
protected call's arguments against the model turn that asked for it (by the tool
call's id). A ``not_read`` / ``stale`` refusal names the call that ran after it (QA
qa-new13a S4). Real LangGraph runs (the scripted chat model of the recording tests).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="icore[langgraph]")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from icore._line_seal import whole_digest
from icore.adapters import AdapterError, audit_trace, parse_jsonl
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

from .test_recording_truthful import Brain, Hotel, _audit, _graph


def _run(change_to: str | None = "120") -> RunRecorder:
    """Read R101, book it; the price changes in between (a stale refusal, the replan)."""
    hotel = Hotel()
    rec = RunRecorder("whole")
    app = _graph(hotel, Brain(brain=hotel.brain(change_to=change_to)))
    app.invoke({"messages": [HumanMessage("Book room R101")]},
               {"callbacks": [RecordingHandler(rec)]})
    return rec


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _write(p: Path, lines: list[dict[str, Any]]) -> Path:
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def _stripped(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As a writer without digests would have written it (no marker, digest or chain)."""
    for x in lines:
        for k in ("digest", "run_digest", "chain", "chain_end"):
            x.pop(k, None)
        if "run" in x:
            x["run"].pop("icore", None)
        pf = x.get("planfence")
        if isinstance(pf, dict) and isinstance(pf.get("decision"), dict):
            pf["decision"].pop("digest", None)
    return lines


def _turn(lines: list[dict[str, Any]], tool: str = "book_room") -> tuple[int, dict[str, Any]]:
    return next((n, x) for n, x in enumerate(lines) if x.get("kind") == "output" and any(
        c.get("name") == tool for c in x.get("tool_calls") or ()))


def test_every_line_is_digested_and_chained_and_the_honest_run_is_clean(tmp_path: Path
                                                                        ) -> None:
    rec = _run()
    lines = _lines(rec.jsonl())
    assert all("chain" in x for x in lines)
    assert all(x["digest"] == whole_digest(x) for x in lines if "agent" in x)
    assert lines[0]["run_digest"] == whole_digest(lines[0])
    assert "lines" in lines[0]["run"]["icore"]["digests"]
    n, turn = _turn(lines)
    linked = [x for x in lines if x.get("call_id") and x.get("task")]
    assert linked and {x["call_id"] for x in linked} <= {
        c["id"] for _, t in [(n, turn)] for c in t["tool_calls"]} | {
        c.get("id") for x in lines for c in x.get("tool_calls") or ()}
    code, _out, run = _audit(rec.write(tmp_path / "honest.jsonl"), "--fail-on", "invalid")
    assert code == 0 and "INVALID" not in {lv["status"] for lv in run["lineage"]}
    assert not [w for w in run.get("warnings", ()) if "digest" in w or "differ" in w
                or "chain" in w]


def test_a_refusal_names_the_call_that_ran_after_it(tmp_path: Path) -> None:
    rec = _run()
    _code, _out, run = _audit(rec.write(tmp_path / "again.jsonl"))
    blocked = [lv for lv in run["lineage"] if lv["status"] == "blocked"]
    ran = [lv for lv in run["lineage"] if lv["status"] == "valid"]
    assert len(blocked) == 1 and len(ran) == 1
    said = blocked[0]["called_again"]
    assert said.startswith("refused stale at line ") and "; called again at line " in said
    assert f"({ran[0]['action']}) after reading room/R101@2" in said
    assert said in blocked[0]["reason"] and "called_again" not in ran[0]
    page = (tmp_path / "again-rep" / "whole.html").read_text(encoding="utf-8")
    assert "called again" in page


def test_an_edited_model_turn_or_action_is_invalid(tmp_path: Path) -> None:
    base = _lines(_run().jsonl())
    n, _ = _turn(base)
    cases: dict[str, list[dict[str, Any]]] = {}
    turn = json.loads(json.dumps(base))
    turn[n]["tool_calls"][0]["args"]["price"] = "1"  # the model's turn made innocent
    cases["turn"] = turn
    gone = json.loads(json.dumps(base))
    del gone[n]  # a model turn deleted
    cases["deleted"] = gone
    act = json.loads(json.dumps(base))
    out = next(x for x in act if x.get("kind") == "tool_output" and x.get("tool") ==
               "book_room" and not x.get("blocked"))
    out["args"]["price"] = "1000"  # the action's line says another amount
    cases["action"] = act
    for name, lines in cases.items():
        code, _o, run = _audit(_write(tmp_path / f"{name}.jsonl", lines), "--fail-on",
                               "invalid")
        assert code == 3 and {lv["status"] for lv in run["lineage"]} == {"INVALID"}, name


def test_the_turn_check_reads_a_trace_without_digests(tmp_path: Path) -> None:
    """No digest to catch the edit (a writer without them): the turn check does."""
    lines = _stripped(_lines(_run(change_to=None).jsonl()))
    n, turn = _turn(lines)
    call = next(c for c in turn["tool_calls"] if c["name"] == "book_room")
    code, _o, run = _audit(_write(tmp_path / "plain.jsonl", lines), "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["valid"]
    call["args"]["price"] = "10"
    code, _o, run = _audit(_write(tmp_path / "forged.jsonl", lines), "--fail-on", "invalid")
    (lv,) = run["lineage"]
    assert code == 3 and lv["status"] == "INVALID"
    assert (f"arguments of book_room call {call['id']} differ from the model's tool call "
            f"at line {n + 1}: price \"10\" vs \"100\"") in lv["reason"]
    call["args"]["price"] = "100"
    call["name"] = "cancel_room"  # another tool asked for
    code, _o, run = _audit(_write(tmp_path / "tool.jsonl", lines), "--fail-on", "invalid")
    assert code == 3 and "the tool 'cancel_room' vs 'book_room'" in run["lineage"][0]["reason"]


def _payments(asked: list[tuple[str, dict[str, Any]]]) -> tuple[RunRecorder, list[Any]]:
    """A payer reads account A, then the model asks for ``asked`` in one turn."""
    ws = Workspace({"acct/*": "bank"})
    ws.put("acct/A", {"limit": 100})
    payer = ws.agent("payer")
    paid: list[Any] = []

    @tool
    def get_acct(acct: str) -> dict[str, Any]:
        """Read an account."""
        return dict(payer.read(f"acct/{acct}") or {})

    def pay(acct: str, amount: int, when: date, memo: str = "") -> str:
        """Pay ``amount`` from ``acct`` on ``when``."""
        paid.append((amount, when, memo))
        return f"paid {amount}"

    def think(messages: list[BaseMessage]) -> Any:
        done = [m.name for m in messages if isinstance(m, ToolMessage)]
        if not done:
            return [("get_acct", {"acct": "A"})]
        return asked if "pay" not in done else "done"

    brain = Brain(brain=think)  # one model: its call ids c1, c2, ... unique in the run
    g = StateGraph(MessagesState)
    g.add_node("payer", lambda st: {"messages": [brain.invoke(st["messages"])]})
    g.add_node("tools", ToolNode([get_acct, fenced_tool(
        pay, agent=payer, depends_on=lambda a: {f"acct/{a['acct']}"})]))
    g.add_edge(START, "payer")
    g.add_conditional_edges("payer", tools_condition)
    g.add_edge("tools", "payer")
    rec = RunRecorder("pay")
    g.compile().invoke({"messages": [HumanMessage("pay")]},
                       {"callbacks": [RecordingHandler(rec)]})
    return rec, paid


def test_the_schema_s_normal_form_and_two_calls_in_one_turn_are_no_difference(
        tmp_path: Path) -> None:
    """Arguments reordered, a number sent as text, a date-time for a date, a default
    filled in, two calls of one turn: the honest run audits clean; the normal form is
    noted on the tool call (``args_normal``), so dropping that note shows the raw
    difference the schema made (which the audit must not read as a forgery)."""
    rec, paid = _payments([("pay", {"when": "2026-03-01T00:00:00", "amount": "10",
                                    "acct": "A"}),
                           ("pay", {"acct": "A", "amount": 20, "when": "2026-03-02"})])
    assert paid == [(10, date(2026, 3, 1), ""), (20, date(2026, 3, 2), "")]
    lines = _lines(rec.jsonl())
    _, turn = _turn(lines, "pay")
    first, second = turn["tool_calls"]
    assert first["args_normal"] == {"acct": "A", "amount": 10, "when": "2026-03-01",
                                    "memo": ""}
    assert "args_normal" not in second  # the schema changed none of its values
    assert len({x["call_id"] for x in lines if x.get("call_id")}) == 2
    code, _o, run = _audit(rec.write(tmp_path / "pay.jsonl"), "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["valid", "valid"]
    assert not [w for w in run.get("warnings", ()) if "differ" in w]
    plain = _stripped(lines)  # no digests: only the turn check reads the edit
    del _turn(plain, "pay")[1]["tool_calls"][0]["args_normal"]
    code, _o, run = _audit(_write(tmp_path / "raw.jsonl", plain), "--fail-on", "invalid")
    assert [lv["status"] for lv in run["lineage"]] == ["INVALID", "valid"]
    assert 'amount "10" vs 10' in run["lineage"][0]["reason"]


_TRACE: list[str] = []


def _trace() -> str:
    if not _TRACE:
        _TRACE.append(_run().jsonl())
    return _TRACE[0]


def _detected(text: str) -> bool:
    try:
        t = parse_jsonl(text, file="<edit>")
    except AdapterError:
        return True  # the edit made the line unreadable: refused, naming it
    pf = t.planfence
    if pf is None:
        return True  # its PlanFence lines edited away: no action is reported at all
    return pf.chain_broken is not None or bool(pf.edited or pf.edited_decisions
                                                or pf.edited_lines or pf.edited_answers)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=8),
                    st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_single_line_edit_of_a_recorded_trace_is_detected(data: st.DataObject) -> None:
    lines = _trace().splitlines()
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    obj = json.loads(lines[i])
    keys = sorted(obj)
    key = data.draw(st.sampled_from(keys), label="key")
    if data.draw(st.booleans(), label="drop"):
        del obj[key]
    else:
        new = data.draw(_VALUES.filter(lambda v: json.dumps(v) != json.dumps(obj[key])),
                        label="value")
        obj[key] = new
    lines[i] = json.dumps(obj)
    assert _detected("\n".join(lines) + "\n"), (i, key)


def test_the_honest_trace_itself_is_not_flagged() -> None:
    assert not _detected(_trace())
    assert "INVALID" not in {lv.status for lv in audit_trace(parse_jsonl(_trace())).lineage}
