"""The LLM backend: any OpenAI-compatible endpoint (planfence App. A.2).

Each decision sends the fixed system instruction, the role's user object (role content
only) and exactly one grounded tool whose ids and actions are finite enumerations. The
reply must contain exactly one call of that tool with arguments that pass the schema
(:func:`~icore.agents.check_call`). After a violation the model gets one public
correction (the rejection reason and the required tool name, never the answer); a second
violation fails the attempt and nothing from it is committed.

Servers differ in how a tool call can be forced, so the backend *negotiates* a mode once
per endpoint (:func:`negotiate`, cached per process), in this order of preference:

``named``
    ``tool_choice`` names the one function (constrained decoding on llama.cpp and vLLM).
``required``
    ``tool_choice="required"``.
``json_schema``
    no tools; ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, Ollama).
``json_object``
    no tools; ``response_format={"type": "json_object", "schema": ...}`` (the
    llama-cpp-python dialect, a grammar built from the schema).
``auto``
    ``tool_choice="auto"``; the reply is checked like any other (a missing call is a
    violation).

A mode is taken when a small probe request succeeds; a ``response_format`` mode only when
the reply satisfies a schema the probe prompt does not reveal (so the server really
constrains decoding). In every mode the model sees the same enumerated tool schema.

Two kinds of failure are kept apart. A *schema violation* is the model's: malformed
JSON, a missing call, several calls, another tool, an unknown field, an id outside the
enumeration, an undecodable body. An *infrastructure failure* is the server's: HTTP 5xx,
408, 409 and 429, a timeout, a refused connection. It is retried with exponential backoff
(``retries``, ``backoff_s``) and, when the retries are used up, fails the attempt with
``infrastructure=True``; it never counts as a violation and never raises.

Concurrency fits the server: :func:`discover_slots` reads llama.cpp's ``/props``
(``total_slots``) or ``/slots``; otherwise one slot is assumed (``ICORE_LLM_SLOTS``
overrides). Requests of one process to one endpoint pass a semaphore of that size.

Configuration (flags win over environment): ``base_url`` (``ICORE_LLM_BASE_URL``, then
``OPENAI_BASE_URL``), ``model`` (``ICORE_LLM_MODEL``), ``api_key`` (``ICORE_LLM_API_KEY``,
then ``OPENAI_API_KEY``; local servers accept any non-empty key), ``tool_choice``
(``ICORE_LLM_TOOL_CHOICE``: ``negotiate`` or one mode), ``slots`` (``ICORE_LLM_SLOTS``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.agents._decide import DecisionOutcome, DecisionRequest
from icore.agents._llm_config import (
    MAX_ATTEMPTS,
    LLMConfig,
    LLMUnavailable,
    Negotiation,
)
from icore.agents._llm_wire import _semaphore, _Wire, parse_reply, schema_messages
from icore.agents._negotiate import negotiate


@dataclass(slots=True)
class LLMDecider:
    """Grounded role decisions through an OpenAI-compatible chat-completions endpoint.

    Args:
        config: :class:`LLMConfig`.
        transcript: when given, every request sent and every raw reply is appended here
            (dicts; useful to audit what the model saw).
        sleep: the backoff sleep (tests pass a fast one).

    Raises:
        ImportError: the ``openai`` package is missing (``pip install 'icore[llm]'``).
    """

    config: LLMConfig
    transcript: list[dict[str, Any]] | None = None
    sleep: Callable[[float], None] = time.sleep
    name: str = "llm"
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _wire: _Wire | None = field(default=None, init=False, repr=False)
    _neg: Negotiation | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._wire = _Wire(self.config, sleep=self.sleep)

    @property
    def negotiation(self) -> Negotiation:
        """The endpoint's negotiated mode and slots (probed on first use).

        Raises:
            LLMUnavailable: see :func:`negotiate`.
        """
        if self._neg is None:
            self._neg = negotiate(self.config, sleep=self.sleep)
        return self._neg

    def _log(self, entry: dict[str, Any]) -> None:
        if self.transcript is not None:
            with self._lock:
                self.transcript.append(entry)

    def _ask(self, request: DecisionRequest, messages: list[dict[str, Any]], mode: str
             ) -> tuple[dict[str, Any] | None, str | None, int, str]:
        """One response: ``(args, violation, infra_failures, infra_reason)``."""
        assert self._wire is not None
        tool = request.tool
        sent = schema_messages(mode, tool, messages)
        body = self._wire.body(mode, tool, sent)
        self._log({"role": request.role, "tool": tool.name, "mode": mode, "messages": sent,
                   "tools": body.get("tools"), "response_format": body.get("response_format")})
        with _semaphore(self.config.base_url, self.negotiation.slots):
            rep, failures = self._wire.send(body)
        if rep.infra:
            self._log({"role": request.role, "infrastructure": rep.infra,
                       "failures": failures})
            return None, None, failures, rep.infra
        usage = getattr(rep.body, "usage", None)
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        args, bad, logged = parse_reply(mode, tool, rep.body)
        self._log({"role": request.role, "reply": logged, "violation": bad})
        return args, bad, failures, ""

    def decide(self, request: DecisionRequest) -> DecisionOutcome:
        """Ask the model; one public correction after a violation, then fail closed.

        Never raises for the model or the server: an unusable server gives an outcome
        with ``infrastructure=True``.
        """
        try:
            mode = self.negotiation.mode
        except LLMUnavailable as exc:
            return DecisionOutcome(False, None, responses=0, accepted=0,
                                   error=f"infrastructure failure: {exc}",
                                   infrastructure=True)
        base = request.messages()
        messages = list(base)
        violations: list[str] = []
        infra = 0
        responses = 0
        for _ in range(MAX_ATTEMPTS):
            args, bad, failures, why = self._ask(request, messages, mode)
            infra += failures
            if why:
                return DecisionOutcome(False, None, responses=responses, accepted=0,
                                       violations=tuple(violations),
                                       error=f"infrastructure failure: {why}",
                                       infrastructure=True, infra_failures=infra, mode=mode)
            responses += 1
            if bad is None and args is not None:
                return DecisionOutcome(True, args, responses=responses, accepted=1,
                                       violations=tuple(violations), infra_failures=infra,
                                       mode=mode)
            violations.append(bad or "invalid call")
            correction = (f"Your previous response was rejected: {bad}. Call the tool "
                          f"{request.tool.name!r} exactly once with arguments that satisfy "
                          f"its schema.")
            messages = [*base, {"role": "user", "content": correction}]
        return DecisionOutcome(False, None, responses=responses, accepted=0,
                               violations=tuple(violations),
                               error="second schema violation: attempt failed "
                                     f"({violations[-1]})", infra_failures=infra, mode=mode)


def decider_from_config(backend: Mapping[str, Any], *,
                        transcript: list[dict[str, Any]] | None = None) -> Any:
    """Build the decider a manifest's ``backend`` section names (scripted or llm)."""
    from icore.agents._scripted import ScriptedDecider

    kind = backend.get("kind", "scripted")
    if kind == "scripted":
        return ScriptedDecider()
    if kind == "llm":
        cfg = LLMConfig.from_env(base_url=backend.get("base_url"), model=backend.get("model"),
                                 api_key=backend.get("api_key"),
                                 timeout_s=backend.get("timeout_s"),
                                 tool_choice=backend.get("tool_choice"),
                                 slots=backend.get("slots"))
        return LLMDecider(cfg, transcript=transcript)
    raise ValueError(f"unknown backend {kind!r}")


