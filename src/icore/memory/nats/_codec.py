"""NATS store codec: subject tokens of keys, engine entries, counters (planfence App. A).

Heads are ``[record id, seq]`` and owner entries ``[seq, record id, key, record]``, both
msgpack; every malformed entry raises :class:`~icore.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgpack
import nats.errors

from icore.errors import OwnerUnreachable, RpcTimeout, StoreError
from icore.memory import HeadEntry
from icore.memory.nats._digest import INTENT_LAYOUT, decode_digest
from icore.records import Record, RecordId, decode_record, is_record_id

_RAW_KEY = re.compile(r"[A-Za-z0-9][-/=A-Za-z0-9_]*")
MAX_COMMIT_RETRIES = 64
"""Bound on owner-CAS retries of one commit under contention by the same owner."""
STALE_REREADS = 4
"""Bound on re-reads of a gate's heads whose snapshot is behind its quorum barrier."""


def encode_key(key: str) -> str:
    """Map a semantic key to one NATS subject token (injective).

    Keys made of ``[A-Za-z0-9/_=-]`` starting alphanumeric stay as they are; any other key
    becomes ``_`` + unpadded base64url of its UTF-8 bytes (a raw key never starts with
    ``_``, so the two forms cannot collide).
    """
    if _RAW_KEY.fullmatch(key):
        return key
    return "_" + base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_key(token: str) -> str:
    """Inverse of :func:`encode_key`."""
    if not token.startswith("_"):
        return token
    b = token[1:]
    return base64.urlsafe_b64decode(b + "=" * (-len(b) % 4)).decode("utf-8")


def head_subject_key(owner: str, key: str) -> str:
    """The heads-bucket key of semantic key ``key`` owned by ``owner``."""
    return f"{owner}.{encode_key(key)}"


class _OwnerRaced(Exception):
    """Another writer of the same owner won the owner CAS: decide again."""


@dataclass(frozen=True, slots=True)
class _Intent:
    seq: int
    rid: RecordId
    key: str
    record: bytes
    layout: int = 0  # 1: written by a digest-aware writer (see _digest.INTENT_LAYOUT)


def _pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack_head(key: str, data: bytes) -> HeadEntry:
    try:
        rid, seq = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise StoreError("malformed head entry in the engine", key=key) from exc
    if not is_record_id(rid) or not isinstance(seq, int) or isinstance(seq, bool):
        raise StoreError("malformed head entry in the engine", key=key)
    return HeadEntry(key, rid, seq)


def _pack_intent(it: _Intent) -> bytes:
    base = [it.seq, it.rid, it.key, it.record]
    return _pack([*base, it.layout] if it.layout else base)


def _unpack_intent(owner: str, data: bytes) -> _Intent:
    """An owner entry: 4 elements (before digests) or 5 (layout 1, digest-aware writers).

    Raises:
        StoreError: malformed, or of a layout newer than this icore knows.
    """
    try:
        got = msgpack.unpackb(data, raw=False)
        seq, rid, key, rec, *more = got
    except Exception as exc:
        raise StoreError("malformed owner entry in the engine", owner=owner) from exc
    layout = more[0] if len(more) == 1 else 0 if not more else -1
    if isinstance(layout, bool) or layout not in (0, INTENT_LAYOUT):
        raise StoreError("owner entry of another layout (a newer icore wrote it)",
                         owner=owner, layout=str(more)[:40], supported=INTENT_LAYOUT)
    if not (isinstance(seq, int) and is_record_id(rid) and isinstance(key, str)
            and isinstance(rec, bytes)):
        raise StoreError("malformed owner entry in the engine", owner=owner)
    return _Intent(seq, rid, key, rec, layout)


def _record_from(data: bytes, rid: RecordId) -> Record:
    rec = decode_record(data)
    if rec.id != rid:
        raise StoreError("the engine returned another record than asked", record=rid,
                         got=rec.id)
    return rec


def _json_req(subjects: list[str], batch: int) -> bytes:
    import json
    return json.dumps({"multi_last": subjects, "batch": batch},
                      separators=(",", ":")).encode()


