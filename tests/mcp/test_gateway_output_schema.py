"""A result that breaks the tool's declared ``outputSchema`` (QA qa-mcp7 S3, #25; #29).

The gateway forwarded the upstream's result as it came and the SDK's client refused it
(an error to the caller) while the trace recorded a success; then the trace said error
while the answer still had no ``isError`` (a client that does not check, as MCP only
says SHOULD, took it as a success). MCP says a server MUST return structured results
that conform: the gateway, a server to its client, now answers an ``isError`` result
naming what is wrong, and the trace records the same failed call. Real processes: the
SDK's client, ``icore mcp`` and a hand-written JSON-RPC upstream (tests/mcp/upstream_raw.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from icore.adapters import load_jsonl

from .conftest import audited_actions, stdio_gateway, text, write_manifest

RAW = Path(__file__).resolve().parent / "upstream_raw.py"
pytestmark = pytest.mark.timeout(120)


def test_a_result_the_client_refuses_is_traced_as_an_error(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"raw": {
        "command": sys.executable, "args": [str(RAW)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 10}},
        tools={}, facts={})
    said: dict[str, tuple[bool, str]] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for x in ("good", "bad", "none"):  # the SDK client's own check never raises
                r = await s.call_tool("count", {"x": x})
                said[x] = (bool(r.is_error), text(r))

    anyio.run(main)
    assert said["good"] == (False, "counted good"), said
    assert said["bad"][0] and said["bad"][1].startswith(
        "Invalid structured content returned by tool count: 'five' is not of type "
        "'integer'; the gateway does not forward"), said
    assert said["none"][0] and "did not return structured content" in said["none"][1]
    calls = [s for s in load_jsonl(tmp_path / "trace.jsonl").steps
             if s.kind.value == "tool_output"]
    assert [c.exitcode for c in calls] == [0, 1, 1], [c.content for c in calls]
    assert calls[1].content == said["bad"][1] and calls[2].content == said["none"][1]
    assert "counted" not in calls[1].content  # the refused result is not passed on


def test_the_audit_counts_the_refused_result_as_a_call_that_ran(tmp_path: Path) -> None:
    """``icore audit`` (the CLI) on the trace of a protected tool: two valid actions. The
    upstream answered success, so the call whose result breaks the schema ran: the
    client gets isError saying so, never "failed after authorization" (no effect), which
    invited a retry that charges twice (QA qa-new15b S2)."""
    manifest = write_manifest(tmp_path, {"raw": {
        "command": sys.executable, "args": [str(RAW)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 10}},
        tools={"count": {"depends_on": ["fact://plan/goal"]}})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for x in ("good", "bad"):
                await s.read_resource("fact://plan/goal")  # D(a) read: the gate authorizes
                r = await s.call_tool("count", {"x": x})
                assert bool(r.is_error) == (x == "bad"), text(r)
                if x == "bad":
                    assert "The upstream answered success, so count ran: do not call it " \
                        "again to repeat it" in text(r), text(r)
                    assert (r.meta or {}).get("icore/upstream") == {"ran": True}, r.meta

    anyio.run(main)
    acts = audited_actions(tmp_path / "trace.jsonl")
    assert (acts["valid"], acts["failed after authorization"], acts["total"]) == (2, 0, 2), acts
