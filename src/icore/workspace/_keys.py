"""Fact keys of a workspace: checks, suggestions, patterns and detached values (issue 28).

Pure helpers of :class:`~icore.workspace.Workspace` and :class:`~icore.workspace.Agent`:

* :func:`fact_key` refuses what cannot name one fact (not a str, empty, a glob pattern),
  with a fix that fits the mistake (``ws.put(7, ...)`` is told keys are text, not to
  declare ``'7'``);
* :func:`suggest_key` / :func:`suggest_written` name the declared or written key closest
  to a misspelled one (``did you mean ...?``);
* :func:`check_owner_names` holds every owner name to one rule, whatever store hosts
  the owner (a SQLite owner's name is its file's name);
* :func:`ambiguous_patterns` finds owner patterns that both match some key with neither
  more specific (the owner would depend on declaration order);
* :func:`detached` copies a JSON value, so what a reader gets is never the stored
  record's own object (planfence Sec. 3.1: only the owner writes a fact).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from icore.memory import OwnershipMap
from icore.records import MAX_KEY_LEN, JSONValue
from icore.workspace._errors import WorkspaceError

GLOB_CHARS: Final = "*?["
"""The glob characters of a key pattern (``fnmatch``): only a declaration's own are a
pattern; in a call's argument value they are literal (:func:`arg_fault`)."""
_GLOB = frozenset(GLOB_CHARS)
_SURROGATE = re.compile("[\ud800-\udfff]")

OWNER_NAME: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$")
"""An owner's name: 1-63 characters of ``[A-Za-z0-9._-]``, not starting with ``.`` or
``-``: a safe file-name part (a SQLite owner's store is ``<folder>/<owner>.db``; no
``/``, no ``..``, never hidden), the same rule as an MCP gateway manifest's owners."""


def check_owner_names(om: OwnershipMap, **where: Any) -> None:
    """Refuse owner names that are not :data:`OWNER_NAME`, for every store alike.

    One rule whether the owner's store is in memory, in SQLite, over TCP or on NATS, so
    a name a test accepts in memory (``../x``) is not refused only when the same team
    moves to SQLite (where it would put the database outside the folder).

    Args:
        om: the ownership map.
        **where: context for the error (e.g. ``folder=``).

    Raises:
        WorkspaceError: naming the owners that break the rule and the rule.
    """
    bad = sorted(o for o in om.owners() if not OWNER_NAME.match(o))
    if bad:
        raise WorkspaceError(
            "an owner's name must be 1-63 characters of [A-Za-z0-9._-], not starting with "
            "'.' or '-' (it names the owner's store, a file for SQLite)", owners=bad,
            **where, fix="name owners like agents ('facilities', 'sales-eu'), never "
            "with '/' or '..'")


class _Missing:
    """The type of :data:`MISSING` (no ``default=`` given)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""``default=`` not given: reading a fact that was never written raises
:class:`~icore.workspace.FactNotWritten`."""


def is_pattern(key: str) -> bool:
    """Whether ``key`` contains a glob character (``*``, ``?``, ``[``)."""
    return any(c in _GLOB for c in key)


def arg_fault(key: str, args: Mapping[str, Any]) -> tuple[str, str] | None:
    r"""The argument whose value makes ``key`` unable to name a fact, or None.

    A key of D(a) built from a call's arguments (``lambda a: {f"stock/{a['sku']}"}``)
    holds the model's text: ``sku="*"`` gives ``stock/*``, which is no fact (``*``,
    ``?`` and ``[`` in a value are literal characters, never a pattern that widens the
    scope), and ``sku="bolt\x00"`` gives a key no store can hold. Such a key is the
    argument's fault when it holds a glob character, a NUL or a lone surrogate that a
    string argument value (at any depth) carrying it supplies, or is longer than
    :data:`~icore.records.MAX_KEY_LEN` only because of such a value. A pattern the
    function writes itself (``lambda a: {"stock/*"}``) is no argument's fault: a
    developer's mistake, raised as before.

    Returns:
        ``(argument path, value)`` (``sku``, ``lines.0.sku``), or None.

    Raises:
        WorkspaceError: ``key`` is not a str or ``args`` not a mapping (field named).
    """
    if not isinstance(key, str):
        raise WorkspaceError(f"key must be a str, not {type(key).__name__}", field="key")
    if not isinstance(args, Mapping):
        raise WorkspaceError(f"args must be a mapping, not {type(args).__name__}",
                             field="args")
    long = len(key) > MAX_KEY_LEN
    if not (long or is_pattern(key) or unstorable(key)):
        return None
    for path, val in _strings(args, "", 0):
        if not val or val not in key:
            continue
        if is_pattern(val) or unstorable(val) or (long and len(key) - len(val) <= MAX_KEY_LEN):
            return path, val
    return None


