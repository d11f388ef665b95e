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

from collections.abc import ItemsView, Iterator, KeysView, MutableMapping, ValuesView
from dataclasses import fields
from typing import Any, Generic, TypeVar, overload

from icore.state._refs import event_num
from icore.state._share import MEMO_LIMIT, DictPacker, unpack
from icore.state._xmodel import Assertion, AssertionKind, Certificate

V = TypeVar("V")
D = TypeVar("D")

_HOLE: Any = object()
"""An empty position of the list (the id was never written, or was deleted)."""
_MISSING: Any = object()


class ListMap(MutableMapping[str, V], Generic[V]):
    """A ``dict[str, V]`` kept in lists by position (or as the plain dict ``_d``).

    What :class:`SeqTable` and :class:`~icore.state._eventtable.EventTable` share; ``_d``
    is set once the lists cannot hold the dict's order.

    A subclass defines ``get``, ``_occupied`` (the positions in use, in insertion
    order), ``_key`` (the id at a position) and ``_load`` (the item at a position).
    """

    __slots__ = ()
    _d: dict[str, V] | None

    def _occupied(self) -> Iterator[int]:
        raise NotImplementedError

    def _key(self, i: int) -> str:
        raise NotImplementedError

    def _load(self, i: int) -> V:
        raise NotImplementedError

    def __getitem__(self, key: str) -> V:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        d = self._d
        if d is not None:
            return iter(d)
        return (self._key(i) for i in self._occupied())

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"

    def pop(self, key: str, default: Any = _MISSING, /) -> Any:
        """Remove ``key`` and return its item (``default`` when absent, as ``dict.pop``)."""
        v = self.get(key, _MISSING)
        if v is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        del self[key]
        return v


