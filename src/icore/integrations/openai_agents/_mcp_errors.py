"""Which MCP tool calls of a recorded Agents SDK run failed (``isError``; QA qa-new12 S3).

The SDK hands an MCP tool's result to the model as its content and traces it the same
way whether the server flagged it ``isError`` or not: an upstream tool that raised
(``Error executing tool crash``) was recorded as a plain output, ``exitcode: 0``, and the
audit showed no failure. :func:`watch_mcp_errors` has the SDK's MCP tools call their
server through a transparent view of it (:class:`_Watched`, the server's own
``call_tool`` and attributes) that notes, per function span, whether the result was an
error; the recording processor reads it (:func:`mcp_failed`) when the span ends.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any

from agents.tracing import get_current_span

_FAILED: OrderedDict[str, bool] = OrderedDict()
"""Function span id -> the MCP result was an error (``isError``)."""
_MAX = 4096
"""Most spans remembered (a span is read once, when it ends)."""
_LOCK = threading.Lock()
WATCH_MARK = "__icore_watch__"
"""Attribute marking icore's wrapper of ``MCPUtil.invoke_mcp_tool`` (found by any copy
of icore: a reload never wraps twice)."""


def _note(result: Any) -> None:
    """Note the current function span's MCP result as failed when it says so."""
    failed = getattr(result, "is_error", None)
    if failed is None:  # the mcp 1.x field name
        failed = getattr(result, "isError", None)
    if failed is not True:
        return
    span = get_current_span()
    span_id = getattr(span, "span_id", None)
    if not isinstance(span_id, str) or not span_id:
        return
    with _LOCK:
        _FAILED[span_id] = True
        while len(_FAILED) > _MAX:
            _FAILED.popitem(last=False)


class _Watched:
    """An MCP server as the SDK's tool call sees it: itself, its results noted.

    Every attribute is the server's (``isinstance`` too); ``call_tool`` is the server's,
    its result noted by :func:`_note`.
    """

    __slots__ = ("_server",)

    def __init__(self, server: Any) -> None:
        object.__setattr__(self, "_server", server)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_server"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_server"), name, value)

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:
        return type(object.__getattribute__(self, "_server"))

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        """The server's ``call_tool``; an ``isError`` result is noted for the span."""
        result = await object.__getattribute__(self, "_server").call_tool(*args, **kwargs)
        _note(result)
        return result


def watch_mcp_errors() -> None:
    """Have the SDK's MCP tools note their error results (idempotent).

    Wraps ``MCPUtil.invoke_mcp_tool`` (what every SDK MCP tool calls) so its server is
    seen through :class:`_Watched`; nothing else changes (same result, same model text,
    same spans). An SDK without it: nothing is noted (failures read as before). Only
    when a run is recorded (``recording()``, never at ``import icore``), once per
    process: the wrapper carries :data:`WATCH_MARK` and ``__wrapped__``, so a reload of
    this module or a second copy of icore never wraps it twice.
    """
    with _LOCK:
        try:
            from agents.mcp.util import MCPUtil
        except ImportError:  # pragma: no cover - the SDK without its MCP extra
            return
        found = MCPUtil.__dict__.get("invoke_mcp_tool")
        base = getattr(found, "__func__", None)
        if not isinstance(found, classmethod) or base is None:  # pragma: no cover
            return
        m, seen = base, 0
        while m is not None and seen < 64:  # icore's wrapper anywhere in the chain
            if getattr(m, WATCH_MARK, False) is True:
                return
            m, seen = getattr(m, "__wrapped__", None), seen + 1

        @functools.wraps(base)
        async def invoke_mcp_tool(cls: Any, server: Any, *args: Any, **kwargs: Any) -> Any:
            return await base(cls, _Watched(server), *args, **kwargs)

        setattr(invoke_mcp_tool, WATCH_MARK, True)
        MCPUtil.invoke_mcp_tool = classmethod(invoke_mcp_tool)  # type: ignore[method-assign,assignment]


def mcp_failed(span_id: str) -> bool:
    """Whether the MCP call of function span ``span_id`` returned an error (read once)."""
    with _LOCK:
        return _FAILED.pop(span_id, False)


__all__ = ["mcp_failed", "watch_mcp_errors"]
