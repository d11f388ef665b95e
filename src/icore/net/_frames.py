"""The owner protocol's frame codec, sans-io: encode, decode and a stream decoder.

Pure code in the style of h11: no sockets, no clock (planfence Sec. 4.1, App. A;
design.md 3.2, 3.4). A frame is a 4-byte big-endian length N, then N bytes of a msgpack
array ``[version, type, request id, *fields]`` (the messages are in
:mod:`icore.net._protocol`). Every decode failure raises a
:class:`~icore.net.ProtocolError` subclass; after one, a :class:`FrameDecoder` refuses
further input, and transports close the connection.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import msgpack

from icore._frozen import positional
from icore._msgpack import packer
from icore.errors import CodecError, RecordError
from icore.memory import FROM_PARENTS, ExpectedHead, HeadEntry
from icore.net._errors import (
    FrameTooLarge,
    InvalidRecord,
    MalformedMessage,
    ProtocolError,
    TruncatedFrame,
    UnsupportedVersion,
)
from icore.net._protocol import (
    _MAX_RID,
    _MAX_TYPE,
    _TYPES,
    HEADER_BYTES,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Ack,
    Announce,
    Commit,
    CommitAck,
    ErrorReply,
    FetchReply,
    FetchRequest,
    HeadQuery,
    HeadReplyMsg,
    Message,
    MsgType,
    Ping,
    Pong,
    Replicate,
)
from icore.records import (
    Record,
    RecordId,
    plain_record_from_wire,
    record_from_wire,
    record_to_wire,
)

_LEN = struct.Struct(">I")
_commit = positional(Commit)  # every field, no per-field setattr (issue 27)
_commit_ack = positional(CommitAck)
HEAD_REPLY_PREFIX = bytes([0x95, PROTOCOL_VERSION, int(MsgType.HEAD_REPLY)])
"""First bytes of every head-reply body: a 5-array, the version, the type."""
COMMIT_PREFIXES = frozenset(bytes([n, PROTOCOL_VERSION, int(MsgType.COMMIT)])
                            for n in (0x94, 0x95))
"""First bytes of every commit body: a 4- or 5-array (with ``expected``), version, type."""
COMMIT_ACK_PREFIX = bytes([0x97, PROTOCOL_VERSION, int(MsgType.COMMIT_ACK)])
"""First bytes of every commit-acknowledgement body: a 7-array, the version, the type."""


# --- encoding -------------------------------------------------------------------------
def rid32(rid: RecordId) -> bytes:
    """The 32 bytes of a record id as it travels (hex string -> binary).

    Raises:
        MalformedMessage: ``rid`` is not 64 hex digits.
    """
    try:
        raw = bytes.fromhex(rid)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise MalformedMessage(f"not a record id: {rid!r:.80}", field="record_id")
    return raw


def _fields(msg: Message) -> list[Any]:
    if isinstance(msg, HeadQuery):
        known = msg.known
        return [list(msg.keys),
                [None if (v := known.get(k)) is None else rid32(v) for k in msg.keys],
                msg.inline_max_bytes]
    if isinstance(msg, HeadReplyMsg):
        return [[[h.key, rid32(h.record_id), h.seq,
                  None if h.record is None else record_to_wire(h.record)]
                 for h in msg.heads],
                [x for k, q in msg.same for x in (k, q)]]
    if isinstance(msg, FetchRequest):
        return [[rid32(i) for i in msg.ids]]
    if isinstance(msg, FetchReply | Replicate):
        return [[record_to_wire(r) for r in msg.records]]
    if isinstance(msg, Announce):
        return [[record_to_wire(r, with_content=False) for r in msg.records]]
    if isinstance(msg, Commit):
        if msg.expected_head is FROM_PARENTS:
            return [record_to_wire(msg.record)]
        exp = None if msg.expected_head is None else rid32(msg.expected_head)
        return [record_to_wire(msg.record), exp]
    if isinstance(msg, CommitAck):
        return [rid32(msg.record_id), msg.seq, msg.created, msg.lineage_complete]
    if isinstance(msg, Ack):
        return [msg.count]
    if isinstance(msg, ErrorReply):
        if msg.fields:
            return [msg.code, msg.message, dict(msg.fields)]
        return [msg.code, msg.message]
    if isinstance(msg, Ping):
        return []
    if isinstance(msg, Pong):
        return [msg.agent]
    raise TypeError(f"not a protocol message: {type(msg).__name__}")


def encode_body(msg: Message) -> bytes:
    """Encode a message without the length prefix."""
    body: bytes
    if type(msg) is CommitAck:  # the owner's reply per durable commit (issue 27)
        body = packer().pack([PROTOCOL_VERSION, _COMMIT_ACK, msg.rid, rid32(msg.record_id),
                              msg.seq, msg.created, msg.lineage_complete])
        return body
    if type(msg) is Commit and msg.expected_head is FROM_PARENTS:  # the writer's request
        body = packer().pack([PROTOCOL_VERSION, _COMMIT, msg.rid, record_to_wire(msg.record)])
        return body
    body = packer().pack([PROTOCOL_VERSION, int(msg.TYPE), msg.rid, *_fields(msg)])
    return body


_COMMIT_ACK = int(MsgType.COMMIT_ACK)
_COMMIT = int(MsgType.COMMIT)


def encode_frame(msg: Message, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Encode a message as one length-prefixed frame (exactly the bytes a transport sends).

    Raises:
        FrameTooLarge: the body exceeds ``max_frame_bytes``.
        TypeError: ``msg`` is not a protocol message.
    """
    body = encode_body(msg)
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(f"frame body is {len(body)} bytes, over {max_frame_bytes}",
                            size=len(body), limit=max_frame_bytes, rid=msg.rid)
    return _LEN.pack(len(body)) + body


