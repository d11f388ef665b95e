"""Π's justifications kept as numbers (issue 29: bounded memory; design.md 4.2).

An imported run justifies almost every assertion by one event ``m<k>`` of G, at most one
certificate ``c<j>`` of Π and an operation of Ω, citing no assertion. As a
:class:`~icore.state.Justification` object that is about 270 bytes per distinct
justification (the object, two one-item tuples, the two id strings), the largest item of
X per JSONL line after the obligations. :class:`JustificationTable` keeps such a
justification as one ``int`` (``k``, ``j`` and the operation's number packed; shared by
the assertions of a batch, as the object was), and any other justification as the
object itself; reading one builds an equal frozen object. The strings ``m<k>`` and
``c<j>`` are then held by nothing in X (:class:`~icore.state._seqtable.CertificateTable`
keeps a one-event ``events`` tuple as its number too:
:func:`~icore.state._refs.event_num`).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from icore.state._refs import CERT_BITS, EVENT_LIMIT, cert_num
from icore.state._seqtable import _HOLE, RECENT, ColumnTable
from icore.state._xmodel import Justification

OPS = 255
"""Distinct operation names a table numbers (1..255; 0 is None); more: kept as objects."""

_CERT_MASK = (1 << CERT_BITS) - 1
_EVENT_SHIFT = CERT_BITS + 8
_new = object.__new__
_set_events, _set_operation, _set_certificates, _set_cites = (
    getattr(Justification, f.name).__set__ for f in fields(Justification))


class JustificationTable(ColumnTable[Justification]):
    """Π: assertion id ``a<n>`` -> :class:`~icore.state.Justification`, packed when it can be.

    A justification of exactly one canonical event ``m<k>``, no or one canonical
    certificate ``c<j>``, no citation and an operation among the table's first
    :data:`OPS` names (or None) is kept as the ``int``
    ``(k << CERT_BITS | j) << 8 | op`` (``j`` = 0: no certificate; ``op`` = 0: None); the
    assertions written with one object in a row share one ``int``. Any other is kept as
    written (an object of another type makes the table a plain dict, as
    :class:`~icore.state._seqtable.SeqTable` does). The last
    :data:`~icore.state._seqtable.RECENT` written are also kept as written. Reads
    (``[]``, :meth:`get`, :meth:`at`, iteration) build an equal frozen
    :class:`Justification`.
    """

    __slots__ = ("_last", "_op_num", "_ops")

    def __init__(self, prefix: str = "a") -> None:
        super().__init__(prefix, 0)
        self._ops: list[str | None] = [None]  # number -> operation (0: None)
        self._op_num: dict[str | None, int] = {None: 0}
        self._last: tuple[Any, Any] = (None, None)  # (the object, its packed int)

    def _load(self, i: int) -> Justification:
        row = self._items[i]
        if type(row) is not int:
            return row  # type: ignore[no-any-return]
        recent = self._recent  # ColumnTable._kept, inlined (hot)
        k = i - len(self._items) + len(recent)
        if k >= 0:
            kept = recent[k]
            if kept is not None:
                return kept
        return self._unpack(row)

    def at(self, r: int | str) -> Justification | None:
        """The justification of the assertion ``a<r>`` (``r`` a number), or of the id ``r``."""
        if type(r) is int and self._d is None:  # SeqTable.at and _load, inlined (hot)
            items = self._items
            i = r - 1
            if not 0 <= i < len(items):
                return None
            row = items[i]
            if type(row) is not int:
                return None if row is _HOLE else row  # type: ignore[no-any-return]
            recent = self._recent
            k = i - len(items) + len(recent)
            if k >= 0:
                kept = recent[k]
                if kept is not None:
                    return kept
            return self._unpack(row)
        return super().at(r)

    def _unpack(self, row: int) -> Justification:
        j = _new(Justification)  # the frozen dataclass's slots written directly
        c = (row >> 8) & _CERT_MASK
        _set_events(j, (f"m{row >> _EVENT_SHIFT}",))
        _set_operation(j, self._ops[row & 0xFF])
        _set_certificates(j, (f"c{c}",) if c else ())
        _set_cites(j, ())
        return j

    def _row(self, value: Justification, key: str) -> tuple[Any, ...] | None:
        """(the packed ``int``, or ``value`` itself when it cannot be packed)."""
        if type(value) is not Justification:
            return None
        last, packed = self._last
        if value is last:
            return (packed,)
        out = self._pack(value)
        self._last = (value, out)
        return (out,)

    def _append(self, key: str, value: Justification) -> bool:
        if type(value) is not Justification:  # ColumnTable._append and _row, inlined (hot)
            return False
        last, row = self._last
        if value is not last:
            row = self._pack(value)
            self._last = (value, row)
        self._items.append(row)
        recent = self._recent
        recent.append(value)
        if len(recent) > RECENT:
            del recent[0]
        return True

    def _pack(self, value: Justification) -> Any:
        """The packed ``int`` of ``value``, or ``value`` when it cannot be packed."""
        events, certs = value.events, value.certificates
        if (type(events) is not tuple or type(certs) is not tuple or value.cites != ()
                or len(events) != 1 or len(certs) > 1):  # reads give tuples back
            return value
        e = events[0]  # event_num and cert_num, inlined (hot)
        if type(e) is not str or e[:1] != "m":
            return value
        s = e[1:]
        if not (s.isdigit() and s.isascii() and (s[:1] != "0" or s == "0") and len(s) < 14):
            return value
        k = int(s)
        j = cert_num(certs[0]) if certs else 0
        if k >= EVENT_LIMIT or j < 0:
            return value
        operation = value.operation
        if operation is not None and type(operation) is not str:
            return value
        op = self._op_num.get(operation)
        if op is None:
            if len(self._ops) > OPS:
                return value
            op = self._op_num[operation] = len(self._ops)
            self._ops.append(operation)
        return (k << CERT_BITS | j) << 8 | op

    def clear(self) -> None:
        """Remove every item (the table goes back to a list)."""
        super().clear()
        self._last = (None, None)


__all__ = ["JustificationTable"]
