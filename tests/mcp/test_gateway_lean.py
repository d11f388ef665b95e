"""The gateway's lean ``tools/call`` path to a real HTTP upstream (#25 item 7).

Real processes: the SDK upstream (``upstream_server.py --http PORT``) and ``icore mcp``
(over stdio, launched by the SDK's client). The upstream logs each call with the
client software that sent it, so a test sees which path a call took: ``icore-mcp`` is
the lean POST, the SDK's own client says ``python-httpx2``.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    UPSTREAM,
    free_port,
    process,
    stdio_gateway,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)

pytest.importorskip("httptools")


def _upstream(port: int, log: Path) -> Any:
    return process([sys.executable, str(UPSTREAM), "--http", str(port)],
                   extra_env={"UPSTREAM_LOG": str(log)})


@contextlib.contextmanager
def _gateway_files(tmp_path: Path, timeout_s: float) -> Iterator[tuple[Path, Path]]:
    """The HTTP upstream running; yields the gateway manifest in front of it and its log."""
    log, port = tmp_path / "up.log", free_port()
    manifest = write_manifest(tmp_path, {"trip": {"url": f"http://127.0.0.1:{port}/mcp",
                                                  "timeout_s": timeout_s}})
    with _upstream(port, log) as up:
        wait_port(port, up)
        yield manifest, log


def _calls(log: Path, tool: str) -> list[dict[str, Any]]:
    return [x for x in upstream_log(log) if x["tool"] == tool]


def test_calls_go_lean_and_a_stale_one_never_reaches_the_upstream(tmp_path: Path) -> None:
    with _gateway_files(tmp_path, 10) as (manifest, log):

        async def main() -> None:
            async with stdio_gateway(manifest) as s:
                assert text(await s.call_tool("echo", {"text": "hi"})) == "hi"
                await s.read_resource("memo://price")
                await s.read_resource("memo://city")
                r = await s.call_tool("set_price", {"value": "120"})  # a change upstream
                assert not r.is_error, text(r)
                stale = await s.call_tool("book", {"city": "Porto", "price": 100})
                assert stale.is_error and "memo://price" in text(stale)
                assert _calls(log, "book") == []  # never forwarded
                await s.read_resource("memo://price")  # the one replan
                fresh = await s.call_tool("book", {"city": "Porto", "price": 120})
                assert not fresh.is_error, text(fresh)

        anyio.run(main)
    assert [x["agent"] for x in _calls(log, "echo")] == ["icore-mcp"]  # the lean POST
    assert [x["args"]["price"] for x in _calls(log, "book")] == [120]


def test_a_hung_call_times_out_alone(tmp_path: Path) -> None:
    """An upstream call that hangs is an error result within the upstream's timeout;
    another session's calls to the same upstream go on meanwhile."""
    with _gateway_files(tmp_path, 2) as (manifest, log):
        done: dict[str, Any] = {}

        async def hung() -> None:
            async with stdio_gateway(manifest) as s:
                t0 = time.monotonic()
                done["hung"] = await s.call_tool("slow", {"seconds": 6})
                done["hung_s"] = time.monotonic() - t0

        async def other() -> None:
            async with stdio_gateway(manifest) as s:
                with anyio.fail_after(60):
                    while not _calls(log, "slow"):
                        await anyio.sleep(0.05)
                for i in range(5):
                    r = await s.call_tool("echo", {"text": f"go {i}"})
                    assert text(r) == f"go {i}"
                done["other_at"] = time.monotonic()

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(hung)
                tg.start_soon(other)

        anyio.run(main)
    assert done["hung"].is_error
    assert "did not answer tools/call within 2 s" in text(done["hung"])
    assert done["hung_s"] < 5.5


def test_upstream_restart_and_crash_mid_call(tmp_path: Path) -> None:
    """The upstream restarts while idle: the next (lean) tools/call gets 404 for the
    old session, the gateway starts a new one and sends the call again, once. Then it
    crashes mid-call: that call is an error result, the gateway stays up and the next
    call after the upstream is back goes through."""
    log, port = tmp_path / "up.log", free_port()
    manifest = write_manifest(tmp_path, {"trip": {"url": f"http://127.0.0.1:{port}/mcp",
                                                  "timeout_s": 5}})
    procs: list[subprocess.Popen[Any]] = []
    cms: list[Any] = []

    def start() -> None:
        cm = _upstream(port, log)
        procs.append(cm.__enter__())
        cms.append(cm)
        wait_port(port, procs[-1])

    def stop() -> None:
        cms.pop().__exit__(None, None, None)

    start()
    try:
        async def main() -> None:
            async with stdio_gateway(manifest) as s:
                assert text(await s.call_tool("echo", {"text": "one"})) == "one"
                stop()
                start()
                assert text(await s.call_tool("echo", {"text": "two"})) == "two"
                crashed = await s.call_tool("crash", {})
                assert crashed.is_error and "upstream trip" in text(crashed)
                procs[-1].wait(timeout=10)
                cms.pop()
                start()
                assert text(await s.call_tool("echo", {"text": "three"})) == "three"

        anyio.run(main)
    finally:
        while cms:
            stop()
    echoes = _calls(log, "echo")
    assert [x["args"]["text"] for x in echoes] == ["one", "two", "three"]
    assert len({x["pid"] for x in echoes}) == 3
    assert {x["agent"] for x in echoes} == {"icore-mcp"}


def test_icore_mcp_lean_0_keeps_the_sdks_client(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICORE_MCP_LEAN", "0")
    with _gateway_files(tmp_path, 10) as (manifest, log):

        async def main() -> None:
            async with stdio_gateway(manifest) as s:
                assert text(await s.call_tool("echo", {"text": "hi"})) == "hi"

        anyio.run(main)
    assert [x["agent"].split("/")[0] for x in _calls(log, "echo")] == ["python-httpx2"]
