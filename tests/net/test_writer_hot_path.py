"""The writer's hot paths (issue 27) give the general paths' bytes, records and errors.

A writer builds a record (:meth:`Record.create` through :func:`derive`), frames the
commit (:func:`encode_commit`) and reads the acknowledgement (:func:`decode_reply` over
the connection's frame bodies). Each is pinned here to the general path it shortcuts:
a subclass of :class:`Record` takes ``create``'s general checks, ``encode_frame`` of a
:class:`Commit` and ``decode_body`` are the general codec.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.memory import FROM_PARENTS
from icore.net import (
    Commit,
    CommitAck,
    ErrorReply,
    FrameTooLarge,
    HeadReplyMsg,
    MalformedMessage,
    Pong,
    decode_body,
    encode_body,
    encode_frame,
)
from icore.net._commitwire import decode_reply, encode_commit
from icore.net._protocol import PROTOCOL_VERSION, MsgType
from icore.records import Record, canonical_json, derive, record_to_wire
from icore.records._record import _HEX, _hex64


class _General(Record):
    """Same fields; ``create`` takes the general checks for any class but Record."""

    __slots__ = ()


def _outcome(f: Any, *args: Any, **kw: Any) -> tuple[str, Any]:
    try:
        r = f(*args, **kw)
    except Exception as exc:  # the class and text are compared
        return type(exc).__name__, str(exc)
    return "ok", r


def _fields(rec: Record) -> tuple[Any, ...]:
    return (rec.key, rec.owner, rec.seq, rec.parents, rec.type, rec.content,
            rec.content_address, rec.size, rec.schema, rec.id, rec.supersedes)


ids = st.binary(min_size=32, max_size=32).map(bytes.hex)
odd_ids = st.sampled_from(["A" * 64, "g" * 64, "a" * 63, " " * 64, "ab" * 31 + " a",
                           "é" * 64, "0x" + "a" * 62, "\ud800" * 64, 5, None, b"a" * 64])
texts = st.text(max_size=8) | st.sampled_from(["w/1", 'k"q', "k\\", "k\n", "\x7f", ""])


# a small pool, so duplicate parents and a superseded version that is also a parent occur
pool = st.lists(ids, min_size=1, max_size=3, unique=True)


@given(key=texts, owner=texts, rtype=texts, seq=st.integers(-2, 2**64),
       parents=st.lists(ids | odd_ids, max_size=3), sup=st.none() | ids | odd_ids,
       content=st.none() | st.integers() | st.dictionaries(texts, st.integers(), max_size=2),
       shared=pool, picks=st.lists(st.integers(0, 2), max_size=3),
       sup_pick=st.none() | st.integers(0, 2))
def test_create_is_the_general_create(key: Any, owner: Any, rtype: Any, seq: Any,
                                      parents: list[Any], sup: Any, content: Any,
                                      shared: list[str], picks: list[int],
                                      sup_pick: int | None) -> None:
    """The one-pass envelope of ``Record.create``: the same record, or the same error."""
    parents = parents + [shared[i % len(shared)] for i in picks]
    if sup_pick is not None:
        sup = shared[sup_pick % len(shared)]
    kw = {"key": key, "owner": owner, "seq": seq, "parents": parents, "type": rtype,
          "content": content, "supersedes": sup}
    got, want = _outcome(Record.create, **kw), _outcome(_General.create, **kw)
    assert got[0] == want[0]
    if got[0] == "ok":
        assert type(got[1]) is Record
        assert _fields(got[1]) == _fields(want[1])
        assert got[1].verify() is got[1]
        assert got[1].id == hashlib.sha256(canonical_json(got[1].envelope())).hexdigest()
    else:
        assert got == want


def test_str_subclass_ids_are_judged_on_their_plain_text() -> None:
    """A str subclass whose ``__eq__`` says yes to anything is no record id unless its
    plain text is one (the round-trip check compares plain strs)."""
    from icore.records import is_record_id

    class Yes(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    assert not is_record_id(Yes("AB" * 32)) and not is_record_id(Yes(" " * 64))
    assert is_record_id(Yes("ab" * 32))


@given(parents=st.lists(ids, max_size=3), sup=st.none() | ids)
def test_derive_is_create_with_the_inputs_ids(parents: list[str], sup: str | None) -> None:
    """``derive`` of records cites their ids in order, as ``create`` with those parents."""
    recs = [Record.create(key=f"in/{p[:6]}", owner="o", seq=1, content=p) for p in parents]
    got = _outcome(derive, key="k", owner="o", seq=2, content=1, inputs=recs, supersedes=sup)
    want = _outcome(Record.create, key="k", owner="o", seq=2, content=1,
                    parents=[r.id for r in recs], type="plan", supersedes=sup)
    assert got[0] == want[0]
    if got[0] == "ok":
        assert _fields(got[1]) == _fields(want[1])


@pytest.mark.parametrize("bad", [None, "x" * 64, 3])
def test_derive_still_refuses_non_records(bad: Any) -> None:
    """An id or another value among the inputs: the typed error naming the input."""
    ok = Record.create(key="a", owner="o", seq=1, content=1)
    with pytest.raises(Exception, match=r"inputs\[1\] must be a Record"):
        derive(key="k", owner="o", seq=2, content=1, inputs=[ok, bad])


@given(text=st.text(alphabet="0123456789abcdefABCDEF \tg\n", min_size=62, max_size=66)
       | ids)
def test_hex64_is_the_hex_set_check(text: str) -> None:
    """The round-trip check says lowercase hex exactly where the character set does."""
    if len(text) == 64:
        assert _hex64(text) == _HEX.issuperset(text)


def _rec(cite: bool, content: Any, sup: bool = False) -> Record:
    p = Record.create(key="w/1", owner="owner", seq=1, content=0)
    if cite:
        q = Record.create(key="in/1", owner="owner", seq=1, content=1)
        return derive(key="w/1", owner="owner", seq=2, content=content, inputs=[q],
                      supersedes=p if sup else None)
    return Record.create(key="w/1", owner="owner", seq=2, content=content,
                         supersedes=p.id if sup else None)


@given(rid=st.integers(0, 2**32), cite=st.booleans(), sup=st.booleans(),
       content=st.none() | st.integers() | st.text(max_size=20)
       | st.dictionaries(st.text(max_size=4), st.integers(), max_size=3)
       | st.lists(st.lists(st.integers(), max_size=2), max_size=3),
       expected=st.sampled_from(["parents", "none", "id"]))
def test_encode_commit_is_encode_frame(rid: int, cite: bool, sup: bool, content: Any,
                                       expected: str) -> None:
    """The writer's frame is the general encoder's, byte for byte, and decodes back."""
    rec = _rec(cite, content, sup)
    exp: Any = {"parents": FROM_PARENTS, "none": None, "id": "cd" * 32}[expected]
    frame = encode_commit(rid, rec, exp)
    assert frame == encode_frame(Commit(rid, rec, exp))
    msg = decode_body(frame[4:])
    assert isinstance(msg, Commit) and msg.record == rec and msg.expected_head == exp


def test_encode_commit_refuses_what_encode_frame_refuses() -> None:
    """A bad expected head (nothing built) and a frame over the limit: the same errors."""
    rec = _rec(True, 1)
    bad = "not an id"
    assert _outcome(encode_commit, 1, rec, bad) == _outcome(
        encode_frame, Commit(1, rec, bad))
    with pytest.raises(MalformedMessage):
        encode_commit(1, rec, bad)
    # plain content of 4 MiB, just inside the record limit, plus the envelope: over the
    # frame limit exactly when the general encoder says so
    big = Record.create(key="w/1", owner="owner", seq=3, content="x" * (4 * 1024 * 1024 - 2))
    got, want = _outcome(encode_commit, 9, big), _outcome(encode_frame, Commit(9, big))
    assert got == want
    if got[0] != "ok":
        assert got[0] == FrameTooLarge.__name__


def test_encode_commit_of_a_mutated_record_sends_what_it_holds() -> None:
    """A record whose content no longer hashes to its address is framed as held: the
    owner's decoder refuses it (nothing is taken from what ``create`` computed)."""
    rec = _rec(False, {"n": 1})
    rec.content["n"] = 2
    assert encode_commit(1, rec) == encode_frame(Commit(1, rec))
    assert record_to_wire(rec)[9] == b'{"n":2}'


