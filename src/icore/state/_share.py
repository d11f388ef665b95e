"""Compact forms of what X holds per step of a long import (issue 29: bounded memory).

- :class:`ValueShare`: equal small JSON values as one object. A long imported run repeats
  the same certificate payloads thousands of times (``{"seen_digests": [], "seen_pages":
  [], "evidence_before": 12}`` for consecutive outputs). Values of X are never mutated
  after they are recorded (the records holding them are frozen), so equal values can be
  one object: the first object seen for each value is returned, keyed by an exact form
  that tells ``1``, ``1.0`` and ``True`` apart, ``0.0`` from ``-0.0``, lists from tuples,
  and keeps key order, so every encoding of the shared value is byte for byte the
  encoding of the value it replaces.
- :class:`Compact` (built by :class:`Layouts`): a read-only mapping as a key layout shared
  by every mapping with the same keys and a tuple of values: an imported event's fields
  (:data:`Fields`), an obligation's active assertions by slot. About half a dict's
  memory; equal to and printed as the dict it stands for; encoded as a dict in the log.
- :class:`DictPacker`: a small JSON object a table keeps (an obligation's result, an
  assertion's value) as a tuple of its keys and values, a dict built again on read.

Pure: no I/O, no clock; every memo is per state (or per process for the interned slot
layouts) and bounded.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, ValuesView
from typing import Any, Generic, TypeVar

from icore.state._xmodel import JSON

MEMO_LIMIT = 4096
"""Distinct values remembered; the memo is emptied when it reaches this (bounded memory)."""
MAX_ITEMS = 8
"""Values with more items than this (in one list, tuple or dict, or nested) are not shared."""

_SCALARS = (str, int, bool, type(None))
K = TypeVar("K")
V = TypeVar("V")


def exact_key(value: Any, budget: list[int]) -> Hashable | None:
    """A hashable form equal only for values with the same JSON encoding and types.

    ``budget`` is a one-item counter of the containers still allowed (decremented).

    Returns:
        The key, or None when the value is too big or holds something else than JSON
        scalars, lists, tuples and str-keyed dicts.
    """
    t = type(value)
    if t in _SCALARS:
        return (t, value)
    if t is float:
        return (float, value.hex())  # tells 0.0 from -0.0; NaN keys equal one another
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if t is dict:
        if len(value) > MAX_ITEMS:
            return None
        items: list[Hashable] = ["dict"]
        for k, v in value.items():
            if type(k) is not str:
                return None
            tv = type(v)
            kv: Hashable | None = (tv, v) if tv in _SCALARS else exact_key(v, budget)
            if kv is None:
                return None
            items.append(k)
            items.append(kv)
        return tuple(items)
    if t is list or t is tuple:
        if not value:  # the common empty list: no loop
            return (t.__name__,)
        if len(value) > MAX_ITEMS:
            return None
        seq: list[Hashable] = [t.__name__]
        for v in value:
            tv = type(v)
            kv = (tv, v) if tv in _SCALARS else exact_key(v, budget)
            if kv is None:
                return None
            seq.append(kv)
        return tuple(seq)
    return None


class ValueShare:
    """The first object seen for each small JSON value (see the module docstring)."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[Hashable, JSON] = {}

    def __call__(self, value: JSON) -> JSON:
        """``value``, or an earlier equal object (same types, same key order).

        Scalars are returned as they are; containers too big for :data:`MAX_ITEMS` or
        holding non-JSON objects are returned as they are (never copied).
        """
        if type(value) in _SCALARS:
            return value
        key = exact_key(value, [MAX_ITEMS])
        if key is None:
            return value
        memo = self._memo
        hit = memo.get(key)
        if hit is not None:
            return hit
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        memo[key] = value
        return value

    def __len__(self) -> int:
        return len(self._memo)


class Compact(Mapping[K, V]):
    """A read-only mapping held as a shared key layout and a tuple of values.

    In the keys' original order; equal to (and printed as) the dict it stands for. About
    half the memory of a dict of the same items, because the mappings built by one
    :class:`Layouts` share their keys: an imported event's fields (:class:`Fields`), an
    obligation's active assertions by slot.
    """

    __slots__ = ("_at", "_values")

    def __init__(self, at: Mapping[K, int], values: tuple[V, ...]) -> None:
        self._at = at
        self._values = values

    def __getitem__(self, key: K) -> V:
        return self._values[self._at[key]]

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key``, else ``default``."""
        i = self._at.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[K]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> ValuesView[V]:
        """The values, in key order."""
        return _Values(self)

    def __repr__(self) -> str:
        return repr(dict(zip(self._at, self._values, strict=True)))


class _Values(ValuesView[V]):
    __slots__ = ()

    def __iter__(self) -> Iterator[V]:
        return iter(self._mapping._values)  # type: ignore[attr-defined]


Fields = Compact
"""An imported event's fields (:class:`Compact` over str keys and JSON values)."""


