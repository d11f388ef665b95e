"""The LLM backend's settings and negotiated mode (planfence App. A.2-A.3).

Tool-call modes (:data:`MODES`), the endpoint configuration (:class:`LLMConfig`, from
flags and the environment), the outcome of a negotiation (:class:`Negotiation`) and the
backend's one error (:class:`LLMUnavailable`). See :mod:`icore.agents._llm`.
"""

from __future__ import annotations

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
        if self.tool_choice not in ("negotiate", *MODES):
            raise ValueError(f"tool_choice must be negotiate or one of {', '.join(MODES)}, "
                             f"not {self.tool_choice!r}")
        if self.retries < 0 or self.backoff_s < 0 or not self.timeout_s > 0:
            raise ValueError("retries >= 0, backoff_s >= 0 and timeout_s > 0 are required")
        if self.slots is not None and self.slots < 1:
            raise ValueError(f"slots must be >= 1, not {self.slots}")

    @classmethod
    def from_env(cls, *, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, timeout_s: float | None = None,
                 tool_choice: str | None = None, slots: int | None = None,
                 env: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from flags, falling back to the environment.

        Raises:
            ValueError: no base URL or no model is configured, or a value is invalid.
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
        sl = slots if slots is not None else (int(e["ICORE_LLM_SLOTS"])
                                              if e.get("ICORE_LLM_SLOTS") else None)
        return cls(url, mdl, key, float(timeout_s or e.get("ICORE_LLM_TIMEOUT_S") or 30.0),
                   tool_choice=tc, slots=sl,
                   retries=int(e.get("ICORE_LLM_RETRIES") or 3),
                   backoff_s=float(e.get("ICORE_LLM_BACKOFF_S") or 1.0))


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
