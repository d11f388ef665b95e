"""``icore bench mcp``: what the gateway adds to a ``tools/call`` (issue 25 item 7).

In one run, over stdio and over streamable HTTP on loopback: p50/p99 of ``tools/call``
sent by the SDK's client to the upstream directly, through the gateway to an unprotected
tool, and through the gateway to a protected tool with ``d`` facts in D(a) (the session
read them first, so every call is validated fresh: planfence Alg. 1, the owners of D(a)
asked). Real processes: the upstream and the gateway (``icore mcp``) run as subprocesses.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import yaml

from icore.mcp._manifest import GatewayError


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One configuration's latency.

    Attributes:
        transport: ``stdio`` or ``http``.
        path: ``direct`` (upstream), ``gateway unprotected`` or ``gateway protected d=N``.
        p50_ms / p99_ms: latency percentiles of one ``tools/call``, milliseconds.
        added_p50_ms: p50 minus the direct p50 of the same transport (None for direct).
    """

    transport: str
    path: str
    p50_ms: float
    p99_ms: float
    added_p50_ms: float | None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


@contextlib.asynccontextmanager
async def _client_stdio(args: list[str]) -> AsyncIterator[Any]:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable, args=args,
                              env={k: v for k, v in os.environ.items()})
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


@contextlib.asynccontextmanager
async def _client_http(url: str) -> AsyncIterator[Any]:
    from mcp.client import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    deadline = time.monotonic() + 30
    while True:
        try:
            host, port = url.split("//")[1].split("/")[0].split(":")
            with socket.create_connection((host, int(port)), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise GatewayError(f"{url} did not come up in 30 s", url=url) from None
            await anyio.sleep(0.1)
    async with streamable_http_client(url) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        yield s


async def _time(session: Any, tool: str, n: int) -> list[float]:
    for i in range(min(20, n)):  # warm up
        await session.call_tool(tool, {"n": i})
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        res = await session.call_tool(tool, {"n": i})
        out.append((time.perf_counter() - t0) * 1000)
        if res.is_error:
            raise GatewayError(f"benchmark call of {tool} failed: {res.content}", tool=tool)
    return out


def _manifest(folder: Path, deps: int, upstream: dict[str, Any]) -> Path:
    keys = [f"fact://bench/k{i}" for i in range(deps)]
    m = {"name": "icore-bench", "upstreams": {"bench": upstream},
         "facts": {"owners": {f"fact://bench/k{i}": f"owner{i}" for i in range(deps)},
                   "initial": {k: i for i, k in enumerate(keys)}},
         "tools": {"act": {"depends_on": keys}}}
    path = folder / f"gateway-{(upstream.get('url') and 'http') or 'stdio'}.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _rows(transport: str, direct: list[float], unprot: list[float], prot: list[float],
          deps: int) -> list[BenchRow]:
    base = statistics.median(direct)
    return [
        BenchRow(transport, "direct (upstream)", base, _pct(direct, 0.99), None),
        BenchRow(transport, "gateway unprotected", statistics.median(unprot),
                 _pct(unprot, 0.99), statistics.median(unprot) - base),
        BenchRow(transport, f"gateway protected d={deps}", statistics.median(prot),
                 _pct(prot, 0.99), statistics.median(prot) - base),
    ]


async def _through(session: Any, deps: int, n: int) -> tuple[list[float], list[float]]:
    """Unprotected and protected calls interleaved, so a drifting machine load hits both."""
    for i in range(deps):
        await session.read_resource(f"fact://bench/k{i}")
    for i in range(min(20, n)):  # warm up
        await session.call_tool("ping", {"n": i})
        await session.call_tool("act", {"n": i})
    unprot: list[float] = []
    prot: list[float] = []
    for i in range(n):
        for tool, out in (("ping", unprot), ("act", prot)):
            t0 = time.perf_counter()
            res = await session.call_tool(tool, {"n": i})
            out.append((time.perf_counter() - t0) * 1000)
            if res.is_error:
                raise GatewayError(f"benchmark call of {tool} failed: {res.content}",
                                   tool=tool)
    return unprot, prot


async def _gate_only(n: int, deps: int) -> BenchRow:
    """The gate alone, in process: action record + Alg. 1 over d owners (no MCP hop)."""
    from icore.mcp._facts import FactBook
    keys = [f"fact://bench/k{i}" for i in range(deps)]
    book = FactBook({k: f"owner{i}" for i, k in enumerate(keys)})
    for i, k in enumerate(keys):
        book.observe(k, {"value": i})
    view = book.session("bench#1")
    for k in keys:
        book.read(view, k)

    async def forward(**args: Any) -> None:
        return None

    out = []
    for i in range(n + 20):
        t0 = time.perf_counter()
        v = await book.execute(view, "act", keys, {"n": i}, forward)
        if i >= 20:
            out.append((time.perf_counter() - t0) * 1000)
        if not v.call.executed:
            raise GatewayError(f"benchmark gate refused: {v.call.detail}")
    book.close()
    return BenchRow("in process", f"gate only d={deps}", statistics.median(out),
                    _pct(out, 0.99), statistics.median(out))


async def _run(n: int, deps: int) -> list[BenchRow]:
    up = ["-m", "icore.mcp._bench_upstream"]
    rows: list[BenchRow] = [await _gate_only(n, deps)]
    with tempfile.TemporaryDirectory(prefix="icore-bench-mcp-") as tmp:
        folder = Path(tmp)
        # stdio: the client launches the upstream, or the gateway (which launches it)
        async with _client_stdio(up) as s:
            direct = await _time(s, "ping", n)
        env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
        man = _manifest(folder, deps, {"command": sys.executable, "args": up, "env": env})
        async with _client_stdio(["-m", "icore", "mcp", str(man)]) as s:
            unprot, prot = await _through(s, deps, n)
        rows += _rows("stdio", direct, unprot, prot, deps)
        # streamable HTTP: both servers on loopback ports
        p_up, p_gw = _free_port(), _free_port()
        procs = [subprocess.Popen([sys.executable, *up, "--http", str(p_up)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        try:
            url_up = f"http://127.0.0.1:{p_up}/mcp"
            async with _client_http(url_up) as s:
                direct = await _time(s, "ping", n)
            man = _manifest(folder, deps, {"url": url_up})
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "icore", "mcp", str(man), "--http",
                 f"127.0.0.1:{p_gw}"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            async with _client_http(f"http://127.0.0.1:{p_gw}/mcp") as s:
                unprot, prot = await _through(s, deps, n)
        finally:
            for p in procs:
                p.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)
                if p.poll() is None:
                    p.kill()
        rows += _rows("http", direct, unprot, prot, deps)
    return rows


def run_bench(*, n: int = 300, deps: int = 8) -> list[BenchRow]:
    """Time ``tools/call`` directly and through the gateway, over stdio and HTTP.

    Args:
        n: timed calls per configuration (after 20 warm-up calls).
        deps: d = |D(a)| of the protected tool (facts of ``d`` distinct owners).

    Returns:
        Seven :class:`BenchRow`: the gate alone in process (what PlanFence adds), then
        three per transport.

    Raises:
        GatewayError: a server did not start or a call failed.
        MissingExtra: the ``mcp`` extra is not installed.
    """
    from icore._extras import require
    require("mcp.client", "mcp", feature="icore bench mcp")
    return anyio.run(_run, n, deps)
