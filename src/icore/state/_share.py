"""Equal small JSON values held as one object (issue 29: X's memory on long imports).

A long imported run repeats the same small values thousands of times: every obligation's
``node`` value (``{"kind": "analysis", "weight": 1.0, "parent": "task", "deps": [],
"required_root": False}``), the certificate payloads of consecutive outputs
(``{"seen_digests": [], "seen_pages": [], "evidence_before": 12}``). Values of X are
never mutated after they are recorded (the records holding them are frozen), so equal
values can be one object: :class:`ValueShare` returns the first object seen for each
value, keyed by an exact form that tells ``1``, ``1.0`` and ``True`` apart, ``0.0`` from
``-0.0``, lists from tuples, and keeps key order, so every encoding of the shared value
is byte for byte the encoding of the value it replaces.

Pure: no I/O, no clock; the memo is per state and bounded.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from icore.state._xmodel import JSON

MEMO_LIMIT = 4096
"""Distinct values remembered; the memo is emptied when it reaches this (bounded memory)."""
MAX_ITEMS = 8
"""Values with more items than this (in one list, tuple or dict, or nested) are not shared."""

_SCALARS = (str, int, bool, type(None))


def exact_key(value: Any, budget: list[int]) -> Hashable | None:
    """A hashable form equal only for values with the same JSON encoding and types.

    ``budget`` is a one-item counter of the items still allowed (decremented).

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
            kv = exact_key(v, budget)
            if kv is None:
                return None
            items.append(k)
            items.append(kv)
        return tuple(items)
    if t is list or t is tuple:
        if len(value) > MAX_ITEMS:
            return None
        seq: list[Hashable] = [t.__name__]
        for v in value:
            kv = exact_key(v, budget)
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


class Fields(Mapping[str, JSON]):
    """An imported event's fields: a shared key layout and a tuple of values.

    Read-only, in the keys' original order; equal to (and printed as) the dict it was
    built from. About half the memory of a dict of the same items, because the events
    of one type and importer share their keys (:class:`FieldLayouts`).
    """

    __slots__ = ("_at", "_values")

    def __init__(self, at: Mapping[str, int], values: tuple[JSON, ...]) -> None:
        self._at = at
        self._values = values

    def __getitem__(self, key: str) -> JSON:
        return self._values[self._at[key]]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, else ``default``."""
        i = self._at.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(dict(zip(self._at, self._values, strict=True)))


class FieldLayouts:
    """Builds :class:`Fields`, one key layout per distinct key sequence (bounded memo)."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[tuple[str, ...], Mapping[str, int]] = {}

    def __call__(self, fields: Mapping[str, JSON]) -> Fields:
        """``fields`` as :class:`Fields` (its values are not copied)."""
        keys = tuple(fields)
        at = self._memo.get(keys)
        if at is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            at = self._memo[keys] = {k: i for i, k in enumerate(keys)}
        return Fields(at, tuple(fields.values()))


__all__ = ["MAX_ITEMS", "MEMO_LIMIT", "FieldLayouts", "Fields", "ValueShare", "exact_key"]
