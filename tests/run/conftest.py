"""Fixtures for live-run tests: a run folder per test, small manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.agents import RunManifest, default_manifest


@pytest.fixture
def manifest() -> RunManifest:
    """The embedded reservation manifest (scripted backend, PlanFence)."""
    return default_manifest("reservation")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh run folder."""
    d = tmp_path / "run"
    d.mkdir()
    return d


# --------------------------------------------------------------------------------------
# A local OpenAI-compatible fake server (test code, 127.0.0.1 only)
# --------------------------------------------------------------------------------------
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from typing import Any  # noqa: E402

BEHAVIOURS = ("valid", "hallucinate", "extra_field", "wrong_tool", "malformed", "timeout",
              "no_call", "two_calls", "bad_body", "repeat_action")


def _valid_args(schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if "enum" in prop:
            out[name] = prop["enum"][0]
        elif prop.get("type") == "array":
            out[name] = [prop["items"]["enum"][0]]
        else:
            out[name] = "x"
    return out


class FakeOpenAI:
    """Chat-completions endpoint answering from a per-tool script of behaviours.

    ``script[tool_name]`` is a list consumed one entry per request for that tool
    (``default`` when empty). Every request body is kept in :attr:`requests`.
    """

    def __init__(self, script: dict[str, list[str]] | None = None, *,
                 default: str = "valid", sleep_s: float = 5.0) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.default = default
        self.sleep_s = sleep_s
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                status, payload = fake.answer(self.path, body)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        tool = body["tools"][0]["function"]
        with self.lock:
            self.requests.append(body)
            queue = self.script.get(tool["name"], [])
            how = queue.pop(0) if queue else self.default
        args = _valid_args(tool["parameters"])
        name = tool["name"]
        arguments: str | None = None
        calls: list[dict[str, Any]] | None = None
        if how == "timeout":
            time.sleep(self.sleep_s)
        if how == "bad_body":
            return 200, b'{"id": "x", "choices": [ {not json'
        if how == "hallucinate":
            for k, v in list(args.items()):
                if k in ("candidate", "candidates"):
                    args[k] = ["X999"] if isinstance(v, list) else "X999"
        elif how == "extra_field":
            args["reason"] = "because"
        elif how == "wrong_tool":
            name = "other_tool"
        elif how == "repeat_action" and "verdict" in args:
            args["verdict"] = "repeat_action"
        if how == "malformed":
            arguments = '{"candidate": '
        if how != "no_call":
            one = {"id": "call_1", "type": "function",
                   "function": {"name": name,
                                "arguments": arguments or json.dumps(args)}}
            calls = [one, dict(one, id="call_2")] if how == "two_calls" else [one]
        msg: dict[str, Any] = {"role": "assistant",
                               "content": "I think so." if calls is None else None}
        if calls is not None:
            msg["tool_calls"] = calls
        resp = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
                "created": 0, "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": msg,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        return 200, json.dumps(resp).encode()

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def bodies_for(self, tool: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for b in self.requests if b["tools"][0]["function"]["name"] == tool]


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    """A started fake server (script it by assigning ``fake_llm.script``)."""
    srv = FakeOpenAI().start()
    try:
        yield srv
    finally:
        srv.close()
