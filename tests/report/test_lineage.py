"""Lineage pictures, G's paged layout, flag views and PlanFence lines in JSONL traces."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.adapters import AdapterError, parse_jsonl
from icore.report import EventView, lineage_view, trace_lineage
from icore.report._render import _event_graph, _lineage_picture

R0, R1, PLAN, REPLAN, ACT = ("0" * 64, "1" * 64, "2" * 64, "3" * 64, "4" * 64)
RECORDS = [
    {"id": R0, "key": "req/t", "owner": "rev", "seq": 1, "type": "requirement",
     "parents": [], "role": "requirement"},
    {"id": PLAN, "key": "plan/t", "owner": "pl", "seq": 1, "type": "plan",
     "parents": [R0], "role": "plan", "content": {"args": {"option": "H6"}}},
    {"id": R1, "key": "req/t", "owner": "rev", "seq": 2, "type": "requirement",
     "parents": [R0], "role": "revision"},
    {"id": REPLAN, "key": "plan/t", "owner": "pl", "seq": 2, "type": "plan",
     "parents": [R1], "role": "replan"},
    {"id": ACT, "key": "act/t", "owner": "ex", "seq": 1, "type": "action",
     "parents": [REPLAN], "role": "action"},
]


def _decision(point: int, outcome: str, reason: str, roots: list[str],
              frontier: dict[str, str], heads: dict[str, str], **kw: object) -> dict[str, object]:
    return {"point": point, "outcome": outcome, "reason": reason, "roots": roots,
            "deps": ["req/t"], "frontier": frontier, "heads": heads,
            "policy": kw.get("policy", "planfence"), "replanned": kw.get("replanned", False),
            "detail": kw.get("detail", "")}


def test_replan_then_authorized_is_valid() -> None:
    """validate (stale) -> replan -> validate -> authorized; the revision is named."""
    lv = lineage_view("t", "t", RECORDS, [
        _decision(1, "replan_required", "stale", [PLAN], {"req/t": R0}, {"req/t": R1}),
        _decision(2, "authorized", "valid", [REPLAN], {"req/t": R1}, {"req/t": R1},
                  replanned=True)])
    assert lv.status == "valid"
    assert [s.kind for s in lv.steps] == ["validate", "replan", "validate", "authorized"]
    assert lv.stale_by == (R1,) and lv.points[0].stale == ("req/t",)
    assert lv.points[1].stale == () and lv.action == ACT and lv.roots == (REPLAN,)
    assert "found the plan stale" in lv.reason and "seq 2" in lv.reason
    pic = _lineage_picture(lv)
    assert pic is not None
    cls = {n.id: n.cls for n in pic.nodes}
    assert "stale-rev" in cls[R1] and "stale-plan" in cls[PLAN] and "root" in cls[REPLAN]
    assert "in-frontier" in cls[R0] and "is-head" in cls[R1]
    assert len(pic.edges) == sum(len(r["parents"]) for r in RECORDS)


def test_policy_without_frontier_uses_plan_parents() -> None:
    """Owner-head freshness computes no F(x): the plan's exact parents stand in for it,
    labelled, and an authorized action from the stale plan is INVALID."""
    lv = lineage_view("t", "t", RECORDS[:3], [
        _decision(1, "authorized", "not_validated", [PLAN], {}, {"req/t": R1},
                  policy="owner_head_freshness")])
    p = lv.points[0]
    assert p.frontier_source == "plan parents" and p.frontier == (("req/t", R0),)
    assert lv.status == "INVALID" and lv.reason.startswith("INVALID")
    assert "seq 1" in lv.reason and "seq 2" in lv.reason and "did not check" in lv.reason
    assert lv.steps[-1].status == "bad"


def test_policy_reading_no_heads_names_the_newest_recorded_version() -> None:
    """A local replica reads neither F(x) nor owner heads: an INVALID action's reason
    names the cited version and the run's newest version of the key, labelled as such
    (status is the caller's ground truth)."""
    lv = lineage_view("t", "t", RECORDS[:3], [
        _decision(1, "authorized", "not_validated", [PLAN], {}, {},
                  policy="local_replica")], status="INVALID")
    assert lv.points[0].heads == ()
    assert "bound to seq 1" in lv.reason and "newest version is seq 2" in lv.reason
    assert "by rev" in lv.reason and "read no owner head" in lv.reason
    # nothing newer recorded than the cited version: no such claim
    lv = lineage_view("t", "t", RECORDS[:2], [
        _decision(1, "authorized", "not_validated", [PLAN], {}, {},
                  policy="local_replica")], status="INVALID")
    assert "newest version" not in lv.reason


def test_blocked_reason_is_the_gate_reason() -> None:
    """A blocked action: the reason line quotes the gate's reason and detail."""
    lv = lineage_view("t", "t", RECORDS[:2], [
        _decision(1, "blocked", "owner_unavailable", [PLAN], {"req/t": R0}, {},
                  detail="owner rev did not answer")])
    assert lv.status == "blocked"
    assert lv.reason.startswith("BLOCKED") and "owner_unavailable" in lv.reason
    assert "did not answer" in lv.reason and lv.steps[-1].kind == "blocked"


def test_no_decision_is_not_issued() -> None:
    """No gate decision at all: nothing was issued."""
    assert lineage_view("t", "t", RECORDS[:1], []).status == "not issued"


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=5))
def test_stale_keys_are_exactly_frontier_not_head(pairs: list[tuple[int, int]]) -> None:
    """A key is stale at a validation point iff its F(x) version is not its H(x) one;
    an authorized action is INVALID iff some key is stale."""
    def rid(k: int, v: int) -> str:
        return f"{k:032x}{v:032x}"

    deps = [f"k{i}" for i in range(len(pairs))]
    d = {"point": 1, "outcome": "authorized", "reason": "valid", "roots": ["r"],
         "deps": deps, "frontier": {k: rid(i, f) for i, (k, (f, _)) in
                                    enumerate(zip(deps, pairs, strict=True))},
         "heads": {k: rid(i, h) for i, (k, (_, h)) in enumerate(zip(deps, pairs, strict=True))},
         "policy": "p"}
    lv = lineage_view("x", "x", [], [d])
    want = tuple(k for k, (f, h) in zip(deps, pairs, strict=True) if f != h)
    assert lv.points[0].stale == want
    assert lv.status == ("INVALID" if want else "valid")


