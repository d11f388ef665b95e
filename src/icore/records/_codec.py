"""Compact binary codec for records (msgpack), shared by stores and the wire protocol.

Layout: a msgpack array ``[schema, key, owner, seq, [parent ids as 32-byte bin], type,
content address (32-byte bin), size, id (32-byte bin), content]`` where ``content`` is the
canonical JSON bytes, or nil for an envelope-only record; a record with a ``supersedes``
link appends it as an 11th element (32-byte bin), so records without one encode exactly as
before. Decoding always verifies the id (and the content when present), so a decoded
record is trustworthy.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack

from icore._frozen import positional
from icore._msgpack import packer
from icore.errors import CodecError, RecordError
from icore.records._record import _NULL_ADDRESS, MAX_CONTENT_BYTES, Record, canonical_json

_FIELDS = 10
_record = positional(Record)  # every field, no per-field setattr (issue 27)

_RAW_DECODE = json.JSONDecoder().raw_decode
"""``json.loads``'s own decoder (default options), without its encoding detection."""

MAX_RECORD_BYTES = MAX_CONTENT_BYTES + 64 * 1024
"""Largest encoded record accepted by :func:`decode_record`, in bytes."""


def record_to_wire(rec: Record, *, with_content: bool = True) -> list[Any]:
    """Return the msgpack-ready list form of ``rec`` (used inside protocol messages)."""
    body = None
    if with_content and rec.has_content:
        body = canonical_json(rec.content)
    out: list[Any] = [
        rec.schema,
        rec.key,
        rec.owner,
        rec.seq,
        [bytes.fromhex(p) for p in rec.parents],
        rec.type,
        bytes.fromhex(rec.content_address),
        rec.size,
        bytes.fromhex(rec.id),
        body,
    ]
    if rec.supersedes is not None:
        out.append(bytes.fromhex(rec.supersedes))
    return out


def _hex32(value: Any, field: str) -> str:
    if not isinstance(value, bytes) or len(value) != 32:
        raise CodecError(f"{field} must be 32 bytes", field=field)
    return value.hex()


def _json_content(body: bytes, key: str) -> Any:
    """``json.loads(body)``, with a shortcut for canonical content (issue 27).

    UTF-8 JSON with nothing around the value (canonical content always is) goes to the C
    scanner directly; any other text goes through ``json.loads`` itself, so the result and
    the errors are the same.

    Raises:
        CodecError: the bytes are not JSON.
    """
    try:
        text = body.decode("utf-8")
        value, end = _RAW_DECODE(text)
        if end == len(text):
            return value
    except ValueError:  # not UTF-8, or not a JSON value at the start: json.loads decides
        pass
    try:
        return json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise CodecError(f"content is not JSON: {exc}", key=key, field="content") from exc


def record_from_wire(obj: Any) -> Record:
    """Build and verify a record from its list form.

    Raises:
        CodecError: wrong shape or types (names the field).
        MalformedRecord / RecordIdMismatch: the record itself is invalid.
    """
    if not isinstance(obj, list | tuple) or len(obj) not in (_FIELDS, _FIELDS + 1):
        raise CodecError(f"a record is a {_FIELDS}-element array (11 with supersedes)",
                         field="record")
    schema, key, owner, seq, parents, rtype, caddr, size, rid, body = obj[:_FIELDS]
    supersedes = _hex32(obj[_FIELDS], "supersedes") if len(obj) > _FIELDS else None
    if not isinstance(parents, list | tuple):
        raise CodecError("parents must be an array", field="parents")
    if not isinstance(key, str) or not isinstance(owner, str) or not isinstance(rtype, str):
        raise CodecError("key, owner and type must be strings", field="key/owner/type")
    if not isinstance(seq, int) or not isinstance(size, int) or not isinstance(schema, int):
        raise CodecError("schema, seq and size must be integers", field="schema/seq/size")
    content: Any = None
    if body is not None:
        if not isinstance(body, bytes):
            raise CodecError("content must be bytes or nil", key=key, field="content")
        content = _json_content(body, key)
    rec = _record(key, owner, seq,
                  tuple(_hex32(p, f"parents[{i}]") for i, p in enumerate(parents)), rtype,
                  content, _hex32(caddr, "content_address"), size, schema, _hex32(rid, "id"),
                  supersedes)
    if body is not None and content is None and rec.content_address != _NULL_ADDRESS:
        raise CodecError("content decodes to null but address differs", key=key,
                         field="content")
    return rec.verify()


def encode_record(rec: Record, *, with_content: bool = True) -> bytes:
    """Encode a record to bytes (see module docstring for the layout)."""
    out: bytes = packer().pack(record_to_wire(rec, with_content=with_content))
    return out


def decode_record(data: bytes) -> Record:
    """Decode and verify a record.

    Raises:
        CodecError: the bytes are not a record encoding (too large, not msgpack, wrong
            shape); MalformedRecord / RecordIdMismatch for an invalid record.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CodecError("record encoding must be bytes", field="data")
    if len(data) > MAX_RECORD_BYTES:
        raise CodecError(f"record encoding is {len(data)} bytes, over {MAX_RECORD_BYTES}",
                         field="data")
    try:
        obj = msgpack.unpackb(bytes(data), raw=False, strict_map_key=True)
    except RecordError:
        raise
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise CodecError(f"not a msgpack record: {type(exc).__name__}: {exc}",
                         field="data") from exc
    return record_from_wire(obj)
