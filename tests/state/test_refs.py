"""Assertion ids held as numbers inside X (issue 29 item 4): every table keyed or valued by
refs reads exactly as the dict of id strings it replaces, for any sequence of writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state._refs import (
    LIMIT,
    ActiveIds,
    ActiveLayouts,
    CertRefs,
    RefLinks,
    SoundMemo,
    active_ref,
    active_refs,
    aid,
    ref,
)
from icore.state._share import Compact

_odd_ids = st.sampled_from(["a0", "a01", "a", "b5", "A5", "a1x", "a²", "a٣", "a+1", " a1",
                            "a 1", "a1_0", "", f"a{LIMIT}", f"a{LIMIT - 1}", "a00000000001"])
_ids = st.one_of(st.integers(1, 40).map(lambda n: f"a{n}"), _odd_ids)
_refs = st.one_of(st.integers(1, 40), st.integers(LIMIT - 3, LIMIT - 1), _odd_ids)


@given(st.one_of(_ids, st.text(max_size=12), st.integers(1, 10**12).map(lambda n: f"a{n}")))
def test_ref_and_aid_are_inverses(s: str) -> None:
    r = ref(s)
    assert aid(r) == s
    if type(r) is int:  # exactly the canonical a<n> below 2^32 are numbers
        assert 1 <= r < LIMIT and s == f"a{r}"
    else:
        assert r is s


def test_canonical_ids_are_numbers_and_others_stay_strings() -> None:
    assert ref("a1") == 1 and ref("a4294967295") == LIMIT - 1
    for s in ("a0", "a01", "a", "b5", "a²", "a٣", "a+1", "a 1", "a1_0", "a4294967296"):
        assert ref(s) == s


def _remove(t: Any, d: dict[Any, Any], op: str, key: Any) -> None:
    """``del`` or ``pop`` ``key`` from the table ``t`` and the dict ``d`` alike."""
    if key in d:
        assert (t.pop(key) if op == "pop" else t[key]) == d[key]
        if op == "del":
            del t[key]
        d.pop(key)
    else:
        with pytest.raises(KeyError):
            del t[key]
        assert t.pop(key, None) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "del", "pop"]), _refs, _refs), max_size=40))
def test_reflinks_are_the_dict_they_replace(ops: list[tuple[str, Any, Any]]) -> None:
    t, d = RefLinks(), {}
    for op, key, value in ops:
        if op == "set":
            t[key] = d[key] = value
        else:
            _remove(t, d, op, key)
        assert len(t) == len(d) and dict(t.items()) == d
        for k in (*d, 1, 7, LIMIT - 1, "a0", "x"):
            assert (k in t) == (k in d) and t.get(k) == d.get(k)
    t.clear()
    assert len(t) == 0 and list(t) == []


def test_reflinks_keep_far_numbers_in_the_dict() -> None:
    t = RefLinks()
    t[LIMIT - 1] = 5  # far past the array's end: no 16 GB array
    t[3] = 4
    assert t[LIMIT - 1] == 5 and t[3] == 4 and len(t) == 2
    assert len(t._m) < 5000


_cids = st.one_of(st.integers(1, 30).map(lambda n: f"c{n}"),
                  st.sampled_from(["c0", "c01", "c", "a5", "c1x", "c²", f"c{LIMIT}"]))
_cert_values = st.lists(st.one_of(_refs, st.just(True)), max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "add", "add", "discard", "del", "pop"]),
                          _cids, _cert_values), max_size=40))
def test_certrefs_are_the_dict_they_replace(ops: list[tuple[str, str, Any]]) -> None:
    t, d = CertRefs(), {}
    for op, key, value in ops:
        if op == "set":
            t[key] = d[key] = value
        elif op in ("add", "discard"):
            r = value[0] if value else 3
            had = d.get(key, ())
            if op == "add":
                t.add(key, r)
                if r not in had:
                    d[key] = (*had, r)
            else:
                t.discard(key, r)
                if r in had:
                    rest = tuple(x for x in had if x != r)
                    if rest:
                        d[key] = rest
                    else:
                        del d[key]
        else:
            _remove(t, d, op, key)
        assert len(t) == len(d) and dict(t.items()) == d
        for k in (*d, "c1", "c7", "c0", "x"):
            assert (k in t) == (k in d) and t.get(k) == d.get(k) and t.get(k, 5) == d.get(k, 5)
    t.clear()
    assert len(t) == 0 and list(t) == []


_slots = st.sampled_from([("node", ""), ("status", ""), ("assignee", ""), ("result", ""),
                          ("claim", "x"), ("claim", "y")])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_slots, _ids), max_size=12))
def test_an_active_map_is_the_dict_it_replaces(puts: list[tuple[Any, str]]) -> None:
    layouts, d = ActiveLayouts(), {}
    m_: Any = {}
    for slot, value in puts:
        before, was = m_, dict(m_.items())
        m_ = layouts.put(m_, slot, value)
        assert dict(before.items()) == was  # never changed in place
        d[slot] = value
        assert list(m_) == list(d) and list(m_.values()) == list(d.values())
        assert list(m_.items()) == list(d.items()) and len(m_) == len(d)
        assert m_ == d and repr(m_) == repr(d)
        for k in (*d, ("terminal", "")):
            assert m_.get(k) == d.get(k) and (k in m_) == (k in d)
            assert active_ref(m_, k) == (None if k not in d else ref(d[k]))
        assert list(active_refs(m_)) == [ref(v) for v in d.values()]
        # numbers when every id is a ref, else the strings
        all_refs = all(type(ref(v)) is int for v in d.values())
        assert (type(m_) is ActiveIds) == (all_refs and bool(d))
        if not all_refs:
            assert type(m_) is Compact


def test_an_active_map_is_never_changed_in_place() -> None:
    layouts = ActiveLayouts()
    a = layouts.put({}, ("status", ""), "a1")
    b = layouts.put(a, ("status", ""), "a2")
    c = layouts.put(b, ("result", ""), "a3")
    assert dict(a) == {("status", ""): "a1"} and dict(b) == {("status", ""): "a2"}
    assert dict(c) == {("status", ""): "a2", ("result", ""): "a3"}
    assert type(c) is ActiveIds and list(c.refs()) == [2, 3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "put", "pop", "clear"]), _refs, st.booleans(),
                          st.integers(0, 50)), max_size=40))
def test_the_sound_memo_is_the_dict_it_replaces(ops: list[tuple[str, Any, bool, int]]) -> None:
    memo, d = SoundMemo(), {}
    for op, r, sound, room in ops:
        if op == "put":
            memo.put(r, sound, room)
            d[r] = sound
        elif op == "pop":
            memo.pop(r)
            d.pop(r, None)
        else:
            memo.clear()
            d.clear()
        assert len(memo) == len(d)
        for k in (*d, 1, 2, 39, LIMIT - 1, "a0", "x"):
            assert memo.get(k) == d.get(k)


def test_the_sound_memo_is_bounded() -> None:
    memo = SoundMemo(limit=3)
    memo.put(5, True, 10)  # a byte
    memo.put(LIMIT - 1, False, 10)  # too far past the bytes' end: the dict
    assert 6 <= len(memo.bits) <= 10 and memo.get(5) is True and memo.get(LIMIT - 1) is False
    for r in ("a0", "a01", "x"):  # the dict starts over at its limit
        memo.put(r, True, 10)
    assert len(memo.other) == 1 and memo.get("x") is True and memo.get("a0") is None
    assert memo.get(5) is True  # the bytes keep theirs


def test_a_value_that_is_not_a_str_is_no_assertion_and_a_subclass_reads_as_its_text(
        ) -> None:
    """Review (#29): ``ref(2)`` was the number of ``a2`` (so ``superseded_by(2)`` named
    a46), and a ``str`` subclass ``S("a2")`` was another id than ``"a2"``."""
    from icore.state._refs import NO_ID, ref

    class S(str):
        pass

    assert ref(2) == NO_ID and ref(None) == NO_ID and ref(b"a2") == NO_ID  # type: ignore[arg-type]
    assert ref(S("a2")) == 2 and type(ref(S("x7"))) is str and ref(S("x7")) == "x7"


def test_an_active_map_packs_its_numbers_in_one_int() -> None:
    layouts = ActiveLayouts()
    top = f"a{LIMIT - 1}"  # every bit of a slot set: a replacement must clear them all
    m = layouts.put(layouts.put(layouts.put({}, ("node", ""), top), ("status", ""), top),
                    ("result", ""), "a7")
    assert type(m) is ActiveIds and type(m._values) is int
    m2 = layouts.put(m, ("node", ""), "a1")
    assert dict(m2) == {("node", ""): "a1", ("status", ""): top, ("result", ""): "a7"}
    assert list(m2.refs()) == [1, LIMIT - 1, 7] and list(m.refs()) == [LIMIT - 1, LIMIT - 1, 7]
    assert list(layouts.put(m2, ("status", ""), "a2").refs()) == [1, 2, 7]
    assert active_ref(m2, ("result", "")) == 7 and len(m2) == 3


def test_a_trial_leaves_the_packed_active_maps_as_they_were(code_review: Any) -> None:
    from icore.state import Effect, State

    x = State(code_review)
    x.import_assertion(Effect.node("o1", "code"))
    x.import_assertion(Effect.claim("o1", "done"))
    o = x.obligations["o1"]
    before = dict(o.active)
    assert type(o.active) is ActiveIds and type(o.active._values) is int
    with x.trial() as y:
        y.import_assertion(Effect.claim("o1", "done", False))
        y.import_assertion(Effect.claim("o1", "other"))
        assert len(y.obligations["o1"].active) == 3
        assert y.obligations["o1"].active[("claim", "done")] == "a3"
    after = x.obligations["o1"].active
    assert dict(after) == before and list(after.refs()) == [1, 2]
    assert list(after.values()) == ["a1", "a2"]
