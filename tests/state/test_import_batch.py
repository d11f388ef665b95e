"""The batched trusted-import path (``State.import_batch``) leaves X exactly as the same
imports one by one (issue 29 item 4): hypothesis over random import sequences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from icore.state import (
    DeclarationPackage,
    Effect,
    EventSpec,
    State,
    StateInputError,
    Status,
    load_declaration,
)

DECL = load_declaration(Path(__file__).resolve().parents[2] / "examples" / "declarations"
                        / "code_review.yaml")
OIDS = ["o1", "o2", "o3", "o4"]
AGENTS = ["lead", "alice", "bob", "ci", "nobody"]
OPS = ["introduce", "assign", "start", "submit", "approve", "settle", "transfer", None, "bad"]
EVENTS = ["m1", "e2", "m3"]  # m<k>: Π keeps them as numbers (icore.state._pitable)

_item = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(OIDS), st.sampled_from(["code", "review"]),
              st.none() | st.sampled_from(OIDS), st.sampled_from([0.0, 1.0, 2.5])),
    st.tuples(st.just("assign"), st.sampled_from(OIDS), st.sampled_from(AGENTS)),
    st.tuples(st.just("status"), st.sampled_from(OIDS), st.sampled_from(list(Status))),
    st.tuples(st.just("result"), st.sampled_from(OIDS), st.integers(0, 3)),
    st.tuples(st.just("relation"), st.sampled_from(OIDS), st.sampled_from(OIDS)),
    st.tuples(st.just("claim"), st.sampled_from(OIDS), st.booleans()),
    st.tuples(st.just("cert"), st.sampled_from(["ci_green", "approved", "nope"]),
              st.booleans()),
    st.tuples(st.just("cut")),
)
_just = st.fixed_dictionaries({
    "op": st.sampled_from(OPS),
    "events": st.lists(st.sampled_from(EVENTS[:3]), min_size=1, max_size=2)
    | st.sampled_from([[], ["e9"]]),
    "certs": st.just([]) | st.lists(st.integers(1, 3), min_size=1, max_size=1),
    "proposer": st.sampled_from([None, "lead", "alice", "bob", "bob", "nobody"]),
    "cites": st.just([]) | st.just([]) | st.lists(st.integers(1, 6), min_size=1, max_size=1),
    "justified": st.booleans()})


def _state(decl: DeclarationPackage) -> State:
    x = State(decl)
    for i, eid in enumerate(EVENTS):
        x.add_event(EventSpec("note", "lead", {"i": i}, (), eid))
    for oid in OIDS[:2]:  # two obligations before any batch (the items may create o3, o4)
        x.import_assertion(Effect.node(oid, "code"), events=["m1"], operation="introduce")
    return x


def _effect(item: tuple[Any, ...]) -> Effect:
    kind, oid = item[0], item[1]
    if kind == "node":
        return Effect.node(oid, item[2], parent=item[3], weight=item[4])
    if kind == "assign":
        return Effect.assign(oid, item[2])
    if kind == "status":
        return Effect.status(oid, item[2])
    if kind == "result":
        return Effect.result(oid, {"v": item[2]})
    if kind == "relation":
        return Effect.relation(oid, "transported_to", item[2])
    return Effect.claim(oid, "reviewed", item[2])


def _apply(target: Any, item: tuple[Any, ...], j: dict[str, Any]) -> None:
    """One import through ``target`` (a State or an ImportBatch); refusals are skipped."""
    try:
        if item[0] == "cert":
            target.import_certificate(item[1], verdict=item[2], events=j["events"],
                                      payload={"n": len(j["certs"])})
        else:
            target.import_assertion(
                _effect(item), events=j["events"], operation=j["op"],
                certificates=[f"c{c}" for c in j["certs"]],
                cites=[f"a{c}" for c in j["cites"]], proposer=j["proposer"],
                justified=j["justified"])
    except StateInputError:
        pass


def _snapshot(x: State) -> dict[str, Any]:
    return {
        "seq": x.seq, "obligations": dict(x.obligations), "assertions": dict(x.assertions),
        "pi": dict(x.justifications), "certs": dict(x.certificates),
        "metrics": x.metrics(), "evaluated": sorted(x.evaluated()),
        "evals": {o: x.evaluation(o) for o in x.obligations},
        "sound": {a: x.assertion_sound(a) for a in x.assertions},
    }


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_item, _just), max_size=40))
@example([(("assign", "o1", "alice"), {"op": "assign", "events": ["m1"], "certs": [],
                                      "proposer": None, "cites": [], "justified": True}),
          (("result", "o1", 1), {"op": None, "events": ["e2"], "certs": [],
                                 "proposer": "alice", "cites": [], "justified": True})])
def test_batched_import_equals_one_by_one(items: list[tuple[tuple[Any, ...], Any]]) -> None:
    """Same items, same refusals, same X: obligations, Π, evaluations and metrics; and the
    incrementally kept metrics equal a full recompute."""
    one = _state(DECL)
    for item, j in items:
        if item[0] != "cut":
            _apply(one, item, j)
    many = _state(DECL)
    i = 0
    while i < len(items):
        with many.import_batch() as b:
            while i < len(items) and items[i][0][0] != "cut":
                _apply(b, *items[i])
                i += 1
        i += 1
    assert _snapshot(many) == _snapshot(one)
    assert many.metrics() == many.recompute_metrics()


def test_batch_is_atomic() -> None:
    """An exception in the block writes nothing of the batch; a commit writes it all."""
    x = _state(DECL)
    seq = x.seq
    def stopped() -> None:
        with x.import_batch() as b:
            b.import_assertion(Effect.node("o3", "code"), events=["m1"], operation="introduce")
            b.import_assertion(Effect.assign("o3", "alice"), events=["m1"], operation="assign")
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        stopped()
    assert x.seq == seq and "o3" not in x.obligations
    with x.import_batch() as b:
        b.import_assertion(Effect.node("o3", "code"), events=["m1"], operation="introduce")
        b.import_assertion(Effect.assign("o3", "alice"), events=["m1"], operation="assign")
        c = b.import_certificate("ci_green", verdict=True, events=["e2"])
        a = b.import_assertion(Effect.result("o3", 1), events=["e2"], operation="submit",
                               certificates=[c.id])
        assert len(b) == 4 and "o3" not in x.obligations  # nothing written before the end
    assert x.seq == seq + 4 and x.obligations["o3"].assignee == "alice"
    assert x.justifications[a.id].certificates == (c.id,)


def test_batch_refuses_as_one_by_one() -> None:
    """Unknown names are refused at the item's call, naming them; earlier items stay."""
    x = _state(DECL)
    with x.import_batch() as b:
        b.import_assertion(Effect.node("o3", "code"), events=["m1"], operation="introduce")
        with pytest.raises(StateInputError, match="unknown obligation"):
            b.import_assertion(Effect.assign("o9", "alice"), events=["m1"])
        with pytest.raises(StateInputError, match="obligation already exists"):
            b.import_assertion(Effect.node("o3", "code"), events=["m1"])
        with pytest.raises(StateInputError, match="unknown certificate"):
            b.import_assertion(Effect.assign("o3", "alice"), certificates=["c1"])
    assert set(x.obligations) == {"o1", "o2", "o3"}


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner)
    | st.dictionaries(st.text(max_size=3) | st.integers() | st.none(), inner, max_size=3),
    max_leaves=12)


