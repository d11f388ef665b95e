"""The SDK-only proxy ``icore bench mcp`` compares the gateway with: it forwards, and it
contains no icore code (so the ratio gateway / proxy is icore's cost)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import anyio

from icore.mcp import _bench

from .conftest import env


def test_sdk_proxy_forwards_without_icore() -> None:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    src = Path(_bench._PROXY)
    mods = {a.name for n in ast.walk(ast.parse(src.read_text(encoding="utf-8")))
            if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module or "" for n in ast.walk(ast.parse(src.read_text(encoding="utf-8")))
             if isinstance(n, ast.ImportFrom)}
    assert not any(m.split(".")[0] == "icore" for m in mods), mods
    upstream = f"{sys.executable} -m icore.mcp._bench_upstream"

    async def main() -> None:
        p = StdioServerParameters(command=sys.executable, args=[str(src), upstream],
                                  env=env())
        async with stdio_client(p) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            assert {t.name for t in (await s.list_tools()).tools} == {"ping", "act", "act_res",
                                                                  "act_trust"}
            res = await s.call_tool("ping", {"n": 7})
            assert not res.is_error and res.structured_content == {"result": 7}

    anyio.run(main)


def test_bench_failure_inside_task_groups_is_one_line(monkeypatch: Any) -> None:
    """r5-mcp D7: an upstream lost under load surfaced as six nested ExceptionGroups; the
    command now prints the icore error behind them as one line and exits 1."""
    from typer.testing import CliRunner

    import icore.mcp
    from icore.cli import app
    from icore.mcp import GatewayError

    def lost(**_: Any) -> list[Any]:
        err = GatewayError("benchmark call of act_res (reread) failed: upstream bench "
                           "failed during resources/read: Connection closed")
        raise ExceptionGroup("unhandled errors in a TaskGroup",
                             [ExceptionGroup("unhandled errors in a TaskGroup", [err])])

    monkeypatch.setattr(icore.mcp, "run_bench", lost)
    res = CliRunner().invoke(app, ["bench", "mcp", "--quick"], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "error: benchmark call of act_res (reread) failed" in res.output
    assert "Traceback" not in res.output and "ExceptionGroup" not in res.output