# --- decoding -------------------------------------------------------------------------
def _int(v: Any, name: str, lo: int = 0, hi: int = _MAX_RID) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise MalformedMessage(f"{name} must be an integer in [{lo}, {hi}]", field=name)
    return v


def _str(v: Any, name: str, max_len: int = 4096) -> str:
    if not isinstance(v, str) or len(v) > max_len:
        raise MalformedMessage(f"{name} must be a string of at most {max_len} chars",
                               field=name)
    return v


def _bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise MalformedMessage(f"{name} must be a boolean", field=name)
    return v


def _list(v: Any, name: str) -> list[Any]:
    if not isinstance(v, list):
        raise MalformedMessage(f"{name} must be an array", field=name)
    return v


def _id(v: Any, name: str) -> RecordId:
    if not isinstance(v, bytes) or len(v) != 32:
        raise MalformedMessage(f"{name} must be a 32-byte record id", field=name)
    return v.hex()


def _record(v: Any, name: str, *, envelope_only: bool = False) -> Record:
    try:
        rec = record_from_wire(v)
    except RecordError as exc:
        ctx = {**exc.fields, "field": name, "record_code": str(exc.code)}
        if isinstance(exc, CodecError):  # wrong shape or types: a malformed message
            raise MalformedMessage(f"{name}: {exc.message}", **ctx) from exc
        raise InvalidRecord(f"{name}: {exc.message}", **ctx) from exc
    if envelope_only and rec.content is not None:
        raise MalformedMessage(f"{name}: an announcement carries no content", field=name)
    return rec


def _encoded(wire: list[Any], rec: Record) -> bytes | None:
    """``encode_record(rec)`` from the record's list form as received, or None.

    ``wire`` decoded (:func:`icore.records.record_from_wire`) into ``rec``, which was
    verified, so packing it again gives the same values in the same layout. The one part
    verification does not pin is the content's bytes (any JSON text of the content
    verifies): they are taken only when they hash to the content address, i.e. are the
    canonical encoding (issue 27: the owner stores the bytes it received instead of
    encoding the record a second time).
    """
    body = wire[9]
    if type(body) is not bytes or hashlib.sha256(body).hexdigest() != rec.content_address:
        return None
    out: bytes = packer().pack(wire)
    return out


def _arity(parts: list[Any], n: int, what: str) -> None:
    if len(parts) != n:
        raise MalformedMessage(f"{what} has {len(parts)} fields, expected {n}", field="frame")


def head_query_fields(f: list[Any]) -> tuple[tuple[str, ...], dict[str, RecordId], int]:
    """Check a head query's fields (after version, type and rid): (keys, known, inline).

    Raises:
        MalformedMessage: wrong arity, shape or types.
    """
    if len(f) != 3:
        _arity(f, 3, "head query")
    keys_v, ids, inline = f
    if type(keys_v) is not list:
        _list(keys_v, "keys")
    for k in keys_v:
        if type(k) is not str or len(k) > 512:
            _str(k, "keys[]", 512)
    if type(ids) is not list or len(ids) != len(keys_v):
        _list(ids, "known")
        raise MalformedMessage("known must align with keys", field="known")
    known: dict[str, RecordId] = {}
    for k, v in zip(keys_v, ids, strict=True):
        if v is not None:
            if type(v) is not bytes or len(v) != 32:
                _id(v, "known[]")
            known[k] = v.hex()
    if type(inline) is not int or not 0 <= inline <= _MAX_RID:
        _int(inline, "inline_max_bytes")
    return tuple(keys_v), known, inline


