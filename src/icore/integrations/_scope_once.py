"""A ``depends_on`` function asked once per protected call (issue 28; planfence Sec. 4).

D(a) of one call is needed by the guard's setup check, the workspace's action record and
the gate's pre-check (and again after a human's answer): :class:`ScopeOnce` wraps the
user's function so that, inside :func:`one_call`, the first answer for one argument set
is reused. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_SCOPE_MEMO: ContextVar[dict[str, Any] | None] = ContextVar("icore_scope_memo",
                                                            default=None)
"""The D(a) values of the protected call being gated (canonical arguments -> keys)."""


class ScopeOnce:
    """A ``depends_on`` function asked once per protected call and argument set.

    The guard's own check, the workspace's action record and the gate's pre-check all
    need D(a) of one call; inside :meth:`FenceGuard.run` / :meth:`FenceGuard.arun` the
    first answer for these arguments is reused (a replan's other arguments ask again),
    so a user's function runs once per call, never once per layer. Outside a call it is
    the function itself.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Mapping[str, Any]], Iterable[str]]) -> None:
        self.fn = fn

    def __call__(self, args: Mapping[str, Any]) -> Iterable[str]:
        memo = _SCOPE_MEMO.get()
        if memo is None:
            return self.fn(args)
        try:
            key = json.dumps(args, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            return self.fn(args)
        if key in memo:
            return memo[key]  # type: ignore[no-any-return]
        keys = self.fn(args)
        if not isinstance(keys, str | bytes):  # an iterator is read once: keep its keys
            try:
                keys = frozenset(keys)
            except TypeError:
                pass
        memo[key] = keys
        return keys


@contextmanager
def one_call() -> Iterator[None]:
    """The extent of one protected call for :class:`ScopeOnce` (nested calls share it)."""
    if _SCOPE_MEMO.get() is not None:
        yield
        return
    token = _SCOPE_MEMO.set({})
    try:
        yield
    finally:
        _SCOPE_MEMO.reset(token)
