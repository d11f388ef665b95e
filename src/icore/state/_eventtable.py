"""G's events as columns (issue 29: bounded memory; design.md 4.2).

An imported run records one event per step, named ``m<step>`` in step order (``task``
first). A dict of :class:`~icore.state._xmodel.Event` objects spends, per event, a 88-byte
object, a dict slot of about 43 bytes and a 48-byte compact fields object;
:class:`EventTable` keeps each event as list slots instead (its type, kind and agent as
one shared tuple, its fields' key layout and values, its causes (a marker when they are
the one event before it, as an import records them), its time) and the ids
``m<n>`` as one array of numbers (8 bytes each), about 48 bytes per event in all. Reading
an event builds an equal frozen :class:`Event`; the last :data:`RECENT` written are kept
as written (an import reads back the events it has just recorded).

It is a ``MutableMapping`` that behaves exactly as the dict it replaces: same keys, same
iteration order (insertion order), same errors. Any write the columns cannot hold with the
dict's order (an ``m<n>`` not after every ``m`` id written so far, a deletion other than
of the last event, an item that is not an :class:`Event` whose id is its key) turns the
table into a plain dict first, once, so nothing is lost and only the memory saving is.
Pure: no I/O.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any, overload

from icore.state._seqtable import ListMap
from icore.state._share import MEMO_LIMIT, Compact
from icore.state._xmodel import Event

RECENT = 8
"""Events kept as the objects written (the last ones; an import reads them back)."""
_new = object.__new__
_PREV: Any = object()
"""In ``_causes``: the event's causes are the one event at the position before it."""
(_set_id, _set_type, _set_kind, _set_agent, _set_fields, _set_causes,
 _set_t_ms) = (getattr(Event, f.name).__set__ for f in fields(Event))


def _step_number(key: object) -> int:
    """``n`` for a canonical id ``m<n>`` (``n`` ≥ 0, no leading zero), else -1."""
    if type(key) is str and key[:1] == "m":
        s = key[1:]
        if s.isdigit() and s.isascii() and (s[:1] != "0" or s == "0"):
            return int(s)
    return -1


