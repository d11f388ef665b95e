"""The sans-io protocol: exact frames, round trips, typed decode errors, fuzzing."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.memory import HeadEntry, MemoryStore, OwnershipMap
from icore.net import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Ack,
    Announce,
    Commit,
    CommitAck,
    ErrorReply,
    FetchReply,
    FetchRequest,
    FrameDecoder,
    FrameTooLarge,
    HeadQuery,
    HeadReplyMsg,
    InvalidRecord,
    MalformedMessage,
    OwnerHandler,
    Ping,
    Pong,
    ProtocolError,
    Replicate,
    RequestSequence,
    SequenceViolation,
    TruncatedFrame,
    UnsupportedVersion,
    decode_frame,
    encode_frame,
    frame_size,
)
from icore.net._stats import to_head_reply
from icore.records import Record, record_to_wire

REC = Record.create(key="req/1", owner="a", seq=1, content={"city": "Oslo"})
REC2 = Record.create(key="req/1", owner="a", seq=2, content={"city": "Rome"}, parents=[REC.id])

MESSAGES = [
    HeadQuery(1, ("req/1", "req/2"), {"req/1": REC.id}, 4096),
    HeadQuery(2, (), {}, 0),
    HeadReplyMsg(3, "", (HeadEntry("req/1", REC.id, 1), HeadEntry("req/1", REC2.id, 2, REC2))),
    HeadReplyMsg(3, "", (HeadEntry("req/1", REC.id, 1),), (("req/2", 4), ("req/3", 9))),
    FetchRequest(4, (REC.id, REC2.id)),
    FetchReply(5, (REC, REC2)),
    Announce(6, (REC.without_content(),)),
    Replicate(7, (REC,)),
    Commit(8, REC2),
    CommitAck(9, REC2.id, 2, True, False),
    Ack(10, 3),
    ErrorReply(11, "ownership", "no"),
    Ping(12),
    Pong(13, "a"),
]

V = PROTOCOL_VERSION


def _frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


class TestRoundTrip:
    """Every message encodes to one frame and decodes back equal."""

    @pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
    def test_round_trip(self, msg: object) -> None:
        """decode(encode(m)) == m and frame_size is exact."""
        frame = encode_frame(msg)  # type: ignore[arg-type]
        assert decode_frame(frame) == msg
        assert frame_size(msg) == len(frame)  # type: ignore[arg-type]

    def test_d1_validation_is_small(self) -> None:
        """A d=1 head query and its reply are far below the 512-byte budget."""
        q = encode_frame(HeadQuery(1, ("req/trip-17",), {"req/trip-17": REC.id}))
        r = encode_frame(HeadReplyMsg(1, "planner", (HeadEntry("req/trip-17", REC.id, 7),)))
        assert len(q) + len(r) < 160

    def test_unchanged_head_sends_no_id_back(self) -> None:
        """Protocol 2: an owner answers a head equal to the caller's known id with its
        sequence only; the client fills the id in from what it sent (issue 17)."""
        store = MemoryStore(OwnershipMap.from_mapping({"req/*": "a"}), "a")
        store.commit(REC, writer="a")
        q = HeadQuery(1, ("req/1",), {"req/1": REC.id})
        reply = OwnerHandler(store, agent="a").handle(decode_frame(encode_frame(q)), "b")
        assert isinstance(reply, HeadReplyMsg)
        assert reply.heads == () and reply.same == (("req/1", 1),)
        full = encode_frame(HeadReplyMsg(1, "a", (HeadEntry("req/1", REC.id, 1),)))
        assert len(encode_frame(reply)) <= len(full) - 32
        got = to_head_reply(decode_frame(encode_frame(reply)), owner="a", keys=["req/1"],
                            known={"req/1": REC.id})
        assert got.heads["req/1"].record_id == REC.id and got.heads["req/1"].seq == 1
        # a changed head comes back in full
        store.commit(REC2, writer="a")
        changed = OwnerHandler(store, agent="a").handle(q, "b")
        assert isinstance(changed, HeadReplyMsg) and changed.same == ()
        assert changed.heads[0].record_id == REC2.id
        # "same" for a key the client sent no known id for is malformed (the gate blocks)
        with pytest.raises(MalformedMessage, match="no known id"):
            to_head_reply(reply, owner="a", keys=["req/1"], known={})

    def test_protocol_2_replies_are_refused(self) -> None:
        """Protocol 3 replies name no owner and list *same* heads flat; a protocol-2
        reply (owner name, [key, seq] pairs) is refused with a typed error, and so is a
        flat list of odd length."""
        with pytest.raises(UnsupportedVersion):
            decode_frame(_frame([2, 2, 1, "a", [], [["req/1", 1]]]))
        with pytest.raises(MalformedMessage, match="pairs"):
            decode_frame(_frame([V, 2, 1, [], ["req/1"]]))
        with pytest.raises(MalformedMessage):
            decode_frame(_frame([V, 2, 1, "a", [], ["req/1", 1]]))  # an owner: 3 fields
        got = decode_frame(_frame([V, 2, 1, [], ["req/1", 1, "req/2", 5]]))
        assert got == HeadReplyMsg(1, "", (), (("req/1", 1), ("req/2", 5)))

    def test_query_sends_only_the_asked_keys_ids(self) -> None:
        """Known ids of keys not asked of this owner stay off the wire."""
        q = HeadQuery(1, ("req/1",), {"req/1": REC.id, "req/9": REC2.id})
        back = decode_frame(encode_frame(q))
        assert isinstance(back, HeadQuery) and dict(back.known) == {"req/1": REC.id}

    def test_stream_split_anywhere(self) -> None:
        """Feeding the concatenated frames byte by byte yields every message in order."""
        stream = b"".join(encode_frame(m) for m in MESSAGES)  # type: ignore[arg-type]
        dec = FrameDecoder()
        out = []
        for i in range(len(stream)):
            out += dec.feed(stream[i:i + 1])
        dec.eof()
        assert out == MESSAGES
        assert dec.frames_in == len(MESSAGES)

    def test_announce_strips_content(self) -> None:
        """An announcement carries the metadata envelope only."""
        msg = decode_frame(encode_frame(Announce(1, (REC,))))
        assert isinstance(msg, Announce)
        assert msg.records[0].content is None
        assert msg.records[0].id == REC.id


class TestTypedErrors:
    """Every bad input raises a specific ProtocolError and breaks the decoder."""

    def test_oversize_length_prefix(self) -> None:
        """A huge length prefix is refused before any body is buffered."""
        dec = FrameDecoder(max_frame_bytes=1024)
        with pytest.raises(FrameTooLarge):
            dec.feed(struct.pack(">I", 1025))
        with pytest.raises(FrameTooLarge):  # broken for good
            dec.feed(encode_frame(Ping(1)))

    def test_default_max(self) -> None:
        """The default limit is MAX_FRAME_BYTES."""
        with pytest.raises(FrameTooLarge):
            FrameDecoder().feed(struct.pack(">I", MAX_FRAME_BYTES + 1))

    def test_truncated(self) -> None:
        """A stream ending inside a frame is a TruncatedFrame at eof."""
        dec = FrameDecoder()
        assert dec.feed(encode_frame(Ping(1))[:-1]) == []
        with pytest.raises(TruncatedFrame):
            dec.eof()

    def test_version(self) -> None:
        """Another protocol version is refused."""
        with pytest.raises(UnsupportedVersion):
            decode_frame(_frame([PROTOCOL_VERSION + 1, 11, 1]))

    @pytest.mark.parametrize("obj", [
        {"a": 1}, [V], [V, 99, 1], [V, 11, -1], [V, 11, True], [V, 1, 1, "keys", [], 0],
        [V, 1, 1, ["k"], [b"short"], 0], [V, 1, 1, ["k"], {"k": b"x" * 32}, 0],
        [V, 1, 1, ["k", "j"], [None], 0], [V, 11, 1, "extra"], [V, 8, 1, b"x" * 32, 1, 1, 0],
        [V, 2, 1, "a", [["k", b"x" * 32, "seq", None]], []], [V, 2, 1, "a", [], [["k"]]],
        [V, 2, 1, "a", [], [["k", -1]]], [V, 2, 1, "a", []], [V, 10, 1, 5, "m"],
        [V, 7, 1, [1, 2]],
    ])
    def test_wrong_types(self, obj: object) -> None:
        """Wrong shapes and types are MalformedMessage."""
        with pytest.raises(MalformedMessage):
            decode_frame(_frame(obj))

    @pytest.mark.parametrize("rid", ["zz", "ab", "", 5, "0" * 63])
    def test_encoding_junk_record_id(self, rid: object) -> None:
        """Encoding a message with something that is not a record id is MalformedMessage
        (was a bare ValueError/TypeError from bytes.fromhex, or a short id on the wire)."""
        with pytest.raises(MalformedMessage, match="not a record id"):
            encode_frame(FetchRequest(rid=1, ids=(rid,)))  # type: ignore[arg-type]
        with pytest.raises(MalformedMessage, match="not a record id"):
            encode_frame(HeadQuery(rid=1, keys=("k",), known={"k": rid}))  # type: ignore[dict-item]

    def test_not_msgpack(self) -> None:
        """Garbage bodies are MalformedMessage."""
        with pytest.raises(MalformedMessage):
            decode_frame(struct.pack(">I", 2) + b"\xc1\xc1")

    def test_empty_frame(self) -> None:
        """A zero length prefix is malformed."""
        with pytest.raises(MalformedMessage):
            FrameDecoder().feed(b"\x00\x00\x00\x00")

    def test_tampered_record(self) -> None:
        """A record whose content does not hash to its id is InvalidRecord."""
        wire = record_to_wire(REC)
        wire[9] = b'{"city":"Paris"}'
        with pytest.raises(InvalidRecord) as ei:
            decode_frame(_frame([V, 7, 1, wire]))
        assert ei.value.fields["record_code"] == "record_id_mismatch"

    def test_inlined_record_must_match_head(self) -> None:
        """An inlined record must be the head it claims to be."""
        frame = encode_frame(HeadReplyMsg(1, "a", (HeadEntry("req/1", REC.id, 1, REC2),)))
        with pytest.raises(InvalidRecord):
            decode_frame(frame)

    def test_sequence_guard(self) -> None:
        """Replayed and reordered request ids are SequenceViolation."""
        seq = RequestSequence()
        seq.check(1)
        seq.check(5)
        with pytest.raises(SequenceViolation, match="replayed"):
            seq.check(5)
        with pytest.raises(SequenceViolation, match="reordered"):
            seq.check(3)


class TestFuzz:
    """Hypothesis: no input crashes or hangs the decoder; errors are always typed."""

    @given(st.binary(max_size=2048))
    def test_random_bytes(self, data: bytes) -> None:
        """Random bytes: messages or a ProtocolError, nothing else."""
        dec = FrameDecoder(max_frame_bytes=4096)
        try:
            dec.feed(data)
            dec.eof()
        except ProtocolError:
            assert dec.broken is not None

    @given(st.sampled_from(MESSAGES), st.data())
    def test_truncated_and_corrupted(self, msg: object, data: st.DataObject) -> None:
        """Truncating or flipping bytes of a valid frame gives a typed error or a message."""
        frame = bytearray(encode_frame(msg))  # type: ignore[arg-type]
        cut = data.draw(st.integers(0, len(frame)))
        flips = data.draw(st.lists(st.tuples(st.integers(0, len(frame) - 1),
                                             st.integers(0, 255)), max_size=4))
        for i, b in flips:
            frame[i] = b
        dec = FrameDecoder(max_frame_bytes=1 << 20)
        try:
            dec.feed(bytes(frame[:cut]))
            dec.eof()
        except ProtocolError:
            pass

    json_like = st.recursive(
        st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=8)
        | st.binary(max_size=40) | st.floats(allow_nan=True),
        lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=20)

    @given(st.integers(1, 12), st.lists(json_like, max_size=5), st.integers(-3, 2**64))
    def test_wrong_types_fuzz(self, mtype: int, fields: list[object], rid: int) -> None:
        """Well-framed msgpack of any shape: a message or a ProtocolError."""
        try:
            frame = _frame([PROTOCOL_VERSION, mtype, rid, *fields])
        except (OverflowError, TypeError):
            return
        try:
            decode_frame(frame)
        except ProtocolError:
            pass


def test_a_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    """FrameDecoder.feed: max_frame_bytes is the largest accepted body (inclusive)."""
    frame = encode_frame(Pong(1, "a" * 100))
    body = len(frame) - 4
    assert FrameDecoder(max_frame_bytes=body).feed(frame) == [Pong(1, "a" * 100)]
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=body - 1).feed(frame)


def test_a_string_field_of_exactly_its_maximum_length_is_accepted() -> None:
    """_str: a string of max_len chars decodes; one more is malformed (agent: 512)."""
    assert decode_frame(encode_frame(Pong(1, "a" * 512))) == Pong(1, "a" * 512)
    with pytest.raises(MalformedMessage):
        decode_frame(encode_frame(Pong(1, "a" * 513)))


@pytest.mark.parametrize("kind", [Announce, Replicate])
def test_a_peer_announces_only_its_own_records_and_they_are_installed(kind: type) -> None:
    """OwnerHandler: an Announce/Replicate of the peer's own records is installed (Ack
    with the count); one naming another owner is refused and installs nothing."""
    om = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "b"})
    store = MemoryStore(om, "b")
    h = OwnerHandler(store, agent="b")
    ack = h.handle(kind(1, (REC,)), "a")
    assert ack == Ack(1, 1)
    assert store.installed_head("req/1") == HeadEntry("req/1", REC.id, 1)
    other = MemoryStore(om, "b")
    refused = OwnerHandler(other, agent="b").handle(kind(2, (REC2,)), "c")
    assert isinstance(refused, ErrorReply) and refused.code == "ownership"
    assert other.installed_head("req/1") is None
