"""Π's justifications kept as numbers (issue 29: bounded memory; design.md 4.2).

An imported run justifies almost every assertion by one event ``m<k>`` of G, at most one
certificate ``c<j>`` of Π and an operation of Ω, citing no assertion. As a
:class:`~icore.state.Justification` object that is about 270 bytes per distinct
justification (the object, two one-item tuples, the two id strings), the largest item of
X per JSONL line after the obligations. :class:`JustificationTable` keeps such a
justification as one 8-byte item of an ``array('Q')`` (``k``, ``j`` and the operation's
number packed), and any other justification as the object itself, beside the array;
reading one builds an equal frozen object. The strings ``m<k>`` and ``c<j>`` are then
held by nothing in X (:class:`~icore.state._seqtable.CertificateTable` keeps a one-event
``events`` tuple as its number too: :func:`~icore.state._refs.event_num`).

Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from icore.state._seqtable import RECENT, SeqTable
from icore.state._xmodel import Justification

OPS = 255
"""Distinct operation names a table numbers (1..255; 0 is None); more: kept as objects."""
EVENT_BITS = 28
"""An event number ``k`` packed is below 2^28 (more: the justification is kept as the object)."""
CERT_BITS = 27
"""A certificate number ``j`` packed is below 2^27 (more: kept as the object)."""

_HOLE = 0  # an empty position of the array
_OBJ = 1  # the object is in ``_objs`` (packed items are 2 + the packed number)
_CERT_MASK = (1 << CERT_BITS) - 1
_EVENT_SHIFT = CERT_BITS + 8
_new = object.__new__
_set_events, _set_operation, _set_certificates, _set_cites = (
    getattr(Justification, f.name).__set__ for f in fields(Justification))


class JustificationTable(SeqTable[Justification]):
    """Π: assertion id ``a<n>`` -> :class:`~icore.state.Justification`, packed when it can be.

    The justification of ``a<n>`` is item ``n - 1`` of an ``array('Q')`` (0: no item).
    One of exactly one canonical event ``m<k>`` (``k`` < 2^:data:`EVENT_BITS`), no or one
    canonical certificate ``c<j>`` (``j`` < 2^:data:`CERT_BITS`), no citation and an
    operation among the table's first :data:`OPS` names (or None) is the item
    ``2 + ((k << CERT_BITS | j) << 8 | op)`` (``j`` = 0: no certificate; ``op`` = 0: None);
    any other is the item 1 and the object itself in a dict by position. A key that is
    not ``a<n>`` (``n`` ≥ 1, no leading zero), a write before a later item or a value of
    another type makes the table a plain dict, once (as
    :class:`~icore.state._seqtable.SeqTable` does). The last
    :data:`~icore.state._seqtable.RECENT` written are also kept as written. Reads
    (``[]``, :meth:`get`, :meth:`at`, iteration) build an equal frozen
    :class:`Justification`.
    """

    __slots__ = ("_last", "_objs", "_op_num", "_ops", "_recent")
    _items: array[int]  # type: ignore[assignment]

    def __init__(self, prefix: str = "a") -> None:
        super().__init__(prefix)
        self._items = array("Q")  # type: ignore[assignment]
        self._objs: dict[int, Justification] = {}  # position -> an item kept as the object
        self._recent: list[Justification | None] = []  # the last positions' objects
        self._ops: list[str | None] = [None]  # number -> operation (0: None)
        self._op_num: dict[str | None, int] = {None: 0}
        self._last: tuple[Any, int] = (None, 0)  # (the object, its item)

    # ---------------------------------------------------------------- positions
    def _occupied(self) -> Iterator[int]:
        items = self._items
        return (i for i in range(len(items)) if items[i])

    def _load(self, i: int) -> Justification:
        """The justification at the occupied position ``i``."""
        row = self._items[i]
        if row == _OBJ:
            return self._objs[i]
        recent = self._recent
        k = i - len(self._items) + len(recent)
        if k >= 0:
            kept = recent[k]
            if kept is not None:
                return kept
        return self._unpack(row)

    def _unpack(self, row: int) -> Justification:
        row -= 2
        j = _new(Justification)  # the frozen dataclass's slots written directly
        c = (row >> 8) & _CERT_MASK
        _set_events(j, (f"m{row >> _EVENT_SHIFT}",))
        _set_operation(j, self._ops[row & 0xFF])
        _set_certificates(j, (f"c{c}",) if c else ())
        _set_cites(j, ())
        return j

    # ---------------------------------------------------------------- reads
    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        d = self._d
        if d is not None:
            return d.get(key, default)
        i = self._held(key)
        return default if i < 0 else self._load(i)

    def at(self, r: int | str) -> Justification | None:
        """The justification of the assertion ``a<r>`` (``r`` a number), or of the id ``r``."""
        if type(r) is int and self._d is None:  # _load, inlined (hot)
            items = self._items
            i = r - 1
            if not 0 <= i < len(items):
                return None
            row = items[i]
            if row <= _OBJ:
                return self._objs[i] if row else None
            recent = self._recent
            k = i - len(items) + len(recent)
            if k >= 0:
                kept = recent[k]
                if kept is not None:
                    return kept
            return self._unpack(row)
        return self.get(r if type(r) is str else f"{self._p}{r}")  # type: ignore[arg-type,no-any-return]

    def __contains__(self, key: object) -> bool:
        d = self._d
        if d is not None:
            return key in d
        return self._held(key) >= 0

    def _held(self, key: object) -> int:
        """The position of ``key``'s item, or -1 when it has none."""
        i = self._pos(key)
        return i if 0 <= i < len(self._items) and self._items[i] else -1

    # ---------------------------------------------------------------- writes
    def _item(self, value: Justification) -> int:
        """The array item of ``value`` (the packed number + 2, or :data:`_OBJ`)."""
        last, row = self._last
        if value is not last:
            row = self._pack(value)
            self._last = (value, row)
        return row

    def _pack(self, value: Justification) -> int:
        events, certs = value.events, value.certificates
        if (type(events) is not tuple or type(certs) is not tuple or value.cites != ()
                or len(events) != 1 or len(certs) > 1):  # reads give tuples back
            return _OBJ
        e = events[0]  # event_num and cert_num, inlined (hot)
        if type(e) is not str or e[:1] != "m":
            return _OBJ
        s = e[1:]
        if not (s.isdigit() and s.isascii() and (s[:1] != "0" or s == "0") and len(s) < 10):
            return _OBJ
        k = int(s)
        j = 0
        if certs:
            c = certs[0]
            if type(c) is not str or c[:1] != "c":
                return _OBJ
            s = c[1:]
            if not (s.isdigit() and s.isascii() and s[:1] != "0" and len(s) < 10):
                return _OBJ
            j = int(s)
        if k >> EVENT_BITS or j >> CERT_BITS:
            return _OBJ
        operation = value.operation
        if operation is not None and type(operation) is not str:
            return _OBJ
        op = self._op_num.get(operation)
        if op is None:
            if len(self._ops) > OPS:
                return _OBJ
            op = self._op_num[operation] = len(self._ops)
            self._ops.append(operation)
        return 2 + ((k << CERT_BITS | j) << 8 | op)

    def __setitem__(self, key: str, value: Justification) -> None:
        d = self._d
        if d is not None:
            d[key] = value
            return
        i = self._pos(key)
        items = self._items
        n = len(items)
        if type(value) is Justification and i >= 0:
            row = self._item(value)
            if i >= n:  # after every item written so far: dict order kept
                if i > n:
                    items.frombytes(bytes(8 * (i - n)))
                    self._recent.clear()  # the window covers the last positions only
                items.append(row)
                if row == _OBJ:
                    self._objs[i] = value
                recent = self._recent
                recent.append(value)
                if len(recent) > RECENT:
                    del recent[0]
                self._len += 1
                return
            if items[i]:  # a replacement keeps its place
                items[i] = row
                if row == _OBJ:
                    self._objs[i] = value
                else:
                    self._objs.pop(i, None)
                k = i - n + len(self._recent)
                if k >= 0:
                    self._recent[k] = value
                return
        # not an id of this table, a new key before a later one, or another type
        self._to_dict()[key] = value

    def __delitem__(self, key: str) -> None:
        d = self._d
        if d is not None:
            del d[key]
            return
        i = self._held(key)
        if i < 0:
            raise KeyError(key)
        items = self._items
        items[i] = _HOLE
        self._objs.pop(i, None)
        recent = self._recent
        k = i - len(items) + len(recent)
        if k >= 0:
            recent[k] = None
        self._len -= 1
        while items and not items[-1]:  # a trial's undo removes the last ones
            items.pop()
            if recent:
                recent.pop()

    def _to_dict(self) -> dict[str, Justification]:
        """Turn the table into a plain dict (same items, same order), once."""
        d = dict(self.items())
        self._reset()
        self._d = d
        return d

    def _reset(self) -> None:
        self._items = array("Q")
        self._objs.clear()
        self._recent.clear()
        self._last = (None, 0)

    def clear(self) -> None:
        """Remove every item (the table goes back to an array)."""
        self._reset()
        self._d, self._len = None, 0


__all__ = ["CERT_BITS", "EVENT_BITS", "JustificationTable"]
