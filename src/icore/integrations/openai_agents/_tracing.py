"""Recorded Agents SDK runs (icore Sec. 3).

A tracing processor writes a :class:`~icore.integrations.RunRecorder`.

:class:`RecordingProcessor` implements the SDK's ``TracingProcessor``: agent spans give
the speaking agent, generation / response spans the model's turns (text and tool calls)
and the run's task (the first user input), function spans the tool calls with input and
output (errors as errors), handoff spans the handoffs, guardrail spans a thought; a
trace's end records the last turn as the final answer. :func:`recording` installs it
for a ``with`` block.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agents.tracing import (
    AgentSpanData,
    FunctionSpanData,
    GenerationSpanData,
    GuardrailSpanData,
    HandoffSpanData,
    ResponseSpanData,
    Span,
    Trace,
    TracingProcessor,
    get_trace_provider,
)

from icore.errors import IntegrationError
from icore.integrations import RunRecorder


def _items(output: Any) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for it in output or ():
        if isinstance(it, Mapping):
            out.append(it)
        elif hasattr(it, "model_dump"):
            out.append(it.model_dump())
    return out


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content or () if isinstance(p, Mapping)]
    return " ".join(str(p) for p in parts if p)


class RecordingProcessor(TracingProcessor):
    """An Agents SDK tracing processor recording every run into ``recorder``.

    Args:
        recorder: where the run goes.
    """

    def __init__(self, recorder: RunRecorder) -> None:
        self.recorder = recorder
        self.active = True
        """Set False to stop recording (the processor stays registered, inert)."""
        self._agent: dict[str, str] = {}
        self._last: dict[str, tuple[str, str]] = {}
        self._tasked: set[str] = set()
        self._lock = threading.Lock()

    def _who(self, span: Span[Any]) -> str:
        with self._lock:
            return self._agent.get(span.trace_id, "agent")

    def on_trace_start(self, trace: Trace) -> None:
        """A run starts."""

    def on_trace_end(self, trace: Trace) -> None:
        """A run ends: its last model text is the final answer."""
        if not self.active:
            return
        with self._lock:
            last = self._last.pop(trace.trace_id, None)
            self._agent.pop(trace.trace_id, None)
            self._tasked.discard(trace.trace_id)
        if last is not None:
            self.recorder.finish(last[0], last[1])

    def on_span_start(self, span: Span[Any]) -> None:
        """An agent span names the agent that speaks next."""
        if not self.active:
            return
        data = span.span_data
        if isinstance(data, AgentSpanData):
            with self._lock:
                self._agent[span.trace_id] = data.name

    def _turn(self, span: Span[Any], inputs: Any, output: Any) -> None:
        who = self._who(span)
        with self._lock:
            first = span.trace_id not in self._tasked
            self._tasked.add(span.trace_id)
        if first:
            task = inputs if isinstance(inputs, str) else next(
                (_text(m) for m in _items(inputs) if m.get("role") == "user"), "")
            if task:
                self.recorder.task(task)
        calls, texts = [], []
        for it in _items(output):
            if it.get("type") == "function_call":
                args = it.get("arguments")
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    pass
                calls.append({"name": it.get("name"), "args": args})
            elif it.get("type") == "message" or it.get("role") == "assistant":
                texts.append(_text(it))
        text = " ".join(t for t in texts if t)
        if text:
            with self._lock:
                self._last[span.trace_id] = (who, text)
        if text or calls:
            self.recorder.turn(who, text or f"calls {[c['name'] for c in calls]}",
                               tool_calls=calls or None)

    def on_span_end(self, span: Span[Any]) -> None:
        """Map a finished span to recorder events."""
        if not self.active:
            return
        data = span.span_data
        if isinstance(data, GenerationSpanData):
            self._turn(span, data.input, data.output)
        elif isinstance(data, ResponseSpanData) and data.response is not None:
            self._turn(span, data.input, data.response.output)
        elif isinstance(data, FunctionSpanData):
            if data.name in self.recorder.fenced_tools:
                return
            try:
                args = json.loads(data.input) if data.input else None
            except json.JSONDecodeError:
                args = {"input": data.input}
            err = span.error
            self.recorder.tool_call(self._who(span), data.name, args if isinstance(
                args, dict) else {"input": args}, err["message"] if err else data.output,
                error=err is not None)
        elif isinstance(data, HandoffSpanData) and data.to_agent:
            self.recorder.handoff(data.from_agent or self._who(span), data.to_agent)
        elif isinstance(data, GuardrailSpanData):
            self.recorder.add(self._who(span), "thought",
                              f"guardrail {data.name}: triggered={data.triggered}")

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Events are recorded as they arrive."""


ACTIVE_RECORDER: contextvars.ContextVar[RunRecorder | None] = contextvars.ContextVar(
    "icore_openai_agents_recorder", default=None)
"""The recorder of the :func:`recording` block this code runs in: a fenced tool built
without ``recorder=`` records its gate decisions and calls there."""


@contextmanager
def recording(recorder: RunRecorder, *, exclusive: bool = False
              ) -> Iterator[RecordingProcessor]:
    """Record every Agents SDK run inside the block into ``recorder``.

    Args:
        recorder: where the runs go.
        exclusive: for the block, this processor replaces the installed ones (nothing
            leaves the process, e.g. in tests); otherwise it is added next to them.

    Fenced tools built without ``recorder=`` record into ``recorder`` inside the block.
    The processors installed before are restored afterwards. When the SDK's provider
    does not expose them, the processor is only switched off at the end (and
    ``exclusive`` is refused, since the others could not be put back).

    Raises:
        IntegrationError: ``exclusive`` with a provider whose processors are unknown.
    """
    provider = get_trace_provider()
    multi = getattr(provider, "_multi_processor", None)
    known = getattr(multi, "_processors", None)
    before = list(known) if isinstance(known, tuple | list) else None
    proc = RecordingProcessor(recorder)
    if exclusive:
        if before is None:
            raise IntegrationError("cannot replace the trace processors of this provider",
                                   framework="openai_agents",
                                   provider=type(provider).__name__)
        provider.set_processors([proc])
    else:
        provider.register_processor(proc)
    token = ACTIVE_RECORDER.set(recorder)
    try:
        with recorder.active():  # fenced tools built without recorder= record here too
            yield proc
    finally:
        ACTIVE_RECORDER.reset(token)
        proc.active = False
        if before is not None:
            provider.set_processors(before)