def bad_args_hint(bad: Mapping[str, str], action: str, keys: Iterable[str] = ()) -> str:
    """What a model is told when argument values made keys no fact can have.

    The one text of such a refusal, in process (the workspace) and at the ``icore mcp``
    gateway alike (QA r8 D5).

    Args:
        bad: argument path -> its value (:func:`arg_fault`'s pairs).
        action: the tool's name.
        keys: the keys the values made (named when given).

    Returns:
        One sentence without its final period.

    Raises:
        WorkspaceError: ``bad`` is not a mapping of str to str, ``action`` not a str or
            ``keys`` not an iterable of str (field named).
    """
    if not isinstance(bad, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in bad.items()):
        raise WorkspaceError("bad must map argument paths (str) to their values (str)",
                             field="bad")
    if not isinstance(action, str):
        raise WorkspaceError(f"action must be a str, not {type(action).__name__}",
                             field="action")
    keys = _str_keys(keys)
    shown = ", ".join(f"{p}={v!r}"[:120] for p, v in sorted(bad.items()))
    glob = any(ch in v for v in bad.values() for ch in GLOB_CHARS)
    why = ("'*', '?' and '[' in an argument are literal characters, not a pattern, and no "
           "fact has such a key" if glob else "it cannot be part of a fact's key: a NUL, a "
           f"lone surrogate, or a key longer than {MAX_KEY_LEN} characters")
    where = ", ".join(sorted(keys)).encode("utf-8", "backslashreplace").decode()[:200]
    return (f"the argument value {shown} is not a valid key of a known fact"
            f"{': ' + where if where else ''} ({why}). Nothing ran: nothing can authorize "
            f"the call, so it was not made. Call {action} again "
            "with the exact value of an existing fact (read it first)")