@given(_json_values)
def test_is_json_fast_path_agrees_with_the_encoder(value: Any) -> None:
    """The fast structural check never says yes where the strict encoder says no."""
    import json

    from icore.state._json import is_json

    try:
        json.dumps(value, allow_nan=False)
        encodes = True
    except (TypeError, ValueError):
        encodes = False
    assert is_json(value) == encodes


def test_batch_checks_what_each_item_names() -> None:
    """An item naming what the previous one named skips those checks; anything else
    (another event, a certificate, the same list changed since) is checked (#29)."""
    x = _state(DECL)
    events = ["m1"]
    with x.import_batch() as b:
        b.import_assertion(Effect.node("o3", "code"), events=events, operation="introduce")
        b.import_assertion(Effect.assign("o3", "alice"), events=events, operation="introduce")
        events.append("e9")  # the same list, now naming an event not in G
        with pytest.raises(StateInputError, match="event not in G"):
            b.import_assertion(Effect.status("o3", Status.ACTIVE), events=events,
                               operation="introduce")
        with pytest.raises(StateInputError, match="unknown certificate"):
            b.import_assertion(Effect.status("o3", Status.ACTIVE), events=["m1"],
                               operation="introduce", certificates=["c7"])
        with pytest.raises(StateInputError, match="unknown operation"):
            b.import_assertion(Effect.status("o3", Status.ACTIVE), events=["m1"],
                               operation="bad")
        with pytest.raises(StateInputError, match="unknown agent"):
            b.import_assertion(Effect.status("o3", Status.ACTIVE), events=["m1"],
                               operation="introduce", proposer="nobody")
    assert x.obligations["o3"].assignee == "alice" and len(x.assertions) == 4


def test_folded_steps_copy_each_obligation_once() -> None:
    """``obligation_steps(fold=True)``: one copy per obligation for the whole change,
    equal to what the unfolded steps end with; X's own objects untouched (#29)."""
    from icore.state._entries import AssertionImported
    from icore.state._transition import final_obligations, obligation_steps
    from icore.state._xmodel import Assertion, AssertionKind, Justification

    x = _state(DECL)
    before = x.obligations["o1"]
    j = Justification(("m1",), "assign", (), ())
    bodies = [AssertionImported(Assertion(f"a{90 + i}", "o1", kind, key, value, None, None),
                                j)
              for i, (kind, key, value) in enumerate([
                  (AssertionKind.ASSIGNEE, "", "alice"), (AssertionKind.STATUS, "", "active"),
                  (AssertionKind.STATUS, "", "submitted")])]
    plain = obligation_steps(x, bodies)
    folded = obligation_steps(x, bodies, fold=True)
    objs = {id(s.obligations["o1"]) for s in folded if s is not None}
    assert len(objs) == 1 and len({id(s.obligations["o1"]) for s in plain if s}) == 3
    assert final_obligations(folded) == final_obligations(plain)
    assert [s.supersedes for s in folded if s] == [s.supersedes for s in plain if s]
    assert x.obligations["o1"] is before and before.status != "submitted"
