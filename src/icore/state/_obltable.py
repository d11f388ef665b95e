"""Q's obligations kept as columns, no object per obligation (issue 29: bounded memory).

A long import keeps one :class:`~icore.state._xmodel.Obligation` per step that created
work: an 86-byte object, its id string and a dict slot, and an :class:`ActiveIds`
object for its active map, about 190 bytes for fields that mostly repeat (kind, weight,
parent, status, assignee). :class:`ObligationTable` keeps, per obligation, a row of
columns in insertion order: the number ``n`` of a canonical id ``o<n>`` (8 bytes in an
``array``; any other id is kept as its string beside it), one shared tuple of the fields
that repeat (and the active map's key layout), the result value and the active map's
packed ``int``. A read builds an equal :class:`Obligation`. The last :data:`RECENT`
obligations written are kept as the objects and reach the columns when they leave that
window: an import rewrites an obligation once per assertion on it, in a row, and reads
back the ones it just installed.

It is a ``MutableMapping`` that behaves exactly as the dict it replaces (same keys, same
insertion order, same errors); an item that is not exactly an :class:`Obligation` is
kept as the object. Obligations are values here: X never changes one in place
(:mod:`icore.state._transition` installs new objects), so an equal rebuilt object is
what the dict held. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import ItemsView, Iterator, KeysView, MutableMapping, ValuesView
from typing import Any

from icore.state._refs import ActiveIds
from icore.state._share import MEMO_LIMIT, DictPacker, unpack
from icore.state._xmodel import Obligation, Status

RECENT = 16
"""Obligations kept as the objects written (the last ones; an import reads them back)."""
SLACK = 1 << 16
"""How far past the largest number so far an id ``o<n>`` may jump and keep a number."""
_HOLE = -1  # a row emptied by a delete
_NAMED = -2  # a row whose id is no ``o<n>``: the string is in ``_names``
_MISSING: Any = object()
_new = object.__new__


def _num(key: object) -> int:
    """``n`` for the canonical id ``o<n>`` (``n`` ≥ 0, no leading zero, ASCII), else -1."""
    if type(key) is str and key[:1] == "o":
        s = key[1:]
        if s.isdigit() and s.isascii() and (s[:1] != "0" or s == "0") and len(s) < 16:
            return int(s)
    return -1


def _shareable(o: Obligation) -> bool:
    """The repeated fields are of the exact types whose equality is identity of value.

    (A memo shares equal tuples: ``1 == True`` and ``0.0 == -0.0`` must not merge.)
    """
    w, p, a = o.weight, o.parent, o.assignee
    return (type(o.kind) is str and type(w) is float and w == w and w != 0.0
            and (p is None or type(p) is str) and type(o.deps) is tuple
            and (not o.deps or all(type(d) is str for d in o.deps))  # most have none
            and type(o.required_root) is bool
            and type(o.status) is Status and (a is None or type(a) is str)
            and type(o.repair_pending) is bool)


class ObligationTable(MutableMapping[str, Obligation]):
    """A ``dict[str, Obligation]`` kept as columns by row (see the module doc).

    Rows are in insertion order; a deleted row is a hole (a trial's undo deletes the last
    rows, which are dropped). ``_index[n]`` is the row of ``o<n>`` plus one (0: none).
    """

    __slots__ = (
        "_index",
        "_len",
        "_memo",
        "_metas",
        "_named",
        "_names",
        "_nums",
        "_pack",
        "_packs",
        "_recent",
        "_results",
    )

    def __init__(self, packer: DictPacker | None = None) -> None:
        self._pack = packer or DictPacker()  # results: small dicts as tuples
        self._nums = array("q")  # per row: n of o<n>, _NAMED, or _HOLE
        self._metas: list[Any] = []  # per row: the shared tuple, or the object itself
        self._results: list[Any] = []  # per row: the result value
        self._packs: list[Any] = []  # per row: the active map's int (or the map)
        self._index = array("I")  # n -> row + 1 (0: no such obligation)
        self._named: dict[str, int] = {}  # another id -> its row
        self._names: dict[int, str] = {}  # row -> that id
        self._recent: dict[str, Obligation] = {}
        self._memo: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._len = 0

    # ---------------------------------------------------------------- rows
    def _row(self, key: object) -> int:
        """The row of ``key``, or -1."""
        if type(key) is not str:
            if not isinstance(key, str):
                return -1
            key = str.__str__(key)  # a str subclass finds what its text finds, as in a dict
        n = _num(key)
        if n >= 0:
            index = self._index
            if n < len(index) and index[n]:
                return index[n] - 1
        named = self._named  # any other id, or an o<n> that jumped too far when written
        if named:
            r = named.get(key)  # type: ignore[call-overload]
            if r is not None:
                return r  # type: ignore[no-any-return]
        return -1

    def _key(self, r: int) -> str:
        n = self._nums[r]
        return f"o{n}" if n >= 0 else self._names[r]

    def _rows(self) -> Iterator[int]:
        nums = self._nums
        return (r for r in range(len(nums)) if nums[r] != _HOLE)

    def _load(self, r: int) -> Obligation:
        meta = self._metas[r]
        if meta is None:  # written lately: kept as the object
            return self._recent[self._key(r)]
        if type(meta) is list:  # an item that is not exactly an Obligation, boxed
            return meta[0]  # type: ignore[no-any-return]
        kind, weight, parent, deps, root, status, assignee, pending, at = meta
        o = _new(Obligation)  # the slots written directly: no __init__ call
        n = self._nums[r]
        o.id = f"o{n}" if n >= 0 else self._names[r]
        o.kind, o.weight, o.parent, o.deps, o.required_root = kind, weight, parent, deps, root
        o.status, o.assignee, o.result, o.repair_pending = (status, assignee,
                                                            unpack(self._results[r]), pending)
        pack = self._packs[r]
        if at is None:
            o.active = pack
        else:
            a = _new(ActiveIds)
            a._at, a._values = at, pack
            o.active = a
        return o

    def _meta(self, key: str, o: Obligation) -> tuple[Any, Any]:
        """(the meta column's value, the packs column's value) of ``o`` written at ``key``."""
        if type(o) is not Obligation or o.id != key:
            return [o], None  # kept as the object (boxed: a tuple is a row's fields)
        m = o.active
        at, pack = (m._at, m._values) if type(m) is ActiveIds else (None, m)
        meta = (o.kind, o.weight, o.parent, o.deps, o.required_root, o.status, o.assignee,
                o.repair_pending, at)
        if not _shareable(o):
            return meta, pack
        mk = (*meta[:8], None if at is None else id(at))  # the memo keeps `at` alive
        memo = self._memo
        shared = memo.get(mk)
        if shared is None:
            if len(memo) >= MEMO_LIMIT:  # a cache: clearing it only stops sharing
                memo.clear()
            shared = memo[mk] = meta
        return shared, pack

    def _remember(self, key: str, value: Obligation) -> None:
        """Keep ``value`` as written; the oldest kept one goes into its row's columns.

        An import writes an obligation once per assertion on it, in a row: only the
        last version reaches the columns. A row whose meta is None is in ``_recent``.
        """
        recent = self._recent
        recent.pop(key, None)
        recent[key] = value
        if len(recent) > RECENT:
            old = next(iter(recent))
            o = recent.pop(old)
            r = self._row(old)
            self._metas[r], self._packs[r] = self._meta(old, o)
            self._results[r] = self._pack.pack(o.result) if type(o) is Obligation else None

    # ---------------------------------------------------------------- reads
    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        o = self._recent.get(key) if type(key) is str else None
        if o is not None:
            return o
        r = self._row(key)
        return default if r < 0 else self._load(r)

    def __getitem__(self, key: str) -> Obligation:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        if type(key) is str and key in self._recent:  # written lately (hot): no id parsed
            return True
        return self._row(key) >= 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        return (self._key(r) for r in self._rows())

    def keys(self) -> KeysView[str]:
        """The ids, in insertion order."""
        return KeysView(self)

    def values(self) -> ValuesView[Obligation]:
        """The obligations, in insertion order (no id lookups)."""
        return _Values(self)

    def items(self) -> ItemsView[str, Obligation]:
        """(id, obligation) pairs, in insertion order."""
        return _Items(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"

    # ---------------------------------------------------------------- writes
    def __setitem__(self, key: str, value: Obligation) -> None:
        if type(key) is not str:
            if not isinstance(key, str):
                raise TypeError(f"an obligation id is a str, not {type(key).__name__}")
            key = str.__str__(key)
        recent = self._recent
        if key in recent:  # written lately: its row waits in _recent already (hot)
            del recent[key]
            recent[key] = value
            return
        n = _num(key)  # _row, inlined: the id is parsed once
        index = self._index
        if 0 <= n < len(index) and index[n]:
            r = index[n] - 1
        else:
            r = self._named.get(key, -1) if self._named else -1
        if r >= 0:  # a replacement keeps its place; the columns wait (see _remember)
            self._metas[r] = self._results[r] = self._packs[r] = None
        else:
            r = len(self._nums)
            if 0 <= n < len(index) + SLACK:
                if n >= len(index):
                    index.extend(bytes(4 * (n + 1 - len(index))))  # zeros
                index[n] = r + 1
            else:
                n = _NAMED
                self._named[key] = r
                self._names[r] = key
            self._nums.append(n)
            self._metas.append(None)
            self._results.append(None)
            self._packs.append(None)
            self._len += 1
        self._remember(key, value)

    def __delitem__(self, key: str) -> None:
        r = self._row(key)
        if r < 0:
            raise KeyError(key)
        n = self._nums[r]
        if n >= 0:
            self._index[n] = 0
        else:
            del self._named[key], self._names[r]
        self._nums[r] = _HOLE
        self._metas[r] = self._results[r] = self._packs[r] = None
        self._recent.pop(key, None)
        self._len -= 1
        nums = self._nums
        while nums and nums[-1] == _HOLE:  # a trial's undo removes the last rows
            nums.pop()
            self._metas.pop()
            self._results.pop()
            self._packs.pop()

    def clear(self) -> None:
        """Remove every obligation."""
        self.__init__(self._pack)  # type: ignore[misc]


class _Values(ValuesView[Obligation]):
    __slots__ = ()
    _mapping: ObligationTable

    def __iter__(self) -> Iterator[Obligation]:
        t = self._mapping
        return (t._load(r) for r in t._rows())


class _Items(ItemsView[str, Obligation]):
    __slots__ = ()
    _mapping: ObligationTable

    def __iter__(self) -> Iterator[tuple[str, Obligation]]:
        t = self._mapping
        return ((t._key(r), t._load(r)) for r in t._rows())


__all__ = ["RECENT", "ObligationTable"]
