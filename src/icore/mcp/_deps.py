"""D(a) and ``writes:`` entries filled from a call's arguments (#25, planfence Sec. 3).

A manifest entry names the facts a protected call depends on or writes: ``{arg}``
placeholders are filled from the call's arguments (defaults applied), and the manifest's
own ``*``, ``?`` and ``[`` make it a glob matched against the known keys. A value filled
in is always literal: an argument never chooses which facts are validated.
"""

from __future__ import annotations

import fnmatch
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

from icore.errors import IcoreError
from icore.workspace import GLOB_CHARS, arg_fault

_GLOB = frozenset(GLOB_CHARS)
_GLOB_CHAR = re.compile(f"[{re.escape(GLOB_CHARS)}]")


def expand_deps(patterns: Iterable[str], args: Mapping[str, Any],
                known: Iterable[str]) -> frozenset[str]:
    """D(a) for one call: ``{arg}`` placeholders filled, globs matched to known keys.

    Only the manifest's own ``*``, ``?`` and ``[`` are a pattern: a value filled in from
    the call's arguments is literal (``fact://hold/{sku}`` with ``sku="*"`` is the key
    ``fact://hold/*``, never every hold: an argument never chooses which facts are
    validated; such a key has no value, so the call is refused, :func:`glob_args`). In an
    entry with a glob of its own, the filled value is escaped before matching.

    Raises:
        IcoreError: a placeholder names an argument the call lacks, or an argument
            used in a key is not a string or number; ``patterns`` or ``known`` is not an
            iterable of str, or ``args`` not a mapping (field named).
    """
    for what, it in (("patterns", patterns), ("known", known), ("args", args)):
        if isinstance(it, str | bytes) or not isinstance(it, Mapping if what == "args" else
                                                          Iterable):
            raise IcoreError(f"{what} must be a {'mapping' if what == 'args' else 'list'} "
                             f"of str, not {type(it).__name__}", field=what)
    patterns, known_l = list(patterns), list(known)
    if not all(isinstance(x, str) for x in (*patterns, *known_l)):
        raise IcoreError("patterns and known must hold str only", field="patterns")
    keys: set[str] = set()
    for pat in patterns:
        key, glob = fill_pattern(pat, args)
        if glob:
            keys.update(k for k in known_l if fnmatch.fnmatchcase(k, key))
        else:
            keys.add(key)
    return frozenset(keys)


def fill_pattern(pat: str, args: Mapping[str, Any]) -> tuple[str, bool]:
    """One D(a) or ``writes:`` entry with its ``{arg}`` placeholders filled: ``(text, glob)``.

    ``glob`` False: ``text`` is the key. True: ``text`` is an ``fnmatch`` pattern in which
    the filled values are escaped (an argument never chooses which facts match).

    Raises:
        IcoreError: a placeholder names an argument the call lacks, or its value is not a
            string or number (see :func:`expand_deps`).
    """
    parts, escaped, glob = [], [], False
    for lit, name, _spec, _conv in string.Formatter().parse(pat):
        parts.append(_shortest(lit))
        escaped.append(lit)
        glob = glob or any(c in lit for c in _GLOB)
        if name:
            if name not in args:
                raise IcoreError(f"D(a) entry {pat!r} needs argument {name!r}",
                                 key=pat, argument=name)
            val = args[name]
            if isinstance(val, bool) or not isinstance(val, str | int | float):
                raise IcoreError(f"argument {name!r} used in {pat!r} must be a string "
                                 "or number", key=pat, argument=name)
            parts.append(str(val))
            escaped.append(_GLOB_CHAR.sub(r"[\g<0>]", str(val)))
    return ("".join(escaped), True) if glob else ("".join(parts), False)


_GLOB_SPAN = re.compile(r"\[[^\]]+\]|\?")


def _shortest(literal: str) -> str:
    """The manifest's own text of a pattern as its shortest match.

    ``[ab]`` and ``?`` are one character, ``*`` none: a key is too long only when every
    match is.
    """
    return _GLOB_SPAN.sub("x", literal).replace("*", "")


def glob_args(patterns: Iterable[str], args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments whose values make a D(a) key that no fact can have.

    The workspace's rule (:func:`icore.workspace.arg_fault`, one rule in process and at
    the gateway): a value filled into a ``{placeholder}`` that carries ``*``, ``?`` or
    ``[`` (literal, :func:`expand_deps`), a NUL or a lone surrogate, or that alone makes
    the key longer than :data:`~icore.records.MAX_KEY_LEN` characters. A placeholder the
    call lacks, or whose value is no string or number, is :func:`expand_deps`' error.

    Returns:
        Argument name -> its value (empty: none).
    """
    out: dict[str, Any] = {}
    for pat in patterns:
        parts: list[str] = []
        filled: dict[str, str] = {}
        for lit, name, _spec, _conv in string.Formatter().parse(pat):
            parts.append(_shortest(lit))
            if name:
                val = args.get(name)
                if isinstance(val, bool) or not isinstance(val, str | int | float):
                    break
                parts.append(filled.setdefault(name, str(val)))
        else:
            key = "".join(parts)
            out.update((n, args[n]) for n, v in filled.items()
                       if arg_fault(key, {n: v}) is not None)
    return out


__all__ = ["expand_deps", "fill_pattern", "glob_args"]
