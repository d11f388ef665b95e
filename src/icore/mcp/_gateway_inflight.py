"""Protected calls in flight and the keys they write (#25).

Two protected calls sent at once could both pass the gate from the same version of a key
the first one writes: the gate compares D(a) with the owners' heads, and the first call's
write is only a new version once its answer is in and the key read again. So a protected
call whose D(a) overlaps the ``writes:`` of a protected call in flight waits for that call
to end (its writes read again as new versions) before its own gate check, which then sees
the new head and refuses the call as a sequential second call is refused. Calls with
disjoint keys never wait for each other.

Keys are compared as the manifest's entries filled from the arguments (a ``Pattern``): a
key, or a glob whose filled values are escaped. A glob ``writes:`` entry claims every key
it can match, a glob D(a) entry waits for any write it can match (a key the call in
flight creates included), and an entry whose argument is missing claims or waits on its
literal prefix: the comparison errs towards waiting, never towards running two calls
that may touch one fact. The wait comes before the call is shielded from its client: a
call cancelled while it waits is never sent (QA qa-re7 N2).
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio

from icore.errors import IcoreError
from icore.mcp._deps import fill_pattern

Pattern = tuple[str, bool]
"""``(text, glob)`` of :func:`icore.mcp._facts.fill_pattern`: a key, or a glob."""


class InFlight:
    """The write sets of the protected calls between their wait and their end.

    One per gateway (every session's calls): anyio tasks on one event loop, so a check
    and a claim with no ``await`` between them are atomic.
    """

    def __init__(self) -> None:
        self._writing: dict[int, tuple[tuple[Pattern, ...], anyio.Event]] = {}
        self._ids = itertools.count(1)

    async def enter(self, deps: Sequence[Pattern], writes: Sequence[Pattern]) -> int | None:
        """Wait until no call in flight may write a key of ``deps``, then claim ``writes``.

        Args:
            deps: D(a) of the call, its entries filled (:func:`patterns`).
            writes: the call's ``writes:`` entries, filled (:func:`patterns`).

        Returns:
            the claim to give :meth:`leave` when the call ends (its writes read again),
            or None when the call writes nothing (nothing to leave).
        """
        while True:
            busy = next((ev for w, ev in self._writing.values()
                         if any(overlap(a, b) for a in w for b in deps)), None)
            if busy is None:
                break
            await busy.wait()  # then look again: another call may have claimed meanwhile
        if not writes:
            return None
        n = next(self._ids)
        self._writing[n] = (tuple(writes), anyio.Event())
        return n

    def leave(self, claim: int | None) -> None:
        """End a claim of :meth:`enter`: the calls waiting on its keys go on."""
        if claim is None:
            return
        _, done = self._writing.pop(claim)
        done.set()


def patterns(entries: Iterable[str], args: Mapping[str, Any]) -> tuple[Pattern, ...]:
    """The manifest ``entries`` (D(a) or ``writes:``) filled from ``args``.

    An entry that cannot be filled (an argument missing or of another type) becomes its
    literal text up to the first placeholder followed by ``*``: it covers every key the
    entry could name.
    """
    out = []
    for e in entries:
        try:
            out.append(fill_pattern(e, args))
        except IcoreError:
            out.append((e.split("{", 1)[0] + "*", True))  # the manifest's own globs kept
    return tuple(out)


def call_patterns(depends_on: Iterable[str], writes: Iterable[str], args: Mapping[str, Any]
                  ) -> tuple[tuple[Pattern, ...], tuple[Pattern, ...]]:
    """(D(a), writes) of one protected call as filled entries (its defaults applied)."""
    return patterns(depends_on, args), patterns(writes, args)


def overlap(a: Pattern, b: Pattern) -> bool:
    """True when the two filled entries may name one key (errs towards True).

    Two keys: equal. A key and a glob: the glob matches it. Two globs: the literal text
    before their first wildcard is a prefix of the other's.
    """
    (ta, ga), (tb, gb) = a, b
    if not ga and not gb:
        return ta == tb
    if not ga:
        return fnmatch.fnmatchcase(ta, tb)
    if not gb:
        return fnmatch.fnmatchcase(tb, ta)
    pa, pb = _literal_head(ta), _literal_head(tb)
    return pa.startswith(pb) or pb.startswith(pa)


def _literal_head(glob: str) -> str:
    """The text a glob's matches all start with (escapes ``[x]`` read as ``x``)."""
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "[" and i + 2 < len(glob) and glob[i + 2] == "]":  # an escaped character
            out.append(glob[i + 1])
            i += 3
            continue
        if c in "*?[":
            break
        out.append(c)
        i += 1
    return "".join(out)
