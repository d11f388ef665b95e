"""The owner protocol, sans-io: its messages (the frame codec is :mod:`icore.net._frames`).

Pure code in the style of h11: no sockets, no clock (planfence Sec. 4.1, App. A;
design.md 3.2, 3.4). Transports move the bytes; this module says what the bytes are.

Frame layout::

    +----------------------+-------------------------------------------------------+
    | length N (4 bytes,   | msgpack array [version, type, request id, *fields]    |
    | big-endian unsigned) | (N bytes, 1 <= N <= max frame size)                   |
    +----------------------+-------------------------------------------------------+

Record ids travel as 32-byte binaries and records in the codec of
:func:`icore.records.record_to_wire`; every record is verified on decode (its id is the
hash of its envelope, its content hashes to the content address). Every decode failure
raises a :class:`~icore.net.ProtocolError` subclass; after one, a :class:`FrameDecoder`
refuses further input, and transports close the connection.

Messages (type code in brackets):

* :class:`HeadQuery` [1] / :class:`HeadReplyMsg` [2] - batched head query per owner
  (Alg. 1 line 5); the reply may inline a small changed record (design.md 3.2).
* :class:`FetchRequest` [3] / :class:`FetchReply` [4] - fetch exact records (line 8).
* :class:`Announce` [5] - head announcement, metadata envelope only (metadata sync).
* :class:`Replicate` [6] - records with content pushed to a replica.
* :class:`Commit` [7] / :class:`CommitAck` [8] - a writer commits its own record to its
  owner service, or to a central store (centralized lineage). Fields ``[record]`` (the
  base is the record's parents) or ``[record, expected]`` (compare-and-set on an explicit
  expected head: a 32-byte id, or nil for create-if-absent).
* :class:`Ack` [9], :class:`ErrorReply` [10], :class:`Ping` [11] / :class:`Pong` [12].
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from icore.memory import FROM_PARENTS, ExpectedHead, HeadEntry
from icore.net._errors import (
    ProtocolError,
    SequenceViolation,
)
from icore.records import Record, RecordId

PROTOCOL_VERSION = 3
"""Version written into every frame; a frame of another version is rejected.

2 (issue 17): a head query sends the caller's known id aligned with each key it asks (no
key twice, no ids of other owners' keys); a head reply answers a key whose head *is* the
known id with its sequence only (``HeadReplyMsg.same``), so an unchanged head costs no id
on the way back.

3 (issue 27): a head reply no longer names the owner (the client checked the owner's
certificate when it connected: decoded replies carry ``owner=""`` and the client fills
in the owner it asked) and lists *same* heads flat (``[key, seq, key, seq, ...]``): a
d=1 validation is 7 bytes smaller with the owner ``owner``. A peer of protocol 2 is
refused with :class:`~icore.net.UnsupportedVersion` both ways."""

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Default largest frame body accepted, in bytes (a 4 MiB record plus headroom)."""

HEADER_BYTES = 4
"""Size of the length prefix."""

_MAX_RID = 2**63 - 1


class MsgType(enum.IntEnum):
    """Message type codes (stable wire values)."""

    HEAD_QUERY = 1
    HEAD_REPLY = 2
    FETCH = 3
    FETCH_REPLY = 4
    ANNOUNCE = 5
    REPLICATE = 6
    COMMIT = 7
    COMMIT_ACK = 8
    ACK = 9
    ERROR = 10
    PING = 11
    PONG = 12


_MAX_TYPE = int(max(MsgType))
_TYPES = {int(t): t for t in MsgType}


@dataclass(frozen=True, slots=True)
class HeadQuery:
    """Ask one owner for its heads of ``keys`` (one request per owner, Alg. 1 line 5).

    Attributes:
        rid: request id, strictly increasing per connection.
        keys: the semantic keys asked (the owner's part of D(a)).
        known: the caller's frontier ids F(x) (lets the owner inline changed records).
        inline_max_bytes: inline a changed head record up to this content size (0: never).
    """

    rid: int
    keys: tuple[str, ...]
    known: Mapping[str, RecordId] = field(default_factory=dict)
    inline_max_bytes: int = 0
    TYPE = MsgType.HEAD_QUERY


