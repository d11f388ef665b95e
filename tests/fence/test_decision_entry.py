"""``DecisionEntry``: the typed gate decision rooms exchange (issue 26 item 3).

``GateDecision.to_dict()`` must stay byte-identical to what it wrote before issue 26
(the old body is copied here as the reference), ``DecisionEntry.from_dict`` is its
inverse, and reading back is no stricter than the JSONL importer was.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.errors import FenceError
from icore.fence import DecisionEntry, DecisionFormatError, GateDecision, Outcome, Reason
from icore.records import Record

KEYS = st.sampled_from(["req/a", "req/b", "plan/c"])
TEXT = st.text(max_size=12)
IDS = st.text(alphabet="0123456789abcdef", min_size=1, max_size=8)
FRESH = [Record.create(key="req/a", owner="alice", seq=n, content={"v": n})
         for n in (1, 2)]


def old_to_dict(d: GateDecision) -> dict[str, Any]:
    """``GateDecision.to_dict`` before issue 26, verbatim."""
    return {
        "outcome": d.outcome.value,
        "reason": d.reason.value,
        "action": d.action,
        "roots": list(d.roots),
        "deps": list(d.deps),
        "frontier": dict(d.frontier),
        "heads": dict(d.heads),
        "fresh": {k: r.id for k, r in d.fresh.items()},
        "replanned": d.replanned,
        "point": d.point,
        "at_ms": d.at_ms,
        "policy": d.policy,
        "detail": d.detail,
        "owners_contacted": d.owners_contacted,
        "heads_checked": d.heads_checked,
    }


DECISIONS = st.builds(
    GateDecision,
    outcome=st.sampled_from(list(Outcome)),
    reason=st.sampled_from(list(Reason)),
    action=TEXT,
    roots=st.lists(IDS, max_size=3).map(tuple),
    deps=st.lists(KEYS, max_size=3, unique=True).map(lambda x: tuple(sorted(x))),
    frontier=st.dictionaries(KEYS, IDS, max_size=3),
    heads=st.dictionaries(KEYS, IDS, max_size=3),
    fresh=st.dictionaries(KEYS, st.sampled_from(FRESH), max_size=2),
    replanned=st.booleans(),
    point=st.integers(0, 10**6),
    at_ms=st.floats(0, 1e9, allow_nan=False) | st.integers(0, 10**9),
    policy=TEXT,
    detail=TEXT,
    owners_contacted=st.integers(0, 50),
    heads_checked=st.integers(0, 50),
)


@given(DECISIONS, st.none() | TEXT)
def test_to_dict_is_byte_identical_and_round_trips(d: GateDecision, task: str | None) -> None:
    before = json.dumps(old_to_dict(d))
    assert json.dumps(d.to_dict()) == before
    e = d.entry(task=task)
    want = old_to_dict(d) if task is None else {**old_to_dict(d), "task": task}
    assert json.dumps(e.to_dict()) == json.dumps(want)  # task last, only when set
    back = DecisionEntry.from_dict(json.loads(json.dumps(e.to_dict())))
    assert back == e
    assert json.dumps(back.to_dict()) == json.dumps(want)
    assert back.authorized == d.authorized


def test_minimal_decision_reads_with_defaults() -> None:
    e = DecisionEntry.from_dict({"outcome": "authorized", "reason": "valid"})
    assert e == DecisionEntry("authorized", "valid")
    assert (e.action, e.roots, e.deps, e.frontier, e.heads, e.fresh) == ("", (), (), {}, {},
                                                                         {})
    assert (e.replanned, e.point, e.policy, e.detail, e.task) == (False, 0, "", "", None)
    assert e.authorized


def test_lenient_as_the_importers() -> None:
    """Numbers as text, ids read as strings, unknown codes and fields kept/ignored."""
    e = DecisionEntry.from_dict({
        "outcome": "from_the_future", "reason": 7, "action": "book", "roots": ["r1", 2],
        "deps": ["req/a"], "frontier": {"req/a": 5}, "heads": {"req/a": "x"},
        "policy": 3, "detail": None, "point": None, "replanned": "false", "extra": [1],
        "task": "t1/book/abcd", "fresh": "not a map", "at_ms": "soon",
    })
    assert (e.outcome, e.reason, e.roots, e.frontier, e.policy, e.detail) == (
        "from_the_future", "7", ("r1", "2"), {"req/a": "5"}, "3", "")
    assert (e.point, e.replanned, e.task, e.fresh, e.at_ms) == (0, False, "t1/book/abcd",
                                                                {}, 0.0)
    assert not e.authorized
    assert DecisionEntry.from_dict({"outcome": "blocked", "reason": "x", "task": ""}
                                   ).to_dict()["task"] == ""


@pytest.mark.parametrize(("obj", "field", "message"), [
    ([], "pf[3].decision", "a decision must be an object"),
    ({"reason": "valid"}, "pf[3].decision.outcome", "missing field"),
    ({"outcome": "authorized", "reason": ["x"]}, "pf[3].decision.reason",
     "expected a string, got list"),
    ({"outcome": "a", "reason": "b", "frontier": []}, "pf[3].decision.frontier",
     "frontier must be an object of key -> record id"),
    ({"outcome": "a", "reason": "b", "heads": "h"}, "pf[3].decision.heads",
     "heads must be an object of key -> record id"),
    ({"outcome": "a", "reason": "b", "roots": "r"}, "pf[3].decision.roots",
     "roots must be a list"),
    ({"outcome": "a", "reason": "b", "deps": {}}, "pf[3].decision.deps",
     "deps must be a list"),
    ({"outcome": "a", "reason": "b", "detail": {}}, "pf[3].decision.detail",
     "expected a string, got dict"),
    ({"outcome": "a", "reason": "b", "point": -1}, "pf[3].decision.point",
     "must be an integer >= 0, not -1"),
    ({"outcome": "a", "reason": "b", "point": True}, "pf[3].decision.point",
     "must be an integer >= 0, not True"),
    ({"outcome": "a", "reason": "b", "replanned": "maybe"}, "pf[3].decision.replanned",
     "not a boolean: 'maybe'"),
])
def test_malformed_names_the_field(obj: Any, field: str, message: str) -> None:
    with pytest.raises(DecisionFormatError) as ei:
        DecisionEntry.from_dict(obj, where="pf[3].decision")
    assert ei.value.message == message
    assert ei.value.fields == {"field": field}
    assert isinstance(ei.value, FenceError) and isinstance(ei.value, ValueError)
