"""The lineage rule, lineage traversal and the frontier F_a (planfence Sec. 3.2, Alg. 1).

**The lineage rule** (stated here once; the gate's frontier walk, the stores' lineage
completeness check and iCORE's derivation ancestors all apply it through
:func:`is_chain_link` / :func:`lineage_inputs`):

* a record's *inputs* are its ``parents`` whose key differs from the record's own key -
  the records it was derived from. Lineage is walked through inputs only.
* the *owner's chain* - the version of the same key that a new version replaces - is not
  an input. It is named by the record's ``supersedes`` link (the compare-and-set base,
  which is not in ``parents`` and is never walked), or, for records written before that
  link existed, by a parent of the record's own key: such a *same-key parent* is a chain
  link too, never walked. Only its key tells it apart, so a legacy same-key parent that
  is not available still makes the child lineage-incomplete (fail closed); a record that
  names its base with ``supersedes`` is complete once its inputs are, so a replica that
  holds only a key's current version can act on it.

Frontier: starting from the roots L(a), follow inputs to every key of D(a) reachable
from them; the first version of a key of D(a) met on a path is that path's boundary for
the key (versions of it further down a derivation path are its history), and a path ends
once it has a boundary for every key of D(a). ``F_a(x)`` is the id of the boundary of x.
The walk is pure: it reads records through an injected ``lookup`` and never touches I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from icore._frozen import positional
from icore.errors import (
    FrontierConflict,
    LineageTooLarge,
    MalformedRecord,
    MissingBoundary,
    MissingParent,
)
from icore.records._record import Record, RecordId, is_record_id

Lookup = Callable[[RecordId], Record | None]
"""Return the record with that id, or None when it is not available locally."""

MAX_LINEAGE_RECORDS = 100_000
"""Default bound on records visited by one traversal."""


def is_chain_link(child: Record, parent: Record) -> bool:
    """True when ``parent`` is on ``child``'s owner chain, not an input (the lineage rule).

    That is when ``parent`` is the version ``child`` supersedes or has ``child``'s key.
    """
    return parent.key == child.key or parent.id == child.supersedes


def lineage_inputs(record: Record, lookup: Lookup) -> tuple[RecordId | Record, ...]:
    """The inputs of ``record`` under the lineage rule, in parent order.

    Each element is the input :class:`Record` when ``lookup`` has it, or the bare id when
    it does not (the caller decides: the gate and iCORE fail closed on it). Parents that
    are chain links (:func:`is_chain_link`) are left out; ``supersedes`` is never listed.
    """
    out: list[RecordId | Record] = []
    for pid in record.parents:
        parent = lookup(pid)
        if parent is None:
            out.append(pid)
        elif not is_chain_link(record, parent):
            out.append(parent)
    return tuple(out)


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


_frontier = positional(Frontier)


def frontier(
    roots: Iterable[RecordId],
    deps: Collection[str],
    lookup: Lookup,
    *,
    mode: TraversalMode = TraversalMode.FULL,
    max_records: int = MAX_LINEAGE_RECORDS,
) -> Frontier:
    """Compute F_a by walking exact inputs from ``roots`` to the keys in ``deps``.

    Parents that are chain links of their child (same key, or its ``supersedes``) are
    not walked (the lineage rule, module docstring). The walk finds the version of every
    key of D(a) reachable from the roots, also keys that are ancestors of other declared
    keys (planfence Fig. 6 right, App. C: declaring
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
        MalformedRecord: an argument of the wrong type (:func:`_check_walk_args`).
    """
    _check_walk_args(roots, deps, lookup)
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
    # (record id, depth, the child record that cites it or None for a root, keys bounded)
    stack: list[tuple[RecordId, int, Record | None, frozenset[str]]] = [
        (r, 0, None, empty) for r in reversed(roots_t)]
    got: dict[RecordId, Record] = {}
    max_depth = 0
    limit = 1 if mode is TraversalMode.DIRECT else None
    while stack:
        rid, depth, child, above = stack.pop()
        prev = bounded.get(rid)
        if prev is not None and prev <= above:
            continue
        rec = got.get(rid)
        if rec is None:
            rec = lookup(rid)
            if rec is None:
                raise MissingParent("lineage is incomplete: a record is not available",
                                    record=rid, cited_by=None if child is None else child.id)
            got[rid] = rec
        key = rec.key
        # is_chain_link(child, rec), inline: the owner's chain, not an input, is never a
        # boundary and never walked
        if child is not None and (key == child.key or rec.id == child.supersedes):
            continue
        if prev is not None:
            above = prev & above
        bounded[rid] = above
        if len(bounded) > max_records:
            raise LineageTooLarge(f"lineage walk visited more than {max_records} records",
                                  roots=roots_t)
        if key in dep_set and key not in above:
            have = versions.get(key)
            if have is not None and have != rid:
                raise FrontierConflict(
                    "two versions of one dependency are reached from the roots",
                    key=key, versions=(have, rid))
            versions[key] = rid
            records[key] = rec
            if depth > max_depth:
                max_depth = depth
            above = above | {key}
        if above >= dep_set or (limit is not None and depth >= limit):
            continue
        below = depth + 1
        for p in reversed(rec.parents):
            stack.append((p, below, rec, above))
    if len(versions) != len(dep_set):
        missing = sorted(k for k in dep_set if k not in versions)
        raise MissingBoundary("dependencies not reached from the roots", keys=missing,
                              roots=roots_t)
    return _frontier(roots_t, versions, records, len(bounded), max_depth)


def _check_walk_args(roots: object, deps: object, lookup: object) -> None:
    """Refuse arguments of :func:`frontier` / :func:`ancestors` of the wrong type.

    Raises:
        MalformedRecord: ``roots`` is not an iterable of record ids (str), ``deps`` not a
            collection of keys (str; a lone str is refused: it would be its letters), or
            ``lookup`` not callable (field named; they were TypeErrors from inside).
    """
    if roots is not None and (isinstance(roots, str | bytes) or not isinstance(
            roots, Iterable) or not all(isinstance(r, str) for r in roots)):  # type: ignore[union-attr]
        raise MalformedRecord("roots must be an iterable of record ids (str)", field="roots")
    if deps is not None and (isinstance(deps, str | bytes) or not isinstance(
            deps, Iterable) or not all(isinstance(k, str) for k in deps)):  # type: ignore[union-attr]
        raise MalformedRecord("deps must be a collection of keys (str)", field="deps")
    if not callable(lookup):
        raise MalformedRecord(f"lookup must be callable (record id -> Record or None), "
                              f"not {type(lookup).__name__}", field="lookup")


def ancestors(root: RecordId, lookup: Lookup, *, max_records: int = MAX_LINEAGE_RECORDS
              ) -> dict[RecordId, Record]:
    """Return ``root`` and every record reachable from it through inputs (the lineage rule).

    Chain links (a same-key parent, ``supersedes``) are not followed; this is the set of
    records a certificate over ``root`` depends on in iCORE (docs/state.md "Revocation
    follows derivation").

    Raises:
        MissingParent: a reachable input (or ``root``) is not available.
        LineageTooLarge: more than ``max_records`` records are reachable.
        MalformedRecord: ``root`` is no record id or ``lookup`` not callable.
    """
    if not is_record_id(root):
        raise MalformedRecord(f"root must be a record id (64 hex digits), not "
                              f"{root!r:.80}", field="root")
    _check_walk_args(None, None, lookup)
    first = lookup(root)
    if first is None:
        raise MissingParent("lineage is incomplete", record=root)
    out: dict[RecordId, Record] = {root: first}
    stack = [first]
    while stack:
        rec = stack.pop()
        for inp in lineage_inputs(rec, lookup):
            if isinstance(inp, str):
                raise MissingParent("lineage is incomplete", record=inp, cited_by=rec.id)
            if inp.id in out:
                continue
            out[inp.id] = inp
            if len(out) > max_records:
                raise LineageTooLarge("too many ancestors", root=root)
            stack.append(inp)
    return out