@dataclass(frozen=True, slots=True)
class HeadReplyMsg:
    """An owner's heads (a key it has no head for is absent).

    Attributes:
        rid: the request id answered.
        owner: the answering owner. Not on the wire since protocol 3 (the client knows
            it from the server's certificate): a decoded reply carries ``""``.
        heads: the head entries, each optionally with its record inlined.
    """

    rid: int
    owner: str
    heads: tuple[HeadEntry, ...]
    same: tuple[tuple[str, int], ...] = ()
    """(key, sequence) of each head equal to the id the query sent as known for that key:
    the owner vouches for the equality instead of repeating the id (protocol 2)."""
    TYPE = MsgType.HEAD_REPLY


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Fetch exact records by id (Alg. 1 line 8)."""

    rid: int
    ids: tuple[RecordId, ...]
    TYPE = MsgType.FETCH


@dataclass(frozen=True, slots=True)
class FetchReply:
    """Records found (verified on decode); ids the owner does not hold are absent."""

    rid: int
    records: tuple[Record, ...]
    TYPE = MsgType.FETCH_REPLY


@dataclass(frozen=True, slots=True)
class Announce:
    """Head announcement: metadata envelopes only, no content (planfence App. A)."""

    rid: int
    records: tuple[Record, ...]
    TYPE = MsgType.ANNOUNCE


@dataclass(frozen=True, slots=True)
class Replicate:
    """Records with content, installed into the receiver's replica cache."""

    rid: int
    records: tuple[Record, ...]
    TYPE = MsgType.REPLICATE


@dataclass(frozen=True, slots=True)
class Commit:
    """Commit one record; the writer is the authenticated peer, never a field.

    ``expected_head`` is the head the commit replaces (:meth:`icore.memory.Store.commit`).
    ``encoded`` is set by the decoder only (:func:`icore.net.decode_body`): the record
    in :func:`icore.records.encode_record`'s layout, the very bytes the store would
    write, so the owner stores them without encoding the record again (issue 27). It is
    not sent, compared or shown.
    """

    rid: int
    record: Record
    expected_head: ExpectedHead = FROM_PARENTS
    encoded: bytes | None = field(default=None, compare=False, repr=False)
    TYPE = MsgType.COMMIT


@dataclass(frozen=True, slots=True)
class CommitAck:
    """A durable commit: sent only after the store's transaction committed."""

    rid: int
    record_id: RecordId
    seq: int
    created: bool
    lineage_complete: bool
    TYPE = MsgType.COMMIT_ACK


@dataclass(frozen=True, slots=True)
class Ack:
    """Generic acknowledgement (``count`` items processed)."""

    rid: int
    count: int
    TYPE = MsgType.ACK


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A typed error answer (``code`` is an :class:`icore.errors.ErrorCode` value).

    ``fields`` carries the error's structured string fields when they matter to the
    client (a head conflict's key, expected and current head); encoded only when set.
    """

    rid: int
    code: str
    message: str
    fields: Mapping[str, str] = field(default_factory=dict)
    TYPE = MsgType.ERROR


@dataclass(frozen=True, slots=True)
class Ping:
    """Liveness probe."""

    rid: int
    TYPE = MsgType.PING


@dataclass(frozen=True, slots=True)
class Pong:
    """Answer to :class:`Ping` naming the answering agent."""

    rid: int
    agent: str
    TYPE = MsgType.PONG


Message: TypeAlias = (HeadQuery | HeadReplyMsg | FetchRequest | FetchReply | Announce
                      | Replicate | Commit | CommitAck | Ack | ErrorReply | Ping | Pong)
"""Any protocol message."""

REQUEST_TYPES = (HeadQuery, FetchRequest, Announce, Replicate, Commit, Ping)
"""Messages a client sends (each answered by exactly one reply with the same rid)."""


class RequestSequence:
    """Per-connection guard: request ids must strictly increase (replay/reorder defence).

    TLS already rejects replayed or reordered *records*; this guard makes the same
    promise at the message layer, for transports without TLS (virtual, tests) and
    against a buggy or hostile authenticated peer.
    """

    def __init__(self) -> None:
        self.last = -1

    def check(self, rid: int) -> None:
        """Accept ``rid`` or raise.

        Raises:
            SequenceViolation: ``rid`` is not larger than the previous one.
        """
        if rid <= self.last:
            kind = "replayed" if rid == self.last else "reordered"
            raise SequenceViolation(f"request id {rid} {kind} (last {self.last})",
                                    rid=rid, last=self.last)
        self.last = rid


__all__ = [
    "HEADER_BYTES",
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "REQUEST_TYPES",
    "Ack",
    "Announce",
    "Commit",
    "CommitAck",
    "ErrorReply",
    "FetchReply",
    "FetchRequest",
    "HeadQuery",
    "HeadReplyMsg",
    "Message",
    "MsgType",
    "Ping",
    "Pong",
    "ProtocolError",
    "Replicate",
    "RequestSequence",
]
