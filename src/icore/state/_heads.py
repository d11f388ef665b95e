"""Owners' heads of cited PlanFence records, and their derivation lineage (design.md 4.2).

A :data:`HeadView` answers "what is the current head of this key"; a view that also has
``ancestors`` (:class:`LineageHeadView`) lets a certificate depend on every record its
cited records were derived from (docs/state.md "Revocation follows derivation").
Ancestors follow the one lineage rule of :mod:`icore.records` (inputs only; a record's
``supersedes`` link and a same-key parent are the owner's chain), exactly as the gate's
frontier walk does, so iCORE revokes what the gate would block.

Three constructors:

* :func:`store_head_view` - one store holds the heads and the records (one owner, or a
  central store);
* :func:`owners_head_view` - a team: heads from any :class:`~icore.memory.OwnerAccess`
  (in-process :class:`~icore.memory.LocalOwners`, the TCP ``SyncOwnerClient``, NATS'
  ``SyncNatsOwnerAccess``), records from a local replica or fetched by exact id from
  their owners (and verified);
* :class:`LineageHeadView` itself - any head function plus any record lookup (a live
  run's coordinator uses the heads and records its owners acknowledged).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from icore.errors import RecordError
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, OwnerAccess, OwnershipMap, Store
from icore.records import MAX_LINEAGE_RECORDS, Record, RecordId, is_record_id, lineage_inputs
from icore.state._xmodel import CitedRecord

HeadView = Callable[[str], RecordId | None]
"""Key -> the owner's current head record id (None: no head / unavailable)."""

RecordSource = Callable[[RecordId], Record | None]
"""Record id -> the record (None: not available here)."""

UNKNOWN_KEY = ""
"""Key of an ancestor that could not be read: it is never any key's head (fail closed)."""


class LineageHeadView:
    """A :data:`HeadView` that also knows derivation lineage (docs/state.md).

    ``view(key)`` is the owner's current head of ``key``; :meth:`ancestors` walks the
    inputs of a cited record (the lineage rule, :func:`icore.records.lineage_inputs`),
    so a certificate over a record also depends on every record it was derived from,
    whoever owns them.

    Args:
        heads: key -> the owner's current head id (None: no head or unavailable). An
            exception it raises counts as None (fail closed).
        records: local record lookup (a replica): id -> record or None.
        fetch: fetches a record by exact id from elsewhere (its owner) when ``records``
            lacks it; the result must hash to the id asked for (verified here).
        max_records: bound on the records one :meth:`ancestors` walk reads.
    """

    def __init__(self, heads: HeadView, records: RecordSource, *,
                 fetch: RecordSource | None = None,
                 max_records: int = MAX_LINEAGE_RECORDS) -> None:
        self._heads = heads
        self._records = records
        self._fetch = fetch
        self._fetched: dict[RecordId, Record] = {}
        self.max_records = max_records

    def __call__(self, key: str) -> RecordId | None:
        """The owner's current head of ``key`` (None: none, or it cannot be read)."""
        try:
            h = self._heads(key)
        except Exception:  # an unreachable owner: no head (fail closed)
            return None
        return h if isinstance(h, str) and is_record_id(h) else None

    def record(self, rid: RecordId) -> Record | None:
        """The verified record ``rid``: from the replica, else fetched; None if neither."""
        rec = self._fetched.get(rid)
        if rec is not None:
            return rec
        try:
            rec = self._records(rid)
        except Exception:
            rec = None
        if rec is None and self._fetch is not None:
            try:
                rec = self._fetch(rid)
            except Exception:
                rec = None
            if rec is not None:
                try:
                    rec.verify()
                except RecordError:
                    return None
                self._fetched[rid] = rec
        if rec is None or rec.id != rid:
            return None
        return rec

    def ancestors(self, ref: CitedRecord) -> tuple[CitedRecord, ...]:
        """Derivation ancestors of ``ref`` along its inputs (sorted, unique).

        A chain link (``supersedes``, or a parent of the same key as its child) is the
        version the child replaced, not an input: it is not an ancestor and the walk does
        not go through it. A record that can be read neither locally nor from an owner -
        the cited record itself, or an ancestor - is returned as an ancestor with key
        :data:`UNKNOWN_KEY`, which is never current (fail closed: the certificate is
        stale until the lineage can be read). So is a walk longer than ``max_records``.
        """
        out: dict[RecordId, CitedRecord] = {}
        start = self.record(ref.record_id)
        if start is None:
            return (CitedRecord(UNKNOWN_KEY, ref.record_id),)
        stack = [start]
        seen = {start.id}
        while stack:
            rec = stack.pop()
            for inp in lineage_inputs(rec, self.record):
                rid = inp if isinstance(inp, str) else inp.id
                if rid in seen:
                    continue
                seen.add(rid)
                if len(seen) > self.max_records:
                    out[rid] = CitedRecord(UNKNOWN_KEY, rid)
                    stack.clear()
                    break
                if isinstance(inp, str):
                    out[rid] = CitedRecord(UNKNOWN_KEY, rid)
                    continue
                out[rid] = CitedRecord(inp.key, rid)
                stack.append(inp)
        return tuple(sorted(out.values(), key=lambda r: (r.key, r.record_id)))


