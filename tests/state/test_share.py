"""Equal small values imported as one object, events' fields in compact form (issue 29
item 4): sharing never changes a value's encoding, and X ends the same."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import Effect, EventSpec, MemoryLog, State, load_declaration, rebuild
from icore.state._log import decode_entry, encode_entry
from icore.state._share import (
    MAX_ITEMS,
    MEMO_LIMIT,
    Compact,
    FieldLayouts,
    Fields,
    Layouts,
    ValueShare,
)

DECL = load_declaration(Path(__file__).resolve().parents[2] / "examples" / "declarations"
                        / "code_review.yaml")

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    [0.0, -0.0, 1.0, 1.5, math.inf]), st.sampled_from(["", "a", "b"]))
_json = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.sampled_from(["k", "v", "w"]), inner, max_size=3)), max_leaves=8)


def _exact(v: Any) -> str:
    """The value's encoding with its types (tuple vs list, int vs bool vs float)."""
    return repr(v) + json.dumps(v, default=str)


@settings(max_examples=200, deadline=None)
@given(st.lists(_json, min_size=1, max_size=12))
def test_shared_value_is_exactly_equal(values: list[Any]) -> None:
    share = ValueShare()
    for v in values:
        out = share(v)
        assert out is v or _exact(out) == _exact(v)
        assert type(out) is type(v)


def test_equal_values_become_one_object_and_lookalikes_do_not() -> None:
    share = ValueShare()
    a = {"kind": "x", "weight": 1.0, "deps": []}
    assert share(a) is a
    assert share({"kind": "x", "weight": 1.0, "deps": []}) is a
    for other in ({"weight": 1.0, "kind": "x", "deps": []},  # key order
                  {"kind": "x", "weight": 1, "deps": []},  # int vs float
                  {"kind": "x", "weight": True, "deps": []},  # bool vs int
                  {"kind": "x", "weight": -0.0, "deps": []},  # sign of zero
                  {"kind": "x", "weight": 1.0, "deps": ()}):  # tuple vs list
        assert share(other) is other


def test_big_or_foreign_values_are_returned_as_they_are() -> None:
    share = ValueShare()
    big = [[i] for i in range(MAX_ITEMS + 1)]
    assert share(big) is big and share([[i] for i in range(MAX_ITEMS + 1)]) is not big
    odd = {"k": {1, 2}}
    assert share(odd) is odd and len(share) == 0
    assert share(None) is None and share("s") == "s"


def test_memo_is_bounded() -> None:
    share = ValueShare()
    for i in range(MEMO_LIMIT + 10):
        share({"i": i})
    assert len(share) <= MEMO_LIMIT


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["step", "a", "b", "c"]), _scalar, max_size=4))
def test_fields_read_like_the_dict(d: dict[str, Any]) -> None:
    f = FieldLayouts[str]()(d)
    assert isinstance(f, Fields)
    assert f == d and d == f and dict(f) == d and list(f) == list(d)
    assert repr(f) == repr(d) and len(f) == len(d)
    for k in ("step", "a", "zz"):
        assert f.get(k) == d.get(k) and (k in f) == (k in d)
        assert f.get(k, 7) == d.get(k, 7)


def test_events_share_a_layout() -> None:
    layouts: FieldLayouts[str] = FieldLayouts()
    a, b = layouts({"step": 1, "x": "p"}), layouts({"step": 2, "x": "q"})
    assert a._at is b._at and a != b and a["step"] == 1 and b["x"] == "q"


def _run(state: State) -> None:
    e1 = state.add_event(EventSpec("ci_run", "ci", {"sha": "s1", "status": "green"}))
    e2 = state.add_event(EventSpec("ci_run", "ci", {"sha": "s2", "status": "green"}))
    for oid, ev in (("o1", e1.id), ("o2", e2.id)):
        state.import_assertion(Effect.node(oid, "code"), events=[ev], operation="introduce",
                               proposer="lead")
        state.import_certificate("ci_green", verdict=True, events=[ev],
                                 payload={"seen": [], "n": 1})


def test_imported_x_and_log_are_unchanged_by_sharing() -> None:
    log = MemoryLog()
    x = State(DECL, log=log)
    _run(x)
    c1, c2 = x.certificates["c1"].payload, x.certificates["c2"].payload
    assert c1 is c2  # the two equal payloads are one object
    assert type(x.events[next(iter(x.events))].fields) is Fields
    # the log holds plain dicts; replaying it rebuilds an equal X
    rows = [encode_entry(e) for e in x.entries]
    again = [decode_entry(*r) for r in rows]
    assert [encode_entry(e) for e in again] == rows
    y = rebuild(again, DECL)
    assert y.metrics() == x.metrics()
    assert {k: dict(v.fields) for k, v in y.events.items()} == {
        k: dict(v.fields) for k, v in x.events.items()}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["node", "status", "result"]), st.integers(0, 9)),
                max_size=12))
def test_put_matches_dict_assignment(writes: list[tuple[str, int]]) -> None:
    layouts: Layouts[str] = Layouts()
    d: dict[str, int] = {}
    m: Mapping[str, int] = {}
    for k, v in writes:
        before = dict(m)
        m2 = layouts.put(m, k, v)
        assert dict(m) == before  # the old mapping is unchanged
        d[k] = v
        m = m2
        assert dict(m) == d and list(m) == list(d) and list(m.values()) == list(d.values())
        assert list(m.items()) == list(d.items())


def test_obligation_active_is_replaced_not_changed() -> None:
    x = State(DECL)
    _run(x)
    a1, a2 = x.obligations["o1"].active, x.obligations["o2"].active
    assert isinstance(a1, Compact) and isinstance(a2, Compact)
    assert dict(a1) == {("node", ""): "a1"} and a2._at is a1._at  # one layout for both
