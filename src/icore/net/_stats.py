"""Traffic accounting and helpers shared by every client transport (design.md 3.4)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icore._frozen import positional
from icore.errors import ErrorCode, HeadConflict
from icore.memory import HeadEntry, HeadReply
from icore.net._errors import MalformedMessage, RemoteError
from icore.net._protocol import ErrorReply, HeadReplyMsg, Message
from icore.records import RecordId

_head_entry = positional(HeadEntry)  # every field; no per-field setattr (#27)
_head_reply = positional(HeadReply)


@dataclass(slots=True)
class TrafficStats:
    """Counters of everything one transport endpoint wrote and read.

    Byte counts are TCP payload bytes: frames plus, for TLS, record headers/tags, the
    handshake flights, session tickets and close alerts. IP/TCP headers are not counted.

    Attributes:
        bytes_out: bytes written to the wire.
        bytes_in: bytes read from the wire.
        frames_out: protocol frames sent.
        frames_in: protocol frames received.
        rpcs: request/reply exchanges completed (successfully or with an error reply).
        connections: connections opened (each pays a handshake).
        handshake_bytes: bytes of TLS handshakes (already included in bytes_out/in).
        failures: RPCs that raised (timeout, unreachable, protocol error).
    """

    bytes_out: int = 0
    bytes_in: int = 0
    frames_out: int = 0
    frames_in: int = 0
    rpcs: int = 0
    connections: int = 0
    handshake_bytes: int = 0
    failures: int = 0

    @property
    def total_bytes(self) -> int:
        """``bytes_out + bytes_in``."""
        return self.bytes_out + self.bytes_in

    def snapshot(self) -> TrafficStats:
        """Return a copy (subtract two snapshots to measure an interval)."""
        return dataclasses.replace(self)

    def __sub__(self, other: TrafficStats) -> TrafficStats:
        return TrafficStats(*(getattr(self, f.name) - getattr(other, f.name)
                              for f in dataclasses.fields(self)))

    def add(self, other: TrafficStats) -> None:
        """Add another endpoint's counters into this one."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        """Return the counters as a plain dict (plus ``total_bytes``)."""
        d = dataclasses.asdict(self)
        d["total_bytes"] = self.total_bytes
        return d


def raise_for_error(reply: Message, *, owner: str) -> None:
    """Raise when ``reply`` is an :class:`ErrorReply`.

    Raises:
        HeadConflict: the owner refused a commit whose base is not its current head (the
            same typed, retryable error a local store raises; ``owner`` is added).
        RemoteError: any other refusal (``remote_code`` names it; a sequence refusal
            also carries the owner's ``last_seq``, an int; an ownership refusal the
            ``key``, the service's owner of it ``service_owner`` (``""``: none) and its
            entry ``service_pattern``).
    """
    if isinstance(reply, ErrorReply) and reply.code == ErrorCode.HEAD_CONFLICT.value:
        raise HeadConflict(f"owner refused the commit: {reply.message}", owner=owner,
                           key=reply.fields.get("key"), expected=reply.fields.get("expected"),
                           current=reply.fields.get("current"), rid=reply.rid)
    if isinstance(reply, ErrorReply):
        last = reply.fields.get("last_seq", "")  # a sequence refusal: the owner's last
        extra: dict[str, object] = (
            {"last_seq": int(last)} if last.isdigit() and len(last) < 20 else {})
        for f in ("key", "service_owner", "service_pattern"):  # an ownership refusal
            if f in reply.fields:
                extra[f] = reply.fields[f]
        raise RemoteError(f"owner refused the request: {reply.message}", owner=owner,
                          remote_code=reply.code, rid=reply.rid, **extra)


def to_head_reply(reply: Message, *, owner: str, keys: Sequence[str],
                  known: Mapping[str, RecordId] | None = None) -> HeadReply:
    """Convert a wire reply into the :class:`icore.memory.HeadReply` the gate expects.

    The keys are passed through as received: the gate itself checks for a wrong key
    (Alg. 1 line 6) and blocks; here only the type is checked. A decoded reply names no
    owner (protocol 3: the connection's certificate was checked to be ``owner``), so
    ``owner`` is filled in; a reply that names one (in process) is passed through for the
    gate to check. A head the owner answered as *same* (protocol 2) is the id this
    client sent as known for it.

    Raises:
        RemoteError: the owner answered with an error.
        MalformedMessage: the reply is not a head reply, or answers *same* for a key this
            client sent no known id for.
    """
    if type(reply) is not HeadReplyMsg:
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, HeadReplyMsg):
            raise MalformedMessage(f"expected a head reply, got {type(reply).__name__}",
                                   owner=owner, field="type")
    who = reply.owner or owner
    entries = tuple(reply.heads)
    if reply.same:
        kn = known or {}
        more = []
        for key, seq in reply.same:
            rid = kn.get(key)
            if rid is None:
                raise MalformedMessage("owner answered 'same' for a key with no known id",
                                       owner=owner, key=key, field="same")
            more.append(_head_entry(key, rid, seq, None))
        entries = (*entries, *more)
    return _head_reply(who, {h.key: h for h in entries}, entries)


def error_code_of(exc: BaseException) -> str:
    """Return the stable error code of an exception (``transport`` for foreign ones)."""
    code = getattr(exc, "code", None)
    return str(code) if isinstance(code, ErrorCode) else str(ErrorCode.TRANSPORT)
