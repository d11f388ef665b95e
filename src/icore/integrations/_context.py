"""Plan roots in a framework's run context: read L(a), write the fresh plan back.

The OpenAI Agents SDK (``RunContextWrapper.context``), AG2 (``ContextVariables``) and
CrewAI (a shared mapping or Flow state) keep the plan in a context object; these helpers
read and write one field of it whatever its kind: a mapping (``ctx[key]``), an object
with ``get``/``set`` (AG2 ``ContextVariables``) or a plain object (attributes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

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
    """L(a) for one call: the ``roots`` field of ``ctx``, or ``roots(ctx, args)``."""
    if isinstance(roots, str):
        got = context_get(ctx, roots)
        return list(got) if got else None
    return roots(ctx, args)


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
