"""Q's obligations kept as columns (issue 29 item 4): an :class:`ObligationTable` reads
exactly as the dict of :class:`Obligation` objects it replaces, for any sequence of writes
(in and out of the window of objects kept), small dict values packed as tuples read back
as equal dicts, and a trial's undo leaves X's obligations as they were."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import Status
from icore.state._obltable import RECENT, ObligationTable
from icore.state._refs import ActiveIds, ActiveLayouts
from icore.state._seqtable import AssertionTable
from icore.state._share import MAX_ITEMS, Compact, DictPacker, PackedDict, unpack
from icore.state._xmodel import Assertion, AssertionKind, Obligation

from .conftest import same_as_dict

pytestmark = pytest.mark.timeout(120)

_LAYOUTS = ActiveLayouts()


class _SubObligation(Obligation):
    """Not exactly an Obligation: kept as the object."""


def _active(n: int) -> Any:
    """An active map: {} (a new obligation), ids packed as numbers, or ids as strings."""
    if n == 0:
        return {}
    m: Any = {}
    for i, slot in enumerate([("node", ""), ("assignee", ""), ("status", ""),
                              ("result", "")][:n]):
        m = _LAYOUTS.put(m, slot, f"a{7 * n + i}" if n != 3 else f"x{i}")
    return m


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False),
              st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)
_obligations = st.builds(
    Obligation,
    st.sampled_from(["o1", "x"]),  # the object's id need not be its key: kept as it is
    st.sampled_from(["analysis", "task", ""]),
    st.sampled_from([1.0, 2.5, 0.0, -0.0, float("nan"), 1, True]),  # 1 and True: not 1.0
    st.sampled_from([None, "task", "o3", 1, True]),
    st.sampled_from([(), ("o1",), ["o1"], (1,)]),
    st.sampled_from([False, True, 0, 1]),
    st.sampled_from([*Status, "open"]),
    st.sampled_from([None, "agent-1", "agent-2", ["a"], 1]),
    st.one_of(_json, st.builds(lambda s, d: {"step": s, "digest": d},
                               st.integers(0, 9), st.text(max_size=4))),
    st.sampled_from([False, True, 0]),
    st.integers(0, 4).map(_active),
)
_values = st.one_of(_obligations, _obligations.map(lambda o: _SubObligation(
    o.id, o.kind, o.weight, o.parent, o.deps, o.required_root)),
    st.sampled_from([None, ("analysis", 1.0), "not an obligation"]))
_keys = st.one_of(
    st.integers(0, 30).map(lambda n: f"o{n}"),  # numbered
    st.sampled_from(["task", "o01", "o", "o-1", "o1x", "o²", "", "O1", f"o{10**20}",
                     f"o{1 << 40}"]),  # kept as strings (a jump too far, too long)
)


def _probe(t: ObligationTable, d: dict[str, Any]) -> None:
    same_as_dict(t, d, ["o0", "o1", "o2", "o17", "o30", "o31", "task", "o01", "", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "set", "set", "del", "pop", "popd"]),
                          _keys, st.integers(0, 11)), max_size=90),
       st.lists(_values, min_size=12, max_size=12))
def test_an_obligation_table_is_the_dict_it_replaces(
        ops: list[tuple[str, str, int]], objs: list[Any]) -> None:
    t, d = ObligationTable(), {}
    for op, key, n in ops:
        if op == "set":
            t[key] = d[key] = objs[n]
        elif op in ("del", "pop") and key in d:
            if op == "del":
                del t[key]
                del d[key]
            else:
                assert t.pop(key) == d.pop(key)
        elif op in ("del", "pop"):
            with pytest.raises(KeyError):
                t.pop(key) if op == "pop" else t.__delitem__(key)
        else:
            assert t.pop(key, None) == d.pop(key, None)
        _probe(t, d)
    for n in range(40, 40 + RECENT + 1):  # every earlier item leaves the window
        t[f"o{n}"] = d[f"o{n}"] = objs[n % len(objs)]
    _probe(t, d)
    assert {k: v for k, v in t.items()} == d
    t.clear()
    assert len(t) == 0 and list(t) == [] and "o40" not in t


@settings(max_examples=200, deadline=None)
@given(_obligations)
def test_an_obligation_reads_back_equal_out_of_the_window(o: Obligation) -> None:
    t = ObligationTable()
    t["o1"] = o
    for n in range(2, RECENT + 3):
        t[f"o{n}"] = Obligation(f"o{n}", "analysis", 1.0, "task", (), False)
    got = t["o1"]
    assert got == o and type(got) is Obligation
    assert (got is o) == (o.id != "o1")  # an object whose id is not its key: kept as is
    assert type(got.active) is type(o.active) and dict(got.active) == dict(o.active)
    assert type(got.result) is type(o.result) and got.result == o.result
    assert repr(got) == repr(o)  # the same field objects: 1 stays 1, -0.0 stays -0.0


def test_equal_fields_share_one_tuple_and_the_id_is_a_number() -> None:
    t = ObligationTable()
    for n in range(1, RECENT + 10):
        t[f"o{n}"] = Obligation(f"o{n}", "analysis", 1.0, "task", (), False,
                                Status.SUBMITTED, "agent-1", {"step": n, "digest": "ab"},
                                active=_active(4))
    assert t._metas[0] is t._metas[1] and t._nums[:2].tolist() == [1, 2]
    assert type(t._results[0]) is PackedDict and t._names == {}
    assert t["o1"].result == {"step": 1, "digest": "ab"}
    assert list(t["o1"].result) == ["step", "digest"]
    assert type(t["o1"].active) is ActiveIds


def test_one_result_dict_is_one_tuple_in_both_tables() -> None:
    packer = DictPacker()
    obligations, assertions = ObligationTable(packer), AssertionTable(packer=packer)
    result = {"step": 3, "digest": "ff"}
    assertions["a1"] = Assertion("a1", "o1", AssertionKind.RESULT, "", result, "agent-1", None)
    obligations["o1"] = Obligation("o1", "analysis", 1.0, None, (), False, result=result)
    for n in range(2, RECENT + 3):
        obligations[f"o{n}"] = Obligation(f"o{n}", "analysis", 1.0, None, (), False)
    assert obligations._results[0] is assertions._vals[0]
    assert assertions.at(1) is not None
    assert obligations["o1"].result == result


@settings(max_examples=300, deadline=None)
@given(_json)
def test_a_packed_value_unpacks_to_an_equal_value_in_the_same_order(v: Any) -> None:
    kept = DictPacker().pack(v)
    back = unpack(kept)
    assert back == v and type(back) is type(v)
    if isinstance(v, dict):
        assert list(back) == list(v) and all(back[k] is v[k] for k in v)
        assert (type(kept) is PackedDict) == (0 < len(v) <= MAX_ITEMS)
    else:
        assert kept is v


def test_only_plain_small_dicts_with_str_keys_are_packed() -> None:
    p = DictPacker()
    for v in ({}, {1: "x"}, {str(i): i for i in range(MAX_ITEMS + 1)},
              Compact({"a": 0}, (1,)), [1, 2], ("a", 1)):
        assert p.pack(v) is v
    d = {"a": 1}
    assert p.pack(d) is p.pack(d) and p.pack(d) is not p.pack({"a": 1})


def test_a_trial_leaves_the_obligations_as_they_were(code_review: Any) -> None:
    from icore.state import Effect, EventSpec, State

    x = State(code_review)
    for n in range(1, RECENT + 6):
        x.add_event(EventSpec("note", "lead", {"i": n}, (), f"m{n}"))
        x.import_assertion(Effect.node(f"o{n}", "code"), events=[f"m{n}"],
                           operation="introduce")
    x.import_assertion(Effect.result("o1", {"step": 1, "digest": "d1"}), events=["m1"],
                       operation="introduce")
    before = {k: repr(v) for k, v in x.obligations.items()}
    assert x._t.obligations._metas[1] is not None  # o2 is in the columns
    with x.trial() as y:
        y.import_assertion(Effect.node("o99", "code"), events=["m2"], operation="introduce")
        y.import_assertion(Effect.result("o2", {"step": 2, "digest": "d2"}), events=["m2"],
                           operation="introduce")
        assert y.obligations["o2"].result == {"step": 2, "digest": "d2"}
        assert "o99" in y.obligations
    assert {k: repr(v) for k, v in x.obligations.items()} == before
    assert "o99" not in x.obligations and len(x._t.obligations._nums) == RECENT + 5
    assert x.obligations["o1"].result == {"step": 1, "digest": "d1"}
