"""A map of sequential ids kept as a list (issue 29: bounded memory; design.md 4.2).

X names its assertions ``a1, a2, ...`` and its certificates ``c1, c2, ...`` in the order
it records them (:meth:`Queries.next_ids <icore.state._queries.Queries.next_ids>`), and
Π's justifications are keyed by the same assertion ids. A dict spends about 43 bytes per
item on its hash slots (an entry of 24 bytes and an index, two thirds full on average);
:class:`SeqTable` keeps the item of id ``<prefix><n>`` at position ``n - 1`` of a list
(about 9 bytes per item), which removes two dict slots per assertion of a long run.

It is a ``MutableMapping`` that behaves exactly as the dict it replaces: same keys, same
iteration order (insertion order), same errors. Any write the list cannot hold with the
dict's order (a key not of the form ``<prefix><n>``, with ``n`` written without leading
zeros, or an insertion before an item written later) turns the table into a plain dict
first, once, so nothing is lost and only the memory saving is. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from typing import Any, Generic, TypeVar, overload

V = TypeVar("V")
D = TypeVar("D")

_HOLE: Any = object()
"""An empty position of the list (the id was never written, or was deleted)."""
_MISSING: Any = object()


class SeqTable(MutableMapping[str, V], Generic[V]):
    """A ``dict[str, V]`` of ids ``<prefix><n>`` (``n`` ≥ 1) stored as a list by ``n``.

    Args:
        prefix: the ids' prefix (``"a"`` for assertions, ``"c"`` for certificates).
    """

    __slots__ = ("_d", "_items", "_len", "_p", "_pn")

    def __init__(self, prefix: str) -> None:
        self._p = prefix
        self._pn = len(prefix)
        self._items: list[Any] = []
        self._len = 0
        self._d: dict[str, V] | None = None  # the plain dict once the list cannot hold it

    def _pos(self, key: object) -> int:
        """The list position of ``key``, or -1 when it is no canonical id of this table."""
        if type(key) is str and key.startswith(self._p):
            s = key[self._pn:]
            if s.isdecimal() and s.isascii() and s[0] != "0":
                return int(s) - 1
        return -1

    def _to_dict(self) -> dict[str, V]:
        """Turn the table into a plain dict (same items, same order), once."""
        p = self._p
        d = {f"{p}{i + 1}": v for i, v in enumerate(self._items) if v is not _HOLE}
        self._d, self._items = d, []
        return d

    # ---------------------------------------------------------------- reads
    def __getitem__(self, key: str) -> V:
        d = self._d
        if d is not None:
            return d[key]
        i = self._pos(key)
        if 0 <= i < len(self._items):
            v = self._items[i]
            if v is not _HOLE:
                return v  # type: ignore[no-any-return]
        raise KeyError(key)

    @overload
    def get(self, key: str, /) -> V | None: ...
    @overload
    def get(self, key: str, default: V | D, /) -> V | D: ...

    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        d = self._d
        if d is not None:
            return d.get(key, default)
        i = self._pos(key)
        if 0 <= i < len(self._items):
            v = self._items[i]
            if v is not _HOLE:
                return v
        return default

    def __contains__(self, key: object) -> bool:
        d = self._d
        if d is not None:
            return key in d
        i = self._pos(key)
        return 0 <= i < len(self._items) and self._items[i] is not _HOLE

    def __len__(self) -> int:
        d = self._d
        return len(d) if d is not None else self._len

    def __iter__(self) -> Iterator[str]:
        d = self._d
        if d is not None:
            return iter(d)
        p, items = self._p, self._items
        return (f"{p}{i + 1}" for i, v in enumerate(items) if v is not _HOLE)

    def keys(self) -> KeysView[str]:
        """The ids, in insertion order."""
        d = self._d
        return d.keys() if d is not None else KeysView(self)

    def values(self) -> ValuesView[V]:
        """The items, in insertion order (no key strings made)."""
        d = self._d
        return d.values() if d is not None else _Values(self)

    def items(self) -> ItemsView[str, V]:
        """(id, item) pairs, in insertion order."""
        d = self._d
        return d.items() if d is not None else _Items(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SeqTable({dict(self.items())!r})"

    # ---------------------------------------------------------------- writes
    def __setitem__(self, key: str, value: V) -> None:
        d = self._d
        if d is not None:
            d[key] = value
            return
        i = self._pos(key)
        items = self._items
        n = len(items)
        if i >= n:  # after every item written so far: dict order kept
            if i > n:
                items.extend([_HOLE] * (i - n))
            items.append(value)
            self._len += 1
        elif i >= 0 and items[i] is not _HOLE:  # a replacement keeps its place
            items[i] = value
        else:  # not an id of this table, or a new key before a later one
            self._to_dict()[key] = value

    def __delitem__(self, key: str) -> None:
        d = self._d
        if d is not None:
            del d[key]
            return
        i = self._pos(key)
        items = self._items
        if not (0 <= i < len(items)) or items[i] is _HOLE:
            raise KeyError(key)
        items[i] = _HOLE
        self._len -= 1
        while items and items[-1] is _HOLE:  # a trial's undo removes the last ones
            items.pop()

    def pop(self, key: str, default: Any = _MISSING, /) -> Any:
        """Remove ``key`` and return its item (``default`` when absent, as ``dict.pop``)."""
        v = self.get(key, _MISSING)
        if v is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        del self[key]
        return v

    def clear(self) -> None:
        """Remove every item (the table goes back to a list)."""
        self._d, self._items, self._len = None, [], 0


class _Values(ValuesView[V]):
    """The items of a list-kept :class:`SeqTable`, read from the list directly."""

    __slots__ = ()
    _mapping: SeqTable[V]

    def __iter__(self) -> Iterator[V]:
        t = self._mapping
        if t._d is not None:
            return iter(t._d.values())
        return (v for v in t._items if v is not _HOLE)


class _Items(ItemsView[str, V]):
    """The (id, item) pairs of a list-kept :class:`SeqTable`, read from the list directly."""

    __slots__ = ()
    _mapping: SeqTable[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        t = self._mapping
        if t._d is not None:
            return iter(t._d.items())
        p = t._p
        return ((f"{p}{i + 1}", v) for i, v in enumerate(t._items) if v is not _HOLE)


__all__ = ["SeqTable"]
