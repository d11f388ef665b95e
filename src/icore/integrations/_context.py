"""Plan roots in a framework's run context: read L(a), write the fresh plan back.

The OpenAI Agents SDK (``RunContextWrapper.context``), AG2 (``ContextVariables``) and
CrewAI (a shared mapping or Flow state) keep the plan in a context object; these helpers
read and write one field of it whatever its kind: a mapping (``ctx[key]``), an object
with ``get``/``set`` (AG2 ``ContextVariables``) or a plain object (attributes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from icore.errors import IntegrationError
from icore.integrations._fenced import Gated
from icore.records import RecordId

ContextRoots = str | Callable[[Any, Mapping[str, Any]], Sequence[RecordId] | None]
"""A context key / attribute holding L(a), or ``f(context, args) -> L(a)``."""
StateUpdate = Callable[[Gated], Mapping[str, Any]]
"""More context (or state) updates after a replan, e.g. the fresh destination."""


def context_get(ctx: Any, key: str) -> Any:
    """``ctx[key]`` / ``ctx.get(key)`` / ``ctx.<key>`` (None when absent)."""
    if isinstance(ctx, Mapping):
        return ctx.get(key)
    getter = getattr(ctx, "get", None)
    if callable(getter):
        return getter(key)
    return getattr(ctx, key, None)


def context_set(ctx: Any, key: str, value: Any) -> None:
    """``ctx[key] = value`` / ``ctx.set(key, value)`` / ``ctx.<key> = value``."""
    if isinstance(ctx, MutableMapping):
        ctx[key] = value
        return
    setter = getattr(ctx, "set", None)
    if callable(setter):
        setter(key, value)
    elif ctx is not None:
        setattr(ctx, key, value)


def plan_roots(ctx: Any, roots: ContextRoots, args: Mapping[str, Any]
               ) -> Sequence[RecordId] | None:
    """L(a) for one call: the ``roots`` field of ``ctx``, or ``roots(ctx, args)``.

    Raises:
        IntegrationError: the field (or the function) gives a str or another non-list
            (a single record id is not L(a): store ``[record.id]``).
    """
    got = context_get(ctx, roots) if isinstance(roots, str) else roots(ctx, args)
    return check_roots(got, source=roots if isinstance(roots, str) else "roots()")


def check_roots(got: Any, *, source: str) -> list[RecordId] | None:
    """``got`` as L(a) (a list of record ids), None when empty.

    Raises:
        IntegrationError: ``got`` is a str/bytes (it would be read as one-character
            roots), not a list/tuple, or holds a non-str.
    """
    if not got:
        return None
    if isinstance(got, str | bytes) or not isinstance(got, list | tuple):
        raise IntegrationError("the plan roots must be a list of record ids",
                               source=source, got=type(got).__name__,
                               fix="store [record.id], not record.id")
    if not all(isinstance(r, str) for r in got):
        raise IntegrationError("the plan roots must be record ids (str)", source=source)
    return list(got)


def write_back(ctx: Any, roots: ContextRoots, gated: Gated,
               state_update: StateUpdate | None) -> None:
    """After a replan that ran: the fresh roots (and ``state_update``) into ``ctx``."""
    if not gated.replanned:
        return
    if isinstance(roots, str):
        context_set(ctx, roots, list(gated.roots))
    if state_update is not None:
        for k, v in state_update(gated).items():
            context_set(ctx, k, v)
