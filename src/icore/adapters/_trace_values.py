"""Quirk-tolerant coercion of trace values and agent-name canonicalization (#26, #29).

The importers (:mod:`icore.adapters._jsonl`, :mod:`icore.adapters._whowhen`,
:mod:`icore.adapters._otel_import`) read booleans, step indices and names written by many
tools through these; each bad value is an :class:`~icore.adapters.AdapterError` naming the
file and field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from icore.adapters._errors import AdapterError

# ------------------------------------------------------------------ quirk-tolerant coercion
_TRUE = {"true", "yes", "1", "y", "t"}
_FALSE = {"false", "no", "0", "n", "f"}


def as_bool(value: Any, *, file: str, field: str, optional: bool = False) -> bool | None:
    """Coerce a boolean that may be stored as a string (``"True"``, ``"false"``, ``1``).

    Raises:
        AdapterError: the value is not a recognisable boolean (or is missing and not optional).
    """
    if value is None:
        if optional:
            return None
        raise AdapterError("missing boolean", file=file, field=field)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        if not v and optional:
            return None
    raise AdapterError(f"not a boolean: {value!r}", file=file, field=field)


MAX_STEP = 2**53 - 1
"""Largest step index read (the largest integer every JSON reader holds exactly)."""


def as_step(value: Any, *, file: str, field: str) -> int | None:
    """Coerce a step index that may be stored as a string (``"12"``, ``12``, ``"12.0"``).

    Returns None for an empty value.

    Raises:
        AdapterError: the value is not an integer in ``[0, MAX_STEP]``.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise AdapterError(f"not a step index: {value!r}", file=file, field=field)
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        s = value.strip()
        if not s.isascii():  # int() also reads other scripts' digits ("٣" as 3)
            raise AdapterError(f"not a step index (ASCII digits): {_short(value)}",
                               file=file, field=field)
        try:
            n = int(float(s)) if re.fullmatch(r"[0-9]+(\.0*)?", s) else int(s)
        except (ValueError, OverflowError):  # "abc"; 400 digits: float is inf
            raise AdapterError(f"not a step index: {_short(value)}", file=file,
                               field=field) from None
    else:
        raise AdapterError(f"not a step index: {value!r}", file=file, field=field)
    if n < 0:
        raise AdapterError(f"negative step index: {value!r}", file=file, field=field)
    if n > MAX_STEP:
        raise AdapterError(f"step index out of range (at most 2**53 - 1): {_short(value)}",
                           file=file, field=field)
    return n


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def as_str(value: Any, *, file: str, field: str, optional: bool = False) -> str | None:
    """Require a string (numbers are accepted and converted, e.g. a numeric ground truth).

    Raises:
        AdapterError: missing (and not optional) or not a string/number.
    """
    if value is None:
        if optional:
            return None
        raise AdapterError("missing field (or null): expected a string", file=file,
                           field=field)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise AdapterError(f"expected a string, got {type(value).__name__}", file=file, field=field)


def as_name(value: Any, *, file: str, field: str, optional: bool = False) -> str | None:
    """Require a string naming (or describing) an agent; numbers are refused.

    Unlike :func:`as_str`: ``"agent": 5`` is a wrong type, not agent ``"5"``.

    Raises:
        AdapterError: missing (and not optional) or not a string.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise AdapterError(f"expected a string, got {type(value).__name__} {_short(value)}",
                           file=file, field=field)
    return as_str(value, file=file, field=field, optional=optional)


MERGED_SHOWN = 8
"""Most other spellings of one agent name :class:`AgentNames` keeps for its warning."""


def name_key(name: str) -> str:
    """Case- and punctuation-insensitive key of an agent name (``Websurfer`` == ``WebSurfer``)."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


class AgentNames:
    """Canonicalizes agent names: the first spelling registered wins.

    ``canonical("Websurfer")`` returns ``"WebSurfer"`` once ``WebSurfer`` is known.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._by_key: dict[str, str] = {}
        self._known: dict[str, str] = {}  # spelling -> canonical (a known name never changes)
        self.merged: dict[str, list[str]] = {}
        """Canonical name -> the other spellings read as it (first seen first, at most
        :data:`MERGED_SHOWN` each): what :meth:`merge_notes` warns about."""
        for n in names:
            self.add(n)
        self.declared = tuple(self._by_key.values())
        """The names given at construction (a trace header's agents), canonical."""
        self.undeclared: dict[str, str] = {}
        """Agent -> where (``line <n>``) an instruction first addressed it while
        :attr:`declared` is not empty and does not hold it (:meth:`addressed`)."""

    def addressed(self, name: str, where: str) -> str:
        """Register an instruction's addressee ``name`` at ``where``; its canonical name.

        An addressee that :attr:`declared` (when not empty) does not hold is kept (a trace
        is what happened) and noted in :attr:`undeclared`, first place only.
        """
        got = self.canonical(name) or self.add(name)
        if self.declared and got not in self.declared and got not in self.undeclared:
            self.undeclared[got] = where
        return got

    def undeclared_notes(self, file: str) -> tuple[str, ...]:
        """One warning per instruction addressee the header does not declare (QA qa-new15c S3).

        It names the agent, the line of the first such instruction and the declared agents.
        """
        shown = ", ".join(repr(d) for d in self.declared[:MERGED_SHOWN])
        more = f" and {len(self.declared) - MERGED_SHOWN} more" * (
            len(self.declared) > MERGED_SHOWN)
        return tuple(f"{file}: {where}: an instruction to {got!r}, an agent the run header "
                     f"does not declare (declared: {shown}{more}); it is audited as an agent "
                     "of the run with no declared capabilities"
                     for got, where in self.undeclared.items())

    def _note(self, name: str, got: str) -> None:
        if name.strip() != got:
            seen = self.merged.setdefault(got, [])
            if name not in seen and len(seen) < MERGED_SHOWN:
                seen.append(name)

    def add(self, name: str) -> str:
        """Register ``name`` (if new) and return its canonical spelling."""
        got = self._known.get(name)
        if got is not None:
            return got
        key = name_key(name)
        if not key:
            return name
        got = self._by_key.setdefault(key, name.strip())
        self._known[name] = got
        self._note(name, got)
        return got

    def merge_notes(self, file: str) -> tuple[str, ...]:
        """One warning per agent read under several spellings (QA qa-new15c S2).

        Names are compared without case, punctuation or invisible characters
        (:func:`name_key`), so ``coder1`` and ``Coder_1`` are the agent ``coder_1``: an
        author who meant distinct agents must give them distinct names. Empty when no
        name was merged.
        """
        return tuple(f"{file}: agent names {', '.join(repr(x) for x in spellings)} were "
                     f"read as the agent {got!r} (names are compared without case, "
                     "punctuation and invisible characters); give distinct agents "
                     "distinct names" for got, spellings in self.merged.items())

    def canonical(self, name: str | None) -> str | None:
        """The canonical spelling of ``name`` or None when unknown."""
        if name is None:
            return None
        got = self._known.get(name)
        if got is not None:
            return got
        got = self._by_key.get(name_key(name))
        if got is not None:
            self._known[name] = got
            self._note(name, got)
        return got

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name_key(name) in self._by_key

    @property
    def names(self) -> list[str]:
        """Canonical names, in registration order."""
        return list(self._by_key.values())
