"""A graph node recorded step by step: :func:`recorded_node` (icore Sec. 3).

Each call of the wrapped node records the keys it actually read, the keys it wrote (a
``Command``'s update too) and its ``goto`` as a handoff, into a
:class:`~icore.integrations.RunRecorder` (the trace ``icore audit`` reads).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from icore.integrations import RunRecorder
from icore.integrations._recorder_arg import check_recorder
from icore.integrations.langgraph._recording import _writes

F = TypeVar("F", bound=Callable[..., Any])


class _Reads(dict[str, Any]):
    """The node's input state, noting which keys the node reads."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        """``dict.get``, noting ``key`` as read (present or not)."""
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def items(self) -> Any:
        """``dict.items``, noting every key as read."""
        self.read.update(self.keys())
        return super().items()

    def values(self) -> Any:
        """``dict.values``, noting every key as read."""
        self.read.update(self.keys())
        return super().values()

    def __iter__(self) -> Iterator[str]:
        self.read.update(self.keys())
        return super().__iter__()


def _note(recorder: RunRecorder, label: str, agent: str, read: list[str], out: Any) -> None:
    wrote, goto = _writes(out)
    recorder.turn(agent, f"node {label}: wrote {', '.join(wrote) or 'nothing'}",
                  node=label, read=read, wrote=wrote)
    for g in goto:
        recorder.handoff(agent, g, f"{label} -> {g}")


def recorded_node(node: F, *, recorder: RunRecorder, name: str | None = None,
                  agent: str | None = None) -> F:
    """Wrap a graph node so each call is recorded (the node itself is unchanged).

    Args:
        node: the node function: ``(state)``, ``(state, config)``, ``(state, *, runtime)``
            ... sync or ``async def``; its signature is kept.
        recorder: where the steps go.
        name: the node's label (default: the function's name).
        agent: the agent the step is attributed to (default: the label).

    Returns:
        The wrapped node, same signature and sync/async kind.

    Raises:
        IntegrationError: ``recorder`` is not a RunRecorder.
    """
    check_recorder(recorder, where="recorded_node")
    label = str(name or getattr(node, "__name__", "node"))
    who = agent or label

    def prepare(state: Any) -> Any:
        return _Reads(state) if type(state) is dict else state

    def read_of(state: Any) -> list[str]:
        return sorted(state.read) if isinstance(state, _Reads) else []

    if inspect.iscoroutinefunction(node):
        @functools.wraps(node)
        async def awrapped(state: Any, *args: Any, **kwargs: Any) -> Any:
            s = prepare(state)
            out = await node(s, *args, **kwargs)
            _note(recorder, label, who, read_of(s), out)
            return out

        return awrapped  # type: ignore[return-value]

    @functools.wraps(node)
    def wrapped(state: Any, *args: Any, **kwargs: Any) -> Any:
        s = prepare(state)
        out = node(s, *args, **kwargs)
        _note(recorder, label, who, read_of(s), out)
        return out

    return wrapped  # type: ignore[return-value]


__all__ = ["recorded_node"]
