"""One pass over a trace's PlanFence records, shared by every action's lineage (issue 29).

:func:`icore.adapters.trace_lineages` gives each protected action a picture (the records
a reader needs to follow its verdict) and fails it closed when a record the verdict rests
on was edited. Both used to scan every record per action, and a picture held every
version of each key the action depends on and the whole ancestor chain of its roots: an
audit quadratic in the number of protected calls (1,200 calls: 13.7 s, 434 MB). Here the
records are indexed once (ids, children, versions per key) and an action's picture is
bounded; the edited-record check still covers the full set it always did (roots and
frontier / head versions with all their ancestors, every version of each key in D(x), the
records derived from the roots), computed once for the whole record graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icore.fence import DecisionEntry


def _parents(r: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(p) for p in r.get("parents") or ())


class RecordIndex:
    """The records of one trace, indexed once.

    Args:
        records: the trace's record dicts (``{id, key, parents, seq, ...}``), in order.
        edited: record id -> why, for records whose id is not their digest
            (:attr:`icore.adapters.PlanfenceLog.edited`).
    """

    def __init__(self, records: Sequence[Mapping[str, Any]],
                 edited: Mapping[str, str]) -> None:
        self.records = records
        self.occ: dict[str, list[int]] = {}  # id -> its occurrences' indexes
        self.last: dict[str, Mapping[str, Any]] = {}  # id -> last occurrence (ancestor walks)
        self.children: dict[str, list[int]] = {}  # parent id -> indexes citing it
        self.newest: dict[str, tuple[int, int]] = {}  # key -> (seq, index) highest seq
        seen: set[str] = set()
        for i, r in enumerate(records):
            rid = str(r.get("id"))
            self.occ.setdefault(rid, []).append(i)
            self.last[rid] = r
            for p in set(_parents(r)):
                self.children.setdefault(p, []).append(i)
            sid = str(r.get("id", ""))
            seq = r.get("seq")
            if sid and sid not in seen:  # as pages dedupe: first occurrence of an id
                seen.add(sid)
                key = str(r.get("key", ""))
                if isinstance(seq, int) and (key not in self.newest
                                             or int(seq) > self.newest[key][0]):
                    self.newest[key] = (int(seq), i)
        self.edited = edited
        self._first_edited = self._reach(edited) if edited else {}
        self._key_edited: dict[str, int] = {}
        self._child_edited: dict[str, int] = {}
        if edited:
            for i, r in enumerate(records):
                if str(r.get("id")) not in edited:
                    continue
                k = r.get("key")
                if isinstance(k, str):
                    self._key_edited.setdefault(k, i)
                for p in _parents(r):
                    self._child_edited.setdefault(p, i)

    def _reach(self, edited: Mapping[str, str]) -> dict[str, int]:
        """Id -> the first index of an edited record among it and its ancestors.

        Sources in record order, each marking what derives from it and stopping at what
        an earlier one marked (its descendants are marked already): O(records + parents),
        cycles included.
        """
        kids: dict[str, list[str]] = {}
        for rid, r in self.last.items():
            for p in _parents(r):
                kids.setdefault(p, []).append(rid)
        best: dict[str, int] = {}
        for e in sorted((e for e in edited if e in self.occ), key=lambda e: self.occ[e][0]):
            if e in best:
                continue
            first = self.occ[e][0]
            best[e] = first
            todo = [e]
            while todo:
                for c in kids.get(todo.pop(), ()):
                    if c not in best:
                        best[c] = first
                        todo.append(c)
        return best

    def edited_shown(self, decisions: Sequence[DecisionEntry]) -> str | None:
        """Why the first edited record an action's verdict rests on was edited, or None.

        The records: its roots and its frontier / head versions with all their ancestors,
        every version of each key in D(x), and the records derived from its roots; the
        first in record order.
        """
        if not self._first_edited and not self._key_edited:
            return None
        seeds = {x for d in decisions for x in d.roots} | {
            v for d in decisions for m in (d.frontier, d.heads) for v in m.values()}
        hits = [self._first_edited[s] for s in seeds if s in self._first_edited]
        hits += [self._key_edited[k] for d in decisions for k in d.deps
                 if k in self._key_edited]
        hits += [self._child_edited[x] for d in decisions for x in d.roots
                 if x in self._child_edited]
        return self.edited[str(self.records[min(hits)].get("id"))] if hits else None

    def picture(self, decisions: Sequence[DecisionEntry]) -> list[Mapping[str, Any]]:
        """The records one action's picture shows, in record order.

        Its roots and what they cite (the plan's inputs), its frontier and head versions
        and their direct parents, the records derived from its roots (its action record)
        and the newest version (highest owner sequence) of each key in D(x): what the
        verdict and its reason name. Not every version of a key or the roots' whole
        ancestry: a reader follows those by id (bounded per action, issue 29).
        """
        ids = {x for d in decisions for x in d.roots}
        ids |= {v for d in decisions for m in (d.frontier, d.heads) for v in m.values()}
        for rid in list(ids):
            for i in self.occ.get(rid, ()):
                ids.update(_parents(self.records[i]))
        at: set[int] = set()
        for rid in ids:
            at.update(self.occ.get(rid, ()))
        for x in {x for d in decisions for x in d.roots}:
            at.update(self.children.get(x, ()))
        for k in {k for d in decisions for k in d.deps}:
            if k in self.newest:
                at.update(self.occ[str(self.records[self.newest[k][1]].get("id"))])
        return [self.records[i] for i in sorted(at)]


__all__ = ["RecordIndex"]