def _head_reply(rid: int, f: list[Any]) -> HeadReplyMsg:
    """Decode a head reply's fields; a field's name is spelled out only when it is wrong."""
    if len(f) != 2:
        _arity(f, 2, "head reply")
    heads_v, flat = f
    if type(heads_v) is not list:
        _list(heads_v, "heads")
    heads: list[HeadEntry] = []
    for i, h in enumerate(heads_v):
        if type(h) is not list or len(h) != 4:
            _arity(_list(h, f"heads[{i}]"), 4, f"heads[{i}]")
        key, hid_v, seq, rec_v = h
        if type(key) is not str or len(key) > 512:
            _str(key, f"heads[{i}].key", 512)
        if type(hid_v) is not bytes or len(hid_v) != 32:
            _id(hid_v, f"heads[{i}].id")
        if type(seq) is not int or not 0 <= seq <= _MAX_RID:
            _int(seq, f"heads[{i}].seq")
        hid = hid_v.hex()
        rec = None if rec_v is None else _record(rec_v, f"heads[{i}].record")
        if rec is not None and (rec.id != hid or rec.key != key):
            raise InvalidRecord("inlined record is not the head it claims to be",
                                field=f"heads[{i}].record", key=key)
        heads.append(HeadEntry(key, hid, seq, rec))
    if type(flat) is not list:
        _list(flat, "same")
    if len(flat) % 2:
        raise MalformedMessage("same lists key, sequence pairs", field="same")
    same = list(zip(flat[::2], flat[1::2], strict=True))
    for i, (key, seq) in enumerate(same):
        if type(key) is not str or len(key) > 512:
            _str(key, f"same[{i}].key", 512)
        if type(seq) is not int or not 0 <= seq <= _MAX_RID:
            _int(seq, f"same[{i}].seq")
    return HeadReplyMsg(rid, "", tuple(heads), tuple(same))


def decode_head_reply(body: bytes) -> HeadReplyMsg:
    """Decode a body that starts with :data:`HEAD_REPLY_PREFIX` (the client's hot path).

    Accepts and refuses exactly what :func:`decode_body` does for that body: the prefix
    fixes the array length, the version and the type, so only the request id and the
    fields are left to check (issue 27).

    Raises:
        MalformedMessage: not msgpack (trailing bytes included), wrong shape or types.
        InvalidRecord: an inlined record fails verification.
    """
    obj = unpack_body(body)
    rid = obj[2]
    if type(rid) is not int or not 0 <= rid <= _MAX_RID:
        _int(rid, "rid")
    return _head_reply(rid, obj[3:])


def unpack_body(body: bytes) -> Any:
    """The msgpack object of a frame body.

    Raises:
        MalformedMessage: the body is not one msgpack object.
    """
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise MalformedMessage(f"frame body is not msgpack: {type(exc).__name__}",
                               field="frame") from exc


def decode_commit(body: bytes) -> Message:
    """Decode a body that starts with one of :data:`COMMIT_PREFIXES` (the owner's hot path).

    Accepts and refuses exactly what the general decoder does for that body, with the
    same message (issue 27; property tests pin both): the prefix fixes the array length,
    the version and the type; the request id and ``expected`` are checked by the same
    rules, and a record of plain shape is verified by
    :func:`icore.records.plain_record_from_wire` (its received encoding kept, as the
    content bytes hash to its content address). Any other body is decoded by the
    general decoder.

    Raises:
        MalformedMessage / InvalidRecord: as :func:`decode_body`.
    """
    obj = unpack_body(body)
    if type(obj) is list and len(obj) in (4, 5) and bytes(body[:3]) in COMMIT_PREFIXES:
        rid = obj[2]
        wire = obj[3]
        rec = plain_record_from_wire(wire)
        if rec is not None and type(rid) is int and 0 <= rid <= _MAX_RID \
                and rec.content is not None:
            if len(obj) == 4:
                return _commit(rid, rec, FROM_PARENTS, packer().pack(wire))
            exp = obj[4]
            if exp is None:
                return _commit(rid, rec, None, packer().pack(wire))
            if type(exp) is bytes and len(exp) == 32:
                return _commit(rid, rec, exp.hex(), packer().pack(wire))
    return _decode(obj)


