"""The head-query hot path of the owner protocol, sans-io (issue 27; planfence Alg. 1 line 5).

A validation's one request per owner is a head query, and its answer is a head reply
made of the owner's current heads, which change only when the owner commits. This
module reads a head query without building a :class:`HeadQuery` and writes the reply
without building a :class:`HeadReplyMsg`, from encodings of head entries it keeps until
the head changes; the client writes its query the same way. The bytes are exactly those
of :func:`~icore.net.decode_body` / :func:`~icore.net.encode_frame` (the wire is
unchanged; property tests pin both), and every check of the general decoder is the same
code (:func:`head_query_fields`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from icore.memory import HeadEntry
from icore.net._errors import FrameTooLarge
from icore.net._frames import (
    HEAD_REPLY_PREFIX,
    _int,
    head_query_fields,
    packer,
    rid32,
    unpack_body,
)
from icore.net._protocol import MAX_FRAME_BYTES, PROTOCOL_VERSION, MsgType
from icore.records import RecordId, record_to_wire

_LEN = struct.Struct(">I")
_FIXARRAY6 = 0x96
HEAD_QUERY_PREFIX = bytes([_FIXARRAY6, PROTOCOL_VERSION, int(MsgType.HEAD_QUERY)])
"""First bytes of every head-query body: a 6-array, the version, the type."""

HeadQueryFields = tuple[int, tuple[str, ...], dict[str, RecordId], int]
"""(request id, keys, known ids, inline_max_bytes) of a head query."""


def decode_head_query(body: bytes) -> HeadQueryFields:
    """Decode a body that starts with :data:`HEAD_QUERY_PREFIX` into its fields.

    Accepts and refuses exactly what :func:`~icore.net.decode_body` does for that body.

    Raises:
        MalformedMessage: not msgpack, wrong shape or types.
    """
    obj = unpack_body(body)  # a 6-array by its first byte, or trailing bytes: refused
    return (_int(obj[2], "rid"), *head_query_fields(obj[3:]))


def encode_head_query(rid: int, keys: Sequence[str], known: Mapping[str, RecordId],
                      inline_max_bytes: int) -> bytes:
    """The frame of ``HeadQuery(rid, keys, known, inline_max_bytes)``, without building it.

    Raises:
        MalformedMessage: a known id is not 64 hex digits (nothing is sent).
        FrameTooLarge: the body exceeds :data:`~icore.net.MAX_FRAME_BYTES`.
    """
    body: bytes = packer().pack([PROTOCOL_VERSION, int(MsgType.HEAD_QUERY), rid, list(keys),
                          [None if (v := known.get(k)) is None else rid32(v) for k in keys],
                          inline_max_bytes])
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLarge(f"frame body is {len(body)} bytes, over {MAX_FRAME_BYTES}",
                            size=len(body), limit=MAX_FRAME_BYTES, rid=rid)
    return _LEN.pack(len(body)) + body


_FIXARRAYS = [bytes([0x90 | n]) for n in range(16)]
"""The one-byte msgpack array headers of 0..15 items."""


def _array_header(n: int) -> bytes:
    if n < 16:
        return _FIXARRAYS[n]
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


class HeadReplyEncoder:
    """Writes one owner's head replies as frames, keeping each head entry's encoding.

    An entry's encoding is kept while the store hands out the same :class:`HeadEntry`
    object (the exclusive SQLite store's head table, the in-memory stores): a commit
    replaces the object, so a changed head is encoded afresh. At most ``cache_size``
    entries are kept (then the cache starts over).

    Args:
        owner: the answering owner (kept for its errors; since protocol 3 no reply names
            it).
        max_frame_bytes: largest frame body written.
        cache_size: most entries kept.
    """

    def __init__(self, owner: str, *, max_frame_bytes: int = MAX_FRAME_BYTES,
                 cache_size: int = 4096) -> None:
        self.owner = owner
        self.max_frame_bytes = max_frame_bytes
        self.cache_size = cache_size
        self._cache: dict[int, tuple[HeadEntry, bytes, bytes]] = {}

    def _entry(self, h: HeadEntry) -> tuple[HeadEntry, bytes, bytes]:
        c = self._cache.get(id(h))
        if c is not None and c[0] is h:  # the cache holds h, so its id is not reused
            return c
        pack = packer().pack
        c = (h, pack([h.key, rid32(h.record_id), h.seq, None]), pack(h.key) + pack(h.seq))
        if len(self._cache) >= self.cache_size:
            self._cache.clear()
        self._cache[id(h)] = c
        return c

    def encode(self, rid: int, full: Sequence[HeadEntry], same: Sequence[HeadEntry]) -> bytes:
        """The frame of ``HeadReplyMsg(rid, owner, full, [(h.key, h.seq) for h in same])``.

        Raises:
            FrameTooLarge: the body exceeds ``max_frame_bytes``.
            MalformedMessage: a head's record id is not 64 hex digits.
        """
        pack = packer().pack
        nf = len(full)
        parts = [HEAD_REPLY_PREFIX, pack(rid), _FIXARRAYS[nf] if nf < 16 else _array_header(nf)]
        for h in full:
            if h.record is None:
                parts.append(self._entry(h)[1])
            else:
                parts.append(pack([h.key, rid32(h.record_id), h.seq,
                                   record_to_wire(h.record)]))
        ns = 2 * len(same)
        parts.append(_FIXARRAYS[ns] if ns < 16 else _array_header(ns))
        for h in same:
            parts.append(self._entry(h)[2])
        body = b"".join(parts)
        if len(body) > self.max_frame_bytes:
            raise FrameTooLarge(f"frame body is {len(body)} bytes, over "
                                f"{self.max_frame_bytes}", size=len(body),
                                limit=self.max_frame_bytes, rid=rid)
        return _LEN.pack(len(body)) + body


__all__ = [
    "HEAD_QUERY_PREFIX",
    "HeadQueryFields",
    "HeadReplyEncoder",
    "decode_head_query",
    "encode_head_query",
]
