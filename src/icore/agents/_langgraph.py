"""LangGraph adapter: PlanFence validation and iCORE events without restructuring an app.

Two wrappers, both keeping the wrapped object's interface:

* :func:`fenced_tool` wraps a LangChain/LangGraph tool (anything with ``name``,
  ``description``, ``args_schema`` and ``invoke``, or a plain function). Calling the
  wrapped tool runs the protected action of planfence App. A.3 — the gate over the
  declared dependency scope D(a), one replan, fail closed — and invokes the original tool
  only when authorized. A blocked call returns a ``BLOCKED: ...`` message (or raises
  :class:`~icore.errors.ActionBlocked` with ``on_block="raise"``).
* :func:`recorded_node` wraps a graph node function so every call is an iCORE event
  (``node_step``) with the keys it read and wrote; the node itself is unchanged.

Events go to a :class:`GraphRecorder`, which keeps them as dicts and, when given an
:class:`icore.state.State` whose declaration declares the observables of
:func:`langgraph_declaration`, appends them to G.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from icore.errors import ActionBlocked
from icore.fence import ActionResult, Fence, ProtectedTool, Replanner
from icore.records import RecordId
from icore.state import DeclarationPackage, EventSpec, State, declaration_from_dict

OBSERVABLES = ("node_step", "gate_decision", "tool_call")
"""Event types the adapter emits."""


def langgraph_declaration(agents: Iterable[str], *, name: str = "langgraph-app"
                          ) -> DeclarationPackage:
    """A minimal declaration package D accepting the adapter's events from ``agents``."""
    return declaration_from_dict({
        "name": name, "version": "1",
        "observables": [{"name": "node_step", "kind": "action", "fields": ["node"]},
                        {"name": "gate_decision", "kind": "action",
                         "fields": ["outcome", "reason"]},
                        {"name": "tool_call", "kind": "action", "fields": ["tool"]}],
        "agents": [{"id": a} for a in agents],
        "operations": [{"name": "note", "effects": [{"kind": "claim", "many": True}]}],
    }, file="<langgraph declaration>")


class GraphRecorder:
    """Collects the adapter's iCORE events (and appends them to ``state``'s G).

    Args:
        state: an iCORE state whose D declares :data:`OBSERVABLES` (optional).
        agent: the agent id events are attributed to.
    """

    def __init__(self, state: State | None = None, *, agent: str = "graph") -> None:
        self.state = state
        self.agent = agent
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, type_: str, fields: Mapping[str, Any], *, agent: str | None = None
               ) -> None:
        """Record one event."""
        who = agent or self.agent
        data = dict(fields)
        with self._lock:
            self.events.append({"type": type_, "agent": who, "fields": data})
            if self.state is not None:
                self.state.add_event(EventSpec(type=type_, agent=who, fields=data))


def _invoke(tool: Any, args: Mapping[str, Any]) -> Any:
    if hasattr(tool, "invoke"):
        return tool.invoke(dict(args))
    return tool(**args)


def fenced_tool(tool: Any, *, fence: Fence, depends_on: Iterable[str] | Callable[
                    [Mapping[str, Any]], Iterable[str]],
                roots: Callable[[], Sequence[RecordId]],
                replan: Replanner | None = None, recorder: GraphRecorder | None = None,
                on_block: str = "message") -> Any:
    """Wrap a LangGraph/LangChain tool so every call goes through the PlanFence gate.

    Args:
        tool: a LangChain ``BaseTool`` (``@tool``) or a plain function.
        fence: the executor's :class:`~icore.fence.Fence` (policy, replica, decision log).
        depends_on: D(a): keys, or a function of the call's arguments returning them.
        roots: returns L(a), the plan record ids authorizing the call's arguments.
        replan: the one isolated replan (returns new roots and arguments, or None).
        recorder: receives ``gate_decision`` and ``tool_call`` events.
        on_block: ``"message"`` (return ``BLOCKED: ...``) or ``"raise"``.

    Returns:
        A LangChain ``StructuredTool`` with the original name, description and argument
        schema (a plain function when ``tool`` is one).
    """
    if on_block not in ("message", "raise"):
        raise ValueError("on_block must be 'message' or 'raise'")
    name = str(getattr(tool, "name", None) or getattr(tool, "__name__", "tool"))
    last: dict[str, ActionResult] = {}

    def run(**kwargs: Any) -> Any:
        return _invoke(tool, kwargs)

    ptool = ProtectedTool(run, depends_on=depends_on, name=name)

    def call(**kwargs: Any) -> Any:
        res = fence.execute(ptool, roots=list(roots()), args=kwargs, replan=replan)
        last["result"] = res
        if recorder is not None:
            for d in res.decisions:
                recorder.record("gate_decision", {"outcome": d.outcome.value,
                                                  "reason": d.reason.value, "tool": name,
                                                  "replanned": d.replanned})
            if res.executed:
                recorder.record("tool_call", {"tool": name, "args": dict(res.args),
                                              "replanned": res.replanned})
        if res.executed:
            return res.value
        if on_block == "raise":
            raise ActionBlocked("protected tool call blocked", action=name,
                                reason=res.final.reason.value, detail=res.detail)
        return f"BLOCKED: {res.final.reason.value}: {res.detail}"

    if hasattr(tool, "args_schema") and hasattr(tool, "invoke"):
        from langchain_core.tools import StructuredTool

        wrapped = StructuredTool.from_function(func=call, name=name,
                                               description=str(tool.description),
                                               args_schema=tool.args_schema)
        wrapped.metadata = {**(wrapped.metadata or {}), "planfence": True}
        object.__setattr__(wrapped, "_icore_last", last)
        return wrapped
    call.__name__ = name
    call.__doc__ = getattr(tool, "__doc__", None)
    return call


def last_result(wrapped: Any) -> ActionResult | None:
    """The :class:`~icore.fence.ActionResult` of a fenced tool's most recent call."""
    last: dict[str, ActionResult] = getattr(wrapped, "_icore_last", {})
    return last.get("result")


def recorded_node(node: Callable[[Any], Any], *, recorder: GraphRecorder,
                  name: str | None = None, agent: str | None = None) -> Callable[[Any], Any]:
    """Wrap a graph node so each call is an iCORE ``node_step`` event (node unchanged)."""
    label = str(name or getattr(node, "__name__", "node"))

    def wrapped(state: Any) -> Any:
        out = node(state)
        read = sorted(state) if isinstance(state, Mapping) else []
        wrote = sorted(out) if isinstance(out, Mapping) else []
        recorder.record("node_step", {"node": label, "read": read, "wrote": wrote},
                        agent=agent)
        return out

    wrapped.__name__ = label
    return wrapped
