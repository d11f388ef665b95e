"""The LLM backend's settings and negotiated mode (planfence App. A.2-A.3).

Tool-call modes (:data:`MODES`), the endpoint configuration (:class:`LLMConfig`, from
flags and the environment), the outcome of a negotiation (:class:`Negotiation`) and the
backend's one error (:class:`LLMUnavailable`). See :mod:`icore.agents._llm`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icore.errors import ErrorCode, IcoreError

MAX_ATTEMPTS = 2
"""One response plus one public correction (App. A.2)."""


MODES = ("named", "required", "json_schema", "json_object", "auto")
"""Tool-call modes, in order of preference."""


TOOL_MODES = frozenset({"named", "required", "auto"})
"""Modes that send ``tools``; the others ask for the arguments as the message content."""


CONSTRAINED = frozenset({"named", "json_schema", "json_object"})
"""Modes in which servers that support them constrain decoding to the schema."""


RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses below 500 that are infrastructure failures (retried)."""


class LLMUnavailable(IcoreError):
    """The model server could not be used: no mode works, or it stays unreachable.

    Attributes (in ``fields``): ``base_url``, ``reason``, ``probes`` (per mode).
    """

    code = ErrorCode.LLM


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Where and how to call the model.

    Attributes:
        base_url: OpenAI-compatible base URL (e.g. ``http://127.0.0.1:8000/v1``).
        model: model name served there.
        api_key: API key (local servers: any non-empty string).
        timeout_s: per-request timeout in seconds.
        temperature: sampling temperature.
        tool_choice: ``negotiate`` (default: probe the server, see :data:`MODES`) or one
            of :data:`MODES` to skip the probe.
        retries: retries of one request after an infrastructure failure.
        backoff_s: first backoff in seconds (doubled per retry).
        slots: requests in flight at once (None = discover, see :func:`discover_slots`).
        max_tokens: completion budget per response.
    """

    base_url: str
    model: str
    api_key: str = "EMPTY"
    timeout_s: float = 30.0
    temperature: float = 0.0
    tool_choice: str = "negotiate"
    retries: int = 3
    backoff_s: float = 1.0
    slots: int | None = None
    max_tokens: int = 256

    def __post_init__(self) -> None:
        """Check every field (issue 29: a NaN backoff crashed the first retry).

        Raises:
            ValueError: a field out of range, of the wrong type, NaN or infinite; the
                message names the field.
        """
        if self.tool_choice not in ("negotiate", *MODES):
            raise ValueError(f"tool_choice must be negotiate or one of {', '.join(MODES)}, "
                             f"not {self.tool_choice!r}")
        _whole("retries", self.retries, 0, MAX_RETRIES)
        _seconds("backoff_s", self.backoff_s, 0.0, MAX_BACKOFF_S, zero_ok=True)
        _seconds("timeout_s", self.timeout_s, 0.0, MAX_TIMEOUT_S, zero_ok=False)
        _seconds("temperature", self.temperature, 0.0, 2.0, zero_ok=True)
        _whole("max_tokens", self.max_tokens, 1, 1_000_000)
        if self.slots is not None:
            _whole("slots", self.slots, 1, MAX_SLOTS)

    @classmethod
    def from_env(cls, *, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, timeout_s: float | None = None,
                 tool_choice: str | None = None, slots: int | None = None,
                 env: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from flags, falling back to the environment.

        Raises:
            ValueError: no base URL or no model is configured, or a value is invalid
                (the message names the flag's field or the environment variable:
                ``ICORE_LLM_RETRIES``, ``ICORE_LLM_BACKOFF_S``, ``ICORE_LLM_SLOTS``,
                ``ICORE_LLM_TIMEOUT_S``, ``ICORE_LLM_TOOL_CHOICE``).
        """
        e = os.environ if env is None else env
        url = base_url or e.get("ICORE_LLM_BASE_URL") or e.get("OPENAI_BASE_URL")
        mdl = model or e.get("ICORE_LLM_MODEL")
        key = api_key or e.get("ICORE_LLM_API_KEY") or e.get("OPENAI_API_KEY") or "EMPTY"
        if not url:
            raise ValueError("the llm backend needs a base URL (--llm-base-url or "
                             "ICORE_LLM_BASE_URL)")
        if not mdl:
            raise ValueError("the llm backend needs a model (--llm-model or ICORE_LLM_MODEL)")
        tc = ((tool_choice if tool_choice != "negotiate" else None)
              or e.get("ICORE_LLM_TOOL_CHOICE") or "negotiate")
        if tc not in ("negotiate", *MODES):
            where = "ICORE_LLM_TOOL_CHOICE" if tool_choice in (None, "negotiate") else \
                "tool_choice"
            raise ValueError(f"{where}: use negotiate or one of {', '.join(MODES)}, not "
                             f"{tc!r}")
        # each value from the environment is checked under its variable's name
        sl = slots if slots is not None else _env(e, "ICORE_LLM_SLOTS", int, None, 1,
                                                  MAX_SLOTS)
        to = timeout_s if timeout_s is not None else _env(
            e, "ICORE_LLM_TIMEOUT_S", float, 30.0, 0.0, MAX_TIMEOUT_S, above=True)
        return cls(url, mdl, key, float(to if to else 30.0), tool_choice=tc, slots=sl,
                   retries=int(_env(e, "ICORE_LLM_RETRIES", int, 3, 0, MAX_RETRIES)),
                   backoff_s=float(_env(e, "ICORE_LLM_BACKOFF_S", float, 1.0, 0.0,
                                        MAX_BACKOFF_S)))


MAX_RETRIES = 100
"""Most retries of one request after infrastructure failures."""
MAX_BACKOFF_S = 600.0
"""Longest first backoff, in seconds (doubled per retry)."""
MAX_TIMEOUT_S = 3600.0
"""Longest per-request timeout, in seconds."""
MAX_SLOTS = 4096
"""Most requests in flight at once."""


def _whole(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], not {v!r}")
    return v


def _seconds(name: str, v: Any, lo: float, hi: float, *, zero_ok: bool) -> float:
    if (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
            or v < lo or v > hi or (v == lo and not zero_ok)):
        op = ">=" if zero_ok else ">"
        raise ValueError(f"{name} must be a finite number {op} {lo:g} and <= {hi:g}, not "
                         f"{v!r}")
    return float(v)


def _env(e: Mapping[str, str], var: str, kind: type, default: Any, lo: float,
         hi: float, *, above: bool = False) -> Any:
    """An environment variable's number, checked; the error names the variable.

    Args:
        e: the environment.
        var: the variable.
        kind: ``int`` or ``float``.
        default: the value when the variable is unset or empty.
        lo: the smallest value (excluded with ``above``).
        hi: the largest value.
        above: the value must be greater than ``lo``.

    Raises:
        ValueError: not a number of ``kind``, NaN, infinite, or out of range.
    """
    raw = (e.get(var) or "").strip()
    if not raw:
        return default
    try:
        v = kind(raw)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v < lo or v > hi or (above and v == lo):
        what = "an integer" if kind is int else "a finite number"
        raise ValueError(f"{var}={raw!r}: must be {what} {'>' if above else '>='} {lo:g} "
                         f"and <= {hi:g}")
    return v


@dataclass(frozen=True, slots=True)
class Negotiation:
    """What the server offers, as found by :func:`negotiate`.

    Attributes:
        mode: the tool-call mode used (one of :data:`MODES`).
        constrained: the mode constrains decoding to the schema (a probe confirmed it
            for ``response_format`` modes; ``named`` is constrained where supported).
        slots: requests the server serves at once.
        slots_source: where ``slots`` came from (``/props``, ``/slots``, ``config``,
            ``assumed``).
        probes: one dict per probed mode (mode, ok, status, note).
        verified: the probe proved the constraint (a ``response_format`` probe found a
            value its prompt never named); for ``named`` the constraint is the server's
            (llama.cpp, vLLM) and cannot be told from a valid reply.
    """

    mode: str
    constrained: bool
    slots: int
    slots_source: str
    probes: tuple[Mapping[str, Any], ...] = ()
    verified: bool = False

    def describe(self) -> str:
        """One line: mode, constrained decoding, slots."""
        how = ("yes (verified by the probe)" if self.verified else
               "yes, where the server implements it" if self.constrained else "no")
        return (f"tool-call mode: {self.mode} (constrained decoding: {how}); server slots: "
                f"{self.slots} ({self.slots_source})")

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"mode": self.mode, "constrained": self.constrained, "verified": self.verified,
                "slots": self.slots, "slots_source": self.slots_source,
                "probes": [dict(p) for p in self.probes], "line": self.describe()}
