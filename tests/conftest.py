"""Shared fixtures: paths to the real data in ../shared/data."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "icore", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
# `make mutation` runs the area tests against every mutant: fewer examples each
settings.register_profile("mutation", parent=settings.get_profile("icore"), max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "icore"))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _sigint_left_as_found() -> Any:
    """Fail a test that leaves SIGINT handled, ignored or blocked differently.

    A child process inherits an ignored or blocked SIGINT across exec, so a test that
    leaks one makes a later Ctrl-C test's ``icore run`` deaf to Ctrl-C. The leak is put
    back and the leaking test is named.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    now_handler = signal.getsignal(signal.SIGINT)
    now_blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if now_handler is not handler or now_blocked != blocked:
        signal.signal(signal.SIGINT, handler)  # type: ignore[arg-type]
        signal.pthread_sigmask(signal.SIG_BLOCK if blocked else signal.SIG_UNBLOCK,
                               {signal.SIGINT})
        pytest.fail(f"the test left SIGINT changed: handler {handler!r} -> {now_handler!r}, "
                    f"blocked {blocked} -> {now_blocked}; restore it in the test",
                    pytrace=False)


def _shared_data() -> Path:
    env = os.environ.get("ICORE_SHARED_DATA")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The ../shared/data folder (Mahimahi traces, Who&When traces)."""
    path = _shared_data()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set ICORE_SHARED_DATA)")
    return path


# --- small synthetic Who&When-shaped runs (written here, not copied from the dataset) ---

TEAM = (
    "Initial plan:\n\nWe are working to address the following user request:\n\nWhat is 6*7?\n\n"
    "To answer this request we have assembled the following team:\n\n"
    "Assistant: A helpful and general-purpose AI assistant with Python skills.\n"
    "ComputerTerminal: A computer terminal that runs Python scripts.\n"
    "FileSurfer: An agent that can handle local files.\n"
    "WebSurfer: A helpful assistant with access to a web browser to search the web.\n\n\n"
    "Here is an initial fact sheet to consider:\n1. nothing\n"
)


def ledger(progress: Any = True, loop: Any = False, satisfied: Any = False,
           nxt: str = "WebSurfer", instr: str = "Search the web for the answer.") -> str:
    """A Magentic-One ledger message."""
    body = {
        "is_request_satisfied": {"reason": "r", "answer": satisfied},
        "is_in_loop": {"reason": "r", "answer": loop},
        "is_progress_being_made": {"reason": "r", "answer": progress},
        "next_speaker": {"reason": "r", "answer": nxt},
        "instruction_or_question": {"reason": "r", "answer": instr},
    }
    return "Updated Ledger:\n" + json.dumps(body, indent=2)


PAGE = ("I typed '6*7' into 'search'.\n\nHere is a screenshot of "
        "[6*7 - Search](https://www.bing.com/search?q=6*7).\nThe page shows 42.")


def magentic_run(**over: Any) -> dict[str, Any]:
    """A small failing Magentic-One run: the WebSurfer repeats itself, a stall, a replan."""
    hist = [
        {"role": "human", "content": "What is 6*7?"},
        {"role": "Orchestrator (thought)", "content": TEAM},
        {"role": "Orchestrator (thought)", "content": ledger()},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the web for 6*7."},
        {"role": "WebSurfer", "content": PAGE},
        {"role": "Orchestrator (thought)", "content": ledger()},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the web again for 6*7."},
        {"role": "Websurfer", "content": PAGE},
        {"role": "Orchestrator (thought)", "content": ledger(progress=True, loop="false")},
        {"role": "Orchestrator (thought)", "content": "Stalled.... Replanning..."},
        {"role": "Orchestrator (thought)", "content": TEAM.replace("Initial plan:", "New plan:")},
        {"role": "Orchestrator (termination condition)",
         "content": "No agent selected.\nFINAL ANSWER: 41\nSCENARIO.PY COMPLETE !#!#"},
    ]
    data: dict[str, Any] = {
        "history": hist, "question": "What is 6*7?", "ground_truth": "42",
        "is_corrected": "False", "question_ID": "q1", "mistake_agent": "Websurfer",
        "mistake_step": "7", "mistake_reason": "repeated the search", "mistake_type": "x",
        "labels": ["a"],
    }
    data.update(over)
    return data


def captain_run(**over: Any) -> dict[str, Any]:
    """A small failing CaptainAgent run: code fails, then an unsupported verification."""
    hist = [
        {"role": "assistant", "name": "Math_Expert",
         "content": "You are given a task.\n# General Task\nWhat is 6*7?\n## Plan for solving "
                    "the task\n1. compute\n2. verify"},
        {"role": "user", "name": "Python_Expert",
         "content": "```python\nprint(6*7\n```"},
        {"role": "user", "name": "Computer_terminal",
         "content": "exitcode: 1 (execution failed)\nCode output: SyntaxError"},
        {"role": "user", "name": "Verification_Expert",
         "content": "I have verified the result: the answer is 41. TERMINATE"},
    ]
    data: dict[str, Any] = {
        "is_correct": "false", "question": "What is 6*7?", "question_ID": "q2",
        "level": "1", "ground_truth": "42", "history": hist,
        "mistake_agent": "python_expert", "mistake_step": 1, "mistake_reason": "bad code",
        "system_prompt": {
            "Math_Expert": "An expert in mathematics and reasoning.",
            "Python_Expert": "Writes python code for the Computer_terminal to execute.",
            "Verification_Expert": "Verifies results carefully.",
        },
    }
    data.update(over)
    return data


@pytest.fixture
def magentic() -> dict[str, Any]:
    """A synthetic Magentic-One run (dict)."""
    return magentic_run()


@pytest.fixture
def captain() -> dict[str, Any]:
    """A synthetic CaptainAgent run (dict)."""
    return captain_run()


@pytest.fixture
def make_magentic() -> Callable[..., dict[str, Any]]:
    """Factory: a Magentic-One run with top-level keys overridden."""
    return magentic_run


@pytest.fixture
def make_captain() -> Callable[..., dict[str, Any]]:
    """Factory: a CaptainAgent run with top-level keys overridden."""
    return captain_run


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Write a JSON document (or raw text) to a file in tmp_path."""

    def write(data: Any, name: str = "run.json") -> Path:
        p = tmp_path / name
        p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return p

    return write


