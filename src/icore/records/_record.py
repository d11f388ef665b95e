"""Records: immutable, content-addressed versions of semantic keys (planfence Sec. 3.1, App. A).

A record's id is ``sha256`` over the canonical encoding of its metadata envelope:
schema version, key, owner, owner sequence, ordered parent ids, type, content address
and content size, plus - only when set - the ``supersedes`` link (so records without one
keep the ids they always had). The content address is ``sha256`` over the canonical
content: the envelope alone (what a head announcement carries) is checked against its id,
content fetched later against the envelope. Timestamps are not in a record (design.md 3.1).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from icore._frozen import positional
from icore.errors import MalformedRecord, RecordIdMismatch

SCHEMA_VERSION = 1
"""Current record schema version; stored in every record."""

RecordId: TypeAlias = str
"""A record id: 64 lowercase hex digits (sha256)."""

JSONValue: TypeAlias = Any
"""A JSON value: None, bool, int, float (finite), str, list, or dict with str keys."""

MAX_KEY_LEN = 512
"""Longest semantic key, in characters."""
MAX_PARENTS = 256
"""Most parent ids one record may cite."""
MAX_CONTENT_BYTES = 4 * 1024 * 1024
"""Largest canonical content, in bytes (4 MiB)."""
MAX_TYPE_LEN = 128
"""Longest record type name, in characters."""

_HEX = frozenset("0123456789abcdef")
_SURROGATE = re.compile("[\ud800-\udfff]")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)
"""The canonical encoder, built once: ``json.dumps`` with these options builds one per call."""
_QUOTE = json.encoder.encode_basestring
"""The string encoder ``json`` uses with ``ensure_ascii=False`` (C when available)."""


_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
"""The C encoder ``json`` builds per call (None without the ``_json`` module)."""
_ACYCLIC = (None if _C_MAKE_ENCODER is None else _C_MAKE_ENCODER(
    None, _CANONICAL.default, _QUOTE, None, ":", ",", True, False, False))
"""The canonical C encoder without the circular-reference check, built once: only for a
value whose nesting is known to be bounded (walked by :func:`_check_json`, or decoded
from at most 64 brackets), where the check cannot fire (issue 27)."""


def canonical_json(value: JSONValue) -> bytes:
    """Encode a JSON value canonically (sorted keys, no spaces, UTF-8).

    The bytes are those of ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, allow_nan=False)`` encoded as UTF-8.

    Raises:
        MalformedRecord: if the value is not JSON (non-str dict keys, NaN, sets, ...).
    """
    try:
        if _C_MAKE_ENCODER is None:  # pragma: no cover - CPython always has _json
            return _CANONICAL.encode(value).encode("utf-8")
        # what JSONEncoder.encode runs, without its two Python frames (issue 27)
        return "".join(_C_MAKE_ENCODER({}, _CANONICAL.default, _QUOTE, None, ":", ",", True,
                                       False, False)(value, 0)).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise MalformedRecord(f"content is not canonical JSON: {exc}", field="content") from exc


def _canonical_bounded(value: JSONValue) -> bytes:
    """:func:`canonical_json` of a value nested at most 64 deep (no cycle possible).

    Same bytes and errors, without building an encoder and a circular-reference table
    per call (issue 27).

    Raises:
        MalformedRecord: as :func:`canonical_json`.
    """
    if _ACYCLIC is None:  # pragma: no cover - CPython always has _json
        return canonical_json(value)
    try:
        return "".join(_ACYCLIC(value, 0)).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise MalformedRecord(f"content is not canonical JSON: {exc}", field="content") from exc


def _envelope_json(rec: Record) -> bytes | None:
    """``canonical_json(rec.envelope())`` written out field by field (issue 27), or None.

    The keys are fixed, so their sorted order is too (``c k n o p s t u v``); strings go
    through ``json``'s own string encoder, integers through ``int.__repr__``: the bytes
    are equal (property tests pin it). None - the general encoder then raises the right
    error - when a field is not of its exact type (a ``bool`` schema, a ``str`` subclass,
    a list of parents) or a string does not encode to UTF-8 (a lone surrogate).
    """
    key, owner, rtype, caddr = rec.key, rec.owner, rec.type, rec.content_address
    seq, size, schema, parents, sup = rec.seq, rec.size, rec.schema, rec.parents, rec.supersedes
    if (type(key) is not str or type(owner) is not str or type(rtype) is not str
            or type(caddr) is not str or type(seq) is not int or type(size) is not int
            or type(schema) is not int or type(parents) is not tuple
            or (sup is not None and type(sup) is not str)):
        return None
    for p in parents:
        if type(p) is not str:
            return None
    text = (f'{{"c":{_QUOTE(caddr)},"k":{_QUOTE(key)},"n":{size!r},"o":{_QUOTE(owner)},'
            f'"p":[{",".join(map(_QUOTE, parents))}],"s":{seq!r},"t":{_QUOTE(rtype)},'
            + ("" if sup is None else f'"u":{_QUOTE(sup)},') + f'"v":{schema!r}}}')
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _plain_envelope(rec: Record, *, computed: bool = False) -> bool:
    """True when :meth:`Record.check_envelope` passes, decided on exact types (issue 27).

    Only plain ASCII ``str`` and ``int`` fields and a ``tuple`` of distinct parent ids are
    decided here; anything else is False and left to ``check_envelope`` (which then
    accepts it or names the offending field), so this never accepts what it refuses.
    ``computed``: the content address, size and schema are :meth:`Record.create`'s own
    (a digest, a length, the constant), not checked again.
    """
    key, owner, rtype, seq, size = rec.key, rec.owner, rec.type, rec.seq, rec.size
    parents, sup, rid = rec.parents, rec.supersedes, rec.id
    if not (type(key) is str and 0 < len(key) <= MAX_KEY_LEN and key.isascii()
            and type(owner) is str and 0 < len(owner) <= MAX_KEY_LEN and owner.isascii()
            and type(rtype) is str and 0 < len(rtype) <= MAX_TYPE_LEN and rtype.isascii()
            and type(seq) is int and 0 < seq < 2**63
            and type(parents) is tuple and len(parents) <= MAX_PARENTS):
        return False
    if not computed and not (
            type(size) is int and 0 <= size <= MAX_CONTENT_BYTES
            and type(rec.schema) is int and rec.schema == SCHEMA_VERSION
            and type(rec.content_address) is str and len(rec.content_address) == 64
            and _hex64(rec.content_address)):
        return False
    for p in parents:
        if type(p) is not str or len(p) != 64 or p == rid or not _hex64(p):
            return False
    if len(parents) > 1 and len(set(parents)) != len(parents):
        return False
    return sup is None or (type(sup) is str and len(sup) == 64 and _hex64(sup)
                           and sup != rid and sup not in parents)


def _hex64(text: str) -> bool:
    """True when the 64-character plain ``str`` ``text`` is lowercase hex (a record id).

    ``bytes.fromhex`` takes hex digits and whitespace, ``hex()`` writes lowercase hex: the
    round trip gives ``text`` back exactly when it is lowercase hex (half the cost, #27).
    """
    try:
        return bytes.fromhex(text).hex() == text
    except ValueError:
        return False


def _new_envelope(key: str, owner: str, seq: int, parents: tuple[RecordId, ...],
                  rtype: str, caddr: str, size: int, sup: RecordId | None) -> bytes | None:
    """The canonical envelope of a record :meth:`Record.create` is building, or None.

    One pass for the plain case (issue 27): the checks of :func:`_plain_envelope` with
    ``computed=True`` (``caddr`` is a digest, ``size`` a length, the schema the constant;
    a new record has no id, so no parent can be it), then :func:`_hex_envelope`. None when
    a check fails: the general path then accepts it or raises the right error.
    """
    if not (type(key) is str and 0 < len(key) <= MAX_KEY_LEN and key.isascii()
            and type(owner) is str and 0 < len(owner) <= MAX_KEY_LEN and owner.isascii()
            and type(rtype) is str and 0 < len(rtype) <= MAX_TYPE_LEN and rtype.isascii()
            and type(seq) is int and 0 < seq < 2**63 and len(parents) <= MAX_PARENTS):
        return None
    for p in parents:
        if type(p) is not str or len(p) != 64 or not _hex64(p):
            return None
    if len(parents) > 1 and len(set(parents)) != len(parents):
        return None
    if sup is not None and not (type(sup) is str and len(sup) == 64 and _hex64(sup)
                                and sup not in parents):
        return None
    return _hex_envelope(caddr, key, size, owner, parents, seq, rtype, sup,
                         SCHEMA_VERSION).encode("ascii")


def _hex_envelope(caddr: str, key: str, size: int, owner: str, parents: Sequence[str],
                  seq: int, rtype: str, sup: str | None, schema: int) -> str:
    """:func:`_envelope_json`'s text for ids known to be lowercase hex (no quoting)."""
    return (f'{{"c":"{caddr}","k":{_QUOTE(key)},"n":{size},"o":{_QUOTE(owner)},"p":['
            + ('"' + '","'.join(parents) + '"' if parents else "") + f'],"s":{seq},'
            f'"t":{_QUOTE(rtype)},' + ("" if sup is None else f'"u":"{sup}",')
            + f'"v":{schema}}}')


_sha256 = hashlib.sha256


def content_address(content_bytes: bytes) -> str:
    """Return the sha256 hex digest of canonical content bytes.

    Raises:
        MalformedRecord: ``content_bytes`` is not bytes (field ``content_bytes``).
    """
    if not isinstance(content_bytes, bytes | bytearray | memoryview):
        raise MalformedRecord(f"content_bytes must be bytes (canonical_json's), not "
                              f"{type(content_bytes).__name__}", field="content_bytes")
    return _sha256(content_bytes).hexdigest()


def is_record_id(value: object) -> bool:
    """Return True if ``value`` has the shape of a record id (64 lowercase hex)."""
    if type(value) is not str:  # a subclass is judged on its plain str, never its __eq__
        value = str.__str__(value) if isinstance(value, str) else ""
    return len(value) == 64 and _hex64(value)


def _plain_json(value: JSONValue, depth: int = 0) -> bool:
    """True when :func:`_check_json` passes, decided on exact types (issue 27).

    Plain ``dict`` (``str`` keys), ``list``, ``tuple``, ``str``, ``int``, ``bool``, None
    and finite ``float`` nested at most 64 deep, without building a path per value;
    anything else (subclasses included) is False and left to ``_check_json``, which then
    accepts it or names the offending value.
    """
    t = type(value)
    if t is dict:
        if depth >= 64:
            return False
        for k, v in value.items():
            tv = type(v)
            if type(k) is not str or not (tv is str or tv is int or v is None or tv is bool
                                          or _plain_json(v, depth + 1)):
                return False
        return True
    if t is list or t is tuple:
        if depth >= 64:
            return False
        for v in value:
            tv = type(v)
            if not (tv is str or tv is int or v is None or tv is bool
                    or _plain_json(v, depth + 1)):
                return False
        return True
    if t is float:
        return math.isfinite(value)
    return depth <= 64 and (t is str or t is int or t is bool or value is None)


def _check_json(value: JSONValue, path: str, depth: int = 0) -> None:
    if depth > 64:
        raise MalformedRecord("content nests deeper than 64 levels", field=path)
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MalformedRecord("content holds a non-finite float", field=path)
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise MalformedRecord(f"content has a non-string key {k!r}", field=path)
            _check_json(v, f"{path}.{k}", depth + 1)
        return
    raise MalformedRecord(
        f"content holds a value of type {type(value).__name__}, which has no JSON form",
        field=path, fix="store JSON data: str, int, float, bool, None, lists and dicts with "
        "str keys (e.g. d.isoformat() for a date, sorted(s) for a set, m.model_dump("
        "mode='json') for a pydantic model)")


@dataclass(frozen=True, slots=True)
class Record:
    """One immutable version of a semantic key (design.md 3.1).

    Build records with :meth:`Record.create`, which validates every field and computes
    the id; the plain constructor is for decoders that then call :meth:`verify`.

    Attributes:
        key: the semantic key ``x`` (e.g. ``"req/trip-17"``).
        owner: agent id authoritative for ``key`` (``o(x)``).
        seq: owner sequence, a per-owner monotone counter (>= 1).
        parents: exact, ordered parent record ids: the inputs the record was derived from
            (the lineage edges; :mod:`icore.records._lineage` states the rule).
        type: application record type (``"requirement"``, ``"plan"``, ...).
        content: the JSON content, or None when only the envelope is held.
        content_address: sha256 hex of the canonical content bytes.
        size: canonical content size in bytes.
        schema: record schema version.
        id: sha256 hex of the canonical envelope encoding (the record id).
        supersedes: the previous version of ``key`` this version replaces on the owner's
            chain (compare-and-set base), or None. Not an input and never walked as
            lineage; hashed into the id (as ``"u"``) only when set.
    """

    key: str
    owner: str
    seq: int
    parents: tuple[RecordId, ...]
    type: str
    content: JSONValue
    content_address: str
    size: int
    schema: int
    id: RecordId = field(default="")
    supersedes: RecordId | None = None

    # -- construction ---------------------------------------------------------------
    @classmethod
    def create(
        cls,
        *,
        key: str,
        owner: str,
        seq: int,
        content: JSONValue,
        parents: Iterable[RecordId] = (),
        type: str = "record",
        supersedes: RecordId | None = None,
    ) -> Record:
        """Validate fields, encode content canonically and compute the record id.

        Args:
            key: the semantic key.
            owner: the key's owner.
            seq: owner sequence (>= 1).
            content: JSON content.
            parents: the exact ids of the inputs the record was derived from.
            type: record type name.
            supersedes: the version of ``key`` this one replaces (the owner's chain,
                planfence App. A), or None for a creation or when the commit states its
                base with ``expected_head``; it is not an input.

        Raises:
            MalformedRecord: naming the field, for an empty or oversized key, owner or
                type, a sequence < 1, a non-JSON or oversized content, a parent that is
                not a record id, duplicate parents or more than ``MAX_PARENTS`` parents,
                a ``supersedes`` that is not a record id or is also a parent.
        """
        try:
            parents_t = tuple(parents)
        except TypeError:
            raise MalformedRecord("parents must be a collection of record ids, not "
                                  f"{parents.__class__.__name__}", key=key, field="parents"
                                  ) from None
        if not _plain_json(content):
            _check_json(content, "content")
        body = _canonical_bounded(content)
        if len(body) > MAX_CONTENT_BYTES:
            raise MalformedRecord(
                f"too large: content is {len(body)} bytes > the "
                f"{MAX_CONTENT_BYTES // (1 << 20)} MiB limit ({MAX_CONTENT_BYTES} bytes)",
                key=key, field="content", size=len(body), limit=MAX_CONTENT_BYTES,
            )
        caddr = content_address(body)
        if cls is Record:  # every field at once, no per-field setattr (issue 27)
            env = _new_envelope(key, owner, seq, parents_t, type, caddr, len(body),
                                supersedes)
            if env is not None:  # plain: checked and encoded in one pass
                return _new_record(key, owner, seq, parents_t, type, content, caddr,
                                   len(body), SCHEMA_VERSION, _sha256(env).hexdigest(),
                                   supersedes)
            rec = _new_record(key, owner, seq, parents_t, type, content, caddr, len(body),
                              SCHEMA_VERSION, "", supersedes)
        else:
            rec = cls(key=key, owner=owner, seq=seq, parents=parents_t, type=type,
                      content=content, content_address=caddr, size=len(body),
                      schema=SCHEMA_VERSION, supersedes=supersedes)
        if not _plain_envelope(rec, computed=cls is Record):
            rec.check_envelope()
        object.__setattr__(rec, "id", rec.compute_id())
        return rec

    # -- identity -------------------------------------------------------------------
    def envelope(self) -> dict[str, JSONValue]:
        """Return the metadata envelope (everything hashed into the id).

        ``"u"`` (supersedes) is present only when set, so older records keep their ids.
        """
        env: dict[str, JSONValue] = {
            "v": self.schema,
            "k": self.key,
            "o": self.owner,
            "s": self.seq,
            "p": list(self.parents),
            "t": self.type,
            "c": self.content_address,
            "n": self.size,
        }
        if self.supersedes is not None:
            env["u"] = self.supersedes
        return env

    def compute_id(self) -> RecordId:
        """Return sha256 hex over the canonical envelope encoding.

        Raises:
            MalformedRecord: a field has no JSON form (only for a record that did not
                pass :meth:`check_envelope`).
        """
        body = _envelope_json(self)
        if body is None:
            body = canonical_json(self.envelope())
        return hashlib.sha256(body).hexdigest()

    def check_envelope(self) -> None:
        """Validate envelope fields without touching the id.

        Raises:
            MalformedRecord: naming the offending field.
        """
        rid = self.id or None
        if not isinstance(self.key, str) or not self.key or len(self.key) > MAX_KEY_LEN:
            raise MalformedRecord("key must be a non-empty string of at most 512 chars",
                                  record=rid, field="key")
        for name in ("key", "owner", "type"):
            text = getattr(self, name)
            if isinstance(text, str) and not text.isascii() and _SURROGATE.search(text):
                raise MalformedRecord(f"{name} holds a lone surrogate (no UTF-8 form)",
                                      record=rid, field=name, value=ascii(text)[:80])
        if not isinstance(self.owner, str) or not self.owner or len(self.owner) > MAX_KEY_LEN:
            raise MalformedRecord("owner must be a non-empty string", key=self.key,
                                  record=rid, field="owner")
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 1:
            raise MalformedRecord("seq must be an integer >= 1", key=self.key, record=rid,
                                  field="seq")
        if self.seq >= 2**63:
            raise MalformedRecord("seq must be below 2**63", key=self.key, record=rid,
                                  field="seq")
        if not isinstance(self.type, str) or not self.type or len(self.type) > MAX_TYPE_LEN:
            raise MalformedRecord("type must be a non-empty string of at most 128 chars",
                                  key=self.key, record=rid, field="type")
        if not isinstance(self.parents, tuple):
            raise MalformedRecord("parents must be a tuple", key=self.key, record=rid,
                                  field="parents")
        if len(self.parents) > MAX_PARENTS:
            raise MalformedRecord(f"{len(self.parents)} parents, more than {MAX_PARENTS}",
                                  key=self.key, record=rid, field="parents")
        seen: set[str] = set()
        for i, p in enumerate(self.parents):
            if not is_record_id(p):
                raise MalformedRecord(f"parent {i} is not a record id: {p!r}", key=self.key,
                                      record=rid, field=f"parents[{i}]")
            if p in seen:
                raise MalformedRecord(f"parent {p} is listed twice", key=self.key,
                                      record=rid, field=f"parents[{i}]")
            if rid is not None and p == rid:
                raise MalformedRecord("a record cannot be its own parent (cycle)",
                                      key=self.key, record=rid, field=f"parents[{i}]")
            seen.add(p)
        if self.supersedes is not None:
            if not is_record_id(self.supersedes):
                raise MalformedRecord(f"supersedes is not a record id: {self.supersedes!r}",
                                      key=self.key, record=rid, field="supersedes")
            if self.supersedes in seen:
                raise MalformedRecord("the superseded version is not an input: it cannot "
                                      "also be a parent", key=self.key, record=rid,
                                      field="supersedes")
            if rid is not None and self.supersedes == rid:
                raise MalformedRecord("a record cannot supersede itself (cycle)",
                                      key=self.key, record=rid, field="supersedes")
        if not is_record_id(self.content_address):
            raise MalformedRecord("content_address must be a sha256 hex digest",
                                  key=self.key, record=rid, field="content_address")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not (
            0 <= self.size <= MAX_CONTENT_BYTES
        ):
            raise MalformedRecord("size must be an integer in [0, 4 MiB]", key=self.key,
                                  record=rid, field="size")
        if type(self.schema) is not int or self.schema != SCHEMA_VERSION:  # True == 1
            raise MalformedRecord(f"unsupported schema version {self.schema!r}",
                                  key=self.key, record=rid, field="schema")

    def verify(self) -> Record:
        """Check the envelope, the id and (when present) the content; return self.

        Raises:
            MalformedRecord: a field is invalid.
            RecordIdMismatch: the id is not the hash of the envelope, or the content does
                not hash to ``content_address`` / has another size.
        """
        if not _plain_envelope(self):
            self.check_envelope()
        want = self.compute_id()
        if self.id != want:
            raise RecordIdMismatch(
                "record id does not match its canonical encoding",
                key=self.key, record=self.id, expected=want,
            )
        if self.has_content:
            if not _plain_json(self.content):
                _check_json(self.content, "content")
            body = _canonical_bounded(self.content)
            if len(body) != self.size or content_address(body) != self.content_address:
                raise RecordIdMismatch(
                    "record content does not hash to its content address",
                    key=self.key, record=self.id, field="content",
                )
        return self

    @property
    def has_content(self) -> bool:
        """True when the content is held (not just the envelope)."""
        return self.content is not None or self.content_address == _NULL_ADDRESS

    def without_content(self) -> Record:
        """Return the metadata-envelope-only form (for head announcements)."""
        return Record(self.key, self.owner, self.seq, self.parents, self.type, None,
                      self.content_address, self.size, self.schema, self.id,
                      self.supersedes)

    def with_content(self, content: JSONValue) -> Record:
        """Attach fetched content to an envelope-only record and verify it.

        Raises:
            RecordIdMismatch: the content does not hash to ``content_address``.
        """
        rec = Record(self.key, self.owner, self.seq, self.parents, self.type, content,
                     self.content_address, self.size, self.schema, self.id,
                     self.supersedes)
        return rec.verify()

    def __repr__(self) -> str:
        sup = "" if self.supersedes is None else f", supersedes={self.supersedes[:12]}…"
        return (f"Record(key={self.key!r}, owner={self.owner!r}, seq={self.seq}, "
                f"id={self.id[:12]}…, parents={len(self.parents)}, type={self.type!r}{sup})")


_NULL_ADDRESS = content_address(b"null")
_new_record = positional(Record)


def _type_name(v: object) -> str:
    """A value's type for an error message (``str 'abc'``, ``NoneType``)."""
    if isinstance(v, str | int | float) and not isinstance(v, bool):
        r = repr(v)
        return f"{type(v).__name__} {r if len(r) <= 40 else r[:37] + '...'}"
    return type(v).__name__


def derive(
    *,
    key: str,
    owner: str,
    seq: int,
    content: JSONValue,
    inputs: Sequence[Record] | Mapping[str, Record],
    type: str = "plan",
    supersedes: Record | RecordId | None = None,
) -> Record:
    """Create a record derived from ``inputs``, citing their exact ids as parents.

    This is how a plan binds itself to the records it came from (planfence Sec. 4.1).
    ``supersedes`` (a record or its id) is the previous version of ``key`` the new one
    replaces - the owner's chain, not an input (:func:`icore.records.is_chain_link`).

    Raises:
        MalformedRecord: ``inputs`` is not a list (or mapping) of :class:`Record` (a
            string, None, an id instead of the record: field ``inputs[i]``);
            ``supersedes`` is neither a record, a record id nor None; or as
            :meth:`Record.create`.
    """
    if inputs.__class__ is list or inputs.__class__ is tuple:  # no ABC checks (issue 27)
        if supersedes is None:  # records only: their ids, with no second loop
            ids = [r.id for r in inputs if r.__class__ is Record]
            if len(ids) == len(inputs):
                return Record.create(key=key, owner=owner, seq=seq, content=content,
                                     parents=ids, type=type)
        recs = list(inputs)
    elif isinstance(inputs, str | bytes) or not isinstance(inputs, Mapping | Sequence):
        raise MalformedRecord(f"inputs must be a list of records (or a mapping of them), "
                              f"not {_type_name(inputs)}", key=key, field="inputs")
    else:
        recs = list(inputs.values()) if isinstance(inputs, Mapping) else list(inputs)
    for i, r in enumerate(recs):
        if not isinstance(r, Record):
            hint = " (give the record, not its id)" if is_record_id(r) else ""
            raise MalformedRecord(f"inputs[{i}] must be a Record, not {_type_name(r)}{hint}",
                                  key=key, field=f"inputs[{i}]")
    if supersedes is not None and not isinstance(supersedes, Record) and not is_record_id(
            supersedes):
        raise MalformedRecord(f"supersedes must be a Record, a record id or None, not "
                              f"{_type_name(supersedes)}", key=key, field="supersedes")
    sup = supersedes.id if isinstance(supersedes, Record) else supersedes
    return Record.create(key=key, owner=owner, seq=seq, content=content,
                         parents=[r.id for r in recs], type=type, supersedes=sup)
