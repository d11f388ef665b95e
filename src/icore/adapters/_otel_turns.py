"""Agent turns of an OpenTelemetry trace, in the order they happened (QA qa-new15c S2).

The same run audits the same whether it was recorded natively (:class:`RunRecorder`,
generic JSONL) or imported from its OpenTelemetry trace. Three things the importer
(:mod:`icore.adapters._otel_import`) reads here so its steps are those a recorder writes:

- **an agent span's own output at its end**: an ``invoke_agent``/``AGENT`` span's
  ``output.value`` is the agent's answer after its model turns and tool calls, not before
  them. It is an ``output`` step when the span ends, unless it only says again what the
  agent's last model turn inside the span said (the same answer, one output), or it is
  empty, or it is the routing message of a handoff the span made (the handoff's
  instruction carries it, as a recorder writes a handoff: one instruction, no output),
  or it is the run's final answer given by the last agent span to end (the termination
  carries it).
- **structured tool calls of a model turn**: ``gen_ai.output.messages`` ``tool_call``
  parts (GenAI) or ``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.function.*``
  (OpenInference), as a JSONL ``tool_calls`` field. A model turn without them asked for
  the tool spans of its agent that follow it (each ``execute_tool`` span is a call a model
  asked for): their names and arguments (``gen_ai.tool.call.arguments``, else
  ``input.value``) are its calls. So retrying a call after a failed or refused answer is a
  new action, not a repeat, as for a recorded run.
- the tool calls as canonical JSON (:func:`icore.adapters._gate_lines.tool_calls`).
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from icore.adapters import _otel_names as N
from icore.adapters._gate_lines import tool_calls

_OI_CALL = re.compile(r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\."
                      r"tool_call\.(?:function\.)?(name|arguments)$")
"""A flattened OpenInference tool-call attribute of an LLM span's output message."""


def _args(v: Any) -> Any:
    """Call arguments as data: a JSON text read back (else kept as the text)."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def span_calls(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls an LLM span's output asks for: ``[{"name", "args"}, ...]``.

    Read from ``gen_ai.output.messages`` (a JSON text or a list of messages, each with
    ``parts``; the ``tool_call`` parts) or OpenInference's flattened
    ``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.function.name`` /
    ``.arguments``. Malformed values are read as no calls (they are optional data).
    """
    msgs = attrs.get(N.OUTPUT_MESSAGES)
    if isinstance(msgs, str) and "tool_call" in msgs:
        try:
            msgs = json.loads(msgs)
        except ValueError:
            msgs = None
    out: list[dict[str, Any]] = []
    if isinstance(msgs, list):
        for m in msgs:
            parts = m.get("parts") if isinstance(m, dict) else None
            for p in parts if isinstance(parts, list) else ():
                if isinstance(p, dict) and p.get("type") == "tool_call" \
                        and isinstance(p.get("name"), str):
                    out.append({"name": p["name"], "args": _args(p.get("arguments"))})
    if out:
        return out
    flat: dict[tuple[int, int], dict[str, Any]] = {}
    for k, v in attrs.items():
        if k.startswith("llm.output_messages.") and (m2 := _OI_CALL.match(k)):
            flat.setdefault((int(m2[1]), int(m2[2])), {})[m2[3]] = v
    return [{"name": c["name"], "args": _args(c.get("arguments"))}
            for _, c in sorted(flat.items()) if isinstance(c.get("name"), str)]


def tool_call_of(attrs: Mapping[str, Any], span_name: str) -> dict[str, Any]:
    """The call a tool span ran: its tool's name and arguments (``{"name", "args"}``).

    The arguments as recorded (``gen_ai.tool.call.arguments``, else
    ``tool.parameters``, else ``input.value``), not parsed: equal calls are equal texts.
    """
    name = attrs.get(N.TOOL_NAME) or attrs.get("tool.name")
    if not isinstance(name, str) or not name:
        name = span_name.removeprefix("execute_tool ").strip() or span_name
    args = attrs.get(N.TOOL_ARGS)
    if args is None:
        args = attrs.get("tool.parameters", attrs.get(N.OI_INPUT))
    return {"name": name, "args": args}


