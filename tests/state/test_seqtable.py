"""X's tables of sequential ids kept as lists (issue 29 item 4): a :class:`SeqTable`
behaves exactly as the dict it replaces, for any sequence of writes, and a trial's undo
leaves X as it was."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import AssertionKind
from icore.state._seqtable import AssertionTable, CertificateTable, SeqTable
from icore.state._xmodel import Assertion, Certificate, CitedRecord

from .conftest import replay_as_dict, same_as_dict

_keys = st.one_of(
    st.integers(1, 12).map(lambda n: f"a{n}"),  # the usual ids
    st.sampled_from(["a0", "a01", "b1", "a", "a1x", "a²", "", "A1"]),  # not canonical
)
_ops = st.lists(st.tuples(st.sampled_from(["set", "del", "pop", "popd"]), _keys,
                          st.integers(0, 3)), max_size=40)


def _same(t: SeqTable[Any], d: dict[str, Any]) -> None:
    same_as_dict(t, d, ["a1", "a2", "a5", "a12", "a13", "a0", "a01", "b1", "x", ""])


def _assertion(key: str, n: int) -> Any:
    """An assertion stored under ``key`` (n = 3: one whose id is another key; n = 2: no
    assertion at all)."""
    if n == 2:
        return ("not an assertion", key)
    return Assertion(key if n < 3 else "a7", f"o{n}", list(AssertionKind)[n], "k" * n,
                     {"v": [n]}, "agent" if n else None, None if n else "p1", n != 1)


def _certificate(key: str, n: int) -> Any:
    """A certificate stored under ``key`` (n = 3: one whose id is another key; n = 2: no
    certificate at all; n = 1: one with an unhashable payload and a list of records)."""
    if n == 2:
        return ("not a certificate", key)
    rec: Any = (CitedRecord("k", "r" * 64),) if n else ()
    if n == 1:
        rec = [rec]  # unhashable: a dict holds it
    return Certificate(key if n < 3 else "a7", f"v{n % 2}", "1", (f"m{n}",), rec,
                       {"p": [n]}, n != 1, ("o1",) * n)


_TABLES: dict[str, tuple[Any, Any]] = {
    "list": (lambda: SeqTable("a"), lambda _key, n: n),
    "assertions": (AssertionTable, _assertion),
    "certificates": (lambda: CertificateTable("a"), _certificate),
}


@settings(max_examples=300, deadline=None)
@given(_ops, st.sampled_from(sorted(_TABLES)))
def test_a_seqtable_is_the_dict_it_replaces(ops: list[tuple[str, str, int]],
                                            kind: str) -> None:
    make, value = _TABLES[kind]
    t: SeqTable[Any] = make()
    replay_as_dict(t, ops, value, _same, ("a1", value("a1", 0)))


def test_sequential_ids_stay_a_list_and_other_keys_make_a_dict() -> None:
    t: SeqTable[str] = SeqTable("a")
    for n in range(1, 6):
        t[f"a{n}"] = str(n)
    del t["a5"]  # a trial's undo removes the last
    t["a5"] = "5"
    assert t._d is None and list(t) == ["a1", "a2", "a3", "a4", "a5"]
    del t["a2"]
    t["a2"] = "2"  # re-inserted: a dict puts it last, so the list gives way
    assert t._d is not None and list(t) == ["a1", "a3", "a4", "a5", "a2"]
    assert repr(t).startswith("SeqTable({'a1': '1'")


def test_assertion_columns_share_what_repeats() -> None:
    t = AssertionTable()
    for n in range(1, 4):
        t[f"a{n}"] = Assertion(f"a{n}", f"o{n}", AssertionKind.STATUS, "", "open", "x", None)
    assert t._d is None and t._metas[0] is t._metas[2]
    assert t["a2"] == Assertion("a2", "o2", AssertionKind.STATUS, "", "open", "x", None)


def test_assertion_proposals_are_kept_in_the_shared_part() -> None:
    from icore.state._seqtable import RECENT

    t = AssertionTable()
    written = [Assertion(f"a{n}", "o", AssertionKind.STATUS, "", "open", "x", f"p{n % 3}")
               for n in range(1, RECENT + 6)]
    for a in written:
        t[a.id] = a
    assert t._d is None and t._metas[0] is t._metas[3] and t._metas[0] is not t._metas[1]
    assert [t[a.id] for a in written] == written  # the first ones rebuilt from the columns
    assert [t[a.id].proposal for a in written[:4]] == ["p1", "p2", "p0", "p1"]


def test_the_last_assertions_written_are_read_back_as_written() -> None:
    from icore.state._seqtable import RECENT

    t = AssertionTable()
    written = [Assertion(f"a{n}", "o", AssertionKind.CLAIM, f"k{n}", n, None, None)
               for n in range(1, RECENT + 3)]
    for a in written:
        t[a.id] = a
    assert t["a3"] is written[2] and t[f"a{RECENT + 2}"] is written[-1]
    assert t["a1"] == written[0] and t["a1"] is not written[0]  # rebuilt from the columns
    del t[f"a{RECENT + 2}"]
    assert t[f"a{RECENT + 1}"] is written[-2] and len(t) == RECENT + 1


def test_certificate_columns_share_what_repeats_and_read_back_equal() -> None:
    from icore.state._seqtable import RECENT

    t = CertificateTable()
    written = [Certificate(f"c{n}", "output_evidence", "1", (f"m{n}",), (), {"n": n}, True)
               for n in range(1, RECENT + 3)]
    for c in written:
        t[c.id] = c
    assert t._d is None and t._metas[0] is t._metas[-1]
    assert t["c3"] is written[2] and t["c1"] == written[0] and t["c1"] is not written[0]
    assert list(t.values()) == written
