"""``icore bench mcp`` under faults (QA r5-mcp D7): a configuration that fails is a row
saying why, the others still report; an HTTP upstream's transport failure is one
request's error, never the loss of the whole connection."""

from __future__ import annotations

import math
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from icore.mcp import _bench
from icore.mcp._bench import BenchRow

from .conftest import env, free_port, wait_port


class _Fake:
    """A client session answering every call, or failing as told."""

    def __init__(self, *, raise_on: str | None = None, error_on: str | None = None) -> None:
        self.raise_on, self.error_on = raise_on, error_on

    async def read_resource(self, uri: str) -> None:
        return None

    async def call_tool(self, tool: str, args: dict[str, Any]) -> Any:
        if tool == self.raise_on and args["n"] == 3:
            raise ExceptionGroup("unhandled errors in a TaskGroup",
                                 [ConnectionResetError("peer reset")])
        if tool == self.error_on:
            return SimpleNamespace(is_error=True, content=[SimpleNamespace(
                text="upstream bench failed during resources/read: Connection closed")])
        return SimpleNamespace(is_error=False, content=[])


def test_a_failed_configuration_is_a_row_and_the_others_report() -> None:
    times, failed = anyio.run(_bench._interleaved, _Fake(), None, _Fake(error_on="act_res"),
                              2, 12, {"proxy": "its server did not start: OSError: x"})
    rows = _bench._rows("http", times, 2, failed)
    by = {r.path: r for r in rows}
    assert by["sdk proxy (no icore)"].error == "its server did not start: OSError: x"
    bad = by["gateway protected resources d=2"]
    assert math.isnan(bad.p50_ms) and bad.added_p50_ms is None
    assert bad.error is not None and "call 1 of act_res was an error" in bad.error
    assert "Connection closed" in bad.error
    for ok in ("direct (upstream)", "gateway unprotected", "gateway protected d=2",
               "gateway protected trusted d=2"):
        assert by[ok].error is None and by[ok].p50_ms > 0
    times, failed = anyio.run(_bench._interleaved, _Fake(raise_on="ping"), _Fake(), None,
                              2, 12, {})
    assert failed["direct"] == "call 4 of ping raised ConnectionResetError: peer reset"
    assert failed["protected"] == "its server did not start"
    assert times["proxy"]


def test_the_command_prints_the_failed_row_and_exits_1(monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    import icore.mcp
    from icore.cli import app

    def rows(**_: Any) -> list[BenchRow]:
        return [BenchRow("stdio", "direct (upstream)", 1.0, 2.0, None),
                BenchRow("stdio", "sdk proxy (no icore)", 2.0, 3.0, 1.0),
                BenchRow("stdio", "gateway protected d=8", 2.5, 3.0, 1.5),
                BenchRow("http", "gateway protected resources d=8", math.nan, math.nan,
                         None, error="call 7 of act_res was an error: lost")]

    monkeypatch.setattr(icore.mcp, "run_bench", rows)
    res = CliRunner().invoke(app, ["bench", "mcp", "--quick"], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "FAILED: call 7 of act_res was an error: lost" in res.output
    assert "2.500" in res.output  # the others still report
    assert "stdio: protected call +0.50 ms p50 over the SDK-only proxy" in res.output
    assert "1 configuration(s) failed: http gateway protected resources d=8" in res.output


def test_an_http_transport_failure_fails_one_request_not_the_connection() -> None:
    """The root cause of D7: the SDK runs each POST in its transport's task group, so one
    POST that failed (a pooled connection the server closed: RemoteProtocolError) ended
    the connection and failed every request in flight with "Connection closed"."""
    import httpx2

    import icore.mcp._upstream as U
    import icore.mcp._upstream_http as UH
    from icore.mcp import UpstreamError, UpstreamSpec

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "icore.mcp._bench_upstream", "--http",
                             str(port)], env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    fail_next: list[str] = []  # methods whose next POST fails at the transport

    async def main() -> None:
        async def note(name: str, message: Any) -> None:
            return None

        u = U.Upstream("bench", UpstreamSpec(url=f"http://127.0.0.1:{port}/mcp"), note)
        async with anyio.create_task_group() as tg:
            u.bind(tg)
            await u.connect()
            inner = u.http_client._transport.inner  # under the keep-alive wrapper
            real = inner.handle_async_request

            async def flaky(request: Any) -> Any:
                method = UH._method_and_id(request)[0]
                if method in fail_next:
                    fail_next.remove(method)
                    raise httpx2.RemoteProtocolError("Server disconnected without sending "
                                                     "a response.")
                return await real(request)

            inner.handle_async_request = flaky
            gen = u.generation
            fail_next.append("resources/read")  # a read: sent again on a new connection
            got: list[str] = []

            async def read(i: int) -> None:
                r = await u.request("resources/read",
                                    lambda s: s.read_resource(f"bench://r{i}"))
                got.append(r.contents[0].text)

            async with anyio.create_task_group() as g:
                for i in range(8):
                    g.start_soon(read, i)
            assert sorted(got) == [str(i) for i in range(8)]
            fail_next.append("tools/call")  # a call may have run: not sent again
            with pytest.raises(UpstreamError, match="RemoteProtocolError"):
                await u.request("tools/call", lambda s: s.call_tool("ping", {"n": 1}))
            r = await u.request("tools/call", lambda s: s.call_tool("ping", {"n": 2}))
            assert not r.is_error and u.generation == gen  # the same MCP session goes on
            u.close()

    try:
        wait_port(port, proc)
        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
