"""G's events kept as columns (issue 29 item 4): an :class:`EventTable` behaves exactly as
the dict it replaces, for any sequence of writes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state._eventtable import RECENT, EventTable
from icore.state._share import FieldLayouts
from icore.state._xmodel import Event

from .conftest import replay_as_dict, same_as_dict

_keys = st.one_of(
    st.integers(0, 12).map(lambda n: f"m{n}"),  # the usual ids
    st.sampled_from(["task", "m01", "m-1", "m", "m1x", "m²", "", "M1", "e3"]),  # others
)
_ops = st.lists(st.tuples(st.sampled_from(["set", "del", "pop", "popd"]), _keys,
                          st.integers(0, 4)), max_size=40)
_layouts: FieldLayouts[str] = FieldLayouts()


def _event(key: str, n: int) -> Any:
    """An event stored under ``key`` (n = 3: one whose id is another key; n = 4: no event;
    odd n: compact fields, even n: a dict)."""
    if n == 4:
        return ("not an event", key)
    fields: dict[str, Any] = {"step": n, "digest": "d" * n}
    causes: tuple[str, ...] = ("task",) * n
    if n == 2 and key[1:].isdecimal() and key[1:].isascii():  # the step before: a marker
        causes = (f"m{int(key[1:]) - 1}",)
    return Event(key if n != 3 else "m7", "output", "artifact", f"agent{n % 2}",
                 _layouts(fields) if n % 2 else fields, causes, float(n))


def _same(t: EventTable, d: dict[str, Any]) -> None:
    same_as_dict(t, d, ["m0", "m1", "m5", "m12", "m13", "task", "m01", "m-1", "x", ""])


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_an_event_table_is_the_dict_it_replaces(ops: list[tuple[str, str, int]]) -> None:
    replay_as_dict(EventTable(), ops, _event, _same, ("m1", _event("m1", 1)))


def test_step_ids_in_order_stay_columns_and_others_make_a_dict() -> None:
    t = EventTable()
    written = [_event("task", 0)] + [_event(f"m{n}", 1) for n in range(0, 2 * RECENT + 4, 2)]
    for e in written:
        t[e.id] = e
    assert t._d is None and list(t) == [e.id for e in written]
    assert t["m0"] == written[1] and t["m0"] is not written[1]  # rebuilt from the columns
    assert t["m0"].fields == {"step": 1, "digest": "d"}
    assert t[written[-1].id] is written[-1]  # the last written are kept as written
    assert t._metas[1] is t._metas[2]  # type, kind and agent shared
    assert "m1" not in t and "m3" not in t and t.get("m02") is None
    del t[written[-1].id]  # a trial's undo removes the last
    assert t._d is None and len(t) == len(written) - 1
    t["m1"] = _event("m1", 1)  # an m id before a later one: a dict keeps the order
    assert t._d is not None and list(t)[-1] == "m1"
    assert repr(t).startswith("EventTable({'task': Event(")


def test_the_cause_before_is_kept_as_a_marker_and_read_back() -> None:
    from icore.state._eventtable import _PREV

    t = EventTable()
    t["task"] = Event("task", "task", "task", "human", {}, (), 0.0)
    chain = [Event(f"m{n}", "output", "artifact", "a", {"step": n},
                   ("task",) if n == 0 else (f"m{n - 1}",), 1.0) for n in range(RECENT + 4)]
    for e in chain:
        t[e.id] = e
    t["m20"] = Event("m20", "output", "artifact", "a", {}, ("m3",), 1.0)  # another cause
    assert t._causes[1] is _PREV and t._causes[2] is _PREV and t._causes[-1] == ("m3",)
    assert [t[e.id] for e in chain] == chain and t["m1"].causes == ("m0",)
    assert t["m0"].causes == ("task",) and t["task"].causes == ()


def test_an_id_found_absent_is_found_once_written() -> None:
    """The last id found absent is remembered (#29: a new event's id parsed once) until a write."""
    t = EventTable()
    for n in (0, 1):
        t[f"m{n}"] = _event(f"m{n}", 1)
    assert "m2" not in t and "m2" not in t and t.get("m2") is None  # remembered absent
    assert "task" not in t  # another id found absent replaces it
    t["m2"] = _event("m2", 1)  # numbered as m2: the order holds, still columns
    assert "m2" in t and t._d is None and list(t._num) == [0, 1, 2]
    assert "task" not in t
    t["task"] = _event("task", 0)  # an id of another form, absent just before
    assert "task" in t and t["task"].id == "task" and t._d is None

    class Sub(str):
        pass

    assert "m9" not in t
    t[Sub("m9")] = _event(Sub("m9"), 1)  # a str subclass is no canonical id: kept by name
    assert 4 in t._names and "m9" in t and t["m9"].id == "m9"  # not numbered from the memo
    assert list(t) == ["m0", "m1", "m2", "task", "m9"]
