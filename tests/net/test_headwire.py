"""The owner's head-query hot path writes and accepts exactly what the general codec does."""

from __future__ import annotations

from collections.abc import Callable

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.memory import HeadEntry, MemoryStore, OwnershipMap
from icore.net import (
    PROTOCOL_VERSION,
    FrameDecoder,
    FrameTooLarge,
    HeadQuery,
    HeadReplyMsg,
    MalformedMessage,
    OwnerHandler,
    ProtocolError,
    decode_body,
    encode_body,
    encode_frame,
)
from icore.net._frames import HEAD_REPLY_PREFIX, decode_head_reply
from icore.net._headwire import (
    HEAD_QUERY_PREFIX,
    HeadReplyEncoder,
    decode_head_query,
    encode_head_query,
)
from icore.records import Record

REC = Record.create(key="req/1", owner="a", seq=1, content={"city": "Oslo"})
REC2 = Record.create(key="req/1", owner="a", seq=2, content={"city": "Rome"}, parents=[REC.id])

_hex_ids = st.binary(min_size=32, max_size=32).map(bytes.hex)
_keys = st.text(min_size=1, max_size=40)
_ints = st.integers(min_value=0, max_value=2**63 - 1)
_entries = st.builds(HeadEntry, _keys, _hex_ids, _ints)


@settings(max_examples=200, deadline=None)
@given(rid=_ints, owner=_keys, full=st.lists(_entries, max_size=20),
       same=st.lists(_entries, max_size=20), inline=st.booleans())
def test_reply_bytes_equal_the_general_encoder(rid: int, owner: str, full: list[HeadEntry],
                                               same: list[HeadEntry], inline: bool) -> None:
    """Cached or not, inlined record or not: the frame is encode_frame's, byte for byte."""
    if inline:
        full.append(HeadEntry(REC2.key, REC2.id, REC2.seq, REC2))
    enc = HeadReplyEncoder(owner, cache_size=8)
    want = encode_frame(HeadReplyMsg(rid, owner, tuple(full),
                                     tuple((h.key, h.seq) for h in same)))
    assert enc.encode(rid, full, same) == want
    assert enc.encode(rid, full, same) == want  # from the cache


def test_a_changed_head_is_encoded_afresh() -> None:
    """The cache is keyed by the entry object: a new head (a commit) is never stale."""
    enc = HeadReplyEncoder("a")
    old = HeadEntry("req/1", REC.id, 1)
    enc.encode(1, [old], [])
    new = HeadEntry("req/1", REC2.id, 2)
    assert enc.encode(2, [new], []) == encode_frame(HeadReplyMsg(2, "a", (new,)))


def test_reply_over_the_frame_limit_is_refused() -> None:
    """The hot path keeps the frame size limit of encode_frame."""
    enc = HeadReplyEncoder("a", max_frame_bytes=64)
    with pytest.raises(FrameTooLarge):
        enc.encode(1, [HeadEntry(f"req/{i}", REC.id, 1) for i in range(4)], [])


@settings(max_examples=200, deadline=None)
@given(rid=_ints, keys=st.lists(_keys, max_size=12, unique=True),
       data=st.data(), inline=_ints)
def test_query_fields_equal_the_general_decoder(rid: int, keys: list[str],
                                                data: st.DataObject, inline: int) -> None:
    """A well-formed head query decodes to the same fields on both paths."""
    known = {k: data.draw(_hex_ids) for k in keys if data.draw(st.booleans())}
    q = HeadQuery(rid, tuple(keys), known, inline)
    body = encode_body(q)
    assert body.startswith(HEAD_QUERY_PREFIX)
    assert decode_head_query(body) == (rid, q.keys, q.known, inline)
    assert decode_body(body) == q
    assert encode_head_query(rid, q.keys, q.known, inline) == encode_frame(q)


_junk_fields = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-5, max_value=2**64 - 1)
    | st.text(max_size=600) | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4), max_leaves=12)


