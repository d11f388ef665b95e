"""The LLM backend's HTTP side: requests per mode, retries, reply parsing (App. A.2).

:class:`_Wire` sends one request per tool-call mode with retries and backoff for
infrastructure failures; :func:`parse_reply` reads one grounded tool call out of a reply
(a schema violation is the model's); :func:`discover_slots` reads a server's slots. See
:mod:`icore.agents._llm`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icore.agents._decide import ToolSpec, check_call
from icore.agents._llm_config import (
    RETRYABLE_STATUS,
    TOOL_MODES,
    LLMConfig,
)


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
