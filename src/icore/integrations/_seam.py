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
from typing import Any

from icore.fence import ActionResult, AsyncReplanner, Fence, ProtectedTool, Replanner
from icore.records import RecordId

Scope = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]


def execute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
            roots: Sequence[RecordId], args: Mapping[str, Any],
            replan: Replanner | None) -> ActionResult:
    """``fence.execute`` of the sync ``fn`` as a protected tool named ``name``.

    Raises:
        AsyncRequired: ``fn`` or ``replan`` is a coroutine function.
    """
    tool = ProtectedTool(fn, depends_on=depends_on, name=name)
    return fence.execute(tool, roots=roots, args=args, replan=replan)


async def aexecute(fence: Fence, fn: Callable[..., Any], *, name: str, depends_on: Scope,
                   roots: Sequence[RecordId], args: Mapping[str, Any],
                   replan: Replanner | AsyncReplanner | None) -> ActionResult:
    """``await fence.aexecute`` of ``fn`` (sync or ``async def``) named ``name``."""
    tool = ProtectedTool(fn, depends_on=depends_on, name=name)
    return await fence.aexecute(tool, roots=roots, args=args, replan=replan)
