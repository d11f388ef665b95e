"""Assertion ids held as numbers inside X (issue 29: bounded memory; design.md 4.2).

X names its assertions ``a1, a2, ...`` (:meth:`Queries.next_ids
<icore.state._queries.Queries.next_ids>`). A long import keeps, per obligation, the ids of
its active assertions, and per superseded assertion a link to the one that replaced it:
as strings, about 56 bytes an id, the largest single item of X per step. Inside X's
tables an assertion is named by its *ref* instead: the number ``n`` of a canonical id
``a<n>`` (``n`` ≥ 1 written without leading zeros, below 2^32), or the id string itself
for any other id (a log written by hand may hold one). :func:`ref` and :func:`aid` are
exact inverses, so every table keyed or valued by refs answers as the dict of strings it
replaces; the string is made only where X's public API returns it.

- :class:`ActiveIds`: an obligation's active assertions by slot (``Obligation.active``),
  a shared key layout and one ``int`` packing the numbers, 32 bits a slot (built by
  :class:`ActiveLayouts`;
  a map holding another id stays a :class:`~icore.state._share.Compact` of strings).
  A ``Mapping`` of strings, equal to and printed as the dict it stands for; the state's
  own hot paths read the numbers (:func:`active_ref`, :func:`active_refs`), so no id
  string is built while X is evaluated.
- :class:`RefLinks`: ``superseded`` (a superseded assertion's ref -> the ref of the one
  that replaced it) as an ``array`` by number, other refs in a dict beside it.
- :class:`CertRefs`: ``active_by_cert`` (a certificate id -> the refs of the active
  assertions citing it) as two ``array``s by certificate number.
- :class:`SoundMemo`: the memoized soundness verdicts, a byte per assertion number.
- :func:`event_num` and :func:`cert_num`: the numbers of the event ids ``m<k>`` and
  certificate ids ``c<j>``, where Π keeps them as numbers
  (:class:`~icore.state._pitable.JustificationTable`, the certificates' events).

Pure: no I/O.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence, ValuesView
from typing import Any, TypeAlias, TypeVar

from icore.state._share import Compact, Layouts

Ref: TypeAlias = "int | str"
"""An assertion inside X's tables: ``n`` for the canonical id ``a<n>``, else the id."""
Slot: TypeAlias = "tuple[str, str]"
LIMIT = 1 << 32
"""Numbers at or above this are not refs (4-byte array items): their ids stay strings."""
SLACK = 4096
"""How far past its end :class:`RefLinks`' array grows for one key (more: the dict)."""
_MISSING: Any = object()
K = TypeVar("K")
V = TypeVar("V")


NO_ID = "\x00 not an assertion id"
"""The ref of a value that is not a ``str``: no assertion has it (ids hold no NUL)."""


def ref(assertion_id: str) -> Ref:
    """The ref of ``assertion_id``: ``n`` for ``a<n>`` (canonical, ``n`` < 2^32), else the id.

    A ``str`` subclass is read as its plain text; anything that is not a ``str`` (an
    ``int`` 2 is not ``a2``) gets :data:`NO_ID`, which matches no assertion.
    """
    if type(assertion_id) is not str:
        if not isinstance(assertion_id, str):
            return NO_ID
        assertion_id = str.__str__(assertion_id)
    if assertion_id[:1] == "a":
        s = assertion_id[1:]
        if s.isdigit() and s.isascii() and s[:1] != "0" and len(s) < 11:
            n = int(s)
            if n < LIMIT:
                return n
    return assertion_id


def aid(r: Ref) -> str:
    """The assertion id of the ref ``r`` (the inverse of :func:`ref`)."""
    return f"a{r}" if type(r) is int else r  # type: ignore[return-value]


CERT_BITS = 32
"""Bits of a certificate number ``j`` (below 2^32; 0: none) where it is packed with others."""
EVENT_LIMIT = 1 << 40
"""Event numbers ``k`` at or above this are not numbers (their ids stay strings)."""


def event_num(event_id: object) -> int:
    """``k`` for the canonical event id ``m<k>`` (``k`` ≥ 0, below 2^40), else -1.

    ``f"m{k}"`` gives the id back exactly (no sign, no leading zero, ASCII digits).
    """
    if type(event_id) is str and event_id[:1] == "m":
        s = event_id[1:]
        if s.isdigit() and s.isascii() and (s[:1] != "0" or s == "0") and len(s) < 14:
            k = int(s)
            if k < EVENT_LIMIT:
                return k
    return -1


