"""The one error of every integration for a wrong ``agent=`` (issue 28 item 4)."""

from __future__ import annotations

from typing import Any

from icore.errors import IntegrationError
from icore.fence import Fence


def agent_error(agent: Any, *, tool: str, fence: Fence | None, framework: str, wrapper: str,
                native: bool = False, native_kind: str = "") -> IntegrationError:
    """The one error of every integration for a wrong ``agent=`` (issue 28 item 4).

    Args:
        agent: what was passed.
        tool: the tool's name.
        fence: the ``fence=`` passed (the low-level API, where ``agent=`` may be an id).
        framework: the integration (``"ag2"``, ``"openai_agents"``, ``"crewai"``).
        wrapper: the function the fix calls (``fenced_tool``).
        native: ``agent`` is the framework's own agent object: the message adds a hint
            naming ``ws.agent('<its name>')``.
        native_kind: how the hint names that object (``"an AG2 Agent"``).

    Returns:
        The :class:`~icore.errors.IntegrationError` to raise (fields ``framework``,
        ``tool``, ``got``, ``fence`` and ``fix``).
    """
    name = getattr(agent, "name", None) if native else None
    hint = (f"; this is {native_kind}: pass the workspace agent whose reads the calls "
            f"derive from, ws.agent({name!r})" if native else "")
    return IntegrationError(
        "a fenced tool needs agent= (a workspace agent: ws.agent('name')) or fence= (a "
        "Fence, the low-level API, where agent= may be an agent id str)" + hint,
        framework=framework, tool=tool, got=type(agent).__name__,
        fence="given" if fence is not None else "none",
        fix=f"{wrapper}(tool, agent=ws.agent({(name if native else 'dispatcher')!r}), "
        "depends_on={...})")


__all__ = ["agent_error"]
