"""Protected calls in flight and the keys they write (#25).

Two protected calls sent at once could both pass the gate from the same version of a key
the first one writes: the gate compares D(a) with the owners' heads, and the first call's
write is only a new version once its answer is in and the key read again. So a protected
call whose D(a) overlaps the ``writes:`` of a protected call in flight waits for that call
to end (its writes read again as new versions) before its own gate check, which then sees
the new head and refuses the call as a sequential second call is refused. Calls with
disjoint keys never wait for each other.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from icore.errors import IcoreError
from icore.mcp._facts import expand_deps


class InFlight:
    """The write sets of the protected calls between their gate check and their end.

    One per gateway (every session's calls): anyio tasks on one event loop, so a check
    and a claim with no ``await`` between them are atomic.
    """

    def __init__(self) -> None:
        self._writing: dict[int, tuple[frozenset[str], anyio.Event]] = {}
        self._ids = itertools.count(1)

    async def enter(self, deps: Iterable[str], writes: Iterable[str]) -> int | None:
        """Wait until no call in flight writes a key of ``deps``, then claim ``writes``.

        Args:
            deps: D(a) of the call (keys).
            writes: the keys the call writes (its ``writes:`` filled from its arguments).

        Returns:
            the claim to give :meth:`leave` when the call ends (its writes read again),
            or None when the call writes nothing (nothing to leave).
        """
        d = frozenset(deps)
        while True:
            busy = next((ev for w, ev in self._writing.values() if w & d), None)
            if busy is None:
                break
            await busy.wait()  # then look again: another call may have claimed meanwhile
        w = frozenset(writes)
        if not w:
            return None
        n = next(self._ids)
        self._writing[n] = (w, anyio.Event())
        return n

    def leave(self, claim: int | None) -> None:
        """End a claim of :meth:`enter`: the calls waiting on its keys go on."""
        if claim is None:
            return
        _, done = self._writing.pop(claim)
        done.set()


def write_keys(patterns: Iterable[str], args: Mapping[str, Any]) -> frozenset[str]:
    """The keys a call writes: its tool's ``writes:`` entries filled from ``args``.

    An entry that cannot be filled (a missing argument) is left out; the gateway notes it
    when it reads the writes again after the call. A glob entry names no key here.
    """
    keys: set[str] = set()
    for w in patterns:
        try:
            keys |= expand_deps([w], args, ())
        except IcoreError:
            continue
    return frozenset(keys)