def cert_num(certificate_id: object) -> int:
    """``j`` for the canonical certificate id ``c<j>`` (1 ≤ ``j`` < 2^32), else -1."""
    if type(certificate_id) is str and certificate_id[:1] == "c":
        s = certificate_id[1:]
        if s.isdigit() and s.isascii() and s[:1] != "0" and len(s) < 11:
            j = int(s)
            if j < 1 << CERT_BITS:
                return j
    return -1


class ActiveIds(Compact[Slot, str]):
    """An obligation's active assertion ids by slot, kept as numbers (see the module doc).

    Read as a ``Mapping[tuple[str, str], str]``: each read builds the id ``a<n>``. The
    numbers (each below :data:`LIMIT`) are packed in one ``int``, the ``i``-th slot's at
    bits ``32 i`` to ``32 i + 31``: 28 to 36 bytes for one or two slots, where an
    ``array`` took 84 to 100.
    """

    __slots__ = ()
    _values: int  # type: ignore[assignment]

    def __getitem__(self, key: Slot) -> str:
        return f"a{(self._values >> (self._at[key] << 5)) & _MASK}"

    def get(self, key: Slot, default: Any = None) -> Any:
        """The id of ``key``'s active assertion, else ``default``."""
        i = self._at.get(key)
        return default if i is None else f"a{(self._values >> (i << 5)) & _MASK}"

    def __len__(self) -> int:
        return len(self._at)

    def values(self) -> ValuesView[str]:
        """The ids, in slot order."""
        return _IdValues(self)

    def refs(self) -> Sequence[int]:
        """The numbers of the ids, in slot order (a new sequence: one item, or an array)."""
        v, n = self._values, len(self._at)
        if n == 1:
            return (v,)
        if _NATIVE:  # the 4-byte slots as they are: one copy, no loop
            return array("I", v.to_bytes(n << 2, "little"))
        return [(v >> (i << 5)) & _MASK for i in range(n)]

    def ref(self, key: Slot) -> int | None:
        """The number of ``key``'s active assertion id, else None."""
        i = self._at.get(key)
        return None if i is None else (self._values >> (i << 5)) & _MASK

    def __repr__(self) -> str:
        return repr(dict(zip(self._at, self.values(), strict=True)))


_MASK = LIMIT - 1
_NATIVE = array("I").itemsize == 4 and sys.byteorder == "little"


class _IdValues(ValuesView[str]):
    __slots__ = ()

    def __iter__(self) -> Iterator[str]:
        return (f"a{n}" for n in self._mapping.refs())  # type: ignore[attr-defined]


def active_ref(m: Mapping[Slot, str], slot: Slot) -> Ref | None:
    """The ref of the active assertion of ``slot`` in the active map ``m``, else None."""
    if type(m) is ActiveIds:
        return m.ref(slot)
    v = m.get(slot)
    return None if v is None else ref(v)


def active_refs(m: Mapping[Slot, str]) -> Iterable[Ref]:
    """The refs of the active map ``m``'s assertions, in slot order."""
    if type(m) is ActiveIds:
        return m.refs()
    return [ref(v) for v in m.values()]


class ActiveLayouts(Layouts[Slot]):
    """Builds :class:`ActiveIds` maps (a ``Compact`` of strings when an id is no ref).

    The key layouts are shared, as :class:`~icore.state._share.Layouts` shares them.
    """

    __slots__ = ()

    def put(self, m: Mapping[Slot, str], key: Slot,  # type: ignore[override]
            value: str) -> Compact[Slot, str]:
        """A map of ``m`` with ``key`` set to the id ``value`` (``m`` unchanged; new keys last)."""
        n: Ref = value
        if type(value) is str and value[:1] == "a":  # ref(value), inlined (hot)
            s = value[1:]
            if s.isdigit() and s.isascii() and s[:1] != "0" and len(s) < 11 and int(s) < LIMIT:
                n = int(s)
        if type(m) is not ActiveIds:  # a new obligation's {} (or a map of strings)
            items = dict(m.items())
            items[key] = value
            packed, shift = 0, 0
            for v in items.values():
                r = ref(v)
                if not isinstance(r, int):
                    return super().put(m, key, value)
                packed |= r << shift
                shift += 32
            return ActiveIds(self._layout(tuple(items)), packed)  # type: ignore[arg-type]
        at, packed = m._at, m._values
        if type(n) is not int:  # the id is no ref: the strings, as a Compact
            return super().put(Compact(at, tuple(f"a{x}" for x in m.refs())), key, value)
        i = at.get(key)
        if i is not None:
            sh = i << 5
            return ActiveIds(at, packed & ~(_MASK << sh) | n << sh)  # type: ignore[arg-type]
        packed |= n << (len(at) << 5)
        return ActiveIds(self._layout((*at, key)), packed)  # type: ignore[arg-type]


