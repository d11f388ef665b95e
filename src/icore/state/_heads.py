"""Owners' heads of cited PlanFence records, and their derivation lineage (design.md 4.2).

A :data:`HeadView` answers "what is the current head of this key"; a view that also has
``ancestors`` (:class:`StoreHeadView`) lets a certificate depend on every record its
cited records were derived from (docs/state.md "Revocation follows derivation").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from icore.memory import Store
from icore.records import RecordId
from icore.state._model import CitedRecord

HeadView = Callable[[str], RecordId | None]
"""Key -> the owner's current head record id (None: no head / unavailable)."""


class StoreHeadView:
    """A :data:`HeadView` over a PlanFence store that also knows derivation lineage.

    ``view(key)`` is the owner's current head of ``key``; :meth:`ancestors` walks exact
    parents from a cited record (docs/state.md "Revocation follows derivation"), so a
    certificate over a record also depends on every record it was derived from.

    Args:
        store: the PlanFence store (``head``, ``get``).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, key: str) -> RecordId | None:
        h = self.store.head(key)
        return None if h is None else h.record_id

    def ancestors(self, ref: CitedRecord) -> tuple[CitedRecord, ...]:
        """Derivation ancestors of ``ref`` along exact parents (sorted, unique).

        A parent of the same key as its child is the version the child supersedes, not
        an input it was derived from: it is not an ancestor and the walk does not go
        through it. A parent missing from the store is returned as its own ancestor
        with key ``""`` (never current: fail closed).
        """
        out: dict[RecordId, CitedRecord] = {}
        stack: list[tuple[str, RecordId]] = [(ref.key, ref.record_id)]
        while stack:
            key, rid = stack.pop()
            rec = self.store.get(rid)
            if rec is None:
                continue
            for pid in rec.parents:
                if pid in out:
                    continue
                prec = self.store.get(pid)
                if prec is None:
                    out[pid] = CitedRecord("", pid)
                    continue
                if prec.key == key:
                    continue
                out[pid] = CitedRecord(prec.key, pid)
                stack.append((prec.key, pid))
        return tuple(sorted(out.values(), key=lambda r: (r.key, r.record_id)))


def store_head_view(store: Store) -> StoreHeadView:
    """A :data:`HeadView` reading heads from a PlanFence store (``store.head(key)``).

    It has derivation lineage (:class:`StoreHeadView`).
    """
    return StoreHeadView(store)


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
