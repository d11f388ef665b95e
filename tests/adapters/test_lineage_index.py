"""One record index per trace, bounded pictures, the same verdicts (issue 29).

``trace_lineages`` used to scan every record per action and keep every version of each
key in D(x) and the roots' whole ancestry in each picture: an audit quadratic in the
protected calls. :class:`RecordIndex` indexes the records once; the edited-record check
still covers the full set the old picture held (held against the old code here, on
random record graphs, cycles included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import lineage_of, trace_lineages
from icore.adapters._lineage_index import RecordIndex
from icore.fence import DecisionEntry
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace

pytestmark = pytest.mark.timeout(120)

KEYS = ("k/a", "k/b", "k/c")


def _old_picture(records: Sequence[Mapping[str, Any]], decisions: Sequence[DecisionEntry]
                 ) -> list[Mapping[str, Any]]:
    """The picture before issue 29's index (the reference the verdicts are held to)."""
    by_id = {str(r.get("id")): r for r in records}
    roots = {x for d in decisions for x in d.roots}
    deps = {k for d in decisions for k in d.deps}
    keep = set(roots) | {v for d in decisions for m in (d.frontier, d.heads)
                         for v in m.values()}
    todo = list(keep)
    while todo:
        r = by_id.get(todo.pop())
        for p in (r.get("parents") or ()) if r is not None else ():
            if str(p) not in keep:
                keep.add(str(p))
                todo.append(str(p))
    return [r for r in records if str(r.get("id")) in keep or r.get("key") in deps
            or roots & {str(p) for p in r.get("parents") or ()}]


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[DecisionEntry], set[str]]:
    n = draw(st.integers(1, 14))
    ids = [f"{i:064x}" for i in range(n)]
    records = [{"id": ids[i], "key": draw(st.sampled_from(KEYS)), "seq": i + 1,
                "owner": "o", "type": "fact",
                "parents": draw(st.lists(st.sampled_from(ids), max_size=3, unique=True))}
               for i in range(n)]
    pick = st.sampled_from(ids)
    decisions = [DecisionEntry(
        outcome=draw(st.sampled_from(["authorized", "replan_required", "blocked"])),
        reason=draw(st.sampled_from(["valid", "stale", "not_validated"])), action="ship",
        roots=tuple(draw(st.lists(pick, min_size=1, max_size=2, unique=True))),
        deps=tuple(draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))),
        frontier=draw(st.dictionaries(st.sampled_from(KEYS), pick, max_size=2)),
        heads=draw(st.dictionaries(st.sampled_from(KEYS), pick, max_size=2)),
        point=i + 1) for i in range(draw(st.integers(1, 3)))]
    edited = set(draw(st.lists(pick, max_size=3)))
    return records, decisions, edited


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_same_verdict_and_edited_record_as_the_full_picture(
        g: tuple[list[dict[str, Any]], list[DecisionEntry], set[str]]) -> None:
    """The bounded picture gives the same points and status; the first edited record of
    the old full picture (ancestors, every version of D(x), derived records) is found."""
    records, decisions, edited = g
    why = {e: f"record {e[-2:]} edited" for e in edited}
    index = RecordIndex(records, why)
    old = _old_picture(records, decisions)
    new = index.picture(decisions)
    assert {r["id"] for r in new} <= {r["id"] for r in old}
    want = next((why[r["id"]] for r in old if r["id"] in why), None)
    assert index.edited_shown(decisions) == want
    a, b = (lineage_of("t", "t", p, decisions) for p in (old, new))
    assert (a.status, a.points) == (b.status, b.points)


def test_an_edited_record_deep_in_the_ancestry_fails_the_action_closed() -> None:
    """A record five generations above the plan is not in the picture, yet editing it
    makes the action's verdict untrusted, as before the picture was bounded."""
    chain = [f"{i:064x}" for i in range(7)]
    records = [{"id": rid, "key": f"note/{i}", "seq": i + 1, "owner": "o",
                "parents": [chain[i - 1]] if i else []} for i, rid in enumerate(chain)]
    d = DecisionEntry(outcome="authorized", reason="valid", action="ship",
                      roots=(chain[-1],), deps=("note/5",), frontier={"note/5": chain[5]},
                      heads={"note/5": chain[5]}, point=1)
    index = RecordIndex(records, {chain[0]: "record 0 edited"})
    assert chain[0] not in {r["id"] for r in index.picture([d])}
    assert index.edited_shown([d]) == "record 0 edited"
    assert RecordIndex(records, {}).edited_shown([d]) is None


def _lineage(n: int) -> tuple[Any, Any]:
    rec = RunRecorder("big", question="ship")
    ws = Workspace({"order/*": "sales"})
    agent = ws.agent("shipper")
    guard = FenceGuard(agent=agent, depends_on={"order/1"}, recorder=rec)
    rec.task("ship")
    for i in range(n):
        ws.put("order/1", {"city": f"c{i}"})
        agent.read("order/1")
        if i % 3 == 0:
            ws.put("order/1", {"city": f"d{i}"})
        guard.run("ship", lambda city: city, {"city": f"c{i}"})
    rec.finish("shipper", "done")
    t = rec.trace()
    return trace_lineages(t.planfence, t.steps), t.planfence


def test_a_picture_does_not_grow_with_the_versions_of_its_key() -> None:
    """Every version of ``order/1`` used to be in every action's picture (n calls: n^2
    records); now each picture holds its plan's inputs, F/H versions, its action record
    and the key's newest version, whatever n."""
    (small, _), (big, log) = _lineage(6), _lineage(30)
    assert [a.status for a in big[:6]] == [a.status for a in small]
    assert max(len(a.records) for a in big) == max(len(a.records) for a in small) <= 5
    newest = max((r for r in log.records if r.get("key") == "order/1"),
                 key=lambda r: r["seq"])
    assert all(newest in a.records for a in big)  # what an INVALID reason may name
