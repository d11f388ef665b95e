"""The owner side of the protocol as a pure request handler over a store.

:class:`OwnerHandler` maps one decoded request and the *authenticated* peer identity to
one reply. It does no I/O of its own (the store does), so the in-process virtual
transport and the TCP service run the very same code (planfence App. A owner rules).

Authorization:

* head queries, fetches and pings: any authenticated team member;
* commits: the writer is the peer identity, never a message field, so a writer claiming
  another owner's key is refused by the store's owner rule (``OwnershipError``);
* announcements and replication: every record must name the peer as its owner.

Store and record errors become :class:`ErrorReply` with the error's stable code, and are
logged on the ``icore.net`` logger with the peer and request id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import ClassVar

from icore._frozen import positional
from icore.errors import (
    HeadConflict,
    IcoreError,
    OwnershipError,
    SequenceConflict,
    SequenceError,
)
from icore.memory import CommitOp, HeadEntry, Store
from icore.net._protocol import (
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
    Ping,
    Pong,
    Replicate,
)
from icore.records import RecordId

log = logging.getLogger("icore.net")

DEFAULT_INLINE_CAP_BYTES = 4096
"""Largest record an owner inlines into a head reply, whatever the client asks."""

_op = positional(CommitOp)  # every field, no per-field setattr (issue 27)
_ack = positional(CommitAck)


class OwnerHandler:
    """Serve one agent's store.

    Args:
        store: the agent's store (authoritative for its keys).
        agent: the agent id (the identity in its certificate).
        inline_cap_bytes: upper bound on inlined record size in head replies.
    """

    answers_foreign_keys: ClassVar[bool] = False
    """Answer a head query for another owner's key (with nothing) instead of refusing
    it: a replica view that adds its installed heads of such keys (quorum policies)."""

    def __init__(self, store: Store, *, agent: str,
                 inline_cap_bytes: int = DEFAULT_INLINE_CAP_BYTES) -> None:
        self.store = store
        self.agent = agent
        self.inline_cap_bytes = inline_cap_bytes
        self.requests = 0
        self.errors = 0

    def handle(self, msg: Message, peer: str) -> Message:
        """Answer one request from the authenticated ``peer``.

        Returns:
            The reply (an :class:`ErrorReply` on a refused request).
        """
        self.requests += 1
        try:
            return self._handle(msg, peer)
        except IcoreError as exc:
            return self._refused(msg, peer, exc)

    def _refused(self, msg: Message, peer: str, exc: IcoreError) -> ErrorReply:
        self.errors += 1
        log.warning("refused %s rid=%d from peer=%s: %s [%s]", type(msg).__name__,
                    msg.rid, peer, exc, exc.code)
        fields = {}
        if isinstance(exc, HeadConflict):  # the client rebuilds the typed conflict
            fields = {k: str(exc.fields[k]) for k in ("key", "expected", "current")
                      if exc.fields.get(k) is not None}
        elif isinstance(exc, OwnershipError) and isinstance(exc.fields.get("key"), str):
            key = exc.fields["key"]  # the client names both owners of the key (#28)
            om = self.store.ownership
            fields = {"key": key[:512], "service_owner": (om.owner_of(key) or "")[:512],
                      "service_pattern": (om.entry_of(key) or "")[:512]}
        elif isinstance(exc, SequenceError | SequenceConflict):  # a remote writer of this
            last = exc.fields.get("last_seq", exc.fields.get("seq"))  # owner resends (#28)
            fields = {"last_seq": str(last)} if isinstance(last, int) else {}
        return ErrorReply(msg.rid, str(exc.code), str(exc)[:4096], fields)

    def handle_commits(self, items: Sequence[tuple[Commit, str]], *,
                       verified: bool = False) -> list[Message]:
        """Answer several commits with one group commit (issue 17).

        Every commit is checked by the owner rules against the state the ones before it
        left (:meth:`~icore.memory.Store.commit_many`); the whole group is one write
        transaction, so the caller sends the acknowledgements only after this returns.

        Args:
            items: (commit request, authenticated peer) pairs, in arrival order.
            verified: every record was decoded from the wire by
                :func:`~icore.net.decode_body` (which verifies it) and not changed since:
                the store does not verify it a second time (issue 27).

        Returns:
            One reply per item, in order (:class:`CommitAck` or :class:`ErrorReply`).

        Raises:
            Exception: the group's write failed (nothing of it was written); the caller
                must not acknowledge any item.
        """
        self.requests += len(items)
        results = self.store.commit_many(
            [_op(m.record, p, m.expected_head, verified is True,
                 m.encoded if verified is True else None) for m, p in items])
        out: list[Message] = []
        debug = log.isEnabledFor(logging.DEBUG)  # once per group, not per record
        for (msg, peer), res in zip(items, results, strict=True):
            if isinstance(res, IcoreError):
                out.append(self._refused(msg, peer, res))
            else:
                if debug:
                    log.debug("commit %s seq=%d by %s", msg.record.key, msg.record.seq, peer)
                rec = res.record
                out.append(_ack(msg.rid, rec.id, rec.seq, res.created, res.lineage_complete))
        return out

    def head_query(self, rid: int, keys: tuple[str, ...], known: dict[str, RecordId],
                   inline_max_bytes: int, peer: str
                   ) -> tuple[list[HeadEntry], list[HeadEntry]] | ErrorReply:
        """Answer a head query given by its fields (the owner's hot path, issue 27).

        Returns:
            (heads to send in full, heads equal to the known id: sent as key and sequence
            only), or an :class:`ErrorReply` when the store refused.
        """
        self.requests += 1
        try:
            return self._heads(keys, known, inline_max_bytes)
        except IcoreError as exc:
            return self._refused(HeadQuery(rid, keys, known, inline_max_bytes), peer, exc)

    def _heads(self, keys: tuple[str, ...], known: Mapping[str, RecordId],
               inline_max_bytes: int) -> tuple[list[HeadEntry], list[HeadEntry]]:
        inline = min(inline_max_bytes, self.inline_cap_bytes)
        self._refuse_foreign(keys)
        heads = self.store.heads(keys, known=dict(known), inline_max_bytes=inline)
        full: list[HeadEntry] = []
        same: list[HeadEntry] = []
        for h in heads.values():
            if h.record is None and known.get(h.key) == h.record_id:
                same.append(h)  # unchanged: the id is not sent back
            else:
                full.append(h)
        return full, same

    def _refuse_foreign(self, keys: Sequence[str]) -> None:
        """Refuse a head query for a key this service's map gives another owner (#28).

        A client whose ownership map routes a key here while the service's map (its
        manifest) names another owner would otherwise read "never written" for a fact
        that lives elsewhere. A store serving every owner (``agent`` None, a central
        store) answers every key, as does a handler with :attr:`answers_foreign_keys`.

        Raises:
            OwnershipError: fields ``key``, ``owner`` (the service's owner of it, ``""``
                when its map declares none), ``pattern`` (the entry that routes it).
        """
        store = self.store
        if store.agent is None or self.answers_foreign_keys:
            return
        om = store.ownership
        for k in keys:
            owner = om.owner_of(k)
            if owner != store.agent:
                raise OwnershipError(
                    "this owner service does not own the key: its ownership map "
                    + ("declares no owner for it" if owner is None
                       else f"gives it to {owner!r}"),
                    key=k, owner=owner or "", pattern=om.entry_of(k) or "",
                    service=store.agent)

    def _handle(self, msg: Message, peer: str) -> Message:
        if isinstance(msg, HeadQuery):
            full, same = self._heads(msg.keys, msg.known, msg.inline_max_bytes)
            return HeadReplyMsg(msg.rid, self.agent, tuple(full),
                                tuple((h.key, h.seq) for h in same))
        if isinstance(msg, FetchRequest):
            return FetchReply(msg.rid, tuple(self.store.fetch(msg.ids)))
        if isinstance(msg, Commit):
            res = self.store.commit(msg.record, writer=peer, expected_head=msg.expected_head)
            log.debug("commit %s seq=%d by %s", msg.record.key, msg.record.seq, peer)
            return CommitAck(msg.rid, res.record.id, res.record.seq, res.created,
                             res.lineage_complete)
        if isinstance(msg, Announce | Replicate):
            for rec in msg.records:
                if rec.owner != peer:
                    raise OwnershipError("a peer may only announce its own records",
                                         key=rec.key, owner=rec.owner, peer=peer)
            for rec in msg.records:
                self.store.install(rec)
            return Ack(msg.rid, len(msg.records))
        if isinstance(msg, Ping):
            return Pong(msg.rid, self.agent)
        self.errors += 1
        log.warning("unexpected %s from peer=%s", type(msg).__name__, peer)
        return ErrorReply(msg.rid, "transport", f"{type(msg).__name__} is not a request")
