"""The framework cases of ``icore bench integrations`` (issue 28 item 8).

Each case times one framework's own call of a tool, without and with the fence, on the
in-process team the caller hands in (``icore bench integrations`` passes the lab's
``SeamWorld``: in-memory stores reached through ``LocalOwners``),
every fenced call authorized:

=============================  ==================================================
case                           the call
=============================  ==================================================
LangGraph tool.invoke          ``StructuredTool.invoke(args)`` (target <= 1.3x), plan
                               roots given (the low-level API)
... workspace agent            the same through ``fenced_tool(agent=ws.agent(...))``
                               (the high-level API: each call's action record built
                               from the agent's reads; target <= 1.3x)
OpenAI Agents function tool    ``await FunctionTool.on_invoke_tool(ctx, json)``
AG2 tool                       one ``ToolCallEvent`` through the ``ag2.tool``'s
                               middleware chain (AG2 1.x), as its ``register`` runs it
=============================  ==================================================

A framework that is not installed (or whose drop-in refuses the installed version) is
skipped with the reason. Integrations use only the public API of the layers they build
on (design.md 2), so this module imports nothing of the lab (the benchmarks): the world
is duck typed (:class:`World`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from icore.errors import IcoreError
from icore.fence import Fence


class World(Protocol):
    """The team a case gates against: a fence, D(a), roots binding ``ship(**args)``."""

    @property
    def fence(self) -> Fence:
        """The executor's fence."""
        ...

    @property
    def deps(self) -> Collection[str]:
        """D(a) of ``ship``."""
        ...

    @property
    def roots(self) -> Sequence[str]:
        """L(a): the roots binding ``ship(**args)``."""
        ...

    @property
    def args(self) -> Mapping[str, Any]:
        """The arguments every call makes."""
        ...

    def ship(self, city: str) -> str:
        """The tool's side effect."""
        ...


@dataclass(frozen=True)
class FrameworkCase:
    """One framework's unfenced and fenced call (the fields the seam benchmark times).

    Attributes:
        name: the row's label.
        base_label / fenced_label: what each side calls.
        base / fenced: one call of each side (sync, or a coroutine function).
        target: the highest acceptable ratio fenced / base (None: no target).
    """

    name: str
    base_label: str
    fenced_label: str
    base: Callable[[], Any] | Callable[[], Awaitable[Any]]
    fenced: Callable[[], Any] | Callable[[], Awaitable[Any]]
    target: float | None = None


def _ship_fn(world: World) -> Callable[..., str]:
    def ship(city: str) -> str:
        """Ship the order to a city."""
        return world.ship(city)

    return ship


def _langgraph(world: World) -> FrameworkCase:
    from langchain_core.tools import tool as as_tool

    from icore.integrations.langgraph import fenced_tool

    plain = as_tool(_ship_fn(world))
    safe = fenced_tool(plain, fence=world.fence, depends_on=world.deps,
                       roots=lambda state, args: list(world.roots))
    args = dict(world.args)
    return FrameworkCase("LangGraph tool.invoke", "unfenced tool", "fenced_tool",
                         lambda: plain.invoke(args), lambda: safe.invoke(args), target=1.3)


def _langgraph_agent(world: World) -> FrameworkCase:
    """The high-level API: each call builds its action record from the agent's reads."""
    from langchain_core.tools import tool as as_tool

    from icore.integrations.langgraph import fenced_tool
    from icore.workspace import Workspace

    ws = Workspace({"order/7": "customer"})
    ws.put("order/7", dict(world.args))
    shipper = ws.agent("shipper")
    shipper.read("order/7")
    plain = as_tool(_ship_fn(world))
    safe = fenced_tool(plain, agent=shipper, depends_on={"order/7"})
    args = dict(world.args)
    return FrameworkCase("LangGraph tool.invoke, workspace agent", "unfenced tool",
                         "fenced_tool(agent=)", lambda: plain.invoke(args),
                         lambda: safe.invoke(args), target=1.3)


