"""Lineage traversal and the dependency frontier F_a (planfence Sec. 3.2, Alg. 1 lines 1-4).

Starting from the roots L(a), follow exact parent ids to every key of D(a) reachable from
them; the first version of a key of D(a) met on a path is that path's boundary for the
key (older versions below it are its history), and a path ends once it has a boundary
for every key of D(a). ``F_a(x)`` is the id of the boundary of x. The walk is pure: it
reads records through an injected ``lookup`` and never touches I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from icore.errors import FrontierConflict, LineageTooLarge, MissingBoundary, MissingParent
from icore.records._record import Record, RecordId

Lookup = Callable[[RecordId], Record | None]
"""Return the record with that id, or None when it is not available locally."""

MAX_LINEAGE_RECORDS = 100_000
"""Default bound on records visited by one traversal."""


class TraversalMode(enum.StrEnum):
    """How far lineage is followed (planfence App. C)."""

    FULL = "full"
    """Follow exact parents transitively (PlanFence)."""
    DIRECT = "direct"
    """Only the roots and their direct parents (ablation: cannot prove depth > 1)."""


@dataclass(frozen=True, slots=True)
class Frontier:
    """The dependency frontier F_a of an action (planfence eq. 1).

    Attributes:
        roots: the roots L(a) the walk started from.
        versions: ``F_a(x)`` for every x in D(a): key -> record id.
        records: the boundary records themselves, key -> record.
        visited: number of records visited.
        depth: the largest number of parent hops from a root to a boundary.
    """

    roots: tuple[RecordId, ...]
    versions: Mapping[str, RecordId]
    records: Mapping[str, Record]
    visited: int
    depth: int


def frontier(
    roots: Iterable[RecordId],
    deps: Collection[str],
    lookup: Lookup,
    *,
    mode: TraversalMode = TraversalMode.FULL,
    max_records: int = MAX_LINEAGE_RECORDS,
) -> Frontier:
    """Compute F_a by walking exact parents from ``roots`` to the keys in ``deps``.

    The walk finds the version of every key of D(a) reachable from the roots, also keys
    that are ancestors of other declared keys (planfence Fig. 6 right, App. C: declaring
    more keys only adds checks). On each path the first version of a declared key met is
    that key's boundary; versions of the same key further down that path are its history
    (the owner's chain), not a second version. A path stops once every key of D(a) has a
    boundary on it. Two different boundaries of one key is a frontier conflict.

    Args:
        roots: plan root record ids L(a) (at least one).
        deps: the dependency scope D(a) (semantic keys).
        lookup: local record lookup (store plus replica cache); None for a record that is
            absent or lineage incomplete.
        mode: :class:`TraversalMode`; ``DIRECT`` is the App. C ablation.
        max_records: bound on visited records.

    Returns:
        The :class:`Frontier`.

    Raises:
        MissingParent: a root or a parent reached from the roots is not available.
        MissingBoundary: some key of ``deps`` is never reached (names the keys).
        FrontierConflict: two different versions of one key of ``deps`` are reached.
        LineageTooLarge: more than ``max_records`` records would be visited.
    """
    roots_t = tuple(roots)
    dep_set = frozenset(deps)
    if not roots_t:
        raise MissingParent("an action needs at least one root record", field="roots")
    versions: dict[str, RecordId] = {}
    records: dict[str, Record] = {}
    # record id -> the keys already bounded on the paths it was expanded with (the
    # intersection over those paths); a record is expanded again only when it shrinks
    bounded: dict[RecordId, frozenset[str]] = {}
    empty: frozenset[str] = frozenset()
    stack: list[tuple[RecordId, int, RecordId | None, frozenset[str]]] = [
        (r, 0, None, empty) for r in reversed(roots_t)]
    got: dict[RecordId, Record] = {}
    max_depth = 0
    limit = 1 if mode is TraversalMode.DIRECT else None
    while stack:
        rid, depth, child, above = stack.pop()
        prev = bounded.get(rid)
        if prev is not None:
            if prev <= above:
                continue
            above = prev & above
        bounded[rid] = above
        if len(bounded) > max_records:
            raise LineageTooLarge(f"lineage walk visited more than {max_records} records",
                                  roots=roots_t)
        rec = got.get(rid)
        if rec is None:
            rec = lookup(rid)
            if rec is None:
                raise MissingParent("lineage is incomplete: a record is not available",
                                    record=rid, cited_by=child)
            got[rid] = rec
        if rec.key in dep_set and rec.key not in above:
            have = versions.get(rec.key)
            if have is not None and have != rid:
                raise FrontierConflict(
                    "two versions of one dependency are reached from the roots",
                    key=rec.key, versions=(have, rid))
            versions[rec.key] = rid
            records[rec.key] = rec
            if depth > max_depth:
                max_depth = depth
            above = above | {rec.key}
        if above >= dep_set or (limit is not None and depth >= limit):
            continue
        for p in reversed(rec.parents):
            stack.append((p, depth + 1, rid, above))
    if len(versions) != len(dep_set):
        missing = sorted(k for k in dep_set if k not in versions)
        raise MissingBoundary("dependencies not reached from the roots", keys=missing,
                              roots=roots_t)
    return Frontier(roots=roots_t, versions=versions, records=records, visited=len(bounded),
                    depth=max_depth)


def ancestors(root: RecordId, lookup: Lookup, *, max_records: int = MAX_LINEAGE_RECORDS
              ) -> dict[RecordId, Record]:
    """Return every record reachable from ``root`` through parents (including it).

    Raises:
        MissingParent: a reachable record is not available.
        LineageTooLarge: more than ``max_records`` records are reachable.
    """
    out: dict[RecordId, Record] = {}
    stack = [root]
    while stack:
        rid = stack.pop()
        if rid in out:
            continue
        rec = lookup(rid)
        if rec is None:
            raise MissingParent("lineage is incomplete", record=rid)
        out[rid] = rec
        if len(out) > max_records:
            raise LineageTooLarge("too many ancestors", root=root)
        stack.extend(p for p in rec.parents if p not in out)
    return out