class Layouts(Generic[K]):
    """Builds :class:`Compact` mappings, one key layout per distinct key sequence.

    The memo of layouts is bounded (:data:`MEMO_LIMIT`; emptied when full).
    """

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[tuple[K, ...], Mapping[K, int]] = {}

    def _layout(self, keys: tuple[K, ...]) -> Mapping[K, int]:
        at = self._memo.get(keys)
        if at is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            at = self._memo[keys] = {k: i for i, k in enumerate(keys)}
        return at

    def __call__(self, items: Mapping[K, V]) -> Compact[K, V]:
        """``items`` as a :class:`Compact` (its values are not copied)."""
        return Compact(self._layout(tuple(items)), tuple(items.values()))

    def put(self, m: Mapping[K, V], key: K, value: V) -> Compact[K, V]:
        """A :class:`Compact` of ``m`` with ``key`` set to ``value`` (``m`` unchanged).

        A new key goes last, as in a dict.
        """
        if type(m) is not Compact:
            m = self(m)
        at, values = m._at, m._values
        i = at.get(key)
        if i is not None:
            return Compact(at, (*values[:i], value, *values[i + 1:]))
        return Compact(self._layout((*at, key)), (*values, value))


FieldLayouts = Layouts
"""Builds events' :class:`Fields` (see :class:`Layouts`)."""


class PackedDict(tuple):  # type: ignore[type-arg]
    """A dict kept by a table as ``(keys, *values)`` (:class:`DictPacker`); never returned."""

    __slots__ = ()


class DictPacker:
    """Keeps small JSON objects as tuples: ``(keys, *values)``, 64 bytes for two items.

    A dict of two items takes 184 bytes; a long import records one per output step (an
    obligation's result ``{"step", "digest"}``, its assertion's value). :meth:`pack`
    gives a :class:`PackedDict` for an exact ``dict`` of 1 to :data:`MAX_ITEMS` str keys
    (its key tuple shared by a bounded memo, its values the same objects), anything else
    as it is; :func:`unpack` builds an equal dict (same keys, order and value objects).
    The same dict object packed twice (a result held by an assertion and its obligation,
    a value :class:`ValueShare` made one object) gives the same tuple while it is among
    the last :data:`MEMO_LIMIT` packed (the memo keeps those objects alive).
    """

    __slots__ = ("_keys", "_seen")

    def __init__(self) -> None:
        self._keys: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._seen: dict[int, tuple[Any, PackedDict]] = {}

    def pack(self, value: Any) -> Any:
        """``value`` as kept: a :class:`PackedDict`, or ``value`` itself."""
        if type(value) is not dict or not value or len(value) > MAX_ITEMS:
            return value
        seen = self._seen
        hit = seen.get(id(value))
        if hit is not None:  # the memo holds the object: its id is not reused
            return hit[1]
        keys = tuple(value)
        for k in keys:
            if type(k) is not str:
                return value
        memo = self._keys
        shared = memo.get(keys)
        if shared is None:
            if len(memo) >= MEMO_LIMIT:  # a cache: clearing it only stops sharing
                memo.clear()
            shared = memo[keys] = keys
        packed = PackedDict((shared, *value.values()))
        if len(seen) >= MEMO_LIMIT:
            del seen[next(iter(seen))]
        seen[id(value)] = (value, packed)
        return packed


def unpack(kept: Any) -> Any:
    """The value :meth:`DictPacker.pack` kept as ``kept`` (a new equal dict, or ``kept``)."""
    if type(kept) is PackedDict:
        return dict(zip(kept[0], kept[1:], strict=True))  # type: ignore[has-type]
    return kept


__all__ = ["MAX_ITEMS", "MEMO_LIMIT", "Compact", "DictPacker", "FieldLayouts", "Fields", "Layouts",
           "PackedDict", "ValueShare", "exact_key", "unpack"]
