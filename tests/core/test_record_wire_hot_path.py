"""The record decoder's hot path (issue 27) accepts only what the general path accepts,
as the very same record, and takes every plain record the general path accepts.

:func:`icore.records.plain_record_from_wire` decides on exact types and the received
content bytes; :func:`icore.records._codec._general_from_wire` is the general decoder
(what :func:`icore.records.record_from_wire` ran before). Wires are built forged: the
content address and the id are recomputed from the changed fields, so a change is not
refused merely because a hash no longer matches (the hashes are the last check, and the
one an attacker controls)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.records import Record, derive, encode_record, plain_record_from_wire, record_to_wire
from icore.records._codec import _general_from_wire
from icore.records._record import (
    _canonical_bounded,
    _check_json,
    _plain_envelope,
    _plain_json,
    canonical_json,
)

texts = st.text(max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4),
    max_leaves=12,
)


def _outcome(f: Any, *args: Any) -> tuple[str, Any]:
    try:
        r = f(*args)
    except Exception as exc:  # the class and text are compared
        return type(exc).__name__, str(exc)
    return "ok", r


def _sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def _forge(wire: list[Any]) -> list[Any]:
    """Recompute the content address and the id of a (changed) wire from its fields."""
    w = list(wire)
    if type(w[9]) is bytes:
        w[6] = _sha(w[9])
    env: dict[str, Any] = {"v": w[0], "k": w[1], "o": w[2], "s": w[3],
                           "p": [p.hex() if isinstance(p, bytes) else p for p in w[4]]
                           if isinstance(w[4], list) else w[4],
                           "t": w[5], "c": w[6].hex() if isinstance(w[6], bytes) else w[6],
                           "n": w[7]}
    if len(w) > 10:
        env["u"] = w[10].hex() if isinstance(w[10], bytes) else w[10]
    try:
        text = json.dumps(env, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        w[8] = _sha(text.encode("utf-8"))
    except (TypeError, ValueError):
        pass
    return w


def _same(wire: list[Any]) -> None:
    """The hot path is None or the general path's record; a refusal is always None."""
    fast = plain_record_from_wire(wire)
    kind, slow = _outcome(_general_from_wire, wire)
    if fast is not None:
        assert kind == "ok", slow
        assert fast == slow
        assert [type(getattr(fast, f)) for f in Record.__slots__] == \
            [type(getattr(slow, f)) for f in Record.__slots__]
        if wire[9] is not None:  # the owner stores the received list re-packed
            assert msgpack.packb(wire, use_bin_type=True) == encode_record(slow)


def _base(content: Any, sup: bool, nparents: int) -> list[Any]:
    parents = [Record.create(key=f"p/{i}", owner="o", seq=i + 1, content=i)
               for i in range(nparents)]
    rec = derive(key="k/1", owner="o", seq=9, content=content, inputs=parents,
                 supersedes=("ab" * 32) if sup else None)
    return record_to_wire(rec)


@settings(max_examples=150, deadline=None)
@given(content=json_values, sup=st.booleans(), nparents=st.integers(0, 3))
def test_plain_records_take_the_hot_path(content: Any, sup: bool, nparents: int) -> None:
    """Every record a writer builds is decoded by the hot path, equal to the general one."""
    wire = _base(content, sup, nparents)
    fast = plain_record_from_wire(wire)
    assert fast is not None
    assert fast == _general_from_wire(wire)
    _same(wire)


odd_values = st.sampled_from([
    None, True, False, 0, 1, -1, 2**63, 1.0, "", "x", "é", "a" * 513, "\ud800", b"",
    b"\x00" * 32, b"\x00" * 31, [], [b"\x01" * 32], [b"\x01" * 32, b"\x01" * 32], {},
])


@settings(max_examples=400, deadline=None)
@given(content=json_values, sup=st.booleans(), nparents=st.integers(0, 3),
       field=st.integers(0, 10), value=odd_values, forge=st.booleans())
def test_a_changed_field_is_never_accepted_by_the_hot_path_alone(
        content: Any, sup: bool, nparents: int, field: int, value: Any, forge: bool) -> None:
    """Any field replaced (types, limits, duplicate or self parents, supersedes in the
    parents), with the hashes recomputed or not: the hot path gives the general path's
    record or defers; it never accepts what the general path refuses."""
    wire = _base(content, sup, nparents)
    if field < len(wire):
        wire[field] = value
    _same(_forge(wire) if forge else wire)


