"""The LLM-backed iCORE team against a real local OpenAI-compatible HTTP endpoint."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from icore.agents._llm_icore import LLMSettings, LLMTeam, parse_json
from icore.agents._sim_world import SimWorld
from icore.agents._simulated import SimEnvironment, introduce
from icore.audit import AuditLoop, LoopConfig
from icore.state import Note, State
from icore.workloads._tasks import TaskMode, declaration, make_instance


class FakeChat(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: picks option 0, repairs on feedback; every 5th reply is
    prose without JSON (the client must fall back)."""

    seen: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the test server

    def do_POST(self) -> None:
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n))
        FakeChat.seen.append(body)
        user = body["messages"][-1]["content"]
        if "iCORE-Audit feedback" in user:
            content = (
                '{"action": "reassign"}' if "assignment defect" in user
                else 'Sure: {"action": "repair"}'
            )
        elif len(FakeChat.seen) % 5 == 0:
            content = "I think the first option is best."
        else:
            content = '{"choice": 0}'
        reply = {
            "id": f"cmpl-{len(FakeChat.seen)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 5,
                      "total_tokens": len(user.split()) + 5},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr logging."""


@pytest.fixture
def endpoint() -> Iterator[str]:
    FakeChat.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeChat)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.shutdown()
        srv.server_close()
        th.join(timeout=5)


def test_parse_json_finds_object_in_prose() -> None:
    """Models wrap JSON in prose; anything without an object is None."""
    assert parse_json('ok: {"choice": 2} thanks') == {"choice": 2}
    assert parse_json("no json here") is None
    assert parse_json("{not json}") is None


def test_llm_team_runs_under_icore_audit(endpoint: str) -> None:
    """The loop drives the LLM team; feedback text reaches the model verbatim."""
    inst = make_instance(TaskMode.BUILD_CHAIN, 0)
    world = SimWorld(inst)
    team = LLMTeam.create(inst, world, LLMSettings(base_url=endpoint, model="fake"))
    x = State(declaration(inst))
    introduce(x, inst)
    res = AuditLoop(
        x, team, env=SimEnvironment(world),
        config=LoopConfig(max_steps=inst.budget, head_view=world.head_view),
    ).run()
    assert team.requests == len(FakeChat.seen) == res.agent_calls
    assert team.parse_failures >= 1  # the prose replies fell back to option 0
    assert team.prompt_tokens > 0 and team.completion_tokens == 5 * team.requests
    fb_notes = [e.body.payload["text"] for e in x.entries
                if isinstance(e.body, Note) and e.body.kind == "feedback"]
    asked = [b["messages"][-1]["content"] for b in FakeChat.seen]
    assert fb_notes, "the run produced feedback"
    for text in fb_notes[: res.extra_calls]:
        assert any(text in a for a in asked)
    assert res.steps > 0 and 0.0 <= world.performance() <= 1.0


def test_llm_team_needs_settings_or_client() -> None:
    """Constructing without an endpoint is a usage error."""
    inst = make_instance(TaskMode.DEADLINE, 0)
    with pytest.raises(ValueError, match="settings or a client"):
        LLMTeam(inst=inst, world=SimWorld(inst))


def test_cli_real_llm_setting(endpoint: str, tmp_path) -> None:
    """``icore bench icore --llm-base-url`` runs the same evaluation with the LLM team."""
    from typer.testing import CliRunner

    from icore.cli import app

    r = CliRunner().invoke(app, ["bench", "icore", "--per-mode", "1", "--mode", "deadline",
                                 "--jobs", "1", "--out", str(tmp_path),
                                 "--llm-base-url", endpoint, "--llm-model", "fake"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["agents"] == f"llm:fake@{endpoint}"
    assert len(FakeChat.seen) > 0
