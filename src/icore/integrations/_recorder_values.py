"""The values a :class:`~icore.integrations.RunRecorder` line or header takes, checked.

What :func:`icore.adapters.audit_path` would refuse is refused when it is recorded, with
an :class:`~icore.errors.IntegrationError` naming the argument (issue 29). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from icore.errors import IntegrationError, brief
from icore.integrations._trace_data import finite

KIND_NAMES = frozenset({"task", "plan", "ledger", "instruction", "thought", "output",
                         "tool_output", "stall", "termination"})
"""The generic JSONL format's kinds (``icore.adapters.StepKind``; not imported: heavy);
tests/integrations pin the two equal."""
def text_arg(value: Any, name: str, *, optional: bool = False,
              numbers: bool = False) -> str | None:
    """``value`` when it is a string (or None, when ``optional``).

    With ``numbers``, an int or a finite float as its text (``ground_truth=42`` ->
    ``"42"``, as the JSONL importer reads a number there); NaN and the infinities are
    refused (``"nan"`` would be an answer nothing equals: QA qa-new10 S4).

    Raises:
        IntegrationError: anything else (``argument`` names the parameter).
    """
    if isinstance(value, str) or (optional and value is None):
        return value
    if numbers and isinstance(value, int | float) and not isinstance(value, bool) and \
            not (isinstance(value, int) and value.bit_length() > 4000) and \
            not (isinstance(value, float) and not math.isfinite(value)):
        return str(value)
    raise IntegrationError(f"{name} must be a string{' or finite number' if numbers else ''}"
                           f"{' or None' if optional else ''}, not "
                           f"{type(value).__name__} {brief(value)}"[:160], argument=name)


def agents_arg(agents: Any) -> dict[str, str]:
    """``agents`` (agent id -> description) as a dict; None is ``{}``.

    Raises:
        IntegrationError: not a mapping, or a key or description that is not a string.
    """
    if agents is None:
        return {}
    if not isinstance(agents, Mapping):
        raise IntegrationError(f"agents must be a mapping of agent id -> description, not "
                               f"{type(agents).__name__} {brief(agents)}"[:160], argument="agents")
    for k, v in agents.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise IntegrationError(f"agents must map strings to strings: {brief(k)}: "
                                   f"{brief(v)}"[:160],
                                   argument="agents")
    return dict(agents)


FLAGS = ("terminates", "pause", "replan", "stopped")
"""Step markers the JSONL format takes as JSON booleans only (issue 29)."""


def outcome(value: Any) -> bool | None:
    """``succeeded`` as a bool or None; a NumPy bool (``a == b`` on arrays) becomes a bool.

    A string such as ``"no"`` or ``"False"`` is truthy: recorded as a success, it made a
    wrong answer audit as sound (QA r8-bad D16). Refused.

    Raises:
        IntegrationError: anything else (``argument="succeeded"``).
    """
    if value is None or isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise IntegrationError(f"succeeded must be True, False or None, not "
                           f"{type(value).__name__} {brief(value)}"[:160], argument="succeeded")


def line_args(agent: Any, kind: Any, at: Any = None) -> None:
    """Refuse an event line :func:`icore.adapters.audit_path` would refuse.

    Raises:
        IntegrationError: ``agent`` not a non-empty string, ``kind`` not one of the
            JSONL format's kinds, ``at`` neither None nor a finite number (``argument``
            names which).
    """
    if at is not None and (isinstance(at, bool) or not isinstance(at, int | float)
                           or not finite(at)):
        raise IntegrationError(f"at is the event's time in seconds since the epoch (a "
                               f"finite number), not {type(at).__name__} {brief(at)}"[:160],
                               argument="at")
    if not isinstance(agent, str) or not agent:
        raise IntegrationError(f"agent must be a non-empty string, not "
                               f"{type(agent).__name__} {brief(agent)}"[:160], argument="agent")
    if not isinstance(kind, str) or kind not in KIND_NAMES:
        raise IntegrationError(f"unknown kind {brief(kind)}; use one of "
                               f"{', '.join(sorted(KIND_NAMES))}"[:200], argument="kind")


__all__ = ["FLAGS", "KIND_NAMES", "agents_arg", "line_args", "outcome", "text_arg"]