class AgentTurns:
    """What the importer holds between an agent span's start and its end.

    ``emit(span, agent, text)`` adds an agent's output step (the importer's ``add``);
    ``amend(step, calls)`` sets the tool calls of a step already added.
    """

    def __init__(self, emit: Callable[[int, str, str], None],
                 amend: Callable[[int, str], None], *, last_agent_span: int,
                 final_answer: str) -> None:
        self._emit = emit
        self._amend = amend
        self._last_agent_span = last_agent_span
        self._final = final_answer
        self.waiting: list[tuple[int, int, str, str]] = []
        """Agent spans whose output waits for their end: ``(end ns, span, agent, text)``
        (a heap)."""
        self._said: dict[int, str] = {}  # agent span -> its output text (for a handoff)
        self._handed: set[int] = set()  # agent spans whose text a handoff carried
        self._last_in: dict[int, str] = {}  # agent span -> its last model turn's text
        self._worked: set[int] = set()  # agent spans with a model turn or a tool call
        self._asking: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self.final_by: str | None = None
        """The agent whose span's output was the run's final answer (the termination's)."""

    def start(self, span: int, end_ns: int, agent: str, text: str) -> None:
        """An agent span starts: its output waits for its end (``end_ns``)."""
        self._settle(agent)
        self._said[span] = text
        heapq.heappush(self.waiting, (end_ns, span, agent, text))

    def due(self, start_ns: int, span: int, above: Callable[[int, int], bool]) -> None:
        """Emit the outputs of the agent spans that ended before ``span`` starts.

        ``start_ns``: its start; an ancestor of it (``above(j, span)``) waits.
        """
        p = self.waiting
        while p and p[0][0] <= start_ns and not above(p[0][1], span):
            self._out(*heapq.heappop(p))

    def flush(self) -> None:
        """At the trace's end: emit every output still waiting, in end order.

        The tool calls of every agent's last model turn are set too.
        """
        while self.waiting:
            self._out(*heapq.heappop(self.waiting))
        for agent in list(self._asking):
            self._settle(agent)

    def _settle(self, agent: str) -> None:
        """Set the calls of ``agent``'s last model turn (once: no JSON per tool span)."""
        got = self._asking.pop(agent, None)
        if got is not None and (js := tool_calls(got[1])) is not None:
            self._amend(got[0], js)

    def _out(self, _end: int, span: int, agent: str, text: str) -> None:
        self._said.pop(span, None)
        self._worked.discard(span)
        last = self._last_in.pop(span, None)
        handed = span in self._handed
        self._handed.discard(span)
        if not text or handed or text == last:
            return
        if span == self._last_agent_span and self._final and text == self._final:
            self.final_by = agent
            return
        self._emit(span, agent, text)

    def handoff_text(self, agent_span: int | None) -> str:
        """The routing message of the agent span that hands off ('' if none).

        Only a turn that did nothing but route (no model turn, no tool call inside it):
        a worker's answer handed back with a handoff stays its output (its work).
        """
        if agent_span is None or agent_span in self._worked:
            return ""
        text = self._said.get(agent_span, "")
        if text:
            self._handed.add(agent_span)
        return text

    def model_turn(self, step: int, agent: str, agent_span: int | None, text: str,
                   calls: list[dict[str, Any]]) -> str | None:
        """A model turn (an LLM span's output step ``step``); its calls as JSON (or None).

        Without structured calls the turn asks for the tool spans of ``agent`` that follow
        (:meth:`tool_ran`).
        """
        if agent_span is not None:
            self._last_in[agent_span] = text
            self._worked.add(agent_span)
        self._settle(agent)
        if calls:
            return tool_calls(calls)
        self._asking[agent] = (step, [])
        return None

    def tool_ran(self, agent: str, agent_span: int | None, attrs: Mapping[str, Any],
                 span_name: str) -> None:
        """A tool span of ``agent`` ran a call: one its last model turn asked for.

        The call is :func:`tool_call_of` the span's ``attrs`` (read only when a model
        turn of ``agent`` waits for its calls).
        """
        if agent_span is not None:
            self._worked.add(agent_span)
        got = self._asking.get(agent)
        if got is not None:
            got[1].append(tool_call_of(attrs, span_name))


__all__ = ["AgentTurns", "span_calls", "tool_call_of"]
