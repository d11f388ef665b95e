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
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icore.agents._decide import DecisionOutcome, DecisionRequest, ToolSpec, check_call
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

_PROBE_CODE = "k7-q2-x9"
_PROBE_TOOL = ToolSpec("report_code", "Report the code.", {
    "type": "object", "properties": {"code": {"type": "string", "enum": [_PROBE_CODE]}},
    "required": ["code"], "additionalProperties": False})


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


@dataclass(frozen=True, slots=True)
class _Reply:
    """One request's result: infrastructure failure, or the server's reply."""

    infra: str = ""
    status: int = 200
    body: Any = None
    retryable: bool = True


def _root(base_url: str) -> str:
    u = base_url.rstrip("/")
    return u[:-3] if u.endswith("/v1") else u


def discover_slots(base_url: str, *, timeout_s: float = 5.0) -> tuple[int | None, str]:
    """Ask the server how many requests it serves at once.

    Reads llama.cpp's ``GET /props`` (``total_slots``), then ``GET /slots`` (one entry
    per slot). Returns ``(None, "unknown")`` when the server exposes neither (vLLM,
    Ollama, llama-cpp-python).
    """
    import httpx

    root = _root(base_url)
    for path in ("/props", "/slots"):
        try:
            r = httpx.get(root + path, timeout=timeout_s)
            if r.status_code != 200:
                continue
            data = r.json()
        except (httpx.HTTPError, ValueError):
            continue
        if path == "/props" and isinstance(data, dict) and isinstance(
                data.get("total_slots"), int) and data["total_slots"] >= 1:
            return int(data["total_slots"]), path
        if path == "/slots" and isinstance(data, list) and data:
            return len(data), path
    return None, "unknown"


_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_NEGOTIATED: dict[tuple[str, str], Negotiation] = {}
_GLOBAL_LOCK = threading.Lock()


def _semaphore(base_url: str, slots: int) -> threading.BoundedSemaphore:
    with _GLOBAL_LOCK:
        sem = _SEMAPHORES.get(base_url)
        if sem is None:
            sem = _SEMAPHORES[base_url] = threading.BoundedSemaphore(slots)
        return sem


class _Wire:
    """One endpoint's HTTP side: requests per mode, retries, classification."""

    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep
                 ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the llm backend needs the openai package: "
                              "pip install 'icore[llm]'") from exc
        self.openai = openai
        self.config = config
        self.sleep = sleep
        self.client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key,
                                    timeout=config.timeout_s, max_retries=0)

    def body(self, mode: str, tool: ToolSpec, messages: list[dict[str, Any]]
             ) -> dict[str, Any]:
        """The request arguments of ``mode`` (see the module docstring)."""
        out: dict[str, Any] = {"model": self.config.model, "messages": messages,
                               "temperature": self.config.temperature,
                               "max_tokens": self.config.max_tokens}
        if mode in TOOL_MODES:
            out["tools"] = [tool.to_openai()]
            out["tool_choice"] = ({"type": "function", "function": {"name": tool.name}}
                                  if mode == "named" else mode)
        elif mode == "json_schema":
            out["response_format"] = {"type": "json_schema", "json_schema": {
                "name": tool.name, "schema": dict(tool.parameters), "strict": True}}
        else:
            out["response_format"] = {"type": "json_object", "schema": dict(tool.parameters)}
        return out

    def once(self, body: Mapping[str, Any]) -> _Reply:
        """Send one request; classify what went wrong without raising."""
        o = self.openai
        try:
            resp = self.client.chat.completions.create(**body)
        except o.APIStatusError as exc:
            code = int(exc.status_code)
            retry = code >= 500 or code in RETRYABLE_STATUS
            text = _snippet(getattr(exc, "message", "") or str(exc))
            return _Reply(infra=f"HTTP {code}: {text}", status=code, retryable=retry)
        except o.APITimeoutError:
            return _Reply(infra=f"timeout after {self.config.timeout_s:g} s", status=0)
        except o.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return _Reply(infra=f"connection failed ({type(exc).__name__}: "
                                f"{_snippet(str(cause))})", status=0)
        except Exception as exc:  # an undecodable 200 body: the reply is malformed
            return _Reply(body=f"malformed response: {type(exc).__name__}")
        return _Reply(body=resp)

    def send(self, body: Mapping[str, Any], *, tries: int | None = None) -> tuple[_Reply, int]:
        """Send with retries after retryable infrastructure failures.

        Returns:
            ``(reply, failures)``: the last reply and the infrastructure failures seen.
        """
        n = self.config.retries + 1 if tries is None else tries
        failures = 0
        rep = _Reply(infra="not sent")
        for i in range(n):
            rep = self.once(body)
            if not rep.infra:
                return rep, failures
            failures += 1
            if not rep.retryable or i == n - 1:
                break
            self.sleep(self.config.backoff_s * 2 ** i)
        return rep, failures


