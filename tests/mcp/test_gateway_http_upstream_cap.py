"""An HTTP upstream's answer over ``max_message_mb`` fails its call, read capped (#29).

Real processes: the SDK's client launching ``icore mcp`` over stdio, in front of
tests/mcp/upstream_big_http.py (a streamable-HTTP upstream answering JSON with or without
a content-length, or SSE; a huge notification event before a small answer), over the
gateway's lean path and the SDK's client alike. As for a stdio upstream: the call's
answer is an ``isError`` result naming the tool, the size and the cap, the trace records
a call that may have run (``icore audit``: outcome unknown), the connection goes on, and
the gateway never holds the answer (its peak RSS stays far below the answer's size).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    audited_actions,
    env,
    free_port,
    peak_kib,
    process,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)

BIG = Path(__file__).resolve().parent / "upstream_big_http.py"
MIB = 1 << 20
pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def _upstream(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    with process([sys.executable, str(BIG), str(port)],
                 extra_env={"UPSTREAM_LOG": str(tmp_path / "up.log")}) as up:
        wait_port(port, up)
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.asynccontextmanager
async def _gateway(manifest: Path, lean: bool) -> AsyncIterator[Any]:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)],
                              env={**env(), "ICORE_MCP_LEAN": "1" if lean else "0"})
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk-path"])
def test_an_http_answer_over_the_cap_fails_its_call_and_the_session_goes_on(
        tmp_path: Path, lean: bool) -> None:
    got: list[tuple[str, bool, str]] = []
    with _upstream(tmp_path) as url:
        manifest = write_manifest(tmp_path, {"big": {"url": url, "timeout_s": 60}},
                                  tools={"big": {"depends_on": ["fact://plan/goal"]}},
                                  max_message_mb=1)

        async def main() -> None:
            async with _gateway(manifest, lean) as s:
                for args in ({"mb": 0.75}, {"mb": 3}, {"mb": 3, "as": "chunked"},
                             {"mb": 3, "as": "sse"}, {"mb": 3, "tool": "noisy"}):
                    await s.read_resource("fact://plan/goal")
                    tool = str(args.pop("tool", "big"))
                    r = await s.call_tool(tool, args)
                    got.append((tool, bool(r.is_error), text(r)))
                r = await s.call_tool("small", {})
                got.append(("small", bool(r.is_error), text(r)))

        anyio.run(main)
    fine, *over, noisy, small = got
    assert fine[:2] == ("big", False) and len(fine[2]) == int(0.75 * MIB), fine[:2]
    for _, error, said in over:  # JSON (its size known or not), SSE: each fails alone
        assert error and said.startswith("upstream big answered tools/call big with "), said
        assert "over the gateway's max_message_mb (1 MiB, manifest); the answer was " \
            "dropped unread" in said and "The upstream ran the request" in said, said
    assert "a 3,145,8" in over[0][2] and "more than 1,048,576 bytes" in over[1][2], over
    assert noisy == ("noisy", False, "noisy ok"), noisy  # a huge notification: dropped
    assert small == ("small", False, "small ok")
    assert [x["tool"] for x in upstream_log(tmp_path / "up.log")] == [
        "big", "big", "big", "big", "noisy", "small"]
    actions = audited_actions(tmp_path / "trace.jsonl")
    assert (actions["valid"], actions["outcome unknown"], actions["total"]) == (1, 3, 4), \
        actions
    steps = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    outs = [x for x in steps if x.get("kind") == "tool_output" and x.get("tool") == "big"]
    assert [o.get("may_have_run", False) for o in outs] == [False, True, True, True]


def test_an_http_answer_far_over_the_cap_is_never_held(tmp_path: Path) -> None:
    """A 64 MiB JSON answer without a content-length, cap 1 MiB: the gateway's peak RSS
    stays far below the answer's size (it read the whole body before, #29)."""
    with _upstream(tmp_path) as url:
        manifest = write_manifest(tmp_path, {"big": {"url": url, "timeout_s": 60}},
                                  tools={}, max_message_mb=1)
        peak: list[int] = []

        async def main() -> None:
            async with _gateway(manifest, True) as s:
                r = await s.call_tool("big", {"mb": 64, "as": "chunked"})
                assert r.is_error and "more than 1,048,576 bytes" in text(r), text(r)
                peak.append(peak_kib(manifest))

        anyio.run(main)
    assert peak[0] < 200 * 1024, f"peak RSS {peak[0]} KiB"
