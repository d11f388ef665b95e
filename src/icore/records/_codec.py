"""Compact binary codec for records (msgpack), shared by stores and the wire protocol.

Layout: a msgpack array ``[schema, key, owner, seq, [parent ids as 32-byte bin], type,
content address (32-byte bin), size, id (32-byte bin), content]`` where ``content`` is the
canonical JSON bytes, or nil for an envelope-only record; a record with a ``supersedes``
link appends it as an 11th element (32-byte bin), so records without one encode exactly as
before. Decoding always verifies the id (and the content when present), so a decoded
record is trustworthy.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgpack

from icore._frozen import positional
from icore._msgpack import packer
from icore.errors import CodecError, RecordError
from icore.records._record import (
    _NULL_ADDRESS,
    MAX_CONTENT_BYTES,
    MAX_KEY_LEN,
    MAX_PARENTS,
    MAX_TYPE_LEN,
    SCHEMA_VERSION,
    Record,
    _canonical_bounded,
    _hex_envelope,
    _plain_json,
    canonical_json,
)

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
        content = rec.content  # nesting bounded by the walk: no encoder built (issue 27)
        body = _canonical_bounded(content) if _plain_json(content) else canonical_json(content)
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


_NULL_DIGEST = bytes.fromhex(_NULL_ADDRESS)
_SHA256 = hashlib.sha256


def plain_record_from_wire(obj: Any) -> Record | None:
    """The verified record of a list form of plain shape, or None (issue 27).

    The hot path of :func:`record_from_wire`: fields of their exact types within the
    limits of :meth:`Record.check_envelope`, 32-byte ids and distinct parents, content
    bytes (if any) that are canonical JSON nested at most 64 deep (the bytes hash to the
    content address, have its size and are what :func:`canonical_json` writes for the
    value they decode to), and an envelope that hashes to the id. Such a record is what
    :func:`record_from_wire` returns for ``obj``, equal field for field (property tests
    pin it). Anything else - including every refusal - is None: the caller takes the
    general path, which accepts or refuses it with its own error. When the result is
    not None and ``obj`` holds content, ``packer().pack(obj)`` is
    :func:`encode_record` of the result.
    """
    if type(obj) is not list:
        return None
    n = len(obj)
    if n == _FIELDS:
        sup = None
    elif n == _FIELDS + 1:
        sup = obj[_FIELDS]
        if type(sup) is not bytes or len(sup) != 32:
            return None
    else:
        return None
    schema, key, owner, seq, parents, rtype, caddr, size, rid, body = obj[:_FIELDS]
    if not (type(schema) is int and schema == SCHEMA_VERSION
            and type(key) is str and 0 < len(key) <= MAX_KEY_LEN
            and type(owner) is str and 0 < len(owner) <= MAX_KEY_LEN
            and type(rtype) is str and 0 < len(rtype) <= MAX_TYPE_LEN
            and type(seq) is int and 0 < seq < 2**63
            and type(size) is int and 0 <= size <= MAX_CONTENT_BYTES
            and type(caddr) is bytes and len(caddr) == 32
            and type(rid) is bytes and len(rid) == 32
            and type(parents) is list and len(parents) <= MAX_PARENTS):
        return None
    for p in parents:
        if type(p) is not bytes or len(p) != 32 or p == rid:
            return None
    if len(parents) > 1 and len(set(parents)) != len(parents):
        return None
    if sup is not None and (sup == rid or sup in parents):
        return None
    content: Any = None
    if body is not None:
        if (type(body) is not bytes or len(body) != size
                or body.count(b"[") + body.count(b"{") > 64  # bounds the nesting
                or _SHA256(body).digest() != caddr):
            return None
        try:
            text = body.decode("utf-8")
            content, end = _RAW_DECODE(text)
            if end != len(text) or _canonical_bounded(content) != body:
                return None
        except (ValueError, RecursionError, RecordError):  # not (canonical) JSON
            return None
    elif caddr == _NULL_DIGEST:  # an envelope of null content: verified as content
        return None
    pids = [p.hex() for p in parents]
    c_hex = caddr.hex()
    sup_hex = None if sup is None else sup.hex()
    try:  # written from the checked fields (issue 27): ids hex, integers of exact type
        env = _hex_envelope(c_hex, key, size, owner, pids, seq, rtype, sup_hex,
                           schema).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: _envelope_json gives None too
        return None
    if _SHA256(env).digest() != rid:
        return None
    return _record(key, owner, seq, tuple(pids), rtype, content, c_hex, size, schema,
                   rid.hex(), sup_hex)


def record_from_wire(obj: Any) -> Record:
    """Build and verify a record from its list form.

    A list of plain shape takes :func:`plain_record_from_wire` (the same record, issue
    27); anything else the general checks below.

    Raises:
        CodecError: wrong shape or types (names the field).
        MalformedRecord / RecordIdMismatch: the record itself is invalid.
    """
    rec = plain_record_from_wire(obj)
    if rec is not None:
        return rec
    return _general_from_wire(obj)


def _general_from_wire(obj: Any) -> Record:
    """:func:`record_from_wire` by the general checks (what the hot path is pinned to)."""
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