def _snippet(text: str, n: int = 160) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 1] + "…"


def parse_reply(mode: str, tool: ToolSpec, resp: Any) -> tuple[dict[str, Any] | None,
                                                                  str | None, Any]:
    """Check one reply of ``mode`` against the grounded tool.

    Returns:
        ``(args, None, logged)`` when valid, else ``(None, reason, logged)``; ``logged``
        is what the reply contained (for the transcript).
    """
    if isinstance(resp, str):  # the wire's note for an undecodable body
        return None, resp, None
    try:
        choices = resp.choices or []
        msg = choices[0].message if choices else None
        calls = list(getattr(msg, "tool_calls", None) or [])
        content = getattr(msg, "content", None)
    except Exception as exc:
        return None, f"malformed response: {type(exc).__name__}", None
    if mode not in TOOL_MODES:
        if not isinstance(content, str) or not content.strip():
            if len(calls) == 1:  # some servers answer response_format with a call
                fn = getattr(calls[0], "function", None)
                return (*check_call(tool, getattr(fn, "name", None),
                                    getattr(fn, "arguments", None)), "call")
            return None, "the reply has no JSON content", content
        return (*check_call(tool, tool.name, content.strip()), content)
    logged = [{"name": getattr(getattr(c, "function", None), "name", None),
               "arguments": getattr(getattr(c, "function", None), "arguments", None)}
              for c in calls]
    if len(calls) != 1:
        return None, f"exactly one call of {tool.name!r} is required, got {len(calls)}", \
            logged or content
    fn = getattr(calls[0], "function", None)
    arguments = getattr(fn, "arguments", None)
    if not isinstance(arguments, str | dict):
        return None, "the call has no arguments", logged
    return (*check_call(tool, getattr(fn, "name", None), arguments), logged)