def _str_keys(keys: Any) -> list[str]:
    """``keys`` as a list of str, else a :class:`WorkspaceError` (field ``keys``)."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise WorkspaceError(f"keys must be an iterable of str, not {type(keys).__name__}",
                             field="keys")
    out = list(keys)
    if not all(isinstance(k, str) for k in out):
        raise WorkspaceError("keys must hold str only", field="keys")
    return out


def key_args(keys: Iterable[str], args: Mapping[str, Any]) -> dict[str, str]:
    """The call's argument values a key of D(a) is made from: argument path -> value.

    A str (or int) argument value that is a whole ``/``-separated segment of one of
    ``keys`` (``flight="lh100"`` in ``fare/lh100/2026-12-20``), or a text of at least 3
    characters inside one. Used to tell the model that a key naming no fact came from its
    own argument (a wrong id it can correct), not from the application.

    Raises:
        WorkspaceError: ``keys`` is not an iterable of str or ``args`` not a mapping.
    """
    keys = _str_keys(keys)
    if not isinstance(args, Mapping):
        raise WorkspaceError(f"args must be a mapping, not {type(args).__name__}",
                             field="args")
    found: dict[str, str] = {}
    for path, val in _strings(args, "", 0, numbers=True):
        if val and any(val in k.split("/") or (len(val) >= 3 and val in k) for k in keys):
            found[path] = val
    return found


def unwritten_hint(keys: Iterable[str], action: str,
                   from_args: Mapping[str, str] | None = None) -> str:
    """What a model is told when facts a call depends on were never written.

    The one text of such a ``not_read`` refusal, in process (the workspace) and at the
    ``icore mcp`` gateway alike. ``from_args`` (:func:`key_args`): the arguments the keys
    are made from. Given, the model is told the key names no fact and to call again with
    a corrected argument, read first (a wrong id, its case: QA qa-new15a S3); else the
    keys are the application's, and retrying does not help.

    Returns:
        The text after the refusal head, without its final period.
    """
    keys = sorted(keys)
    one = len(keys) == 1
    where = ", ".join(keys).encode("utf-8", "backslashreplace").decode()[:300]
    head = (f"no value yet for {where}: nothing has been written under "
            f"{'this key' if one else 'these keys'}")
    if from_args:
        shown = ", ".join(f"{p}={v!r}"[:120] for p, v in sorted(from_args.items()))
        return (f"{head}, so no such fact exists; {'it is' if one else 'they are'} made from "
                f"your argument{'' if len(from_args) == 1 else 's'} {shown}. Nothing ran. "
                f"Check {'it' if len(from_args) == 1 else 'them'} against the facts you "
                f"read (the exact id, its spelling and case; read the fact first if you "
                f"have not) and call {action} again with corrected arguments")
    return (f"{head} (the application may name a fact that does not exist yet, or misspell "
            f"it), so nothing can authorize the call and reading again does not help. "
            f"Nothing ran. Do not retry it unchanged; report it")


def _strings(value: Any, path: str, depth: int, *, numbers: bool = False
             ) -> Iterable[tuple[str, str]]:
    """``(path, text)`` of every str in a call's arguments (nested up to 8 levels).

    ``numbers``: an int (not a bool) too, as its decimal text.
    """
    if isinstance(value, str):
        yield path, value
    elif numbers and isinstance(value, int) and not isinstance(value, bool):
        yield path, str(value) if abs(value) < 10**30 else ""
    elif depth < 8 and isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k), depth + 1,
                                numbers=numbers)
    elif depth < 8 and isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}.{i}" if path else str(i), depth + 1,
                                numbers=numbers)


def declare_fix(key: str) -> str:
    """The fix for a key no owner is declared for."""
    return f"declare it: Workspace({{{key!r}: '<owner>'}})"


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a NUL or a lone surrogate (no UTF-8 form).

    No store, file name or trace line can hold such text.
    """
    return "\x00" in text or (not text.isascii() and _SURROGATE.search(text) is not None)


def fact_key(key: Any, *, where: str = "key") -> str:
    """``key`` if it can name one fact, else a typed error naming the fix.

    Raises:
        WorkspaceError: ``key`` is not a str (the fix is its text form, never a
            declaration of ``'None'``), is empty, longer than :data:`MAX_KEY_LEN`
            characters, holds a lone surrogate (no UTF-8 form: a SQLite or remote store
            could not hold it) or a NUL, or is a glob pattern (a pattern names many facts;
            one fact is read or written at a time).
    """
    if not isinstance(key, str):
        fix = (f"pass the key as text: {str(key)!r}" if isinstance(key, int | float)
               else "pass the fact's key, e.g. 'order/42'")
        raise WorkspaceError(f"a fact {where} is a str", got=type(key).__name__, fix=fix)
    if not key:
        raise WorkspaceError(f"a fact {where} is a non-empty str",
                             fix="pass the fact's key, e.g. 'order/42'")
    if len(key) > MAX_KEY_LEN:
        raise WorkspaceError(f"a fact {where} is at most {MAX_KEY_LEN} characters",
                             key=key[:40] + "…", length=len(key))
    if unstorable(key):
        raise WorkspaceError(f"a fact {where} must be text with a UTF-8 form and no NUL "
                             "(a lone surrogate or NUL cannot be stored)", key=ascii(key)[:80])
    if is_pattern(key):
        prefix = key[:min(key.index(c) for c in _GLOB if c in key)]
        raise WorkspaceError(
            f"the {where} {key!r} is a pattern, not a fact: '*', '?' and '[' only declare "
            "owners (Workspace({'room/*': 'facilities'}))", key=key,
            fix=f"name one fact, e.g. {prefix + '<id>'!r}")
    return key


