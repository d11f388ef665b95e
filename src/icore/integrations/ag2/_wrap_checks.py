"""Wrap-time checks of a fenced AG2 tool (issue 28 item 4: setup mistakes when wrapped).

What :func:`~icore.integrations.ag2.fenced_tool` accepts as the tool (an ``ag2`` tool
or a plain function, never a class, a callable object or a ``functools.partial``), its
arguments in normal form through the function's own signature, and the ``agent=`` /
``recorder=`` it is given; each mistake is an :class:`~icore.errors.IntegrationError`
naming the fix, raised before the model sees anything.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ag2 import Agent as Ag2Agent
from ag2 import tool as ag2_tool
from ag2.tools.types import FunctionTool

from icore.errors import IntegrationError
from icore.fence import Fence
from icore.integrations import ArgNormalizer, check_tool_function
from icore.integrations._agent_error import agent_error
from icore.integrations._arg_normal import SCHEMA_ERRORS, schema_failed
from icore.workspace import Agent as TeamAgent


def function_of(tool: FunctionTool) -> Callable[..., Any]:
    """The user's function behind an ag2 tool (ag2 wraps it in an async adapter)."""
    fn: Callable[..., Any] = inspect.unwrap(tool.model.call)
    return fn


def normalizer(tool: FunctionTool) -> tuple[ArgNormalizer, bool]:
    """The tool's arguments in normal form, through its function's own signature.

    The parameters AG2 injects (absent from the model's JSON schema) are left out.

    Returns:
        The normaliser, and whether the function takes injected parameters (only then
        can its body reach AG2's context to ask a human).
    """
    fn = function_of(tool)
    props = tool.schema.function.parameters.get("properties") or {}
    sig = check_tool_function(fn, framework="ag2", tool=tool.name)
    skip = [p for p in sig.parameters if p not in props]
    check_tool_function(fn, framework="ag2", tool=tool.name, skip=skip)
    norm = ArgNormalizer.for_function(fn, name=tool.name, skip=skip, framework="ag2")
    return norm, bool(skip)



def as_tool(tool: FunctionTool | Callable[..., Any]) -> FunctionTool:
    """``tool`` as an ag2 ``FunctionTool`` (a plain function is wrapped with ``ag2.tool``).

    Raises:
        IntegrationError: ``tool`` is neither a ``FunctionTool`` nor a function (None,
            a class, a callable object, a ``functools.partial``), or takes ``*args`` /
            ``**kwargs`` / positional-only parameters; the tool's name is empty.
    """
    if isinstance(tool, FunctionTool):
        return _named(tool)
    if not callable(tool):
        raise IntegrationError("fenced_tool needs an ag2 tool or a function",
                               framework="ag2", got=type(tool).__name__)
    check_tool_function(tool, framework="ag2")
    if not hasattr(tool, "__name__") and not isinstance(tool, functools.partial):
        raise IntegrationError("fenced_tool needs a function or an ag2 tool, not a callable "
                               "object (it has no tool name)", framework="ag2",
                               got=type(tool).__name__,
                               fix="fenced_tool(tool(obj.__call__, name='book'), ...)")
    try:
        return _named(ag2_tool(tool))
    except SCHEMA_ERRORS as exc:
        raise schema_failed(exc, framework="ag2", tool=getattr(tool, "__name__", "")) from None


def _named(tool: FunctionTool) -> FunctionTool:
    """``tool`` if its name is a non-empty str (what LangGraph and the Agents SDK require).

    Raises:
        IntegrationError: the tool's name is empty or only spaces.
    """
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise IntegrationError(f"fenced_tool needs a tool with a name, got {name!r}",
                               framework="ag2", got=type(tool).__name__,
                               fix="tool(fn, name='book_room')")
    return tool


def check_agent(agent: Any, name: str, fence: Fence | None) -> TeamAgent | None:
    """The workspace agent of the high-level API, or None (low-level, ``fence=``).

    Low-level, ``agent=`` may be an agent id (a str) or left out (the calling agent).

    Raises:
        IntegrationError: one message for every wrong ``agent=`` (not a workspace agent
            without ``fence=``; neither a workspace agent nor an id with it), with a hint
            naming ``ws.agent('<name>')`` when AG2's own ``Agent`` is passed.
    """
    if isinstance(agent, TeamAgent):
        return agent
    if fence is None or not (agent is None or isinstance(agent, str)):
        raise agent_error(agent, tool=name, fence=fence, framework="ag2",
                          wrapper="fenced_tool", native=isinstance(agent, Ag2Agent),
                          native_kind="an AG2 Agent")
    return None