def _general_or_error(body: bytes) -> object:
    """What the general decoder makes of ``body``: its message, or the error it raised."""
    try:
        return decode_body(body)
    except ProtocolError as exc:
        return exc


def _same_refusal(want: object, fast: Callable[[bytes], object], body: bytes) -> bool:
    """If the general decoder refused ``body``, check ``fast`` refuses it alike; True then."""
    if not isinstance(want, ProtocolError):
        return False
    with pytest.raises(type(want)) as got:
        fast(body)
    assert str(got.value) == str(want)
    return True


@settings(max_examples=400, deadline=None)
@given(fields=st.lists(_junk_fields, min_size=4, max_size=4), tail=st.binary(max_size=3))
def test_query_refusals_equal_the_general_decoder(fields: list[object], tail: bytes) -> None:
    """Any body with the head-query prefix: both paths accept it or both refuse it, alike."""
    body = msgpack.packb([PROTOCOL_VERSION, 1, *fields], use_bin_type=True) + tail
    want = _general_or_error(body)
    if _same_refusal(want, decode_head_query, body):
        return
    assert isinstance(want, HeadQuery)
    assert decode_head_query(body) == (want.rid, want.keys, want.known,
                                       want.inline_max_bytes)


def test_refused_query_answers_an_error_reply() -> None:
    """A store error on the hot path is the handler's typed refusal, as on the general path."""
    store = MemoryStore(OwnershipMap.from_mapping({"req/*": "a"}), "a")
    handler = OwnerHandler(store, agent="a")
    store.close()
    got = handler.head_query(5, ("req/1",), {}, 0, "peer")
    want = handler.handle(HeadQuery(5, ("req/1",), {}, 0), "peer")
    assert got == want and handler.errors == 2


def test_bodies_cut_anywhere_are_the_same_frames() -> None:
    """The framing half of the decoder: one read or byte by byte, the same bodies."""
    frames = [encode_frame(HeadQuery(i, (f"req/{i}",), {}, 0)) for i in range(1, 6)]
    stream = b"".join(frames)
    whole = FrameDecoder().bodies(stream)
    dec = FrameDecoder()
    cut = [b for i in range(len(stream)) for b in dec.bodies(stream[i:i + 1])]
    assert whole == cut == [f[4:] for f in frames]
    assert dec.frames_in == 5 and dec.pending == 0


def test_failed_body_breaks_the_decoder() -> None:
    """A transport that decoded a body itself breaks the decoder with its error."""
    dec = FrameDecoder()
    exc = MalformedMessage("bad", field="frame")
    assert dec.fail(exc) is exc
    with pytest.raises(MalformedMessage):
        dec.bodies(b"\x00")


@settings(max_examples=200, deadline=None)
@given(rid=_ints, full=st.lists(_entries, max_size=12),
       same=st.lists(st.tuples(_keys, _ints), max_size=12))
def test_reply_decodes_alike_on_both_paths(rid: int, full: list[HeadEntry],
                                           same: list[tuple[str, int]]) -> None:
    """The client's head-reply path decodes a reply to what the general decoder does."""
    msg = HeadReplyMsg(rid, "", tuple(full), tuple(same))
    body = encode_body(msg)
    assert body.startswith(HEAD_REPLY_PREFIX)
    assert decode_head_reply(body) == decode_body(body) == msg
    assert FrameDecoder().feed(encode_frame(msg)) == [msg]


@settings(max_examples=400, deadline=None)
@given(fields=st.lists(_junk_fields, min_size=3, max_size=3), tail=st.binary(max_size=3))
def test_reply_refusals_equal_the_general_decoder(fields: list[object], tail: bytes) -> None:
    """Any body with the head-reply prefix: both paths accept it or both refuse it, alike."""
    body = msgpack.packb([PROTOCOL_VERSION, 2, *fields], use_bin_type=True) + tail
    want = _general_or_error(body)
    if not _same_refusal(want, decode_head_reply, body):
        assert decode_head_reply(body) == want
