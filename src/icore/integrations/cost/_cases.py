"""The framework cases of ``icore bench integrations`` (issue 28 item 8).

Each case times one framework's own call of a tool, without and with the fence, on the
same in-process team (:class:`icore.bench.micro.SeamWorld`: in-memory stores reached
through ``LocalOwners``), every fenced call authorized:

=============================  ==================================================
case                           the call
=============================  ==================================================
LangGraph tool.invoke          ``StructuredTool.invoke(args)`` (target <= 1.3x)
OpenAI Agents function tool    ``await FunctionTool.on_invoke_tool(ctx, json)``
AG2 function                   the registered function called as AG2 calls it
=============================  ==================================================

A framework that is not installed (or whose drop-in refuses the installed version) is
skipped with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icore.errors import IcoreError

if TYPE_CHECKING:  # icore.bench is imported when the benchmark runs, not with the package
    from icore.bench.micro import SeamCase, SeamSkip, SeamWorld


def _ship_fn(world: SeamWorld) -> Callable[..., str]:
    def ship(city: str) -> str:
        """Ship the order to a city."""
        return world.ship(city)

    return ship


def _langgraph(world: SeamWorld) -> SeamCase:
    from langchain_core.tools import tool as as_tool

    from icore.integrations.langgraph import fenced_tool

    plain = as_tool(_ship_fn(world))
    safe = fenced_tool(plain, fence=world.fence, depends_on=world.deps,
                       roots=lambda state, args: world.roots)
    args = world.args
    from icore.bench.micro import SeamCase

    return SeamCase("LangGraph tool.invoke", "unfenced tool", "fenced_tool",
                    lambda: plain.invoke(args), lambda: safe.invoke(args), target=1.3)


def _openai_agents(world: SeamWorld) -> SeamCase:
    from agents import function_tool
    from agents.tool_context import ToolContext

    from icore.integrations.openai_agents import fenced_function_tool

    plain = function_tool(_ship_fn(world))
    safe = fenced_function_tool(plain, fence=world.fence, depends_on=world.deps,
                                roots=lambda ctx, args: world.roots)
    raw = json.dumps(world.args)
    ctx: Any = ToolContext(context=None, tool_name=plain.name, tool_call_id="bench",
                           tool_arguments=raw)

    async def base() -> Any:
        return await plain.on_invoke_tool(ctx, raw)

    async def fenced() -> Any:
        return await safe.on_invoke_tool(ctx, raw)

    from icore.bench.micro import SeamCase

    return SeamCase("OpenAI Agents function tool", "unfenced FunctionTool",
                    "fenced_function_tool", base, fenced)


def _ag2(world: SeamWorld) -> SeamCase:
    from icore.integrations.ag2 import fenced_function

    plain = _ship_fn(world)
    safe = fenced_function(plain, fence=world.fence, depends_on=world.deps, context={},
                           roots=lambda ctx, args: world.roots)
    args = world.args
    from icore.bench.micro import SeamCase

    return SeamCase("AG2 function", "unfenced function", "fenced_function",
                    lambda: plain(**args), lambda: safe(**args))


_FRAMEWORKS: tuple[tuple[str, Callable[[SeamWorld], SeamCase]], ...] = (
    ("LangGraph tool.invoke", _langgraph),
    ("OpenAI Agents function tool", _openai_agents),
    ("AG2 function", _ag2),
)


def seam_cases() -> tuple[list[SeamCase], list[SeamSkip]]:
    """The cases of ``icore bench integrations``: frameworks first, then the bare fence.

    Returns:
        ``(cases, skipped)``: each framework's case when it can be built (each on a
        fresh :class:`~icore.bench.micro.SeamWorld`), the bare-fence cases, and the
        frameworks skipped with their reason.
    """
    from icore.bench.micro import SeamSkip, SeamWorld, fence_cases

    cases: list[SeamCase] = []
    skipped: list[SeamSkip] = []
    for name, build in _FRAMEWORKS:
        try:
            cases.append(build(SeamWorld()))
        except (ImportError, IcoreError) as exc:  # not installed, or refused
            skipped.append(SeamSkip(name, str(exc).splitlines()[0]))
    return cases + fence_cases(SeamWorld()), skipped


__all__ = ["seam_cases"]