class EventTable(ListMap[Event]):
    """A ``dict[str, Event]`` kept as columns (see the module docstring).

    Positions are the insertion order. ``_num[p]`` is ``n`` for the id ``m<n>`` at
    position ``p``; a position holding another id is named in ``_names`` (position ->
    id, with ``_other`` its inverse) and repeats the previous ``_num`` (or -1), so that
    ``_num`` never decreases and an ``m<n>`` is found by bisection.
    """

    __slots__ = ("_at", "_causes", "_d", "_hot", "_memo", "_metas", "_miss", "_miss_n",
                 "_names", "_num", "_other", "_recent", "_t", "_vals")

    def __init__(self) -> None:
        self._d: dict[str, Event] | None = None  # a plain dict once columns cannot hold it
        self._num = array("q")
        self._names: dict[int, str] = {}
        self._other: dict[str, int] = {}
        self._metas: list[tuple[str, str, str]] = []
        self._at: list[Mapping[str, int] | None] = []  # a layout; None: _vals is the mapping
        self._vals: list[Any] = []
        self._causes: list[tuple[str, ...]] = []
        self._t: list[float] = []
        self._memo: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        self._recent: list[Event] = []  # the objects written at the last positions
        self._hot: dict[str, int] = {}  # the ids of the last RECENT positions -> position
        # the last id found absent and its number: a new event's id is looked up three
        # times on its way in (absence tests, then its numbering); only a write adds one
        self._miss: str | None = None
        self._miss_n = -1

    # ---------------------------------------------------------------- positions
    def _pos(self, key: object) -> int:
        """The position of ``key``, or -1 when absent."""
        if type(key) is not str:
            return -1
        p = self._hot.get(key, -1)
        if p >= 0:  # an import looks up the events it has just recorded
            return p
        if key == self._miss:  # absent when last looked up, and nothing added since
            return -1
        n = _step_number(key)
        if n < 0:
            p = self._other.get(key, -1)
        else:
            num = self._num
            p = bisect_left(num, n)
            if not (p < len(num) and num[p] == n and p not in self._names):
                p = -1
        if p < 0:
            self._miss, self._miss_n = key, n
        return p

    def _key(self, p: int) -> str:
        name = self._names.get(p)
        return f"m{self._num[p]}" if name is None else name

    def _load(self, p: int) -> Event:
        recent = self._recent
        k = p - len(self._num) + len(recent)
        if k >= 0:
            return recent[k]
        type_, kind, agent = self._metas[p]
        at = self._at[p]
        e = _new(Event)  # the frozen dataclass's slots written directly
        _set_id(e, self._key(p))
        _set_type(e, type_)
        _set_kind(e, kind)
        _set_agent(e, agent)
        _set_fields(e, self._vals[p] if at is None else Compact(at, self._vals[p]))
        causes = self._causes[p]
        _set_causes(e, (self._key(p - 1),) if causes is _PREV else causes)
        _set_t_ms(e, self._t[p])
        return e

    def _meta(self, value: Event) -> tuple[str, str, str]:
        k = (value.type, value.kind, value.agent)
        memo = self._memo
        shared = memo.get(k)
        if shared is None:
            if len(memo) >= MEMO_LIMIT:  # a cache: clearing it only stops sharing
                memo.clear()
            shared = memo[k] = k
        return shared

    def _write(self, p: int, value: Event, *, new: bool = False) -> None:
        """Write the columns of position ``p`` (``new``: the last one, just numbered)."""
        if new:
            hot = self._hot
            hot[value.id] = p
            if len(hot) > RECENT:
                del hot[next(iter(hot))]
        f = value.fields
        at, vals = (f._at, f._values) if type(f) is Compact else (None, f)
        causes = value.causes
        if (p and len(causes) == 1 and type(causes) is tuple
                and causes[0] == self._key(p - 1)):
            causes = _PREV  # the usual cause, the event before: no tuple kept
        row = (self._meta(value), at, vals, causes, value.t_ms)
        if new:
            cols: tuple[list[Any], ...] = (self._metas, self._at, self._vals, self._causes,
                                           self._t)
            for col, v in zip(cols, row, strict=True):
                col.append(v)
            recent = self._recent
            recent.append(value)
            if len(recent) > RECENT:
                del recent[0]
            return
        self._metas[p], self._at[p], self._vals[p], self._causes[p], self._t[p] = row
        k = p - len(self._num) + len(self._recent)
        if k >= 0:
            self._recent[k] = value

    def _to_dict(self) -> dict[str, Event]:
        """Turn the table into a plain dict (same items, same order), once."""
        d = dict(self.items())
        self.clear()
        self._d = d
        return d

    # ---------------------------------------------------------------- reads
    @overload
    def get(self, key: str, /) -> Event | None: ...
    @overload
    def get(self, key: str, default: Event | Any, /) -> Event | Any: ...

    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        d = self._d
        if d is not None:
            return d.get(key, default)
        p = self._pos(key)
        return default if p < 0 else self._load(p)

    def __contains__(self, key: object) -> bool:
        d = self._d
        if d is not None:
            return key in d
        return self._pos(key) >= 0

    def __len__(self) -> int:
        d = self._d
        return len(d) if d is not None else len(self._num)

    def _occupied(self) -> Iterator[int]:
        return iter(range(len(self._num)))

    # ---------------------------------------------------------------- writes
    def __setitem__(self, key: str, value: Event) -> None:
        d = self._d
        if d is None and type(value) is Event and value.id == key:
            p = self._pos(key)
            if p >= 0:  # a replacement keeps its place
                self._write(p, value)
                return
            n = self._miss_n if type(key) is str and key == self._miss else _step_number(key)
            self._miss = None  # the key is added below
            num = self._num
            last = num[-1] if num else -1
            if n > last:  # after every m id so far: the order holds
                num.append(n)
                self._write(len(num) - 1, value, new=True)
                return
            if n < 0:
                p = len(num)
                num.append(last)
                self._names[p] = key
                self._other[key] = p
                self._write(p, value, new=True)
                return
        self._miss = None
        (self._to_dict() if d is None else d)[key] = value

    def __delitem__(self, key: str) -> None:
        d = self._d
        if d is not None:
            del d[key]
            return
        p = self._pos(key)
        if p < 0:
            raise KeyError(key)
        if p != len(self._num) - 1:  # only the last goes without breaking the order
            del self._to_dict()[key]
            return
        self._num.pop()
        self._hot.pop(key, None)
        name = self._names.pop(p, None)
        if name is not None:
            del self._other[name]
        for col in (self._metas, self._at, self._vals, self._causes, self._t):
            col.pop()
        if self._recent:
            self._recent.pop()

    def clear(self) -> None:
        """Remove every event (the table goes back to columns)."""
        self._d = None
        self._miss = None
        del self._num[:]
        self._names.clear()
        self._other.clear()
        self._hot.clear()
        for col in (self._metas, self._at, self._vals, self._causes, self._t, self._recent):
            col.clear()


__all__ = ["EventTable"]