class _ArrayMap(MutableMapping[K, V]):
    """What :class:`RefLinks` and :class:`CertRefs` share: items in arrays, the rest in ``_d``."""

    __slots__ = ()
    _d: dict[Any, Any]
    _len: int

    def get(self, key: Any, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (each subclass reads its arrays).

        Raises:
            NotImplementedError: always here (a subclass defines it).
        """
        raise NotImplementedError

    def __getitem__(self, key: K) -> V:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return self._len + len(self._d)


class RefLinks(_ArrayMap[Ref, Ref]):
    """A ``dict`` of refs to refs: number -> number links in an ``array``, the rest a dict.

    ``superseded``: position ``n`` holds ``m`` for the link ``a<n> -> a<m>`` (0: none), 4
    bytes per assertion of the run instead of a dict slot and an id string per superseded
    one. Keys and values are refs (:func:`ref`). Iteration: the numbers in order, then the
    other keys in insertion order (the state never iterates this map).
    """

    __slots__ = ("_d", "_len", "_m")

    def __init__(self) -> None:
        self._m = array("I")
        self._len = 0  # links held in the array
        self._d: dict[Ref, Ref] = {}

    def get(self, key: Ref, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        if type(key) is int:
            m = self._m
            if key < len(m):
                v = m[key]
                if v:
                    return v
        d = self._d
        return d.get(key, default) if d else default

    def __iter__(self) -> Iterator[Ref]:
        m = self._m
        yield from (n for n in range(len(m)) if m[n])
        yield from list(self._d)

    def __setitem__(self, key: Ref, value: Ref) -> None:
        m = self._m
        if (type(key) is int and type(value) is int and key < 2 * len(m) + SLACK
                and key not in self._d):
            if key >= len(m):
                m.frombytes(bytes(m.itemsize * (key + 1 - len(m))))
            if not m[key]:
                self._len += 1
            m[key] = value
            return
        if type(key) is int and key < len(m) and m[key]:  # the value is no ref now
            m[key] = 0
            self._len -= 1
        self._d[key] = value

    def __delitem__(self, key: Ref) -> None:
        m = self._m
        if type(key) is int and key < len(m) and m[key]:
            m[key] = 0
            self._len -= 1
            return
        del self._d[key]  # KeyError when absent, as a dict

    def clear(self) -> None:
        """Remove every link."""
        del self._m[:]
        self._len = 0
        self._d.clear()

    def __repr__(self) -> str:
        return f"RefLinks({dict(self.items())!r})"


class CertRefs(_ArrayMap[str, tuple[Ref, ...]]):
    """``active_by_cert``: a certificate id -> the refs of the active assertions citing it.

    For a canonical id ``c<n>`` whose value is one or two numbers (an output's status and
    result cite its certificate), the numbers sit at position ``n`` of two 4-byte
    ``array``s (0: none): 8 bytes per certificate of the run instead of a dict slot and a
    tuple; any other item is kept in a dict beside them. Reads build the tuple; the last
    key parsed is remembered (a change reads and writes one certificate's entry in turn).
    Iteration: the numbers in order, then the other keys (the state never iterates it).
    """

    __slots__ = ("_d", "_first", "_len", "_lk", "_ln", "_second")

    def __init__(self) -> None:
        self._first = array("I")
        self._second = array("I")
        self._len = 0  # items held in the arrays
        self._d: dict[str, tuple[Ref, ...]] = {}
        self._lk: object = None  # the last key parsed and its number
        self._ln = 0

    def _num(self, key: object) -> int:
        """``n`` for a canonical id ``c<n>`` (``n`` < 2^32), else 0."""
        if key is self._lk:
            return self._ln
        n = 0
        if type(key) is str and key[:1] == "c":
            s = key[1:]
            if s.isdigit() and s.isascii() and s[:1] != "0" and len(s) < 11:
                n = int(s)
                if n >= LIMIT:
                    n = 0
        self._lk, self._ln = key, n
        return n

    def get(self, key: str, default: Any = None, /) -> Any:
        """``self[key]``, or ``default`` when absent (as ``dict.get``)."""
        n = self._num(key)
        if n and n < len(self._first):
            x = self._first[n]
            if x:
                y = self._second[n]
                return (x, y) if y else (x,)
        d = self._d
        return d.get(key, default) if d else default

    def __iter__(self) -> Iterator[str]:
        first = self._first
        yield from [f"c{n}" for n in range(len(first)) if first[n]]
        yield from list(self._d)

    def __setitem__(self, key: str, value: tuple[Ref, ...]) -> None:
        n = self._num(key)
        first, second = self._first, self._second
        x, y = (value[0], value[-1]) if type(value) is tuple and 0 < len(value) < 3 else ("", "")
        if (n and type(x) is int and type(y) is int
                and n < 2 * len(first) + SLACK and not (self._d and key in self._d)):
            if n >= len(first):
                grow = bytes(first.itemsize * (n + 1 - len(first)))
                first.frombytes(grow)
                second.frombytes(grow)
            if not first[n]:
                self._len += 1
            first[n] = x
            second[n] = y if len(value) == 2 else 0
            return
        if n and n < len(first) and first[n]:  # the arrays cannot hold it: the dict does
            first[n] = second[n] = 0
            self._len -= 1
        self._d[key] = value

    def add(self, key: str, r: Ref) -> None:
        """Add ``r`` to ``key``'s refs unless it is there (``self[key] = (*old, r)``)."""
        n = self._ln if key is self._lk else self._num(key)
        first = self._first
        if n and type(r) is int and not (self._d and key in self._d):
            if len(first) <= n < 2 * len(first) + SLACK:  # a new certificate, as a rule
                grow = bytes(first.itemsize * (n + 1 - len(first)))
                first.frombytes(grow)
                self._second.frombytes(grow)
        if n and type(r) is int and n < len(first) and not (self._d and key in self._d):
            x = first[n]
            if not x:
                first[n] = r
                self._second[n] = 0
                self._len += 1
                return
            if x == r:
                return
            y = self._second[n]
            if not y:
                self._second[n] = r
                return
            if y == r:
                return
        had = self.get(key, ())
        if r not in had:
            self[key] = (*had, r)

    def discard(self, key: str, r: Ref) -> None:
        """Take ``r`` out of ``key``'s refs; the key goes with its last ref."""
        had = self.get(key)
        if had is not None and r in had:
            rest = tuple(x for x in had if x != r)
            if rest:
                self[key] = rest
            else:
                del self[key]

    def __delitem__(self, key: str) -> None:
        n = self._num(key)
        first = self._first
        if n and n < len(first) and first[n]:
            first[n] = self._second[n] = 0
            self._len -= 1
            return
        del self._d[key]  # KeyError when absent, as a dict

    def clear(self) -> None:
        """Remove every item."""
        del self._first[:]
        del self._second[:]
        self._len = 0
        self._d.clear()

    def __repr__(self) -> str:
        return f"CertRefs({dict(self.items())!r})"


class SoundMemo:
    """Memoized soundness verdicts by ref: one byte per assertion number, a dict beside it.

    ``bits[n]`` is 0 (not known), 1 (unsound) or 2 (sound) for the ref ``n``; any other
    ref, or a number too far past the bytes' end, is kept in ``other`` (at most
    ``limit`` verdicts: then it starts over). A cache: clearing it is always safe.
    """

    __slots__ = ("bits", "limit", "other")

    def __init__(self, limit: int = 1 << 16) -> None:
        self.bits = bytearray()
        self.other: dict[Ref, bool] = {}
        self.limit = limit

    def get(self, r: Ref) -> bool | None:
        """The verdict memoized for ``r``, or None."""
        if type(r) is int:
            bits = self.bits
            if r < len(bits):
                v = bits[r]
                if v:
                    return v == 2
        return self.other.get(r) if self.other else None

    def put(self, r: Ref, sound: bool, room: int) -> None:
        """Memoize ``sound`` for ``r``; the bytes may grow up to ``room`` positions."""
        bits = self.bits
        if type(r) is int and r < max(room, len(bits)):
            if r >= len(bits):  # grown by half again at least: a new number seldom grows it
                size = min(max(r + 1, len(bits) + (len(bits) >> 1) + 64), max(room, r + 1))
                bits.extend(bytes(size - len(bits)))
            bits[r] = 2 if sound else 1
            if self.other:
                self.other.pop(r, None)
            return
        other = self.other
        if len(other) >= self.limit:
            other.clear()
        other[r] = sound

    def pop(self, r: Ref) -> None:
        """Forget ``r``'s verdict."""
        if type(r) is int and r < len(self.bits):
            self.bits[r] = 0
        if self.other:
            self.other.pop(r, None)

    def clear(self) -> None:
        """Forget every verdict."""
        del self.bits[:]
        self.other.clear()

    def __len__(self) -> int:
        bits = self.bits
        return len(bits) - bits.count(0) + sum(
            1 for k in self.other if not (type(k) is int and k < len(bits) and bits[k]))


__all__ = ["CERT_BITS", "EVENT_LIMIT", "LIMIT", "ActiveIds", "ActiveLayouts", "CertRefs", "Ref",
           "RefLinks", "SoundMemo", "active_ref", "active_refs", "aid", "cert_num", "event_num",
           "ref"]
