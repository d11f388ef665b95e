"""Recorded LangGraph runs: a node wrapper and a callback handler (icore Sec. 3).

Both write a :class:`~icore.integrations.RunRecorder`, the trace ``icore audit`` reads.

* :func:`recorded_node` wraps a node function, sync or ``async def``, keeping its
  signature (so LangGraph still passes ``config``, ``runtime``, ``store``, ``writer``);
  each call records the keys the node actually read, the keys it wrote (a ``Command``'s
  update too) and its ``goto`` as a handoff.
* :class:`RecordingHandler` is a LangChain callback handler: pass it in
  ``config={"callbacks": [handler]}`` and every node step, model turn (with its tool
  calls) and tool result is recorded, and the end of the run (its last message as the
  final answer, so a clean run has its terminal marker); prebuilt graphs need no
  wrapping. A fenced tool built without ``recorder=`` records into the handler's
  recorder, so it never vanishes from the trace.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.outputs import LLMResult
from langgraph.types import Command

from icore.integrations import RunRecorder

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


def _writes(out: Any) -> tuple[list[str], list[str]]:
    """(keys written, goto targets) of a node's return value."""
    items = out if isinstance(out, list | tuple) else [out]
    wrote: set[str] = set()
    goto: list[str] = []
    for o in items:
        if isinstance(o, Command):
            up = o.update
            if isinstance(up, Mapping):
                wrote.update(str(k) for k in up)
            elif isinstance(up, list | tuple):
                wrote.update(str(k) for k, _ in up)
            targets = o.goto if isinstance(o.goto, list | tuple) else [o.goto]
            goto += [str(getattr(t, "node", t)) for t in targets if t]
        elif isinstance(o, Mapping):
            wrote.update(str(k) for k in o)
    return sorted(wrote), goto


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
    """
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


def _text_args(args: Any) -> str:
    if isinstance(args, Mapping):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return repr(args)


def _final(outputs: Any) -> Any:
    """The run's final answer: the last message's text, else the output itself."""
    msgs = outputs.get("messages") if isinstance(outputs, Mapping) else None
    if isinstance(msgs, list) and msgs:
        return _content(msgs[-1])
    return outputs


def _content(m: Any) -> str:
    c = getattr(m, "content", m)
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in c)
    return str(c)


def _interrupted(outputs: Any) -> bool:
    """Whether a graph run stopped at ``interrupt()`` (it resumes later; not its end)."""
    return isinstance(outputs, Mapping) and "__interrupt__" in outputs


class RecordingHandler(BaseCallbackHandler):
    """A LangChain callback handler recording a LangGraph run into ``recorder``.

    Node steps (``langgraph_node`` runs), model turns with their tool calls (each call
    noted with the agent that asked for it, so a fenced tool's gate events go to that
    agent), tool results (``status="error"`` ones as errors) and the end of the run: the
    graph run's last message is recorded as the final answer (a ``termination`` line,
    attributed to the last agent that spoke). A graph interrupted for a human
    (``interrupt()``) or failing records no end. Fenced tools record their own gate
    decisions and calls (with or without :func:`fenced_tool` ``recorder=``: without it
    they use this handler's recorder), so their tool events are skipped here.

    Args:
        recorder: where the run goes.
        nodes: record node steps (default True).
    """

    raise_error = False
    run_inline = True

    def __init__(self, recorder: RunRecorder, *, nodes: bool = True) -> None:
        self.recorder = recorder
        self.nodes = nodes
        self._runs: dict[UUID, tuple[str, Any]] = {}
        self._fenced: set[UUID] = set()
        self._root: UUID | None = None
        self._last_agent = "graph"
        self._lock = threading.Lock()

    @staticmethod
    def _node(metadata: Mapping[str, Any] | None) -> str:
        return str((metadata or {}).get("langgraph_node") or "graph")

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *,
                       run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A node starts (only the node's own run, not its inner runnables)."""
        node = (metadata or {}).get("langgraph_node")
        if parent_run_id is None:  # the graph run itself: its input is the task
            with self._lock:
                self._root = run_id
            msgs = inputs.get("messages") if isinstance(inputs, Mapping) else None
            first = (msgs[0] if isinstance(msgs, list) else msgs) if msgs else None
            if isinstance(inputs, Command) or (first is None and not inputs):
                return  # a resume (Command) continues the run: no new task
            self.recorder.task(_content(first) if first is not None else inputs)
        if self.nodes and node is not None and kwargs.get("name") == node:
            with self._lock:
                self._runs[run_id] = ("node", str(node))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A node ends: record what it wrote; the graph run ends: record its final answer."""
        with self._lock:
            entry = self._runs.pop(run_id, None)
            root = run_id == self._root
            if root:
                self._root = None
            last = self._last_agent
        if root:
            if not _interrupted(outputs):
                self.recorder.finish(last, _final(outputs))
            return
        if entry is None:
            return
        node = str(entry[1])
        with self._lock:
            self._last_agent = node
        wrote, goto = _writes(outputs)
        self.recorder.add(node, "thought", f"node {node} wrote {', '.join(wrote) or 'nothing'}",
                          node=node, wrote=wrote)
        for g in goto:
            self.recorder.handoff(node, g, f"{node} -> {g}")

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: Any, *,
                            run_id: UUID, metadata: dict[str, Any] | None = None,
                            **kwargs: Any) -> None:
        """A model call starts: remember which node (agent) makes it."""
        with self._lock:
            self._runs[run_id] = ("model", self._node(metadata))

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *,
                     run_id: UUID, metadata: dict[str, Any] | None = None,
                     **kwargs: Any) -> None:
        """A completion-model call starts."""
        with self._lock:
            self._runs[run_id] = ("model", self._node(metadata))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A model turn: its text and tool calls."""
        with self._lock:
            entry = self._runs.pop(run_id, None)
        agent = entry[1] if entry else "model"
        with self._lock:
            self._last_agent = str(agent)
        for gens in response.generations:
            for g in gens:
                msg = getattr(g, "message", None)
                calls = [{"name": c["name"], "args": c["args"], "id": c.get("id")}
                         for c in (getattr(msg, "tool_calls", None) or [])]
                text = _content(msg) if msg is not None else g.text
                asked = ", ".join(f"{c['name']}({_text_args(c['args'])})" for c in calls)
                self.recorder.turn(agent, text or f"calls {asked}", tool_calls=calls or None)

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                      run_id: UUID, metadata: dict[str, Any] | None = None,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A tool starts: record it.

        Fenced tools, and the tool a fenced one wraps, are recorded by their guard instead.
        """
        if (metadata or {}).get("planfence") or kwargs.get("parent_run_id") in self._fenced:
            with self._lock:
                self._fenced.add(run_id)
            return
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        with self._lock:
            self._runs[run_id] = ("tool", (self._node(metadata), name, inputs))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool result (a ``ToolMessage`` with ``status="error"`` is an error)."""
        with self._lock:
            entry = self._runs.pop(run_id, None)
        if entry is None:
            return
        agent, name, inputs = entry[1]
        error = isinstance(output, ToolMessage) and output.status == "error"
        self.recorder.tool_call(agent, name, inputs, _content(output), error=error)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        with self._lock:
            entry = self._runs.pop(run_id, None)
        if entry is None:
            return
        agent, name, inputs = entry[1]
        self.recorder.tool_call(agent, name, inputs, f"{type(error).__name__}: {error}",
                                error=True)
