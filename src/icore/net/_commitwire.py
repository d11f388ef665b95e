"""The writer's side of a durable commit on the wire, sans-io (issue 27; planfence App. A).

A writer sends one commit per record and reads one acknowledgement. This module writes
the commit's frame without building a :class:`~icore.net.Commit` and reads an
acknowledgement frame's body directly; the bytes and the decoded messages are exactly
those of :func:`~icore.net.encode_frame` and :func:`~icore.net.decode_body` (the wire is
unchanged; property tests pin both).
"""

from __future__ import annotations

import struct

from icore.memory import FROM_PARENTS, ExpectedHead
from icore.net._errors import FrameTooLarge
from icore.net._frames import (
    COMMIT_ACK_PREFIX,
    HEAD_REPLY_PREFIX,
    decode_body,
    decode_commit_ack,
    decode_head_reply,
    packer,
    rid32,
)
from icore.net._protocol import MAX_FRAME_BYTES, PROTOCOL_VERSION, Message, MsgType
from icore.records import Record, record_to_wire

_LEN = struct.Struct(">I")
_COMMIT = int(MsgType.COMMIT)


def encode_commit(rid: int, record: Record, expected_head: ExpectedHead = FROM_PARENTS
                  ) -> bytes:
    """The frame of ``Commit(rid, record, expected_head)``, without building the message.

    Raises:
        MalformedMessage: ``expected_head`` is not a record id, None or ``FROM_PARENTS``
            (nothing is sent).
        FrameTooLarge: the body exceeds :data:`~icore.net.MAX_FRAME_BYTES`.
    """
    if expected_head is FROM_PARENTS:
        msg = [PROTOCOL_VERSION, _COMMIT, rid, record_to_wire(record)]
    else:
        msg = [PROTOCOL_VERSION, _COMMIT, rid, record_to_wire(record),
               None if expected_head is None else rid32(expected_head)]
    body: bytes = packer().pack(msg)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLarge(f"frame body is {len(body)} bytes, over {MAX_FRAME_BYTES}",
                            size=len(body), limit=MAX_FRAME_BYTES, rid=rid)
    return _LEN.pack(len(body)) + body


def decode_reply(body: bytes) -> Message:
    """Decode one frame body a client reads: acknowledgements and head replies first.

    The message :func:`~icore.net.decode_body` returns for ``body`` (issue 27: one
    dispatch on the first three bytes instead of two).

    Raises:
        ProtocolError: as :func:`~icore.net.decode_body`.
    """
    head = body[:3]
    if head == COMMIT_ACK_PREFIX:
        return decode_commit_ack(body)
    if head == HEAD_REPLY_PREFIX:
        return decode_head_reply(body)
    return decode_body(body)


__all__ = ["decode_reply", "encode_commit"]
