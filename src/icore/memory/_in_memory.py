"""The in-memory reference store (style habit 11): the semantics every backend matches."""

from __future__ import annotations

import contextlib
import threading

from icore.memory._arg_checks import need_str
from icore.memory._base import HeadEntry, Store
from icore.memory._ownership import OwnershipMap
from icore.records import Record, RecordId


class MemoryStore(Store):
    """A store held in dicts; fast, not durable. See :class:`Store` for the API.

    Thread-safe: commits and installs are serialized by one re-entrant lock per store.
    """

    def __init__(self, ownership: OwnershipMap, agent: str | None = None) -> None:
        super().__init__(ownership, agent)
        self._lock = threading.RLock()
        self._records: dict[RecordId, Record] = {}
        self._heads: dict[str, HeadEntry] = {}
        self._installed: dict[str, HeadEntry] = {}
        self._seqs: dict[str, tuple[int, RecordId | None]] = {}
        self._incomplete: set[RecordId] = set()

    def _critical(self) -> contextlib.AbstractContextManager[None]:
        return self._lock  # type: ignore[return-value]

    def lookup(self, rid: RecordId) -> Record | None:
        """:meth:`Store.lookup` on the dicts directly (the gate's walk calls it per record).

        None when the record is absent, lineage incomplete, or the store is closed.

        Raises:
            OwnershipError: ``rid`` is not a str (as :meth:`Store.lookup`; checked on a
                miss only, so a hit costs one dict read).
        """
        try:
            rec = self._records.get(rid)
        except TypeError:  # unhashable: a list, a dict
            rec = None
        if rec is None or self._closed:
            if not self._closed:
                need_str("rid", rid)
            return None
        if rid in self._incomplete and not self.is_complete(rid):
            return None
        return rec

    def _get_raw(self, rid: RecordId) -> Record | None:
        return self._records.get(rid)

    def _head_raw(self, key: str) -> HeadEntry | None:
        return self._heads.get(key)

    def _owner_seq(self, owner: str) -> tuple[int, RecordId | None]:
        return self._seqs.get(owner, (0, None))

    def _write_commit(self, rec: Record, complete: bool, encoded: bytes | None = None
                      ) -> None:
        self._records[rec.id] = rec
        self._heads[rec.key] = HeadEntry(rec.key, rec.id, rec.seq)
        self._seqs[rec.owner] = (rec.seq, rec.id)
        if not complete:
            self._incomplete.add(rec.id)

    def _write_install(self, rec: Record, complete: bool, move_installed: bool) -> None:
        if rec.id not in self._records or (rec.has_content and
                                           not self._records[rec.id].has_content):
            self._records[rec.id] = rec
        if move_installed:
            self._installed[rec.key] = HeadEntry(rec.key, rec.id, rec.seq)
        if not complete:
            self._incomplete.add(rec.id)

    def _installed_raw(self, key: str) -> HeadEntry | None:
        return self._installed.get(key)

    def _incomplete_ids(self) -> set[RecordId]:
        return self._incomplete

    def _mark_complete(self, rid: RecordId) -> None:
        self._incomplete.discard(rid)

    def _has_content(self, rid: RecordId) -> bool:
        r = self._records.get(rid)
        return r is not None and r.has_content

    def _store_content(self, rec: Record) -> None:
        self._records[rec.id] = rec

    def _head_keys(self) -> list[str]:
        return list(self._heads)

    def _close(self) -> None:
        pass
