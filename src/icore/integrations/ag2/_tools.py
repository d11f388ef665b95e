"""Fenced AG2 functions (planfence App. A.3 at a ``ConversableAgent`` function call).

:func:`fenced_function` wraps the Python function an AG2 executor runs for a tool call.
The wrapper keeps the function's name, docstring, signature and resolved annotations, so
``register_function`` / ``register_for_llm`` build the same schema. L(a) comes from the
chat's context (AG2's ``ContextVariables`` or any mapping: key ``plan_roots`` by
default) or a function of (context, arguments); a replan writes the fresh roots back
into the context. A blocked call raises :class:`~icore.errors.ActionBlocked`, which AG2
turns into the function's error reply (``"Error: PlanFence blocked ..."``, the tool
response the model reads): AG2 reports every tool exception that way, so there is no
separate "raise" mode.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import Fence
from icore.integrations import AnyReplanner, FenceGuard, Gated, Replicator, RunRecorder
from icore.integrations import Scope as _Scope
from icore.integrations._context import ContextRoots, StateUpdate, plan_roots, write_back


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
          ) -> dict[str, Any]:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    return dict(bound.arguments)


def fenced_function(fn: Callable[..., Any], *, fence: Fence, depends_on: _Scope,
                    context: Any, roots: ContextRoots = "plan_roots",
                    replan: AnyReplanner | None = None, recorder: RunRecorder | None = None,
                    agent: str = "executor",
                    state_update: StateUpdate | None = None,
                    replicator: Replicator | None = None,
                    name: str | None = None) -> Callable[..., Any]:
    """Wrap a function an AG2 agent executes so every call passes the PlanFence gate.

    Args:
        fn: the tool function (sync or ``async def``).
        fence: the executor's :class:`~icore.fence.Fence`.
        depends_on: D(a).
        context: the chat's context: AG2 ``ContextVariables`` or a mutable mapping.
        roots: the context key holding L(a) (default ``"plan_roots"``), or
            ``f(context, args)``.
        replan: the one replan (sync, or ``async def`` for an async ``fn``).
        recorder: records gate decisions, the replan and the call.
        agent: the agent id events are attributed to.
        state_update: after a replan, more context updates.
        replicator: names keys, not record ids, in a block's message.
        name: the tool name (default ``fn.__name__``).

    Returns:
        A function with ``fn``'s name, docstring and signature (sync or async like it).

    Raises:
        IntegrationError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise IntegrationError("fenced_function needs a function", framework="ag2",
                               got=type(fn).__name__)
    tool_name = str(name or getattr(fn, "__name__", "tool"))
    guard = FenceGuard(fence=fence, depends_on=depends_on, replan=replan, recorder=recorder,
                       agent=agent, on_block="error", replicator=replicator)
    guard.claim(tool_name)

    def settle(gated: Gated) -> Any:
        if not gated.executed:
            raise ActionBlocked(gated.message, action=tool_name,
                                reason=gated.reason)
        write_back(context, roots, gated, state_update)
        return gated.value

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            a = _bind(fn, args, kwargs)
            return settle(await guard.arun(tool_name, fn, a, plan_roots(context, roots, a)))

        wrapper = awrapper
    else:
        @functools.wraps(fn)
        def swrapper(*args: Any, **kwargs: Any) -> Any:
            a = _bind(fn, args, kwargs)
            return settle(guard.run(tool_name, fn, a, plan_roots(context, roots, a)))

        wrapper = swrapper
    try:  # resolved annotations, so AG2 builds the schema without fn's module globals
        wrapper.__annotations__ = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError):
        pass
    wrapper.__name__ = tool_name
    return wrapper
