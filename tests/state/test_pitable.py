"""Π's justifications kept as packed numbers (issue 29 item 4): a
:class:`JustificationTable` reads exactly as the dict of :class:`Justification` objects it
replaces, for any sequence of writes; the certificates' one-event tuples kept as numbers
read back equal."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state._pitable import CERT_BITS, EVENT_BITS, OPS, JustificationTable
from icore.state._refs import cert_num, event_num
from icore.state._seqtable import RECENT, CertificateTable
from icore.state._xmodel import Certificate, Justification

from .conftest import replay_as_dict, same_as_dict

pytestmark = pytest.mark.timeout(120)

_event_ids = st.one_of(
    st.integers(0, 10**6).map(lambda n: f"m{n}"),  # packed
    st.sampled_from(["m01", "m", "m-1", "m²", "task", "e1", f"m{1 << 40}", "m1x", "m0",
                     f"m{(1 << EVENT_BITS) - 1}", f"m{1 << EVENT_BITS}"]),
)
_cert_ids = st.one_of(
    st.integers(1, 10**6).map(lambda n: f"c{n}"),
    st.sampled_from(["c0", "c01", "c", f"c{1 << 32}", "x1", f"c{(1 << CERT_BITS) - 1}",
                     f"c{1 << CERT_BITS}"]),
)
_seq = st.sampled_from([tuple, tuple, tuple, list])  # a list (not from X) is kept as is
_justifications = st.builds(
    Justification,
    st.tuples(st.lists(_event_ids, max_size=3), _seq).map(lambda x: x[1](x[0])),
    st.one_of(st.none(), st.sampled_from(["submit", "assign", "plan", ""])),
    st.tuples(st.lists(_cert_ids, max_size=2), _seq).map(lambda x: x[1](x[0])),
    st.tuples(st.lists(st.sampled_from(["a1", "a2"]), max_size=1), _seq)
    .map(lambda x: x[1](x[0])),
)
_keys = st.one_of(st.integers(1, 12).map(lambda n: f"a{n}"),
                  st.sampled_from(["a0", "a01", "b1", ""]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "set", "del", "pop", "popd"]), _keys,
                          st.integers(0, 7)), max_size=40),
       st.lists(_justifications, min_size=8, max_size=8))
def test_a_justification_table_is_the_dict_it_replaces(
        ops: list[tuple[str, str, int]], js: list[Justification]) -> None:
    t = JustificationTable()
    # n picks one of 8 objects: the same object written in a row is shared (one int)
    replay_as_dict(t, ops, lambda _key, n: js[n],
                   lambda t, d: same_as_dict(t, d, ["a1", "a2", "a12", "a0", "b1", ""]),
                   ("a1", js[0]))


@settings(max_examples=200, deadline=None)
@given(_justifications)
def test_a_packed_justification_reads_back_equal_after_the_recent_window(
        j: Justification) -> None:
    t = JustificationTable()
    t["a1"] = j
    for n in range(2, RECENT + 3):  # push a1 out of the window of objects kept
        t[f"a{n}"] = Justification(("m1",), "submit")
    assert t._d is None and t["a1"] == j and t.at(1) == j
    packable = (len(j.events) == 1 and 0 <= event_num(j.events[0]) < 1 << EVENT_BITS
                and j.cites == () and type(j.events) is tuple
                and type(j.certificates) is tuple and len(j.certificates) <= 1
                and all(0 <= cert_num(c) < 1 << CERT_BITS for c in j.certificates))
    assert (t._items[0] > 1) == packable  # 1: the object, beside the array
    assert (t._objs.get(0) is j) == (not packable)
    if packable:
        assert t["a1"] is not j  # rebuilt from the number


def test_one_object_written_in_a_row_is_one_number() -> None:
    t = JustificationTable()
    j = Justification(("m7",), "submit", ("c3",))
    t["a1"] = t["a2"] = j
    t["a3"] = Justification(("m7",), "submit", ("c3",))  # equal, another object
    assert t._items[0] == t._items[1] == t._items[2] > 1 and t._objs == {}
    assert t._unpack(t._items[0]) == j


def test_operations_beyond_the_numbered_ones_are_kept_as_objects() -> None:
    t = JustificationTable()
    js = [Justification(("m1",), f"op{n}") for n in range(OPS + 2)]
    for n, j in enumerate(js, 1):
        t[f"a{n}"] = j
    assert t._items[OPS - 1] > 1 and t._items[OPS] == 1
    assert t._objs == {OPS: js[OPS], OPS + 1: js[OPS + 1]}
    assert list(t.values()) == js and t._d is None


def test_a_certificate_of_one_event_keeps_its_number() -> None:
    t = CertificateTable()
    written = [Certificate(f"c{n}", "output_evidence", "1", ev, (), None, True)
               for n, ev in enumerate([("m5",), ("m0",), ("m05",), ("m1", "m2"), ()], 1)]
    for c in written:
        t[c.id] = c
    for _ in range(RECENT):
        t[f"c{len(t) + 1}"] = Certificate(f"c{len(t) + 1}", "v", None, ("m9",), (), None,
                                          True)
    assert t._items[:5] == [5, 0, ("m05",), ("m1", "m2"), ()]
    assert [t[c.id] for c in written] == written


def test_a_trial_leaves_the_justifications_as_they_were(code_review: Any) -> None:
    from icore.state import Effect, EventSpec, State

    x = State(code_review)
    for n in (1, 2):
        x.add_event(EventSpec("note", "lead", {"i": n}, (), f"m{n}"))
    c = x.import_certificate("ci_green", verdict=True, events=["m1"]).id
    x.import_assertion(Effect.node("o1", "code"), events=["m1"], operation="introduce",
                       certificates=[c])
    before = dict(x.justifications)
    assert x._t.pi._items[0] > 1  # packed
    with x.trial() as y:
        y.import_assertion(Effect.node("o2", "code"), events=["m2"], operation="introduce")
        assert y.justifications["a2"] == Justification(("m2",), "introduce")
    assert dict(x.justifications) == before and len(x.justifications) == 1
    assert x.justifications["a1"] == Justification(("m1",), "introduce", (c,))
