"""The commit and acknowledgement hot paths of the frame codec (issue 27) decode exactly
what the general decoder does - the same message, or the same typed refusal - and the
fast encoders write the general encoder's bytes."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.memory import FROM_PARENTS
from icore.net import Commit, CommitAck, decode_body, encode_body
from icore.net._frames import (
    COMMIT_ACK_PREFIX,
    COMMIT_PREFIXES,
    _decode,
    _fields,
    decode_commit,
    decode_commit_ack,
    unpack_body,
)
from icore.net._protocol import PROTOCOL_VERSION
from icore.records import Record, derive, record_to_wire


def decode_body_general(body: bytes) -> Any:
    """The general decoder alone (what the hot paths are pinned to)."""
    return _decode(unpack_body(body))


def _outcome(f: Any, body: bytes) -> tuple[str, Any]:
    try:
        m = f(body)
    except Exception as exc:  # the class and text are compared
        return type(exc).__name__, str(exc)
    return "ok", (m, getattr(m, "encoded", None))


odd = st.sampled_from([None, True, 0, -1, 2**63, 1.5, "x", b"", b"\x01" * 32, b"\x01" * 31,
                       [], {}])


def _record(cite: bool, content: Any) -> Record:
    p = Record.create(key="w/1", owner="owner", seq=1, content=0)
    return (derive(key="w/1", owner="owner", seq=2, content=content, inputs=[p]) if cite
            else Record.create(key="w/1", owner="owner", seq=2, content=content))


@settings(max_examples=300, deadline=None)
@given(cite=st.booleans(), content=st.integers() | st.text(max_size=5),
       rid=st.integers(0, 2**63 - 1), exp=st.sampled_from(["parents", None, "ab" * 32]),
       slot=st.integers(-1, 6), value=odd, rec_field=st.integers(-1, 10))
def test_commit_hot_path_is_the_general_decoder(cite: bool, content: Any, rid: int, exp: Any,
                                                slot: int, value: Any, rec_field: int
                                                ) -> None:
    """A commit body, valid or with one field (of the frame or the record) replaced:
    both decoders give the same message and stored encoding, or the same error."""
    rec = _record(cite, content)
    wire = record_to_wire(rec)
    if 0 <= rec_field < len(wire):
        wire[rec_field] = value
    obj: list[Any] = [PROTOCOL_VERSION, 7, rid, wire]
    if exp != "parents":
        obj.append(None if exp is None else bytes.fromhex(exp))
    if 0 <= slot < len(obj):
        obj[slot] = value
    body = msgpack.packb(obj, use_bin_type=True)
    want = _outcome(decode_body_general, body)
    assert _outcome(decode_body, body) == want
    if body[:3] in COMMIT_PREFIXES:
        assert _outcome(decode_commit, body) == want


def test_valid_commits_take_the_hot_path() -> None:
    """A writer's commit is decoded without the general decoder (it would fail here)."""
    import icore.net._frames as frames

    body = encode_body(Commit(5, _record(True, {"n": 2})))
    assert body[:3] in COMMIT_PREFIXES
    general = frames._decode
    frames._decode = None  # type: ignore[assignment]
    try:
        msg = decode_commit(body)
    finally:
        frames._decode = general
    assert msg == decode_body_general(body)
    assert isinstance(msg, Commit) and msg.encoded is not None


@settings(max_examples=200, deadline=None)
@given(slot=st.integers(-1, 6), value=odd, created=st.booleans(), done=st.booleans())
def test_ack_hot_path_is_the_general_decoder(slot: int, value: Any, created: bool,
                                             done: bool) -> None:
    """A commit acknowledgement, valid or with one field replaced: same message or error."""
    obj: list[Any] = [PROTOCOL_VERSION, 8, 7, b"\x02" * 32, 9, created, done]
    if 0 <= slot < len(obj):
        obj[slot] = value
    body = msgpack.packb(obj, use_bin_type=True)
    want = _outcome(decode_body_general, body)
    assert _outcome(decode_body, body) == want
    if body[:3] == COMMIT_ACK_PREFIX:
        assert _outcome(decode_commit_ack, body) == want


@given(rid=st.integers(0, 2**63 - 1), seq=st.integers(0, 2**63 - 1), created=st.booleans(),
       done=st.booleans(), cite=st.booleans(), exp=st.sampled_from(
           [FROM_PARENTS, None, "cd" * 32]))
def test_fast_encoders_write_the_general_bytes(rid: int, seq: int, created: bool, done: bool,
                                               cite: bool, exp: Any) -> None:
    """``encode_body`` of a commit and an acknowledgement: the general layout's bytes."""
    for msg in (CommitAck(rid, "ef" * 32, seq, created, done),
                Commit(rid, _record(cite, 1), exp)):
        general = msgpack.packb([PROTOCOL_VERSION, int(msg.TYPE), msg.rid, *_fields(msg)],
                                use_bin_type=True)
        assert encode_body(msg) == general
        assert decode_body(general) == msg


def test_decode_body_takes_any_bytes_like_and_the_hot_decoders_check_their_prefix() -> None:
    """``decode_body`` of a ``bytearray``/``memoryview`` decodes as of ``bytes`` (the
    prefix dispatch hashes a copy); ``decode_commit``/``decode_commit_ack`` given another
    body decide as the general decoder (review of #27 round 10)."""
    from icore.net import Ping, UnsupportedVersion

    body = encode_body(Ping(3))
    assert decode_body(bytearray(body)) == decode_body(memoryview(body)) == Ping(3)
    other = msgpack.packb([99, 12, 1, b"x"])
    for fn in (decode_commit, decode_commit_ack):
        with pytest.raises(UnsupportedVersion):
            fn(other)