class _BatchReply:
    """Collects one batched direct get's messages (see :meth:`NatsMemory.last_heads`).

    Args:
        subjects: head subject -> semantic key asked for.
        done: settled with (heads, the snapshot's up-to stream sequence; -1 when none of
            the subjects had a message) or the error.
        digest: the subjects are owner digests (:mod:`icore.memory.nats._digest`); only
            the heads of ``want`` are kept from them.
        want: the semantic keys asked for (digest mode).
        decoded: owner -> (digest bytes, decoded digest) seen last, shared by the reads
            of one connection (digest mode: an unchanged digest is not decoded again).
    """

    def __init__(self, subjects: dict[str, str],
                 done: asyncio.Future[tuple[dict[str, HeadEntry], int]], *,
                 digest: bool = False, want: Sequence[str] = (),
                 decoded: dict[str, tuple[bytes, dict[str, HeadEntry] | None]] | None = None
                 ) -> None:
        self.subjects, self.done = subjects, done
        self.decoded = decoded
        self.heads: dict[str, HeadEntry] = {}
        self.digest, self.want = digest, want
        self.digest_keys: int | None = None  # digest mode: its size; -1 overflowed
        self._seen: set[str] = set()

    def add(self, hdr: Mapping[str, str], data: bytes) -> None:
        """Take one message of the batch; settle the future at its end or on an error.

        Args:
            hdr: the message's headers (name -> value; ``Status`` for a status).
            data: its payload.
        """
        status = hdr.get("Status")
        upto = hdr.get("Nats-UpTo-Sequence", "")
        self._settle(status, str(hdr.get("Description", "")), hdr.get("Nats-Subject", ""),
                     upto.encode() if upto.isascii() else b"?",
                     hdr.get("KV-Operation") in ("DEL", "PURGE"), data)

    def add_raw(self, raw: bytes, data: bytes) -> None:
        """:meth:`add` for a raw header block, its few fields read in place (#27).

        The fields are found as the engine writes them (``Name: value`` lines, the last
        of a name counting, as :func:`icore.memory.nats._reads.parse_headers` reads it).
        A block that does not start with ``NATS/1.0`` fails the read (StoreError).
        """
        if not raw.startswith(b"NATS/1.0"):
            self._fail(StoreError("malformed message headers from the engine",
                                  head=repr(raw[:40])))
            return
        line = raw[8:raw.find(b"\r\n")].strip()
        status = desc = None
        if line:
            code, _, more = line.partition(b" ")
            status, desc = code.decode("ascii", "replace"), more.strip()
        op = _field(raw, b"\r\nKV-Operation:")
        self._settle(status, "" if desc is None else desc.decode("utf-8", "replace"),
                     (_field(raw, b"\r\nNats-Subject:") or b"").decode("utf-8", "replace"),
                     _field(raw, b"\r\nNats-UpTo-Sequence:") or b"",
                     op in (b"DEL", b"PURGE"), data)

    def _fail(self, exc: StoreError) -> None:
        if not self.done.done():
            self.done.set_exception(exc)

    def _settle(self, status: str | None, desc: str, subject: str, upto: bytes,
                deleted: bool, data: bytes) -> None:
        try:
            got = self._add(status, desc, subject, upto, deleted, data)
        except StoreError as exc:
            self._fail(exc)
            return
        if got is not None and not self.done.done():
            self.done.set_result((self.heads, got))

    def _add(self, status: str | None, desc: str, subject: str, upto: bytes,
             deleted: bool, data: bytes) -> int | None:
        if status == "404" and not self._seen:
            return -1  # none of the subjects has a message: no snapshot sequence to check
        if status is not None:
            if status != "204":
                raise StoreError("the engine refused the batched head read", status=status,
                                 description=desc[:200])
            if not upto.isdigit():  # ASCII digits only (bytes)
                raise StoreError("end of batch without its snapshot sequence")
            return int(upto)
        key = self.subjects.get(subject)
        if key is None or subject in self._seen:
            raise StoreError("the engine answered a head not asked for",
                             subject=str(subject)[:200])
        self._seen.add(subject)
        if deleted:
            raise StoreError("a head was deleted in the engine", key=key)
        if not self.digest:
            self.heads[key] = _unpack_head(key, data)
            return None
        last = self.decoded.get(key) if self.decoded is not None else None
        if last is not None and last[0] == data:
            heads = last[1]  # the same digest as last time: decoded once (entries frozen)
        else:
            heads = decode_digest(key, data)
            if self.decoded is not None:
                if len(self.decoded) >= 1024:
                    self.decoded.clear()
                self.decoded[key] = (data, heads)
        self.digest_keys = -1 if heads is None else len(heads)
        if heads is not None:
            self.heads = {k: heads[k] for k in self.want if k in heads}
        return None


def _field(raw: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (CRLF + ``Name:``) in a raw block, stripped.

    The last one counts when repeated; None when absent.
    """
    i = raw.rfind(name)
    if i < 0:
        return None
    i += len(name)
    end = raw.find(b"\r\n", i)
    return raw[i:end if end >= 0 else len(raw)].strip()


@dataclass
class NatsStats:
    """Client-side operation counters of one :class:`NatsMemory` connection.

    Attributes:
        gets: key-value gets issued.
        puts: key-value writes issued (create/update, barriers).
        cas_conflicts: owner or head CAS attempts that lost a race and were retried.
        rereads: gate head reads repeated because their snapshot was behind the
            quorum barrier.
        permission_denied: publishes the server refused (subject permissions).
        violations: the server's last permission-violation messages (at most 100).
    """

    gets: int = 0
    puts: int = 0
    cas_conflicts: int = 0
    rereads: int = 0
    permission_denied: int = 0
    violations: list[str] = field(default_factory=list)


def _unreachable(owner: str, exc: BaseException) -> OwnerUnreachable:
    if isinstance(exc, TimeoutError | nats.errors.TimeoutError):
        return RpcTimeout("the engine did not answer in time", owner=owner)
    return OwnerUnreachable(f"the engine failed: {type(exc).__name__}: {exc}", owner=owner)


BARRIER_TOKEN = "=barrier"
"""First token of a reader's quorum-barrier key in the heads bucket,
``=barrier.<reader>`` (no agent id starts with ``=``, so no owner's watcher sees it)."""
