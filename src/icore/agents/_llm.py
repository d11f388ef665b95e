"""The LLM backend: any OpenAI-compatible endpoint (planfence App. A.2).

Each decision sends the fixed system instruction, the role's user object (role content
only) and exactly one grounded tool whose ids and actions are finite enumerations. The
reply must contain exactly one call of that tool with arguments that pass the schema
(:func:`~icore.agents.check_call`). After a violation the model gets one public
correction (the rejection reason and the required tool name, never the answer); a second
violation fails the attempt and nothing from it is committed.

Timeouts, transport errors, malformed JSON, a missing call, several calls, another tool,
an unknown field or an id outside the enumeration are all violations.

Configuration (flags win over environment): ``base_url`` (``ICORE_LLM_BASE_URL``, then
``OPENAI_BASE_URL``), ``model`` (``ICORE_LLM_MODEL``), ``api_key`` (``ICORE_LLM_API_KEY``,
then ``OPENAI_API_KEY``; local servers accept any non-empty key).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icore.agents._decide import DecisionOutcome, DecisionRequest, check_call

MAX_ATTEMPTS = 2
"""One response plus one public correction (App. A.2)."""


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Where and how to call the model.

    Attributes:
        base_url: OpenAI-compatible base URL (e.g. ``http://127.0.0.1:8000/v1``).
        model: model name served there.
        api_key: API key (local servers: any non-empty string).
        timeout_s: per-request timeout in seconds.
        temperature: sampling temperature.
        tool_choice: ``required`` (default), ``named`` (force the one tool by name) or
            ``auto`` (for servers that reject the other two).
    """

    base_url: str
    model: str
    api_key: str = "EMPTY"
    timeout_s: float = 30.0
    temperature: float = 0.0
    tool_choice: str = "required"

    @classmethod
    def from_env(cls, *, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, timeout_s: float | None = None,
                 tool_choice: str | None = None,
                 env: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from flags, falling back to the environment.

        Raises:
            ValueError: no base URL or no model is configured.
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
        tc = tool_choice or e.get("ICORE_LLM_TOOL_CHOICE") or "required"
        if tc not in ("required", "named", "auto"):
            raise ValueError(f"tool_choice must be required, named or auto, not {tc!r}")
        return cls(url, mdl, key, float(timeout_s or e.get("ICORE_LLM_TIMEOUT_S") or 30.0),
                   tool_choice=tc)


class LLMDecider:
    """Grounded role decisions through an OpenAI-compatible chat-completions endpoint.

    Args:
        config: :class:`LLMConfig`.
        transcript: when given, every request sent and every raw reply is appended here
            (dicts; useful to audit what the model saw).

    Raises:
        ImportError: the ``openai`` package is missing (``pip install 'icore[llm]'``).
    """

    name = "llm"

    def __init__(self, config: LLMConfig, *, transcript: list[dict[str, Any]] | None = None
                 ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the llm backend needs the openai package: "
                              "pip install 'icore[llm]'") from exc
        self.config = config
        self.client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key,
                                    timeout=config.timeout_s, max_retries=0)
        self.transcript = transcript
        self._lock = threading.Lock()

    def _log(self, entry: dict[str, Any]) -> None:
        if self.transcript is not None:
            with self._lock:
                self.transcript.append(entry)

    def _tool_choice(self, name: str) -> Any:
        if self.config.tool_choice == "named":
            return {"type": "function", "function": {"name": name}}
        return self.config.tool_choice

    def _ask(self, request: DecisionRequest, messages: list[dict[str, Any]]
             ) -> tuple[dict[str, Any] | None, str | None]:
        tool = request.tool
        self._log({"role": request.role, "tool": tool.name, "messages": messages,
                   "tools": [tool.to_openai()]})
        try:
            resp = self.client.chat.completions.create(
                model=self.config.model, messages=messages,  # type: ignore[arg-type]
                tools=[tool.to_openai()],  # type: ignore[list-item]
                tool_choice=self._tool_choice(tool.name),
                temperature=self.config.temperature)
        except Exception as exc:  # timeouts, transport, undecodable bodies: a violation
            kind = "timeout" if "timeout" in type(exc).__name__.lower() else "no valid response"
            reason = f"{kind}: {type(exc).__name__}"
            self._log({"role": request.role, "error": reason})
            return None, reason
        try:
            choices = resp.choices or []
            msg = choices[0].message if choices else None
            calls = list(getattr(msg, "tool_calls", None) or [])
        except Exception as exc:
            return None, f"malformed response: {type(exc).__name__}"
        self._log({"role": request.role, "reply": [
            {"name": getattr(getattr(c, "function", None), "name", None),
             "arguments": getattr(getattr(c, "function", None), "arguments", None)}
            for c in calls]})
        if len(calls) != 1:
            return None, f"exactly one call of {tool.name!r} is required, got {len(calls)}"
        fn = getattr(calls[0], "function", None)
        name = getattr(fn, "name", None)
        arguments = getattr(fn, "arguments", None)
        if not isinstance(arguments, str | dict):
            return None, "the call has no arguments"
        return check_call(tool, name, arguments)

    def decide(self, request: DecisionRequest) -> DecisionOutcome:
        """Ask the model; one public correction after a violation, then fail closed."""
        base = request.messages()
        messages = list(base)
        violations: list[str] = []
        for attempt in range(MAX_ATTEMPTS):
            args, bad = self._ask(request, messages)
            if bad is None and args is not None:
                return DecisionOutcome(True, args, responses=attempt + 1, accepted=1,
                                       violations=tuple(violations))
            violations.append(bad or "invalid call")
            correction = (f"Your previous response was rejected: {bad}. Call the tool "
                          f"{request.tool.name!r} exactly once with arguments that satisfy "
                          f"its schema.")
            messages = [*base, {"role": "user", "content": correction}]
        return DecisionOutcome(False, None, responses=MAX_ATTEMPTS, accepted=0,
                               violations=tuple(violations),
                               error="second schema violation: attempt failed "
                                     f"({violations[-1]})")


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
                                 tool_choice=backend.get("tool_choice"))
        return LLMDecider(cfg, transcript=transcript)
    raise ValueError(f"unknown backend {kind!r}")


def dumps_transcript(entries: list[dict[str, Any]]) -> str:
    """JSON-lines form of a transcript."""
    return "".join(json.dumps(e, sort_keys=True, default=str) + "\n" for e in entries)