def decode_commit_ack(body: bytes) -> Message:
    """Decode a body that starts with :data:`COMMIT_ACK_PREFIX` (the writer's hot path).

    Accepts and refuses what the general decoder does, with the same message (issue 27).

    Raises:
        MalformedMessage: as :func:`decode_body`.
    """
    obj = unpack_body(body)
    if type(obj) is list and len(obj) == 7 and bytes(body[:3]) == COMMIT_ACK_PREFIX:
        _v, _t, rid, rec_id, seq, created, complete = obj
        if (type(rid) is int and 0 <= rid <= _MAX_RID and type(rec_id) is bytes
                and len(rec_id) == 32 and type(seq) is int and 0 <= seq <= _MAX_RID
                and type(created) is bool and type(complete) is bool):
            return _commit_ack(rid, rec_id.hex(), seq, created, complete)
    return _decode(obj)


def decode_body(body: bytes) -> Message:
    """Decode one frame body (no length prefix) into a message.

    Commits and commit acknowledgements take their hot paths (:func:`decode_commit`,
    :func:`decode_commit_ack`: the same messages and refusals).

    Raises:
        UnsupportedVersion: another protocol version.
        MalformedMessage: not msgpack, wrong shape or types, unknown message type.
        InvalidRecord: a carried record fails verification.
    """
    head = bytes(body[:3])  # a bytearray or memoryview slice is not hashable
    if head in COMMIT_PREFIXES:
        return decode_commit(body)
    if head == COMMIT_ACK_PREFIX:
        return decode_commit_ack(body)
    return _decode(unpack_body(body))


def _decode(obj: Any) -> Message:
    """Decode the msgpack object of a frame body (the general decoder)."""
    if not isinstance(obj, list) or len(obj) < 3:
        raise MalformedMessage("a frame is an array [version, type, rid, ...]", field="frame")
    version, mtype, rid_v, *f = obj
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise UnsupportedVersion(f"protocol version {version!r} is not supported",
                                 version=repr(version)[:32], expected=PROTOCOL_VERSION)
    t = _int(mtype, "type", 1, _MAX_TYPE)
    rid = _int(rid_v, "rid")
    kind = _TYPES[t]
    if kind is MsgType.HEAD_QUERY:
        return HeadQuery(rid, *head_query_fields(f))
    if kind is MsgType.HEAD_REPLY:
        return _head_reply(rid, f)
    if kind is MsgType.FETCH:
        _arity(f, 1, "fetch")
        return FetchRequest(rid, tuple(_id(x, "ids[]") for x in _list(f[0], "ids")))
    if kind in (MsgType.FETCH_REPLY, MsgType.REPLICATE, MsgType.ANNOUNCE):
        _arity(f, 1, kind.name.lower())
        env = kind is MsgType.ANNOUNCE
        recs = tuple(_record(x, f"records[{i}]", envelope_only=env)
                     for i, x in enumerate(_list(f[0], "records")))
        if kind is MsgType.FETCH_REPLY:
            return FetchReply(rid, recs)
        return Announce(rid, recs) if env else Replicate(rid, recs)
    if kind is MsgType.COMMIT:
        exp: ExpectedHead = FROM_PARENTS
        if len(f) == 2:
            exp = None if f[1] is None else _id(f[1], "expected_head")
        else:
            _arity(f, 1, "commit")
        rec = _record(f[0], "record")
        return _commit(rid, rec, exp, _encoded(f[0], rec))
    if kind is MsgType.COMMIT_ACK:
        _arity(f, 4, "commit ack")
        return CommitAck(rid, _id(f[0], "record_id"), _int(f[1], "seq"),
                         _bool(f[2], "created"), _bool(f[3], "lineage_complete"))
    if kind is MsgType.ACK:
        _arity(f, 1, "ack")
        return Ack(rid, _int(f[0], "count"))
    if kind is MsgType.ERROR:
        if len(f) == 3:
            if not isinstance(f[2], dict) or len(f[2]) > 16:
                raise MalformedMessage("error fields must be a small map", field="fields")
            fields = {_str(k, "fields.key", 64): _str(v, "fields[]", 512)
                      for k, v in f[2].items()}
            return ErrorReply(rid, _str(f[0], "code", 64), _str(f[1], "message", 65536),
                              fields)
        _arity(f, 2, "error")
        return ErrorReply(rid, _str(f[0], "code", 64), _str(f[1], "message", 65536))
    if kind is MsgType.PING:
        _arity(f, 0, "ping")
        return Ping(rid)
    _arity(f, 1, "pong")
    return Pong(rid, _str(f[0], "agent", 512))


