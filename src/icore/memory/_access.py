"""Owner access: how a gate reaches the owners of D(a) (planfence Alg. 1 lines 5-8).

The gate is written against these protocols, so the same gate runs over local stores
(:class:`LocalOwners`), the in-process virtual-time transport and authenticated TCP
(``icore.net``). Implementations raise on an unavailable owner or a timeout; the gate turns
any failure into a *blocked* decision (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from icore.errors import OwnerUnavailable
from icore.memory._base import HeadEntry, Store
from icore.records import Record, RecordId

DEFAULT_TIMEOUT_S = 2.0
"""Default timeout of one owner RPC, in seconds (design.md 3.2)."""


@dataclass(frozen=True, slots=True)
class HeadReply:
    """One owner's answer to a batched head query.

    Attributes:
        owner: the owner that answered (must equal the owner asked).
        heads: key -> :class:`HeadEntry` for the keys asked; a key missing here means the
            owner has no head for it (the gate blocks).
        entries: the reply's entries as received, in order, when it came as a list (a
            wire reply); the gate blocks ``conflicting_reply`` when one key appears more
            than once. Empty for replies built as a mapping.
    """

    owner: str
    heads: Mapping[str, HeadEntry]
    entries: tuple[HeadEntry, ...] = ()

    @classmethod
    def from_entries(cls, owner: str, entries: Sequence[HeadEntry]) -> HeadReply:
        """Build a reply from a received list of entries, keeping the list for the gate."""
        ents = tuple(entries)
        return cls(owner, {h.key: h for h in ents}, ents)


@runtime_checkable
class OwnerAccess(Protocol):
    """Synchronous access to owners."""

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Ask ``owner`` for its heads of ``keys`` in one request.

        Raises:
            OwnerUnavailable: unreachable or timed out (any exception blocks the gate).
        """
        ...

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch exact records (with content) from ``owner``; the caller verifies them."""
        ...


@runtime_checkable
class AsyncOwnerAccess(Protocol):
    """Asynchronous access to owners (network clients).

    The gate bounds every call by its ``timeout_s`` with a timer of its own. An access
    that already ends every call within the ``timeout_s`` it is given (raising, so the
    gate blocks) may say so with a class attribute ``bounds_timeouts = True``: the gate
    then sets no second timer (:class:`icore.net.OwnerClient` does, issue 27). An access
    whose calls never suspend (stores of this process answering inline) may say
    ``answers_inline = True``: the gate then awaits the owners one after another instead
    of a task per owner (``icore.mcp``'s in-process owners do, issue 25).
    """

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Async form of :meth:`OwnerAccess.query_heads`."""
        ...

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Async form of :meth:`OwnerAccess.fetch`."""
        ...


class LocalOwners:
    """:class:`OwnerAccess` over stores in this process: owner id -> its store.

    Args:
        stores: owner -> the store authoritative for that owner's keys (a central store
            may be given for several owners).
        inline_max_bytes: inline changed head records up to this size (0 = never; the
            paper's protocol fetches separately).
    """

    def __init__(self, stores: Mapping[str, Store], *, inline_max_bytes: int = 0) -> None:
        self.stores = dict(stores)
        self.down: set[str] = set()
        self.inline_max_bytes = inline_max_bytes

    def _store(self, owner: str) -> Store:
        if owner in self.down or owner not in self.stores:
            raise OwnerUnavailable("owner is unavailable", owner=owner)
        return self.stores[owner]

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`OwnerAccess.query_heads`."""
        store = self._store(owner)
        return HeadReply(owner, store.heads(keys, known=dict(known or {}),
                                            inline_max_bytes=self.inline_max_bytes))

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`OwnerAccess.fetch`."""
        return self._store(owner).fetch(ids)
