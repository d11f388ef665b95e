"""The team's ownership map: semantic key -> authoritative owner o(x) (planfence Sec. 3.1)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from icore.errors import OwnershipError


class OwnershipMap:
    """Maps semantic keys to owners, by exact key or by glob pattern (``"req/*"``).

    Exact entries win over patterns; among patterns the longest (most specific) wins.
    The map is immutable after construction so every agent of a team agrees on it.

    Args:
        exact: key -> owner.
        patterns: glob pattern -> owner (``fnmatch`` syntax).

    Raises:
        OwnershipError: an empty key, pattern or owner.
    """

    __slots__ = ("_cache", "_exact", "_patterns")

    def __init__(self, exact: Mapping[str, str] | None = None,
                 patterns: Mapping[str, str] | None = None) -> None:
        for name, m in (("exact", exact), ("patterns", patterns)):
            if m is not None and not isinstance(m, Mapping):
                raise OwnershipError(f"{name} must be a mapping of key -> owner, not "
                                     f"{type(m).__name__}", field=name)
        self._exact = dict(exact or {})
        pats = dict(patterns or {})
        for k, o in [*self._exact.items(), *pats.items()]:
            if not isinstance(k, str) or not k or not isinstance(o, str) or not o:
                raise OwnershipError("ownership entries need a non-empty key and owner",
                                     key=k, owner=o)
        self._patterns = sorted(pats.items(), key=lambda kv: -len(kv[0]))
        self._cache: dict[str, str | None] = {}

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> OwnershipMap:
        """Build from one mapping whose keys containing ``*?[`` are patterns."""
        exact = {k: v for k, v in mapping.items() if not any(c in k for c in "*?[")}
        pats = {k: v for k, v in mapping.items() if k not in exact}
        return cls(exact, pats)

    def owner_of(self, key: str) -> str | None:
        """Return o(key), or None when the map has no owner for it (or ``key`` is no str)."""
        if type(key) is not str and not isinstance(key, str):  # a dict, None: no owner
            return None
        hit = self._cache.get(key, "")
        if hit != "":
            return hit
        owner = self._exact.get(key)
        if owner is None:
            for pat, o in self._patterns:
                if fnmatch.fnmatchcase(key, pat):
                    owner = o
                    break
        self._cache[key] = owner
        return owner

    def entry_of(self, key: str) -> str | None:
        """The entry that routes ``key`` (an exact key, else the longest pattern).

        The key itself when declared exactly, else the longest pattern it matches; None
        when no entry does (or ``key`` is no str). Names the declaration behind
        :meth:`owner_of` in errors (a pattern such as ``"campaign/*"``, not each key).
        """
        if type(key) is not str and not isinstance(key, str):
            return None
        if key in self._exact:
            return key
        for pat, _o in self._patterns:
            if fnmatch.fnmatchcase(key, pat):
                return pat
        return None

    def require_owner(self, key: str) -> str:
        """Return o(key).

        Raises:
            OwnershipError: the map has no owner for ``key``.
        """
        owner = self.owner_of(key)
        if owner is None:
            raise OwnershipError("no owner is declared for this key", key=key)
        return owner

    def group_by_owner(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """Group keys by owner (one batched request per owner, Alg. 1 line 5).

        Raises:
            OwnershipError: some key has no owner.
        """
        out: dict[str, list[str]] = {}
        for k in keys:
            out.setdefault(self.require_owner(k), []).append(k)
        return out

    def owners(self) -> set[str]:
        """Return every owner named by the map."""
        return set(self._exact.values()) | {o for _, o in self._patterns}

    def keys(self) -> list[str]:
        """Return the exact keys of the map (patterns excluded)."""
        return list(self._exact)

    def to_dict(self) -> dict[str, str]:
        """Return exact entries and patterns as one mapping."""
        return {**self._exact, **dict(self._patterns)}