def schema_messages(mode: str, tool: ToolSpec, messages: list[dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    """``messages`` as sent in ``mode``.

    Content modes show the enumerated tool schema in the system message (tool modes send
    it as ``tools``).
    """
    if mode in TOOL_MODES or not messages:
        return messages
    first = dict(messages[0])
    first["content"] = (f"{first['content']}\nThe tool is {tool.name}: {tool.description} "
                        f"Reply with its arguments only, as one JSON object matching this "
                        f"schema: {json.dumps(dict(tool.parameters), sort_keys=True)}")
    return [first, *messages[1:]]


def negotiate(config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep,
              use_cache: bool = True) -> Negotiation:
    """Find the tool-call mode and the slots of ``config``'s endpoint.

    Probes the modes of :data:`MODES` in order with one small request each (retrying
    infrastructure failures) and takes the first that works; ``config.tool_choice``
    other than ``negotiate`` is taken as is. Cached per ``(base_url, model)``.

    Raises:
        LLMUnavailable: no mode works (every probe failed), with the per-mode reasons.
    """
    key = (config.base_url, config.model)
    if use_cache:
        with _GLOBAL_LOCK:
            hit = _NEGOTIATED.get(key)
        if hit is not None and (config.tool_choice in ("negotiate", hit.mode)):
            return hit
    if config.slots is not None:
        slots, source = config.slots, "config"
    else:
        found, source = discover_slots(config.base_url, timeout_s=min(config.timeout_s, 5.0))
        slots, source = (found, source) if found else (1, "assumed")
    if config.tool_choice != "negotiate":
        neg = Negotiation(config.tool_choice, config.tool_choice in CONSTRAINED, slots,
                          source, ({"mode": config.tool_choice, "ok": True, "status": None,
                                    "note": "configured, not probed"},))
    else:
        neg = _probe_modes(config, slots, source, sleep)
    if use_cache:
        with _GLOBAL_LOCK:
            _NEGOTIATED[key] = neg
    return neg


def _probe_modes(config: LLMConfig, slots: int, source: str,
                 sleep: Callable[[float], None]) -> Negotiation:
    wire = _Wire(replace(config, max_tokens=min(config.max_tokens, 64)), sleep=sleep)
    probes: list[dict[str, Any]] = []
    for mode in MODES:
        # the response_format probe hides the code: only a constraining server finds it
        ask = ("Call the tool report_code." if mode in TOOL_MODES
               else "Reply with a JSON object.")
        msgs = [{"role": "system", "content": "You are a test client."},
                {"role": "user", "content": ask}]
        body = wire.body(mode, _PROBE_TOOL, msgs)
        rep, _ = wire.send(body, tries=2)  # a mode the server rejects fails fast
        if rep.infra and rep.status == 0:  # unreachable or slow: the full retries
            rep, _ = wire.send(body)
        if rep.infra:
            probes.append({"mode": mode, "ok": False, "status": rep.status,
                           "note": rep.infra})
            if rep.status == 0:  # unreachable after every retry: other modes cannot help
                break
            continue
        args, bad, _ = parse_reply(mode, _PROBE_TOOL, rep.body)
        if mode in TOOL_MODES:
            called = bad is None or not bad.startswith("exactly one call")
            if mode != "auto" and not called:
                probes.append({"mode": mode, "ok": False, "status": 200,
                               "note": f"server ignored tool_choice ({bad})"})
                continue
            probes.append({"mode": mode, "ok": True, "status": 200,
                           "note": "probe valid" if bad is None else f"probe: {bad}"})
            return Negotiation(mode, mode in CONSTRAINED and bad is None, slots, source,
                               tuple(probes))
        if args is None:
            probes.append({"mode": mode, "ok": False, "status": 200,
                           "note": f"schema not enforced ({bad})"})
            continue
        probes.append({"mode": mode, "ok": True, "status": 200, "note": "schema enforced"})
        return Negotiation(mode, True, slots, source, tuple(probes), verified=True)
    reason = ("the server is unreachable or does not answer in time"
              if probes and probes[-1]["status"] == 0
              else "no tool-call mode works on this server")
    raise LLMUnavailable(reason, base_url=config.base_url,
                         probes=[f"{p['mode']}: {p['note']}" for p in probes])


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


def negotiated_backend(backend: Mapping[str, Any], *,
                       sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """A manifest's resolved backend with the negotiated mode and slots filled in.

    For ``kind: llm`` the parent of a live run negotiates once, so the agent processes
    skip the probe and the run records which mode it used (``negotiation``).
    Other backends are returned unchanged.

    Raises:
        LLMUnavailable: see :func:`negotiate`.
        ValueError: no base URL or model is configured.
    """
    out = dict(backend)
    if out.get("kind") != "llm":
        return out
    cfg = LLMConfig.from_env(base_url=out.get("base_url"), model=out.get("model"),
                             api_key=out.get("api_key"), timeout_s=out.get("timeout_s"),
                             tool_choice=out.get("tool_choice"), slots=out.get("slots"))
    neg = negotiate(cfg, sleep=sleep)
    out.update(tool_choice=neg.mode, slots=neg.slots, negotiation=neg.to_dict(),
               base_url=cfg.base_url, model=cfg.model)
    return out


DECISIONS_PER_TASK = 6
"""Model decisions of one live workflow at most (shortlist, plan, replan, action, audit,
one spare)."""


def decision_budget_s(backend: Mapping[str, Any]) -> float:
    """Longest one model decision may take, in seconds.

    Two responses, each with its retries and backoff (0 for the scripted backend).
    """
    if backend.get("kind") != "llm":
        return 0.0
    cfg = LLMConfig.from_env(base_url=backend.get("base_url") or "http://unset",
                             model=backend.get("model") or "unset",
                             timeout_s=backend.get("timeout_s"))
    per_response = (cfg.retries + 1) * cfg.timeout_s + cfg.backoff_s * (2 ** cfg.retries)
    return float(MAX_ATTEMPTS * per_response)


def fit_timeouts(timeouts: Mapping[str, Any], backend: Mapping[str, Any], tasks: int
                 ) -> dict[str, Any]:
    """Step and run timeouts that leave a model its decision budget.

    ``step_s`` covers one decision (capped at 3600 s), ``run_s`` every decision of
    ``tasks`` workflows at the server's slots (capped at one day); neither is lowered.
    """
    out = dict(timeouts)
    budget = decision_budget_s(backend)
    if budget <= 0:
        return out
    slots = max(1, int(backend.get("slots") or 1))
    out["step_s"] = min(3600.0, max(float(out["step_s"]), budget + 30.0))
    need = DECISIONS_PER_TASK * budget * max(1, tasks) / slots
    out["run_s"] = min(86400.0, max(float(out["run_s"]), need))
    return out