class StoreHeadView(LineageHeadView):
    """A :class:`LineageHeadView` over one PlanFence store (its heads and records).

    Args:
        store: the PlanFence store (``head``, ``get``).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        super().__init__(self._head, store.get)

    def _head(self, key: str) -> RecordId | None:
        h = self.store.head(key)
        return None if h is None else h.record_id


def store_head_view(store: Store) -> StoreHeadView:
    """A :data:`HeadView` reading heads from a PlanFence store (``store.head(key)``).

    It has derivation lineage (:class:`StoreHeadView`).
    """
    return StoreHeadView(store)


def owners_head_view(
    owners: OwnerAccess,
    records: Store | RecordSource | Mapping[RecordId, Record] | None = None,
    *,
    ownership: OwnershipMap,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> LineageHeadView:
    """A lineage-aware :data:`HeadView` over a team's owners (icore Sec. 4; design.md 4.2).

    Heads come from each key's owner (one ``query_heads`` per read: never cached, so a
    revision is seen at once); records from ``records`` (a local replica) or, when it
    lacks one, fetched by exact id from the owners (each owner of ``ownership`` in turn,
    until one returns it) and verified against the id.
    A revision of any input then revokes every certificate derived from it, with one
    revocation flag, whoever owns what (:meth:`icore.state.State.revalidate_certificates`,
    :meth:`icore.state.State.on_head_change`). Fails closed: an owner that does not
    answer, answers for another owner or key, or has no head gives None (the key's
    certificates are revoked); an ancestor no one returns is never current.

    Args:
        owners: a sync :class:`~icore.memory.OwnerAccess` (``LocalOwners``,
            ``icore.net.SyncOwnerClient``, ``icore.net.SyncNatsOwnerAccess``).
        records: the local replica: a :class:`~icore.memory.Store` (its ``get``), a
            lookup function, a mapping id -> record, or None (fetch everything).
        ownership: the team's ownership map (who answers for a key).
        timeout_s: per-request timeout, in seconds.

    Returns:
        The :class:`LineageHeadView`.
    """
    if isinstance(records, Store):
        local: RecordSource = records.get
    elif isinstance(records, Mapping):
        local = records.get
    elif records is None:
        def local(rid: RecordId) -> Record | None:
            return None
    else:
        local = records

    def heads(key: str) -> RecordId | None:
        owner = ownership.owner_of(key)
        if owner is None:
            return None
        reply: Any = owners.query_heads(owner, [key], timeout_s=timeout_s)
        if getattr(reply, "owner", None) != owner:
            return None
        entry = reply.heads.get(key) if isinstance(reply.heads, Mapping) else None
        if not isinstance(entry, HeadEntry) or entry.key != key:
            return None
        return entry.record_id

    def fetch(rid: RecordId) -> Record | None:
        for owner in sorted(ownership.owners()):
            try:
                got = owners.fetch(owner, [rid], timeout_s=timeout_s)
            except Exception:
                continue
            # any owner may serve a record: it is verified against the exact id asked
            # for (LineageHeadView.record), whoever sends it
            for r in got:
                if isinstance(r, Record) and r.id == rid:
                    return r
        return None

    return LineageHeadView(heads, local, fetch=fetch)


def lineage_of(
    head_view: HeadView | None, records: Iterable[CitedRecord]
) -> tuple[CitedRecord, ...]:
    """Derivation ancestors of ``records`` when ``head_view`` knows lineage, else ()."""
    anc = getattr(head_view, "ancestors", None)
    if anc is None:
        return ()
    out: dict[tuple[str, str], CitedRecord] = {}
    for r in records:
        for a in anc(r):
            out.setdefault((a.key, a.record_id), a)
    return tuple(out.values())