def decode_frame(data: bytes, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> Message:
    """Decode exactly one complete frame (prefix included).

    Raises:
        ProtocolError: any subclass (truncated, trailing bytes, too large, malformed).
    """
    dec = FrameDecoder(max_frame_bytes=max_frame_bytes)
    msgs = dec.feed(data)
    dec.eof()
    if len(msgs) != 1:
        raise MalformedMessage(f"expected one frame, found {len(msgs)}", field="frame")
    return msgs[0]


class FrameDecoder:
    """Incremental, sans-io decoder of a byte stream into messages.

    Feed it whatever the transport read; it returns the complete messages. The length
    prefix is checked before the body is buffered, so an oversize prefix costs nothing.
    After the first error the decoder is *broken*: every later call raises the same error
    (the transport must close the connection).

    Args:
        max_frame_bytes: largest accepted frame body.

    Attributes:
        bytes_in: total bytes fed.
        frames_in: complete frames decoded.
    """

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be >= 1")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._error: ProtocolError | None = None
        self.bytes_in = 0
        self.frames_in = 0

    @property
    def broken(self) -> ProtocolError | None:
        """The error that broke the decoder, or None."""
        return self._error

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a complete frame."""
        return len(self._buf)

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._error = exc
        self._buf.clear()
        return exc

    def fail(self, exc: ProtocolError) -> ProtocolError:
        """Break the decoder with ``exc`` (a body that did not decode); return ``exc``."""
        return self._fail(exc)

    def _prefix(self, src: bytes | bytearray, pos: int) -> int:
        (n,) = _LEN.unpack_from(src, pos)
        if n == 0:
            raise self._fail(MalformedMessage("empty frame", field="length"))
        if n > self.max_frame_bytes:
            raise self._fail(FrameTooLarge(
                f"length prefix {n} exceeds the maximum frame size {self.max_frame_bytes}",
                size=n, limit=self.max_frame_bytes))
        return int(n)

    def bodies(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Consume bytes and return the bodies of every frame they complete, undecoded.

        The framing half of :meth:`feed`: a transport that decodes the bodies itself
        (the owner's head-query path) calls :meth:`fail` when one does not decode.

        Raises:
            ProtocolError: an empty or oversize length prefix; the decoder is broken.
        """
        if self._error is not None:
            raise self._error
        self.bytes_in += len(data)
        buf = self._buf
        if buf:  # a frame was cut: copy out only once it is complete
            buf += data
            if len(buf) < HEADER_BYTES or len(buf) < HEADER_BYTES + self._prefix(buf, 0):
                return []
            src: bytes = bytes(buf)
            buf.clear()
        else:
            src = data if isinstance(data, bytes) else bytes(data)
        out: list[bytes] = []
        pos, size = 0, len(src)
        while size - pos >= HEADER_BYTES:
            end = pos + HEADER_BYTES + self._prefix(src, pos)
            if end > size:
                break
            out.append(src[pos + HEADER_BYTES:end])
            pos = end
        if pos < size:
            buf += memoryview(src)[pos:]
        self.frames_in += len(out)
        return out

    def feed(self, data: bytes | bytearray | memoryview) -> list[Message]:
        """Consume bytes and return every message they complete (possibly none).

        Raises:
            ProtocolError: any subclass; the decoder is broken afterwards.
        """
        out: list[Message] = []
        for body in self.bodies(data):
            try:
                out.append(decode_head_reply(body) if body[:3] == HEAD_REPLY_PREFIX
                           else decode_body(body))
            except ProtocolError as exc:
                raise self._fail(exc) from None
        return out

    def eof(self) -> None:
        """Signal the end of the stream.

        Raises:
            TruncatedFrame: the stream ended inside a frame.
        """
        if self._error is not None:
            raise self._error
        if self._buf:
            raise self._fail(TruncatedFrame(f"stream ended {len(self._buf)} bytes into a "
                                            "frame", pending=len(self._buf)))


def frame_size(msg: Message) -> int:
    """Return the exact number of bytes ``encode_frame(msg)`` produces."""
    return HEADER_BYTES + len(encode_body(msg))


__all__ = [
    "COMMIT_ACK_PREFIX",
    "COMMIT_PREFIXES",
    "HEAD_REPLY_PREFIX",
    "FrameDecoder",
    "decode_body",
    "decode_commit",
    "decode_commit_ack",
    "decode_frame",
    "decode_head_reply",
    "encode_body",
    "encode_frame",
    "frame_size",
    "head_query_fields",
    "packer",
    "rid32",
    "unpack_body",
]