class SeqTable(ListMap[V], Generic[V]):
    """A ``dict[str, V]`` of ids ``<prefix><n>`` (``n`` ≥ 1) stored as a list by ``n``.

    A subclass may keep each item as several columns (:class:`AssertionTable`): it
    overrides :meth:`_load` (an item from its columns), :meth:`_store` (write the
    columns, or refuse) and :meth:`_grow`/:meth:`_shrink`; ``_items`` stays the first
    column, which marks the empty positions.

    Args:
        prefix: the ids' prefix, one character (``"a"`` for assertions, ``"c"`` for
            certificates).

    Raises:
        ValueError: a prefix of another length.
    """

    __slots__ = ("_d", "_items", "_len", "_p")

    def __init__(self, prefix: str) -> None:
        if len(prefix) != 1:
            raise ValueError(f"a SeqTable's prefix is one character, not {prefix!r}")
        self._p = prefix
        self._items: list[Any] = []
        self._len = 0
        self._d: dict[str, V] | None = None  # the plain dict once the list cannot hold it

    # ---------------------------------------------------------------- columns (hooks)
    def _load(self, i: int) -> V:
        """The item at the (occupied) position ``i``."""
        return self._items[i]  # type: ignore[no-any-return]

    def _store(self, i: int, key: str, value: V) -> bool:
        """Write ``value`` at the existing position ``i``; False: the columns cannot hold it."""
        self._items[i] = value
        return True

    def _append(self, key: str, value: V) -> bool:
        """Write ``value`` at a new last position; False: the columns cannot hold it."""
        self._items.append(value)
        return True

    def _grow(self, n: int) -> None:
        """Add ``n`` empty positions at the end."""
        self._items.extend([_HOLE] * n)

    def _shrink(self) -> None:
        """Drop the last position (empty)."""
        self._items.pop()

    def _clear_at(self, i: int) -> None:
        """Empty the position ``i``."""
        self._items[i] = _HOLE

    # ---------------------------------------------------------------- ids
    def _pos(self, key: object) -> int:
        """The list position of ``key``, or -1 when it is no canonical id of this table."""
        if type(key) is str and key[:1] == self._p:
            s = key[1:]
            if s.isdigit() and s.isascii() and s[:1] != "0":
                return int(s) - 1
        return -1

    def _to_dict(self) -> dict[str, V]:
        """Turn the table into a plain dict (same items, same order), once."""
        d = dict(self.items())
        while self._items:
            self._shrink()
        self._d = d
        return d

    def _key(self, i: int) -> str:
        return f"{self._p}{i + 1}"

    def _occupied(self) -> Iterator[int]:
        items = self._items
        return (i for i in range(len(items)) if items[i] is not _HOLE)

    # ---------------------------------------------------------------- reads
    @overload
    def get(self, key: str, /) -> V | None: ...
    @overload
    def get(self, key: str, default: V | D, /) -> V | D: ...

    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        d = self._d
        if d is not None:
            return d.get(key, default)
        if type(key) is str and key[:1] == self._p:  # _pos, inlined (hot)
            s = key[1:]
            if s.isdigit() and s.isascii() and s[:1] != "0":
                i = int(s) - 1
                if i < len(self._items) and self._items[i] is not _HOLE:
                    return self._load(i)
        return default

    def at(self, r: int | str) -> V | None:
        """The item of id ``<prefix><r>`` (``r`` ≥ 1 a number), or of the id ``r``; None: absent.

        A number reads the position directly: no id string is parsed (the refs of
        :mod:`icore.state._refs`).
        """
        if type(r) is int and self._d is None:
            i = r - 1
            if 0 <= i < len(self._items) and self._items[i] is not _HOLE:
                return self._load(i)
            return None
        return self.get(r if type(r) is str else f"{self._p}{r}")  # type: ignore[arg-type]

    def __contains__(self, key: object) -> bool:
        d = self._d
        if d is not None:
            return key in d
        i = self._pos(key)
        return 0 <= i < len(self._items) and self._items[i] is not _HOLE

    def __len__(self) -> int:
        d = self._d
        return len(d) if d is not None else self._len

    # ---------------------------------------------------------------- writes
    def __setitem__(self, key: str, value: V) -> None:
        d = self._d
        if d is not None:
            d[key] = value
            return
        i = self._pos(key)
        n = len(self._items)
        if i >= n:  # after every item written so far: dict order kept
            if i > n:
                self._grow(i - n)
            if self._append(key, value):
                self._len += 1
                return
            while self._items and self._items[-1] is _HOLE:
                self._shrink()
        elif i >= 0 and self._items[i] is not _HOLE:  # a replacement keeps its place
            if self._store(i, key, value):
                return
        # not an id of this table, a new key before a later one, or an item the
        # columns cannot hold
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
        self._clear_at(i)
        self._len -= 1
        while items and items[-1] is _HOLE:  # a trial's undo removes the last ones
            self._shrink()

    def clear(self) -> None:
        """Remove every item (the table goes back to a list)."""
        while self._items:
            self._shrink()
        self._d, self._len = None, 0


RECENT = 8
"""Items kept as the objects written (the last ones; an import reads them back)."""
_new = object.__new__
(_set_id, _set_obligation, _set_kind, _set_key, _set_value, _set_proposer, _set_proposal,
 _set_cited_sound) = (getattr(Assertion, f.name).__set__ for f in fields(Assertion))
(_set_cid, _set_validator, _set_version, _set_events, _set_records, _set_payload, _set_verdict,
 _set_obligations, _set_lineage) = (getattr(Certificate, f.name).__set__
                                    for f in fields(Certificate))


