"""Issue 29, seventh sweep round: a later valid decision never hides a stale one.

A recording with one action authorized on stale facts (INVALID) and the same decision
written again with the head it should have seen (a conflicting duplicate line, or an
edit appending one) audited ``1 valid``: the action's status came from its last
decision only, so ``--fail-on invalid`` exited 0 (fail open). An action any of whose
decisions authorized it with a stale key is INVALID.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import audit_file, trace_lineages

R, B = "a" * 64, "b" * 64


def _decision(head: str, outcome: str = "authorized", reason: str = "valid") -> dict[str, Any]:
    return {"planfence": {"decision": {
        "outcome": outcome, "reason": reason, "action": "book", "roots": [R],
        "deps": ["req/t"], "frontier": {"req/t": R}, "heads": {"req/t": head}, "point": 1,
        "at_ms": 5.0, "task": "t"}}}


def _rows(*decisions: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"run": {"id": "r1", "succeeded": False, "ground_truth": "4"}},
            {"agent": "user", "kind": "task", "content": "add 2 and 2", "step": 0},
            {"agent": "coder", "kind": "output", "content": "4", "step": 1},
            {"planfence": {"record": {"id": R, "key": "req/t", "owner": "user", "seq": 1}}},
            *decisions,
            {"agent": "coder", "kind": "termination", "content": "done", "final_answer": "4"}]


def _status(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    p = tmp_path / "run.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = audit_file(p)[0]
    (action,) = trace_lineages(run.trace.planfence, run.trace.steps)
    return action.status


@pytest.mark.parametrize("order", ["stale-then-valid", "valid-then-stale"])
def test_a_stale_authorization_is_invalid_whatever_follows(tmp_path: Path, order: str) -> None:
    stale, valid = _decision(B), _decision(R)
    rows = _rows(stale, valid) if order == "stale-then-valid" else _rows(valid, stale)
    assert _status(tmp_path, rows) == "INVALID"


def test_a_refusal_then_a_valid_authorization_stays_valid(tmp_path: Path) -> None:
    """A call refused stale and authorized after its replan ran once, on fresh facts."""
    refused = _decision(B, outcome="replan_required", reason="stale")
    assert _status(tmp_path, _rows(refused, _decision(R))) == "valid"
    assert _status(tmp_path, _rows(_decision(R), copy.deepcopy(_decision(R)))) == "valid"
