"""An upstream answer over ``max_message_mb`` fails its call, in bounded memory (#29).

Real processes: the SDK's client launching ``icore mcp`` over stdio, in front of
tests/mcp/upstream_big.py (answers of any size, written in pieces; the response's ``id``
first, last or in the middle; a huge notification). The call's answer is an ``isError``
result naming the tool, the size and the cap; the trace records a call that ran with an
unknown outcome (``icore audit`` says so); the connection goes on (no relaunch); the
gateway never holds the answer (its peak RSS stays far below the answer's size).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    audited_actions,
    peak_kib,
    stdio_gateway,
    text,
    upstream_log,
    write_manifest,
)

BIG = Path(__file__).resolve().parent / "upstream_big.py"
MIB = 1 << 20
pytestmark = pytest.mark.timeout(180)


def _manifest(tmp_path: Path, cap_mb: float) -> Path:
    return write_manifest(tmp_path, {"big": {
        "command": sys.executable, "args": [str(BIG)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 60}},
        tools={"big": {"depends_on": ["fact://plan/goal"]}}, max_message_mb=cap_mb)


def test_an_answer_over_the_cap_fails_its_call_and_the_session_goes_on(
        tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, 1)
    got: list[tuple[bool, str]] = []

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for args in ({"mb": 0.75}, {"mb": 3}, {"mb": 3, "id_at": "tail"},
                         {"mb": 3, "id_at": "middle"}):
                await s.read_resource("fact://plan/goal")
                r = await s.call_tool("big", args)
                got.append((bool(r.is_error), text(r)))
            for name in ("noisy", "small"):  # a huge notification is dropped; it answers
                r = await s.call_tool(name, {"mb": 3})
                got.append((bool(r.is_error), text(r)))

    anyio.run(main)
    assert got[0] == (False, "x" * (3 * MIB // 4))  # under the cap: whole, many chunks
    for is_error, said in got[1:4]:
        assert is_error, said
        assert said.startswith("upstream big answered tools/call big with a 3,1"), said
        assert "-byte message, over the gateway's max_message_mb (1 MiB, manifest)" in said
        assert "The upstream ran the request" in said
    assert got[4:] == [(False, "noisy ok"), (False, "small ok")]
    assert len({x["pid"] for x in upstream_log(tmp_path / "up.log")}) == 1  # no relaunch
    steps = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    outs = [x for x in steps if x.get("kind") == "tool_output" and x.get("tool") == "big"]
    assert [(o["exitcode"], o.get("may_have_run", False)) for o in outs] == \
        [(0, False), (1, True), (1, True), (1, True)], outs
    assert all("max_message_mb (1 MiB" in o["content"] for o in outs[1:])
    assert len((tmp_path / "trace.jsonl").read_bytes()) < 2 * MIB
    acts = audited_actions(tmp_path / "trace.jsonl")  # the audit tells the same
    assert (acts["valid"], acts["outcome unknown"], acts["total"]) == (1, 3, 4), acts


def test_an_answer_that_is_no_message_fails_its_call_at_once(tmp_path: Path) -> None:
    """Bytes that are no UTF-8 in an answer showing its id: that call fails at once (the
    SDK's transport ended the connection; another bad answer waited for ``timeout_s``);
    a stray print on the upstream's stdout fails nothing."""
    manifest = _manifest(tmp_path, 16)
    got: list[tuple[bool, str]] = []

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for name in ("nonutf8", "small"):
                r = await s.call_tool(name, {})
                got.append((bool(r.is_error), text(r)))

    anyio.run(main)
    assert got[0][0] and got[0][1].startswith(
        "upstream big answered tools/call nonutf8 with a message that is no valid "
        "JSON-RPC ("), got
    assert got[1] == (False, "small ok")
    assert len({x["pid"] for x in upstream_log(tmp_path / "up.log")}) == 1  # no relaunch


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_huge_answer_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 256 MiB answer with a 1 MiB cap: the gateway's peak RSS stays under 200 MiB.

    Before, the SDK's transport held the whole line (and copied it per 64 KiB chunk:
    a 40 MB answer took ~18 s of CPU).
    """
    manifest = _manifest(tmp_path, 1)
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("fact://plan/goal")
            r = await s.call_tool("big", {"mb": 256})
            seen["r"] = (bool(r.is_error), text(r))
            seen["peak"] = peak_kib(manifest)

    anyio.run(main)
    assert seen["r"][0] and "with a 268,435," in seen["r"][1], seen["r"]
    assert seen["peak"] < 200 * 1024, seen["peak"]  # KiB


def test_an_upstream_too_slow_to_initialize_is_bounded_by_connect_timeout_s(
        tmp_path: Path) -> None:
    """``connect_timeout_s`` (default: 30 s or ``timeout_s``) bounds the start (#29)."""
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    manifest = write_manifest(tmp_path, {
        "slow": {"command": sys.executable, "args": [str(sleeper)], "timeout_s": 5,
                 "connect_timeout_s": 1.5},
        "big": {"command": sys.executable, "args": [str(BIG)],
                "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}}}, tools={})
    said: list[str] = []

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            said.append(text(await s.call_tool("small", {})))

    with open(os.devnull, "w"):
        anyio.run(main)
    assert said == ["small ok"]
    trace = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert "did not initialize within 1.5 s (its connect_timeout_s)" in trace, trace[-2000:]