class ColumnTable(SeqTable[V], Generic[V]):
    """A :class:`SeqTable` whose items are kept as columns, no object per item.

    A subclass names its columns (``_items`` stays the first, marking the empty
    positions; ``_cols`` the others), splits an item into one value per column
    (:meth:`_row`, None: the columns cannot hold it) and builds an equal item back
    (:meth:`_load`, after :meth:`_kept`). The last :data:`RECENT` items written are also
    kept as written: an import reads back the items it has just written, so they are not
    rebuilt. :meth:`_shared` makes equal parts of items one object (a bounded memo).
    """

    __slots__ = ("_cols", "_memo", "_recent")

    def __init__(self, prefix: str, columns: int) -> None:
        super().__init__(prefix)
        self._cols: tuple[list[Any], ...] = tuple([] for _ in range(columns))
        self._memo: dict[Any, Any] = {}
        # the objects written at the last len(_recent) positions (None: a hole)
        self._recent: list[V | None] = []

    def _row(self, value: V, key: str) -> tuple[Any, ...] | None:
        """``value`` as (first column, *the other columns); None: not held."""
        raise NotImplementedError

    def _kept(self, i: int) -> V | None:
        """The item at ``i`` as written, when it is one of the last written."""
        recent = self._recent
        k = i - len(self._items) + len(recent)
        return recent[k] if k >= 0 else None

    def _shared(self, part: tuple[Any, ...]) -> tuple[Any, ...]:
        """The first object equal to ``part`` (TypeError: ``part`` is unhashable)."""
        memo = self._memo
        shared = memo.get(part)
        if shared is None:
            if len(memo) >= MEMO_LIMIT:  # a cache: clearing it only stops sharing
                memo.clear()
            shared = memo[part] = part
        return shared  # type: ignore[no-any-return]

    def _append(self, key: str, value: V) -> bool:
        row = self._row(value, key)
        if row is None:
            return False
        self._items.append(row[0])
        for col, v in zip(self._cols, row[1:], strict=True):
            col.append(v)
        recent = self._recent
        recent.append(value)
        if len(recent) > RECENT:
            del recent[0]
        return True

    def _store(self, i: int, key: str, value: V) -> bool:
        row = self._row(value, key)
        if row is None:
            return False
        self._items[i] = row[0]
        for col, v in zip(self._cols, row[1:], strict=True):
            col[i] = v
        k = i - len(self._items) + len(self._recent)
        if k >= 0:
            self._recent[k] = value
        return True

    def _grow(self, n: int) -> None:
        super()._grow(n)
        self._recent.clear()  # the window covers the last positions only
        for col in self._cols:
            col.extend([None] * n)

    def _shrink(self) -> None:
        super()._shrink()
        if self._recent:
            self._recent.pop()
        for col in self._cols:
            col.pop()

    def _clear_at(self, i: int) -> None:
        super()._clear_at(i)
        for col in self._cols:
            col[i] = None
        k = i - len(self._items) + len(self._recent)
        if k >= 0:
            self._recent[k] = None


class AssertionTable(ColumnTable[Assertion]):
    """Q's assertions ``a1, a2, ...`` as columns: no object per assertion is kept.

    An assertion is kept as its obligation, its value (a small dict as a tuple:
    :class:`~icore.state._share.DictPacker`) and one shared tuple of (kind,
    key, proposer, proposal, cited_sound), three list slots (about 27 bytes) instead of a
    96-byte object (an import's assertions have no proposal: they share the tuple; a
    committed proposal's assertions share theirs); reading one builds an equal :class:`Assertion`
    (a frozen value: equal objects are interchangeable). The last :data:`RECENT` written
    are also kept as written: an import reads back the assertions it just wrote (their
    soundness), so they are not rebuilt. An item that is not exactly an
    :class:`Assertion` whose id is its key makes the table a plain dict.
    """

    __slots__ = ("_metas", "_pack", "_vals")

    def __init__(self, prefix: str = "a", packer: DictPacker | None = None) -> None:
        super().__init__(prefix, 2)
        self._vals, self._metas = self._cols
        self._pack = (packer or DictPacker()).pack  # small dict values as tuples

    def _load(self, i: int) -> Assertion:
        kept = self._kept(i)
        if kept is not None:
            return kept
        kind, key, proposer, proposal, cited_sound = self._metas[i]
        a = _new(Assertion)  # the frozen dataclass's slots written directly: 2x faster
        _set_id(a, f"{self._p}{i + 1}")
        _set_obligation(a, self._items[i])
        _set_kind(a, kind)
        _set_key(a, key)
        _set_value(a, unpack(self._vals[i]))
        _set_proposer(a, proposer)
        _set_proposal(a, proposal)
        _set_cited_sound(a, cited_sound)
        return a

    def _row(self, value: Assertion, key: str) -> tuple[Any, ...] | None:
        """(obligation, value, shared (kind, key, proposer, proposal, cited_sound))."""
        if type(value) is not Assertion:
            return None
        kind = value.kind
        if type(kind) is not AssertionKind or value.id != key:
            return None
        proposal = value.proposal
        memo_key = (kind._value_, value.key, value.proposer, proposal,  # str hash
                    value.cited_sound)
        memo = self._memo
        shared = memo.get(memo_key)
        if shared is None:
            if len(memo) >= MEMO_LIMIT:  # a cache: clearing it only stops sharing
                memo.clear()
            shared = memo[memo_key] = (kind, value.key, value.proposer, proposal,
                                       value.cited_sound)
        v = value.value  # only a dict is packed: no call for the others
        return value.obligation, self._pack(v) if type(v) is dict else v, shared