# --------------------------------------------------------------------------------------
# A local OpenAI-compatible fake server (test code, 127.0.0.1 only)
# --------------------------------------------------------------------------------------
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

ALL_MODES = frozenset({"named", "required", "json_schema", "json_object", "auto"})


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


def request_mode(body: dict[str, Any]) -> str:
    """The tool-call mode a request body asks for."""
    if "tools" in body:
        tc = body.get("tool_choice")
        return "named" if isinstance(tc, dict) else str(tc or "auto")
    return str(body.get("response_format", {}).get("type", "text"))


def request_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(name, parameters)`` of the one tool of a request (any mode)."""
    if "tools" in body:
        fn = body["tools"][0]["function"]
        return fn["name"], fn["parameters"]
    rf = body["response_format"]
    if rf["type"] == "json_schema":
        return rf["json_schema"]["name"], rf["json_schema"]["schema"]
    # json_object: the tool name is in the system message (see schema_messages)
    sysmsg = body["messages"][0]["content"]
    name = sysmsg.split("The tool is ", 1)[1].split(":", 1)[0] if "The tool is " in sysmsg \
        else "report_code"
    return name, rf["schema"]


class FakeOpenAI:
    """Chat-completions endpoint answering from a per-tool script of behaviours.

    ``script[tool_name]`` is a list consumed one entry per request for that tool
    (``default`` when empty). ``modes``: the tool-call modes it supports (others answer
    ``unsupported_status``); ``enforces``: response_format modes whose schema it honours
    (others answer free JSON). ``props``: the body of ``GET /props`` (None: 404).
    ``answer_fn(body) -> args`` overrides the valid arguments. Every chat body is kept in
    :attr:`requests`.

    Behaviours: valid, hallucinate, extra_field, wrong_tool, malformed, timeout, no_call,
    two_calls, bad_body, repeat_action, http500, http503.
    """

    def __init__(self, script: dict[str, list[str]] | None = None, *,
                 default: str = "valid", sleep_s: float = 5.0) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.default = default
        self.sleep_s = sleep_s
        self.modes: frozenset[str] = ALL_MODES
        self.enforces: frozenset[str] = frozenset({"json_schema", "json_object"})
        self.unsupported_status = 500
        self.props: dict[str, Any] | None = None
        self.answer_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            def do_GET(self) -> None:
                if self.path == "/props" and fake.props is not None:
                    self._send(200, json.dumps(fake.props).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                self._send(*fake.answer(self.path, body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        mode = request_mode(body)
        name, params = request_tool(body)
        with self.lock:
            self.requests.append(body)
            if mode not in self.modes:
                return self.unsupported_status, json.dumps(
                    {"error": {"message": f"{mode} is not supported"}}).encode()
            queue = self.script.get(name, [])
            how = queue.pop(0) if queue else self.default
        args = self.answer_fn(body) if self.answer_fn and name != "report_code" \
            else _valid_args(params)
        arguments: str | None = None
        calls: list[dict[str, Any]] | None = None
        if how == "timeout":
            time.sleep(self.sleep_s)
        if how in ("http500", "http503"):
            return int(how[4:]), b'{"error": {"message": "server error"}}'
        if how == "bad_body":
            return 200, b'{"id": "x", "choices": [ {not json'
        if how == "hallucinate":
            for k, v in list(args.items()):
                if k in ("candidate", "candidates", "option"):
                    args[k] = ["X999"] if isinstance(v, list) else "X999"
        elif how == "extra_field":
            args["reason"] = "because"
        elif how == "wrong_tool":
            name = "other_tool"
        elif how == "repeat_action" and "verdict" in args:
            args["verdict"] = "repeat_action"
        if how == "malformed":
            arguments = '{"candidate": '
        content: str | None = None
        if mode in ("json_schema", "json_object"):
            if mode not in self.enforces:
                args = {"answer": "free text"}
            content = arguments or ("I think so." if how == "no_call" else json.dumps(args))
        elif how != "no_call":
            one = {"id": "call_1", "type": "function",
                   "function": {"name": name, "arguments": arguments or json.dumps(args)}}
            calls = [one, dict(one, id="call_2")] if how == "two_calls" else [one]
        else:
            content = "I think so."
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if calls is not None:
            msg["tool_calls"] = calls
        resp = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
                "created": 0, "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": msg,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
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
            return [b for b in self.requests if request_tool(b)[0] == tool]


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A started fake server (script it by assigning ``fake_llm.script``); the backend's
    negotiation cache is cleared and retries back off for milliseconds."""
    from icore.agents import _llm_wire, _negotiate

    monkeypatch.setattr(_negotiate, "_NEGOTIATED", {})
    monkeypatch.setattr(_llm_wire, "_SEMAPHORES", {})
    monkeypatch.setenv("ICORE_LLM_BACKOFF_S", "0.01")
    srv = FakeOpenAI().start()
    try:
        yield srv
    finally:
        srv.close()


def invoke_cli(*args: str) -> tuple[int, str]:
    """``icore ARGS`` in process (typer's runner, no LLM configured, 200 columns): its exit
    code and output; anything but a clean exit (a traceback) fails the test."""
    from typer.testing import CliRunner

    from icore.cli import app
    res = CliRunner().invoke(app, list(args), env={
        "COLUMNS": "200", "ICORE_LLM_MODEL": "", "ICORE_LLM_BASE_URL": "",
        "OPENAI_BASE_URL": ""})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output
