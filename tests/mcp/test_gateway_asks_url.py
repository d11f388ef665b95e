"""URL-mode elicitation and its completion through the gateway (#29, MCP 2025-11-25).

Real parts: the SDK's client (over stdio launching ``icore mcp``; over HTTP to ``icore
mcp --http`` in a subprocess) and a real upstream (tests/mcp/upstream_asks.py over stdio
or streamable HTTP) whose tools send the human to a URL mid-call (``ctx.elicit_url``),
answer ``-32042`` (URL elicitation required) and send
``notifications/elicitation/complete``. The URL question, the ``-32042`` error (its
``data``) and each completion reach the client session they belong to, and only it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from .test_gateway_asks import _http, _http_gateway, _manifest, _stdio, _stdio_upstream

GUARD_S = 60.0
"""A hang guard, not a measure."""


class _Client:
    """What one client session saw: URL questions and completions."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.completed: list[str] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        import mcp_types as types
        self.asked.append((params.mode, params.url, params.elicitation_id))
        return types.ElicitResult(action="accept")

    async def notified(self, message: Any) -> None:
        import mcp_types as types
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    def callbacks(self) -> dict[str, Any]:
        return {"elicitation_callback": self.elicit, "message_handler": self.notified}


async def _until(done: Any) -> None:
    with anyio.fail_after(GUARD_S):
        while not done():
            await anyio.sleep(0.05)


def _notes(trace: Path) -> list[str]:
    return [str(json.loads(x).get("content", "")) for x in trace.read_text().splitlines()]


def test_stdio_url_elicitation_and_its_completion(tmp_path: Path) -> None:
    """Over stdio: a URL question reaches the client as it was sent (mode, URL, id) and
    its completion follows; ``-32042`` reaches the client as a JSON-RPC error with its
    ``data``, and the completion of that elicitation (sent during a later call) too; a
    completion of an id never forwarded is not passed on (traced)."""
    from mcp.shared.exceptions import MCPError
    manifest = _manifest(tmp_path, _stdio_upstream(tmp_path / "up.log"))
    me = _Client()

    async def main() -> None:
        async with _stdio(manifest, **me.callbacks()) as s:
            r = await s.call_tool("sign_in", {"eid": "e1"})
            assert not r.is_error and r.content[0].text == "url: accept", r
            await _until(lambda: me.completed == ["e1"])
            with pytest.raises(MCPError) as caught:
                await s.call_tool("needs_auth", {"eid": "e2"})
            assert caught.value.error.code == -32042
            assert caught.value.error.data == {"elicitations": [{
                "mode": "url", "message": "Authorize first",
                "url": "https://bank.example/auth/e2", "elicitationId": "e2"}]}
            await s.call_tool("finish_auth", {"eid": "e2"})
            await _until(lambda: me.completed == ["e1", "e2"])
            await s.call_tool("finish_auth", {"eid": "e9"})  # never sent to anyone
            await s.call_tool("echo", {"text": "after"})  # the notification came first

    anyio.run(main)
    assert me.asked == [("url", "https://bank.example/auth/e1", "e1")]
    assert me.completed == ["e1", "e2"]
    notes = _notes(tmp_path / "trace.jsonl")
    assert "upstream asks completed URL elicitation 'e9'; not passed on: no client " \
           "session was sent that elicitation (or it was forgotten)" in notes
    assert "UPSTREAM ERROR: URL elicitation required (https://bank.example/auth/e2)" in notes


def test_http_completion_goes_to_its_own_session(tmp_path: Path) -> None:
    """Over ``--http`` with an HTTP upstream (its completions come on its GET stream,
    shared by every session): alice's URL question's completion reaches alice only;
    bob's ``-32042`` elicitation, completed during a call of alice's, reaches bob only."""
    from mcp.shared.exceptions import MCPError
    alice, bob = _Client(), _Client()
    with _http_gateway(tmp_path, tmp_path / "up.log") as url:
        async def main() -> None:
            async with _http(url, "alice", **alice.callbacks()) as a, \
                    _http(url, "bob", **bob.callbacks()) as b:
                r = await a.call_tool("sign_in", {"eid": "a1"})
                assert r.content[0].text == "url: accept", r
                await _until(lambda: alice.completed == ["a1"])
                with pytest.raises(MCPError) as caught:
                    await b.call_tool("needs_auth", {"eid": "b1"})
                assert caught.value.error.code == -32042
                await a.call_tool("finish_auth", {"eid": "b1"})
                await _until(lambda: bob.completed == ["b1"])
                await a.call_tool("echo", {"text": "x"})
                await b.call_tool("echo", {"text": "x"})
        anyio.run(main)
    assert alice.asked == [("url", "https://bank.example/auth/a1", "a1")]
    assert bob.asked == []
    assert (alice.completed, bob.completed) == (["a1"], ["b1"])
