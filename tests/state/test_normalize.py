"""Observational equivalence (design.md 4.3) and JSON export."""

from __future__ import annotations

import json

from icore._clock import ManualClock
from icore.state import (
    Effect,
    EventSpec,
    Proposal,
    State,
    equivalent,
    export_json,
    normalize,
)


def _build(decl, *, ev_ids: tuple[str, str], clock_ms: float, assignee: str = "alice") -> State:
    x = State(decl, clock=ManualClock(clock_ms))
    e0, e1 = ev_ids
    assert x.submit(
        Proposal(
            "task",
            "introduce",
            events=(EventSpec("task_posted", "task", {"description": "d"}, id=e0),),
            effects=(Effect.node("o1", "code", required_root=True),),
            justification=(e0,),
        )
    ).committed
    assert x.submit(
        Proposal(
            "lead",
            "assign",
            target="o1",
            events=(EventSpec("note", "lead", {}, (e0,), e1),),
            effects=(Effect.assign("o1", assignee), Effect.status("o1", "assigned")),
            justification=(e1,),
        )
    ).committed
    return x


def test_fresh_ids_and_timestamps_are_ignored(code_review):
    a = _build(code_review, ev_ids=("t", "n"), clock_ms=0.0)
    b = _build(code_review, ev_ids=("task-0001", "note-7"), clock_ms=12345.0)
    assert equivalent(a, b)
    assert export_json(a) != export_json(b)  # the export keeps ids and times


def test_assignee_status_and_flags_are_kept(code_review):
    a = _build(code_review, ev_ids=("t", "n"), clock_ms=0.0)
    b = _build(code_review, ev_ids=("t", "n"), clock_ms=0.0, assignee="bob")
    assert not equivalent(a, b)
    c = _build(code_review, ev_ids=("t", "n"), clock_ms=0.0)
    c.raise_flag("unsupported_assertion", obligations=("o1",))  # type: ignore[arg-type]
    assert not equivalent(a, c)


def test_normal_form_and_export_are_json(code_review):
    a = _build(code_review, ev_ids=("t", "n"), clock_ms=3.0)
    n = normalize(a)
    assert [e["id"] for e in n["G"]] == ["E1", "E2"]
    assert n["G"][1]["causes"] == ["E1"]
    assert n["Q"]["obligations"]["o1"]["status"] == "assigned"
    assert n["Q"]["obligations"]["o1"]["assignee"] == "alice"
    json.dumps(n)
    exp = export_json(a)
    assert exp["metrics"]["evaluated"] == 1
    assert exp["G"][0]["t_ms"] == 3.0
    assert json.loads(json.dumps(exp)) == exp


def test_declared_normalize_interface(code_review):
    a = _build(code_review, ev_ids=("t", "n"), clock_ms=0.0)
    assert code_review.interfaces.normalize(a) == normalize(a)
