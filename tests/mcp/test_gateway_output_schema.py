"""A result that breaks the tool's declared ``outputSchema`` (QA qa-mcp7 S3, #25).

The gateway forwards the upstream's result as it came and the SDK's client refuses it
(an error to the caller), but the trace recorded a success. Now the trace records the
call as the client sees it: an error naming what is wrong. Real processes: the SDK's
client, ``icore mcp`` and a hand-written JSON-RPC upstream (tests/mcp/upstream_raw.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from icore.adapters import load_jsonl

from .conftest import stdio_gateway, write_manifest

RAW = Path(__file__).resolve().parent / "upstream_raw.py"
pytestmark = pytest.mark.timeout(120)


def test_a_result_the_client_refuses_is_traced_as_an_error(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"raw": {
        "command": sys.executable, "args": [str(RAW)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 10}},
        tools={}, facts={})
    said: dict[str, str] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for x in ("good", "bad", "none"):
                try:
                    r = await s.call_tool("count", {"x": x})
                    said[x] = "error" if r.is_error else "ok"
                except RuntimeError as exc:  # the SDK client's own check
                    said[x] = f"refused: {exc}"

    anyio.run(main)
    assert said["good"] == "ok" and said["bad"].startswith("refused: Invalid structured")
    assert said["none"].startswith("refused: Tool count has an output schema"), said
    calls = [s for s in load_jsonl(tmp_path / "trace.jsonl").steps
             if s.kind.value == "tool_output"]
    assert [c.exitcode for c in calls] == [0, 1, 1], [c.content for c in calls]
    assert "Invalid structured content returned by tool count: 'five' is not of type " \
           "'integer'" in calls[1].content
    assert "did not return structured content" in calls[2].content