class CertificateTable(ColumnTable[Certificate]):
    """Π's certificates ``c1, c2, ...`` as columns: no object per certificate is kept.

    A certificate is kept as its events (one event ``m<k>``: the number ``k``), its payload
    and one shared tuple of (validator, version, verdict, records, obligations, lineage):
    three list slots (about 24 bytes)
    instead of a 104-byte object. Reading one builds an equal :class:`Certificate` (a
    frozen value). The last :data:`RECENT` written are also kept as written (an import
    reads back the certificates it has just recorded). An item that is not exactly a
    :class:`Certificate` whose id is its key, or whose shared part cannot be hashed,
    makes the table a plain dict.
    """

    __slots__ = ("_metas", "_pays")

    def __init__(self, prefix: str = "c") -> None:
        super().__init__(prefix, 2)
        self._pays, self._metas = self._cols

    def _load(self, i: int) -> Certificate:
        kept = self._kept(i)
        if kept is not None:
            return kept
        validator, version, verdict, records, obligations, lineage = self._metas[i]
        c = _new(Certificate)  # the frozen dataclass's slots written directly
        _set_cid(c, f"{self._p}{i + 1}")
        _set_validator(c, validator)
        _set_version(c, version)
        events = self._items[i]
        _set_events(c, (f"m{events}",) if type(events) is int else events)
        _set_records(c, records)
        _set_payload(c, self._pays[i])
        _set_verdict(c, verdict)
        _set_obligations(c, obligations)
        _set_lineage(c, lineage)
        return c

    def _row(self, value: Certificate, key: str) -> tuple[Any, ...] | None:
        """(events, payload, the shared rest: validator to lineage)."""
        if type(value) is not Certificate or value.id != key:
            return None
        try:
            meta = self._shared((value.validator, value.version, value.verdict,
                                 value.records, value.obligations, value.lineage))
        except TypeError:  # an unhashable part (not from a state): kept in a dict
            return None
        events: Any = value.events  # one event m<k>: kept as k (no tuple, no id string)
        if len(events) == 1 and type(events) is tuple:
            k = event_num(events[0])
            if k >= 0:
                events = k
        return events, value.payload, meta


class _Values(ValuesView[V]):
    """The items of a list-kept :class:`ListMap`, read from the lists directly."""

    __slots__ = ()
    _mapping: ListMap[V]

    def __iter__(self) -> Iterator[V]:
        t = self._mapping
        if t._d is not None:
            return iter(t._d.values())
        return (t._load(i) for i in t._occupied())


class _Items(ItemsView[str, V]):
    """The (id, item) pairs of a list-kept :class:`ListMap`, read from the lists directly."""

    __slots__ = ()
    _mapping: ListMap[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        t = self._mapping
        if t._d is not None:
            return iter(t._d.items())
        return ((t._key(i), t._load(i)) for i in t._occupied())


__all__ = ["AssertionTable", "CertificateTable", "ColumnTable", "ListMap", "SeqTable"]
