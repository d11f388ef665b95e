"""An HTTP upstream's compressed answer is refused, never decoded past the cap (#29).

Sweep round 8: ``max_message_mb`` counted an HTTP upstream's answer as it arrived, on the
wire; a gzip answer (``content-encoding: gzip``) of 3 MiB text, 3 KiB on the wire,
reached the client through the SDK's path with a 1 MiB cap (and a gzip bomb was decoded
whole), while the lean path said the answer was not UTF-8. The gateway now asks every
HTTP upstream for ``accept-encoding: identity`` and refuses an answer compressed all the
same on both paths: the call fails ``isError`` naming the coding and the cap, it may
have run (the trace says so), and the session goes on. Real processes: the SDK's client
launching ``icore mcp`` over stdio, tests/mcp/upstream_coded_http.py over TCP.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from .conftest import env, free_port, process, text, wait_port, write_manifest

CODED = Path(__file__).resolve().parent / "upstream_coded_http.py"
pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize(("mode", "lean"), [("gzip", "1"), ("gzip", "0"), ("gzip-sse", "0"),
                                            ("deflate", "1"), ("gzip-bomb", "0")])
def test_a_compressed_answer_fails_its_call_and_the_session_goes_on(
        tmp_path: Path, mode: str, lean: str) -> None:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    port = free_port()
    log = tmp_path / "up.log"
    got: list[tuple[bool, str]] = []
    with process([sys.executable, str(CODED), str(port), mode],
                 extra_env={"UPSTREAM_LOG": str(log)}) as up:
        wait_port(port, up)
        manifest = write_manifest(tmp_path, {"big": {"url": f"http://127.0.0.1:{port}/mcp",
                                                     "timeout_s": 60}},
                                  tools={"big": {"depends_on": ["fact://plan/goal"]}},
                                  max_message_mb=1)

        async def main() -> None:
            p = StdioServerParameters(command=sys.executable,
                                      args=["-m", "icore", "mcp", str(manifest)],
                                      env={**env(), "ICORE_MCP_LEAN": lean})
            with open(os.devnull, "w") as devnull:
                async with stdio_client(p, errlog=devnull) as (r, w), \
                        ClientSession(r, w) as s:
                    await s.initialize()
                    for mb in (0.25, 3):
                        await s.read_resource("fact://plan/goal")
                        res = await s.call_tool("big", {"mb": mb})
                        got.append((bool(res.is_error), text(res)))
                    res = await s.call_tool("small", {})
                    got.append((bool(res.is_error), text(res)))

        anyio.run(main)
    *coded, small = got
    for error, said in coded:
        assert error and ("with content-encoding 'gzip'" in said or "'deflate'" in said), said
        assert "accept-encoding: identity" in said and "max_message_mb" in said, said
    assert small == (False, "small ok")
    asked = [y["accept-encoding"] for y in map(json.loads, log.read_text().splitlines())
             if "accept-encoding" in y]  # each call, as the upstream got it
    assert asked == ["identity"] * 3, asked
    steps = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    outs = [x for x in steps if x.get("kind") == "tool_output" and x.get("tool") == "big"]
    assert [o.get("may_have_run") for o in outs] == [True, True], outs