non_canonical = st.sampled_from([
    b'{"n": 1}', b'{"b":1,"a":2}', b'{"a":1,"a":2}', b" 1", b"1 ", b"1.0e0", b"NaN",
    b"Infinity", b'"\\u00e9"', b"[1,2,]", b"\xff", b"null", b"nul", b"01", b"-0",
    b"[" * 65 + b"]" * 65, b"[" * 64 + b"]" * 64, b"[" * 65 + b"1" + b"]" * 65,
    b'{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
])


@settings(max_examples=200, deadline=None)
@given(body=non_canonical, size_ok=st.booleans(), sup=st.booleans())
def test_content_bytes_must_be_canonical(body: bytes, size_ok: bool, sup: bool) -> None:
    """Content bytes that hash to the (forged) content address but are not what the
    canonical encoder writes - spaces, key order, duplicate keys, NaN, nesting deeper
    than 64 - are refused by the general path and never accepted by the hot path."""
    wire = _base(0, sup, 1)
    wire[9] = body
    wire[7] = len(body) if size_ok else len(body) + 1
    _same(_forge(wire))


def test_envelope_of_null_content_defers() -> None:
    """An envelope-only record whose address is the null content's: the general path
    checks it as content (size 4), so the hot path leaves it to it."""
    rec = Record.create(key="k/1", owner="o", seq=1, content=None)
    wire = record_to_wire(rec, with_content=False)
    assert wire[9] is None
    assert plain_record_from_wire(wire) is None
    assert _general_from_wire(wire) == rec.without_content()


def test_non_canonical_bytes_with_their_own_hash_are_refused() -> None:
    """The attack the canonical check stops: spaces added to the content, the content
    address and the id recomputed to match. The general path refuses it."""
    wire = _base({"n": 1}, False, 0)
    wire[9] = b'{"n": 1}'
    wire[7] = len(wire[9])
    wire = _forge(wire)
    assert plain_record_from_wire(wire) is None
    with pytest.raises(Exception, match="content address"):
        _general_from_wire(wire)


odd_json = st.recursive(
    json_values | st.sampled_from([float("nan"), float("inf"), {1: 2}, set(), b"x", ()]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(texts, c, max_size=3)
    | st.lists(c, max_size=3).map(tuple),
    max_leaves=8,
)


def _nest(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"a": leaf}
    return leaf


@settings(max_examples=300, deadline=None)
@given(value=odd_json | st.integers(60, 70).map(lambda d: _nest(d, 1))
       | st.integers(60, 70).map(lambda d: _nest(d, [])))
def test_plain_json_only_passes_what_check_json_passes(value: Any) -> None:
    """``_plain_json`` True means ``_check_json`` passes; then the bounded encoder writes
    ``canonical_json``'s bytes (or raises its error)."""
    kind, _ = _outcome(_check_json, value, "content")
    if _plain_json(value):
        assert kind == "ok"
        assert _outcome(_canonical_bounded, value) == _outcome(canonical_json, value)


@given(value=json_values)
def test_plain_json_takes_plain_values(value: Any) -> None:
    """Plain JSON values (the writer's usual content) take the hot path."""
    assert _plain_json(value)


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(["key", "owner", "type", "seq", "size", "schema", "parents",
                              "content_address", "supersedes", "id"]),
       value=odd_values | st.sampled_from(["ab" * 32, "AB" * 32, ("ab" * 32,),
                                           ("ab" * 32, "ab" * 32), ("cd" * 32,), ("zz",)]))
def test_plain_envelope_only_passes_what_check_envelope_passes(field: str, value: Any
                                                               ) -> None:
    """``_plain_envelope`` True means ``check_envelope`` passes, for any field changed."""
    rec = Record.create(key="k/1", owner="o", seq=3, content=1, parents=["cd" * 32])
    assert _plain_envelope(rec)
    fields = {f: getattr(rec, f) for f in Record.__slots__}
    fields[field] = value
    odd = Record(**fields)
    if _plain_envelope(odd):
        odd.check_envelope()


def test_a_boolean_schema_version_is_refused_on_both_paths() -> None:
    """``"v": true`` equals 1 in Python but is another envelope (another id): refused as an
    unsupported schema version, by the general path too (review of #27 round 10)."""
    from icore.errors import MalformedRecord

    rec = Record.create(key="k/1", owner="o", seq=1, content={"a": 1})
    fields = {f: getattr(rec, f) for f in Record.__slots__}
    fields["schema"] = True
    odd = Record(**fields)
    with pytest.raises(MalformedRecord, match="schema"):
        odd.check_envelope()
