"""The checks of a protected call's inputs, before anything is asked or run (#29).

Wrong-typed inputs of :meth:`~icore.workspace.Agent.execute`, ``action_record`` and
``request_for`` are refused with a :class:`~icore.workspace.WorkspaceError` naming what
and where; a tool function must accept the call's arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from icore.errors import brief
from icore.workspace._errors import WorkspaceError
from icore.workspace._keys import unstorable

_SIGNATURES: dict[tuple[Any, bool], inspect.Signature] = {}


def check_call(action: Any, fn: Any, args: Any, turn: Any, replan: Any) -> dict[str, Any]:
    """Refuse a protected call's wrong-typed inputs before anything is asked or run.

    Returns:
        ``args`` read once into a plain dict: the gate, the approval and the tool all see
        this copy (a mapping read again could answer otherwise, or raise, #29).

    Raises:
        WorkspaceError: ``action`` is not a non-empty str, ``fn`` or ``replan`` is not
            callable, ``args`` is not a mapping of str names (or raised when read),
            ``turn`` is unhashable.
    """
    snap = checked_args(action, args)
    if not callable(fn):
        raise WorkspaceError("fn is the tool function, called once the call is authorized",
                             action=action, got=type(fn).__name__)
    _check_fits(action, fn, snap)
    if replan is not None and not callable(replan):
        raise WorkspaceError("replan= must be a function (Stale) -> the new call's "
                             "arguments", action=action, got=type(replan).__name__)
    _check_turn(action, turn)
    return snap


def checked_args(action: Any, args: Any) -> dict[str, Any]:
    """``action`` a non-empty str and ``args`` a mapping of str names, else WorkspaceError.

    Returns ``args`` as a plain dict, read once (a mapping whose reads raise: refused).
    """
    if not isinstance(action, str) or not action or unstorable(action):
        # a NUL or a lone surrogate was found only as the record's content (issue 29)
        raise WorkspaceError("action is the tool's name, a non-empty str (no NUL, no lone "
                             "surrogate)", got=repr(action)[:80])
    snap: dict[Any, Any] | None = None
    if isinstance(args, Mapping):
        try:
            snap = dict(args)
        except Exception as exc:  # the caller's own mapping raised when read
            raise WorkspaceError("args could not be read: the mapping raised",
                                 action=action, got=type(args).__name__,
                                 error=brief(exc)) from None
    if snap is None or not all(isinstance(k, str) for k in snap):
        raise WorkspaceError("args are the call's keyword arguments: a mapping of names to "
                             "values", action=action, got=type(args).__name__,
                             fix="execute(action, fn, {'city': 'Berlin'}, depends_on=...)")
    return snap


def _check_turn(action: str, turn: Any) -> None:
    """``turn`` hashable (it names the model message), else WorkspaceError."""
    try:
        hash(turn)
    except TypeError:
        raise WorkspaceError("turn names the model message the call came from: a hashable "
                             "value (a str or a tuple)", action=action,
                             got=type(turn).__name__) from None


def checked_rid(rid: Any, agent: str) -> str:
    """``rid`` if it is a str (a record id), else a WorkspaceError naming ``rid``."""
    if not isinstance(rid, str):
        raise WorkspaceError("rid is a record id (a str)", agent=agent,
                             got=type(rid).__name__)
    return rid


def check_basis_args(action: Any, args: Any, keys: Any, turn: Any) -> list[str]:
    """Refuse wrong-typed inputs of ``action_record`` / ``request_for``; the keys, sorted.

    Raises:
        WorkspaceError: ``action`` is not a non-empty str, ``args`` not a mapping of str
            names, ``keys`` not a collection of str keys (a str alone is refused: it
            would be read as its letters), ``turn`` unhashable.
    """
    checked_args(action, args)
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise WorkspaceError("keys are D(a): a collection of fact keys, e.g. {'order/1'}",
                             action=action, got=type(keys).__name__)
    wanted = list(keys)
    if not all(isinstance(k, str) for k in wanted):
        raise WorkspaceError("keys are D(a): fact keys are str", action=action,
                             got=sorted({type(k).__name__ for k in wanted}))
    _check_turn(action, turn)
    return sorted(set(wanted))


def _check_fits(action: str, fn: Any, args: Mapping[str, Any]) -> None:
    """A tool without ``**kwargs`` must accept exactly ``args``.

    A function, and since #29 also a callable object or a ``functools.partial`` (their
    own signature: an argument named ``''`` ran them into Python's TypeError once
    authorized). Checked before the gate, so an authorized call never fails on its own
    parameters. A callable with no signature (some builtins) is not checked.
    """
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_flags & inspect.CO_VARKEYWORDS:
        return  # a wrapper passing arguments on
    try:
        if code is None:
            sig = inspect.signature(fn)
            if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
                return
        else:
            key = (code, inspect.ismethod(fn))  # one def: the same parameters
            cached = _SIGNATURES.get(key)
            if cached is None:
                cached = _SIGNATURES[key] = inspect.signature(fn)
                if len(_SIGNATURES) > 1024:
                    _SIGNATURES.pop(next(iter(_SIGNATURES)))
            sig = cached
    except (TypeError, ValueError):  # no signature to check against
        return
    try:
        sig.bind(**args)
    except TypeError as exc:
        raise WorkspaceError("the call's arguments do not fit the tool function's "
                             "parameters", action=action, error=str(exc),
                             args=sorted(args)) from None