bodies = [
    encode_body(CommitAck(7, "ab" * 32, 3, True, False)),
    encode_body(CommitAck(2**32, "00" * 32, 0, False, True)),
    encode_body(ErrorReply(4, "sequence", "seq must grow", {"key": "w/1"})),
    encode_body(HeadReplyMsg(5, "", (), ())),
    encode_body(Pong(6, "owner")),
    msgpack.packb([PROTOCOL_VERSION, int(MsgType.COMMIT_ACK), 1, b"\x01" * 31, 1, True, True]),
    msgpack.packb([PROTOCOL_VERSION, int(MsgType.COMMIT_ACK), 1, b"\x01" * 32, 1, 1, True]),
    msgpack.packb([PROTOCOL_VERSION, int(MsgType.COMMIT_ACK), -1, b"\x01" * 32, 1, True, True]),
    msgpack.packb([PROTOCOL_VERSION, int(MsgType.COMMIT_ACK), 1, b"\x01" * 32, 1, True]),
    msgpack.packb([PROTOCOL_VERSION, int(MsgType.HEAD_REPLY), 1, [], [], 0]),
    msgpack.packb([PROTOCOL_VERSION + 1, int(MsgType.COMMIT_ACK), 1, b"\x01" * 32, 1, True,
                   True]),
    encode_body(CommitAck(1, "ab" * 32, 1, True, True)) + b"\x00",
    b"\x97\x03",
    b"",
]


@pytest.mark.parametrize("body", bodies)
def test_decode_reply_is_decode_body(body: bytes) -> None:
    """The client's dispatch: the same message, or the same typed refusal."""
    assert _outcome(decode_reply, body) == _outcome(decode_body, body)


@given(body=st.binary(max_size=40).map(lambda b: bytes([0x97, PROTOCOL_VERSION,
                                                         int(MsgType.COMMIT_ACK)]) + b))
def test_decode_reply_of_any_ack_prefixed_bytes(body: bytes) -> None:
    """Any bytes behind the acknowledgement prefix: what the general decoder says."""
    assert _outcome(decode_reply, body) == _outcome(decode_body, body)