def dumps_transcript(entries: list[dict[str, Any]]) -> str:
    """JSON-lines form of a transcript."""
    return "".join(json.dumps(e, sort_keys=True, default=str) + "\n" for e in entries)


TALLY_KEYS = ("decisions", "responses", "accepted", "violations", "corrections",
              "unrecovered", "infra_failures", "infra_unrecovered")
"""The counters of :func:`decision_tally`."""


def decision_tally(decisions: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Count decision outcomes (``DecisionOutcome.to_dict()`` dicts).

    Returns:
        ``decisions``; model ``responses`` received and ``accepted``; schema
        ``violations``; ``corrections`` sent (one per decision whose first response
        violated); ``unrecovered`` decisions (the corrected response violated too);
        ``infra_failures`` (every failed request, retried or not) and
        ``infra_unrecovered`` decisions (the server stayed unusable).
    """
    out = dict.fromkeys(TALLY_KEYS, 0)
    for d in decisions:
        out["decisions"] += 1
        out["responses"] += int(d.get("responses", 0))
        out["accepted"] += int(d.get("accepted", 0))
        nv = len(d.get("violations") or ())
        out["violations"] += nv
        out["corrections"] += int(nv >= 1 and int(d.get("responses", 0)) >= 2)
        infra = bool(d.get("infrastructure"))
        out["unrecovered"] += int(not d.get("ok", True) and not infra and nv >= 1)
        out["infra_failures"] += int(d.get("infra_failures", 0))
        out["infra_unrecovered"] += int(infra)
    return out
