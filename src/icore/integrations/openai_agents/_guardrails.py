"""An Agents SDK run stopped by its guardrail's tripwire (icore Sec. 3, the run's end).

An agent's input or output guardrail whose tripwire triggers makes ``Runner.run`` raise
``InputGuardrailTripwireTriggered`` / ``OutputGuardrailTripwireTriggered``: the user gets
no answer. The SDK traces each guardrail as a span (its name, ``triggered``) inside the
agent's span. :class:`Tripwires` notes which guardrail tripped, on which agent, and
whether it checked the run's input or the answer (an output guardrail runs once the
agent's last model turn gave text without tool calls; an input guardrail starts before
or beside the agent's first model turn), so the recorder ends such a run with no final
answer: a ``thought`` "the run stopped: ..." with ``error`` and ``guardrail`` (QA
qa-new15a S2: the withheld text was recorded as the final answer, audited sound and
correct).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

INPUT, OUTPUT = "input", "output"
"""What a guardrail checked: the run's input, or the agent's answer."""


class Tripwires:
    """The guardrail spans of the recorded traces, and the one that tripped (thread-safe).

    Bounded: at most :attr:`MAX` open guardrail spans and tripped traces remembered.
    """

    MAX = 1024

    def __init__(self) -> None:
        self._kinds: OrderedDict[str, str] = OrderedDict()
        self._tripped: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def started(self, span_id: str, answered: bool) -> None:
        """A guardrail span started; ``answered``: the agent's last turn is its answer."""
        with self._lock:
            self._kinds[span_id] = OUTPUT if answered else INPUT
            while len(self._kinds) > self.MAX:
                self._kinds.popitem(last=False)

    def ended(self, trace_id: str, span_id: str, name: str, agent: str,
              triggered: bool) -> dict[str, Any] | None:
        """A guardrail span ended: its ``guardrail`` fields when it tripped, else None."""
        with self._lock:
            kind = self._kinds.pop(span_id, INPUT)
            if not triggered:
                return None
            info = {"name": name, "agent": agent, "kind": kind, "triggered": True}
            self._tripped[trace_id] = info
            while len(self._tripped) > self.MAX:
                self._tripped.popitem(last=False)
            return info

    def take(self, trace_id: str) -> dict[str, Any] | None:
        """The guardrail that tripped in the trace's run (taken), or None."""
        with self._lock:
            return self._tripped.pop(trace_id, None)


def stopped_text(info: dict[str, Any], withheld: str | None) -> str:
    """The ``error`` of a run a guardrail stopped: which one, on which agent, what it did.

    ``withheld``: the agent's answer the output guardrail checked (its start is quoted).
    """
    exc = ("OutputGuardrailTripwireTriggered" if info["kind"] == OUTPUT
           else "InputGuardrailTripwireTriggered")
    what = (f"so the answer it checked was withheld ({withheld[:200]!r})" if
            info["kind"] == OUTPUT and withheld else
            "so the answer was withheld" if info["kind"] == OUTPUT else
            "so the run's input was refused")
    return (f"{exc}: the {info['kind']} guardrail {info['name']} of agent {info['agent']} "
            f"tripped its tripwire, {what}; the run raised it and the user got no answer")


__all__ = ["INPUT", "OUTPUT", "Tripwires", "stopped_text"]