def suggest_key(key: str, om: OwnershipMap) -> str | None:
    """The declared key closest to a misspelled ``key`` (difflib), or None.

    A pattern ``day/*`` is compared through its literal prefix: ``dya/2026-12-10`` ->
    ``day/2026-12-10``.
    """
    cands: list[str] = []
    for pat in om.to_dict():
        if not is_pattern(pat):
            cands.append(pat)
            continue
        prefix = pat[:min(pat.index(c) for c in _GLOB if c in pat)]
        if prefix.endswith("/") and "/" in key:
            head, rest = key.split("/", 1)
            head += "/"
        else:
            head, rest = key[:len(prefix)], key[len(prefix):]
        close = difflib.SequenceMatcher(None, head, prefix).ratio() >= 0.6
        if prefix and close and om.owner_of(prefix + rest) is not None:
            cands.append(prefix + rest)
    best = difflib.get_close_matches(key, cands, n=1, cutoff=0.6)
    return best[0] if best else None


def suggest_written(key: str, written: Iterable[str]) -> str | None:
    """The written key closest to ``key`` (a key matching a pattern but never written)."""
    best = difflib.get_close_matches(key, [k for k in written if k != key], n=1,
                                     cutoff=0.8)
    return best[0] if best else None


def _tokens(pattern: str) -> list[str]:
    """``pattern`` as fnmatch tokens: ``*``, ``?``, a class ``[...]`` or one literal char."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            end = pattern.find("]", j)
            if end >= 0:
                out.append(pattern[i:end + 1])
                i = end + 1
                continue
        out.append(c)
        i += 1
    return out


def _one(tok: str, c: str) -> bool:
    if tok == "?":
        return True
    if len(tok) > 1:
        return fnmatch.fnmatchcase(c, tok)
    return tok == c


def _chars(tok: str) -> set[str]:
    """Characters worth trying for one token (its members, a few probes)."""
    if len(tok) == 1 and tok != "?":
        return {tok}
    body = tok[1:-1].lstrip("!")
    got = set("x0_-./A")
    for a, b in re.findall(r"(.)-(.)", body):
        got.update(chr(n) for n in range(ord(a), min(ord(b), ord(a) + 256) + 1))
    got.update(body)
    return got


def _compatible(a: str, b: str) -> bool:
    return any(_one(a, c) and _one(b, c) for c in _chars(a) | _chars(b))


def patterns_overlap(p: str, q: str) -> bool:
    """Whether some key matches both fnmatch patterns ``p`` and ``q``."""
    tp, tq = _tokens(p), _tokens(q)

    @functools.cache
    def inter(i: int, j: int) -> bool:
        if i == len(tp) and j == len(tq):
            return True
        if i < len(tp) and tp[i] == "*":
            # the star matches nothing, or the one char q's token j matches (or q's star
            # matches nothing)
            return inter(i + 1, j) or (j < len(tq) and inter(i, j + 1))
        if j < len(tq) and tq[j] == "*":
            return inter(i, j + 1) or (i < len(tp) and inter(i + 1, j))
        if i == len(tp) or j == len(tq):
            return False
        return _compatible(tp[i], tq[j]) and inter(i + 1, j + 1)

    return inter(0, 0)


def ambiguous_patterns(om: OwnershipMap) -> list[tuple[str, str]]:
    """Pairs of owner patterns of different owners that tie for some key.

    Some key matches both and neither is more specific (the longer pattern wins; equal
    lengths tie). A tie would leave the key's owner to declaration order: two processes
    declaring the facts in another order would disagree on who owns it.
    """
    pats = [(p, o) for p, o in om.to_dict().items() if is_pattern(p)]
    return [(p, q) for i, (p, o) in enumerate(pats) for q, o2 in pats[i + 1:]
            if o != o2 and len(p) == len(q) and patterns_overlap(p, q)]


def detached(value: JSONValue) -> JSONValue:
    """A deep copy of a JSON value (dicts and lists copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    if isinstance(value, list):
        return [detached(v) for v in value]
    return value


def detached_map(values: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """Key -> :func:`detached` value."""
    return {k: detached(v) for k, v in values.items()}


