"""The one place integrations call the :class:`~icore.fence.Fence` (a small internal seam).

Everything framework-specific builds on :func:`execute` / :func:`aexecute`, so a change
of the fence's API (issue 12: arguments bound to the plan, ``Fence.aexecute``, the raw
call private) is absorbed here.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from icore.fence import ActionResult, Fence, ProtectedTool, Replan, ReplanRequest
from icore.records import RecordId

Scope = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]


def execute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
            roots: Sequence[RecordId], args: Mapping[str, Any],
            replan: Callable[[ReplanRequest], Replan | None] | None) -> ActionResult:
    """``fence.execute`` of ``fn`` as a protected tool named ``name``."""
    tool = ProtectedTool(fn, depends_on=depends_on, name=name)
    return fence.execute(tool, roots=roots, args=args, replan=replan)


async def aexecute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
                   roots: Sequence[RecordId], args: Mapping[str, Any],
                   replan: Callable[[ReplanRequest], Any] | None) -> ActionResult:
    """The async protected action: the gate runs in a worker thread, an ``async def``
    replanner and tool run on the caller's event loop."""
    loop = asyncio.get_running_loop()
    sync_replan: Callable[[ReplanRequest], Replan | None] | None = None
    if replan is not None:
        def sync_replan(rq: ReplanRequest) -> Replan | None:
            out = replan(rq)
            if inspect.isawaitable(out):
                out = asyncio.run_coroutine_threadsafe(_awaited(out), loop).result()
            return cast("Replan | None", out)

    def deferred(**kw: Any) -> Any:
        return fn(**kw)  # a coroutine for an async tool: awaited below, on the loop

    tool = ProtectedTool(deferred, depends_on=depends_on, name=name)
    res = await asyncio.to_thread(fence.execute, tool, roots=roots, args=args,
                                  replan=sync_replan)
    if res.executed and inspect.isawaitable(res.value):
        res = replace(res, value=await res.value)
    return res


async def _awaited(aw: Awaitable[Any]) -> Any:
    return await aw
