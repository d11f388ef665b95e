"""The record's fast paths (issue 27) give the general encoder's bytes and errors."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.errors import CodecError, MalformedRecord
from icore.records import Record, canonical_json
from icore.records._codec import _json_content
from icore.records._record import _envelope_json

ids = st.binary(min_size=32, max_size=32).map(bytes.hex)
texts = st.text(max_size=30)  # any code point: quotes, controls, non-ASCII, surrogates
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4),
    max_leaves=12,
)


def _dumps(value: Any) -> bytes:
    """The canonical bytes as ``json.dumps`` spells them (the reference)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _outcome(f: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", f(*args)
    except Exception as exc:  # the error's class and text are compared
        return type(exc).__name__, str(exc)


@given(value=json_values)
def test_canonical_json_is_json_dumps(value: Any) -> None:
    """The encoder built once gives ``json.dumps``'s bytes, or fails as it does."""
    want = _outcome(_dumps, value)
    got = _outcome(canonical_json, value)
    if want[0] == "ok":
        assert got == want
    else:
        assert got[0] == "MalformedRecord"


@pytest.mark.parametrize("value", [float("nan"), {(1,): 2}, {"a": {1, 2}}, "\ud800", b"x"])
def test_canonical_json_refuses_what_json_refuses(value: Any) -> None:
    """NaN, tuple keys, sets, lone surrogates, bytes: MalformedRecord on content."""
    with pytest.raises(MalformedRecord) as ei:
        canonical_json(value)
    assert ei.value.fields.get("field") == "content"


@given(key=texts, owner=texts, rtype=texts, seq=st.integers(-5, 2**64),
       size=st.integers(-5, 2**64), schema=st.integers(-1, 3) | st.booleans(),
       parents=st.lists(ids | texts, max_size=4), caddr=ids | texts,
       sup=st.none() | ids | texts)
def test_envelope_json_is_the_general_encoding(key: str, owner: str, rtype: str, seq: int,
                                               size: int, schema: int, parents: list[str],
                                               caddr: str, sup: str | None) -> None:
    """Field by field or through the general encoder: the same bytes, hence the same id.

    Also for records that never passed ``check_envelope`` (odd strings, a bool schema):
    where the fast path declines (None) the general encoder decides.
    """
    rec = Record(key, owner, seq, tuple(parents), rtype, None, caddr, size, schema, "",
                 sup)
    fast = _envelope_json(rec)
    want = _outcome(canonical_json, rec.envelope())
    if fast is not None:
        assert want == ("ok", fast)
    assert _outcome(rec.compute_id) == _outcome(
        lambda: hashlib.sha256(canonical_json(rec.envelope())).hexdigest())


@pytest.mark.parametrize("change", [
    {"schema": True}, {"seq": True}, {"parents": ["a" * 64]}, {"key": "k\udcff"},
])
def test_envelope_json_declines_odd_types(change: dict[str, Any]) -> None:
    """A bool, a list of parents, a lone surrogate: the general encoder decides."""
    base = {"key": "k", "owner": "o", "seq": 1, "parents": (), "type": "t", "content": None,
            "content_address": "0" * 64, "size": 0, "schema": 1}
    rec = Record(**{**base, **change})
    assert _envelope_json(rec) is None
    assert _outcome(rec.compute_id)[0] in ("ok", "MalformedRecord")


def _loads(data: bytes) -> tuple[str, Any]:
    try:
        return "ok", json.loads(data)
    except ValueError:
        return "error", None


json_bytes = st.one_of(
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8")),
    json_values.map(lambda v: (" " + json.dumps(v) + "\n").encode("utf-8")),
    json_values.map(lambda v: json.dumps(v).encode("utf-16")),
    json_values.map(lambda v: b"\xef\xbb\xbf" + json.dumps(v).encode("utf-8")),
    st.binary(max_size=24),
    st.sampled_from([b"NaN", b"-Infinity", b"1 2", b"", b"{}x", b"[1,]", b'"\xff"']),
)


@given(data=json_bytes)
def test_content_decoding_is_json_loads(data: bytes) -> None:
    """The codec's content decoder returns what ``json.loads`` returns and fails where it
    fails (as a CodecError), whatever the bytes: its direct path is only a shortcut."""
    want = _loads(data)
    try:
        got = "ok", _json_content(data, "k")
    except CodecError:
        got = "error", None
    assert got[0] == want[0]
    assert repr(got[1]) == repr(want[1])  # NaN != NaN, but reprs agree
