"""Failure attribution and its scoring (docs/audit-real-runs.md, "Failure attribution")."""

from __future__ import annotations

from typing import Any

import pytest

from icore.adapters import (
    PUBLISHED_BEST,
    attribute,
    audit_trace,
    parse_captain_agent,
    parse_magentic_one,
    score,
    speakers,
)


def test_root_is_first_unsupported_output(magentic: dict[str, Any]) -> None:
    """The root of the chain is the first unsupported output; the chain ends at the terminal."""
    r = audit_trace(parse_magentic_one(magentic))
    a = attribute(r)
    assert a is not None
    assert (a.agent, a.step, a.rule) == ("WebSurfer", 7, "work")
    defects = [c.defect for c in a.chain]
    assert defects[0] == "work" and defects[-1] == "terminal"
    assert "evidence" in defects  # the ledger claims that rested on it
    assert a.to_json()["chain"][0]["events"] == ["m7"]


def test_fallback_to_assignment_or_evidence(make_magentic: Any) -> None:
    """Without an unsupported output, the first unstable/unsupported orchestrator decision."""
    d = make_magentic()
    d["history"] = [*d["history"][:5], d["history"][-1]]
    d["history"][3] = {"role": "Orchestrator (-> FileSurfer)",
                       "content": "Search the web for 6*7 on a website."}
    d["history"][4] = {"role": "FileSurfer", "content": "Address: file:///a.txt\n42"}
    r = audit_trace(parse_magentic_one(d))
    a = attribute(r)
    assert a is not None
    assert (a.agent, a.step, a.rule) == ("Orchestrator", 3, "assignment/evidence")


def test_success_is_not_attributed(make_magentic: Any) -> None:
    """A run recorded as correct has no attribution."""
    r = audit_trace(parse_magentic_one(make_magentic(is_corrected="True")))
    assert attribute(r) is None
    assert score([r]).n == 0


def test_score_and_random_baseline(magentic: dict[str, Any], captain: dict[str, Any]) -> None:
    """Accuracy is exact-match; the random baseline is the expected uniform-guess accuracy."""
    r1 = audit_trace(parse_magentic_one(magentic))       # WebSurfer @ 7: both right
    r2 = audit_trace(parse_captain_agent(captain))       # Python_Expert @ 1: both right
    s = score([r1, r2])
    assert s.n == 2
    assert s.agent_accuracy == 1.0 and s.step_accuracy == 1.0
    n1 = len(speakers(r1))
    n2 = len(speakers(r2))
    assert s.random_agent == pytest.approx((1 / n1 + 1 / n2) / 2)
    assert s.random_step == pytest.approx((1 / 12 + 1 / 4) / 2)
    assert set(s.by_family) == {"magentic_one", "captain_agent"}
    assert s.published == PUBLISHED_BEST


def test_wrong_prediction_scores_zero(make_captain: Any) -> None:
    """A different annotated agent and step score 0."""
    r = audit_trace(parse_captain_agent(make_captain(mistake_agent="Math_Expert",
                                                     mistake_step="0")))
    s = score([r])
    assert s.agent_accuracy == 0.0 and s.step_accuracy == 0.0
    assert s.rows[0].true_agent == "Math_Expert"