def _openai_agents(world: World) -> FrameworkCase:
    from agents import function_tool
    from agents.tool_context import ToolContext

    from icore.integrations.openai_agents import fenced_function_tool

    plain = function_tool(_ship_fn(world))
    safe = fenced_function_tool(plain, fence=world.fence, depends_on=world.deps,
                                roots=lambda ctx, args: list(world.roots))
    raw = json.dumps(dict(world.args))
    ctx: Any = ToolContext(context=None, tool_name=plain.name, tool_call_id="bench",
                           tool_arguments=raw)

    async def base() -> Any:
        return await plain.on_invoke_tool(ctx, raw)

    async def fenced() -> Any:
        return await safe.on_invoke_tool(ctx, raw)

    return FrameworkCase("OpenAI Agents function tool", "unfenced FunctionTool",
                         "fenced_function_tool", base, fenced)


def _ag2(world: World) -> FrameworkCase:
    """AG2 1.x: one ``ToolCallEvent`` through the tool's middleware chain, as AG2 runs it.

    The chain is composed as ``FunctionTool.register`` composes it (each of the tool's
    ``middleware`` hooks around the next, the tool itself innermost), without the stream
    subscription: the unfenced tool's chain against the fenced tool's, same call.
    """
    from ag2 import MemoryStream, tool
    from ag2.context import ConversationContext
    from ag2.events import ToolCallEvent, ToolResultEvent

    from icore.integrations.ag2 import fenced_tool

    plain = tool(_ship_fn(world))
    safe = fenced_tool(plain, fence=world.fence, depends_on=world.deps,
                       roots=lambda ctx, args: list(world.roots))
    context = ConversationContext(MemoryStream())
    event = ToolCallEvent(plain.name, arguments=json.dumps(dict(world.args)), id="bench")

    def chain(t: Any) -> Callable[[], Awaitable[Any]]:
        execution: Callable[[Any, Any], Awaitable[Any]] = t
        for described in reversed(t.middleware):
            execution = _around(described.middleware, execution)
        source = t.source

        async def call() -> Any:
            result = await execution(event.handled_by(source), context)
            if not isinstance(result, ToolResultEvent):  # a benchmark of errors misleads
                raise RuntimeError(f"the benchmark's AG2 call failed: {result!r}")
            return result

        return call

    return FrameworkCase("AG2 tool", "unfenced ag2 tool", "fenced_tool", chain(plain),
                         chain(safe))


def _around(hook: Any, inner: Callable[[Any, Any], Awaitable[Any]]
            ) -> Callable[[Any, Any], Awaitable[Any]]:
    async def call(event: Any, context: Any) -> Any:
        return await hook(inner, event, context)

    return call


FRAMEWORKS: tuple[tuple[str, Callable[[World], FrameworkCase]], ...] = (
    ("LangGraph tool.invoke", _langgraph),
    ("LangGraph tool.invoke, workspace agent", _langgraph_agent),
    ("OpenAI Agents function tool", _openai_agents),
    ("AG2 tool", _ag2),
)
"""(case name, builder) for every framework, in the benchmark's order."""


def seam_cases(world: Callable[[], World]
               ) -> tuple[list[FrameworkCase], list[tuple[str, str]]]:
    """The framework cases of ``icore bench integrations``, each on a fresh ``world()``.

    Args:
        world: makes the in-process team a case gates against
            (the seam benchmark's ``SeamWorld``).

    Returns:
        ``(cases, skipped)``: each framework's case when it can be built, and
        ``(name, reason)`` for each framework that cannot (not installed, or refused).
    """
    cases: list[FrameworkCase] = []
    skipped: list[tuple[str, str]] = []
    for name, build in FRAMEWORKS:
        try:
            cases.append(build(world()))
        except (ImportError, IcoreError) as exc:  # not installed, or refused
            skipped.append((name, str(exc).splitlines()[0]))
    return cases, skipped


__all__ = ["FRAMEWORKS", "FrameworkCase", "World", "seam_cases"]