def test_event_graph_pages() -> None:
    """1,050 events: 11 pages of at most 100, every event drawn once, causes across a
    page boundary drawn as stubs, lanes one per agent."""
    events = [EventView(f"e{i}", i, "t", "action", f"a{i % 4}",
                        causes=tuple(f"e{j}" for j in (i - 1, i - 150) if j >= 0))
              for i in range(1050)]
    g = _event_graph(events, per_page=100)
    assert g is not None and len(g.pages) == 11 and len(g.lanes) == 4
    drawn = [n.e.id for p in g.pages for n in p.nodes]
    assert drawn == [e.id for e in events]
    off = sum(1 for p in g.pages for e in p.edges if "offpage" in e.cls)
    want = sum(1 for e in events for c in e.causes if int(c[1:]) // 100 != int(e.id[1:]) // 100)
    assert off == want and g.edges == sum(len(e.causes) for e in events)
    assert not g.pages[0].labelled and _event_graph(events[:10]).pages[0].labelled  # type: ignore[union-attr]


def test_many_agents_a_page_draws_only_its_lanes() -> None:
    """2,000 agents, one event each, each caused by the event 150 before it: a page draws
    the lanes of its own events' agents and of its off-page causes' agents (a stub starts
    on its cause's lane), not all 2,000; up to ALL_LANES_MAX agents every page keeps
    every lane in its place."""
    from icore.report._render import ALL_LANES_MAX

    events = [EventView(f"e{i}", i, "t", "action", f"a{i}",
                        causes=(f"e{i - 150}",) if i >= 150 else ())
              for i in range(2000)]
    g = _event_graph(events, per_page=100)
    assert g is not None and g.page_lanes and len(g.lanes) == 2000
    for p in g.pages:
        lanes = dict(p.lanes)
        want = {n.e.agent for n in p.nodes} | {f"a{int(c[1:])}" for n in p.nodes
                                               for c in n.e.causes}
        assert set(lanes) == want and len(lanes) <= 200
        assert all(lanes[n.e.agent] == n.y for n in p.nodes)
        assert p.height < 210 * 40
    few = _event_graph(events[:ALL_LANES_MAX], per_page=10)
    assert few is not None and not few.page_lanes
    assert all(p.lanes == few.lanes for p in few.pages)


def _jsonl(*lines: object) -> str:
    return "\n".join(json.dumps(x) for x in lines)


def test_jsonl_planfence_lines_are_kept_not_steps() -> None:
    """PlanFence lines land in extras and build one lineage per action; step numbers
    of the messages are unchanged."""
    t = parse_jsonl(_jsonl(
        {"agent": "u", "kind": "task", "content": "x"},
        {"planfence": {"record": RECORDS[0]}}, {"planfence": {"record": RECORDS[1]}},
        {"planfence": {"record": {**RECORDS[2], "seq": 2}}},
        {"planfence": {"decision": {**_decision(1, "authorized", "not_validated", [PLAN], {},
                                                {"req/t": R1}), "action": "book"}}},
        {"agent": "e", "kind": "output", "content": "done"}))
    assert [s.index for s in t.steps] == [0, 1]
    pf = t.extras["planfence"]
    assert len(pf["records"]) == 3 and len(pf["decisions"]) == 1
    (lv,) = trace_lineage(pf)
    assert lv.status == "INVALID" and {r.id for r in lv.records} == {R0, PLAN, R1}


@pytest.mark.parametrize(("line", "field"), [
    ({"planfence": []}, "line 2.planfence"),
    ({"planfence": {"record": {"key": "k"}}}, "line 2.planfence.record.id"),
    ({"planfence": {"record": {"id": "a" * 64, "key": "k", "parents": "p"}}},
     "line 2.planfence.record.parents"),
    ({"planfence": {"record": {"id": "a" * 64, "key": "k", "seq": "2"}}},
     "line 2.planfence.record.seq"),
    ({"planfence": {"record": {"id": "x", "key": "k"}}}, "line 2.planfence.record.id"),
    ({"planfence": {"record": {"id": "", "key": "k"}}}, "line 2.planfence.record.id"),
    ({"planfence": {"decision": {"outcome": "authorized"}}},
     "line 2.planfence.decision.reason"),
    ({"planfence": {"decision": {"outcome": "a", "reason": "b", "heads": []}}},
     "line 2.planfence.decision.heads"),
])
def test_jsonl_planfence_errors_name_the_field(line: dict[str, object], field: str) -> None:
    """A malformed PlanFence line is a typed error naming the line and field."""
    with pytest.raises(AdapterError) as exc:
        parse_jsonl(_jsonl({"agent": "u", "kind": "task"}, line))
    assert exc.value.field == field


def test_an_action_record_shows_every_argument_the_tool_saw() -> None:
    """A pydantic model argument with its defaults is longer than 90 characters: the
    action's arguments are shown whole (QA: the required fields were cut off); other
    records' content stays short."""
    from icore.report._lineage_view import record_views

    args = {"req": {"bags": 0, "cabin": "economy", "day": "2026-12-10", "origin": "LIS",
                    "trip_id": "T7", "destination": "OSL"}}
    fact = {"note": "x" * 200}
    views = record_views([
        {"id": "a" * 64, "key": "planfence.act/book_flight", "owner": "desk", "seq": 3,
         "type": "action", "role": "action", "content": {"args": args}},
        {"id": "b" * 64, "key": "trip/T7", "owner": "fin", "seq": 1, "type": "fact",
         "role": "input", "content": fact},
        {"id": "c" * 64, "key": "planfence.act/book_flight", "owner": "desk", "seq": 4,
         "type": "action", "content": {"args": args}}])  # no role: its type says action
    assert '"trip_id": "T7"' in views[0].summary and '"origin": "LIS"' in views[0].summary
    assert not views[0].summary.endswith("…")
    assert len(views[1].summary) == 90 and views[1].summary.endswith("…")
    assert views[2].role == "action" and views[2].summary == views[0].summary
