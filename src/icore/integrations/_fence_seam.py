"""The one place integrations call the :class:`~icore.fence.Fence` (a small internal seam).

Everything framework-specific builds on :func:`execute` / :func:`aexecute`: the fence's
protected action with the call's arguments bound to the plan (a root must bind exactly
this tool and these arguments, else ``args_mismatch``; after a replan the fresh root's
arguments run), ``Fence.aexecute`` for async tools and replanners (owners of D(a) queried
concurrently), and no public raw call of the protected tool (issue 12,
docs/planfence-core.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from icore.errors import FenceError
from icore.fence import ActionResult, AsyncReplanner, Fence, ProtectedTool, Replanner
from icore.records import RecordId

Scope = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]

_RUNNING: ContextVar[Callable[..., Any] | None] = ContextVar("icore_seam_running",
                                                            default=None)


def _running(**args: Any) -> Any:
    """The function of the call being executed (set by :func:`execute` / :func:`aexecute`)."""
    fn = _RUNNING.get()
    if fn is None:  # only the fence calls this, inside execute / aexecute
        raise FenceError("a seam tool runs only inside its execute()")
    return fn(**args)


class Tools:
    """One guard's protected tools, built once per name (the per-call cost stays low).

    Each :class:`~icore.fence.ProtectedTool` calls the function of the call being
    executed (a context variable set around the fence's protected action), so a
    closure made per call needs no new ``ProtectedTool``.

    Args:
        depends_on: D(a) of every tool (keys, or a function of the arguments).
    """

    def __init__(self, depends_on: Scope) -> None:
        self.depends_on = depends_on
        self._by_name: dict[str, ProtectedTool] = {}

    def get(self, name: str) -> ProtectedTool:
        """The protected tool named ``name``."""
        tool = self._by_name.get(name)
        if tool is None:
            tool = ProtectedTool(_running, depends_on=self.depends_on, name=name)
            self._by_name[name] = tool
        return tool


def execute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
            roots: Sequence[RecordId], args: Mapping[str, Any],
            replan: Replanner | None, tools: Tools | None = None) -> ActionResult:
    """``fence.execute`` of the sync ``fn`` as a protected tool named ``name``.

    ``tools``: the guard's protected tools (reused; their D(a) is ``depends_on``).

    Raises:
        AsyncRequired: ``fn`` or ``replan`` is a coroutine function.
    """
    if tools is None:
        return fence.execute(ProtectedTool(fn, depends_on=depends_on, name=name),
                             roots=roots, args=args, replan=replan)
    token = _RUNNING.set(fn)
    try:
        return fence.execute(tools.get(name), roots=roots, args=args, replan=replan)
    finally:
        _RUNNING.reset(token)


async def aexecute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
                   roots: Sequence[RecordId], args: Mapping[str, Any],
                   replan: Replanner | AsyncReplanner | None,
                   tools: Tools | None = None) -> ActionResult:
    """``await fence.aexecute`` of ``fn`` (sync or ``async def``) named ``name``."""
    if tools is None:
        return await fence.aexecute(ProtectedTool(fn, depends_on=depends_on, name=name),
                                    roots=roots, args=args, replan=replan)
    token = _RUNNING.set(fn)
    try:
        return await fence.aexecute(tools.get(name), roots=roots, args=args, replan=replan)
    finally:
        _RUNNING.reset(token)
