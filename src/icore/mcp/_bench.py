"""``icore bench mcp``: what the gateway adds to a ``tools/call`` (issue 25 item 7).

In one run, over stdio and over streamable HTTP on loopback: p50/p99 of ``tools/call``
sent by the SDK's client to the upstream directly, through an SDK-only pass-through proxy
(``_bench_proxy.py``: no icore code; the floor of any MCP hop built on the SDK), through
the gateway to an unprotected tool, through the gateway to a protected tool with ``d``
facts in D(a) (the session read them first, so every call is validated fresh: planfence
Alg. 1, the owners of D(a) asked), and to a protected tool whose D(a) is ``d`` resources
of the upstream (each read again from the upstream at every call: the owner of an
upstream resource is the upstream), and to a protected tool whose D(a) is ``d`` resources
of an upstream the manifest marks ``trust_updates`` (not read again while the gateway
holds a live subscription). Real processes: the upstreams, the proxy and the gateway
(``icore mcp``) run as subprocesses; the six are timed in turn in every round.
"""

from __future__ import annotations

import contextlib
import math
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

from icore.mcp._gateway_manifest import GatewayError
from icore.mcp._upstream_failed import cause_line


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One configuration's latency.

    Attributes:
        transport: ``stdio`` or ``http``.
        path: ``direct (upstream)``, ``sdk proxy (no icore)``, ``gateway unprotected``,
            ``gateway protected d=N`` (D(a): gateway facts), ``gateway protected
            resources d=N`` (D(a): upstream resources, each read again at every call),
            ``gateway protected trusted d=N`` (D(a): resources of a ``trust_updates``
            upstream under a live subscription) or ``gate only d=N`` (in process).
        p50_ms / p99_ms: latency percentiles of one ``tools/call``, milliseconds (NaN
            when the configuration failed).
        added_p50_ms: p50 minus the direct p50 of the same transport (None for direct,
            or when either failed).
        error: why the configuration failed (its calls stopped; the others went on),
            else None.
    """

    transport: str
    path: str
    p50_ms: float
    p99_ms: float
    added_p50_ms: float | None
    error: str | None = None


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


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise GatewayError(f"port {port} did not open in 30 s", port=port) from None
            time.sleep(0.1)


def _manifest(folder: Path, deps: int, upstream: dict[str, Any],
              trusted: dict[str, Any]) -> Path:
    keys = [f"fact://bench/k{i}" for i in range(deps)]
    m = {"name": "icore-bench",
         "upstreams": {"bench": upstream, "notifier": {**trusted, "trust_updates": True}},
         "facts": {"owners": {f"fact://bench/k{i}": f"owner{i}" for i in range(deps)},
                   "initial": {k: i for i, k in enumerate(keys)}},
         "tools": {"act": {"depends_on": keys},
                   "act_res": {"depends_on": [f"bench://r{i}" for i in range(deps)]},
                   "act_trust": {"depends_on": [f"bench://t{i}" for i in range(deps)]}}}
    kind = (upstream.get("url") and "http") or "stdio"
    m["trace"] = str(folder / f"trace-{kind}.jsonl")  # recording included, as deployed
    path = folder / f"gateway-{kind}.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


_PROXY = str(Path(__file__).with_name("_bench_proxy.py"))
"""The SDK-only pass-through proxy, run as a script (it never imports icore)."""


_STEPS = (("direct", "ping"), ("proxy", "ping"), ("unprotected", "ping"),
          ("protected", "act"), ("reread", "act_res"), ("trusted", "act_trust"))
"""(configuration, tool) timed in turn in every round."""


async def _interleaved(direct: Any, proxy: Any, gateway: Any, deps: int, n: int,
                       why_not: dict[str, str] | None = None
                       ) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Every configuration timed in turn within each round, so a drifting load hits all.

    The gateway session reads the ``d`` facts first (every protected call validated
    fresh); 20 warm-up rounds are not timed. A configuration whose call fails (an error
    result, a lost connection) stops there with the reason; the others go on. A session
    that is None failed to start (its configurations carry ``failed[key]`` already).

    Returns:
        ``(configuration -> call times in ms, configuration -> why it failed)``.
    """
    failed: dict[str, str] = {}
    sessions = {"direct": direct, "proxy": proxy, "unprotected": gateway,
                "protected": gateway, "reread": gateway, "trusted": gateway}
    server = {"direct": "direct", "proxy": "proxy"}
    for key, s in sessions.items():
        if s is None:
            failed[key] = (why_not or {}).get(server.get(key, "gateway"),
                                              "its server did not start")
    if gateway is not None:
        try:
            for i in range(deps):
                await gateway.read_resource(f"fact://bench/k{i}")
                await gateway.read_resource(f"bench://r{i}")
                await gateway.read_resource(f"bench://t{i}")
        except Exception as exc:  # every gateway configuration needs these reads
            for key in ("unprotected", "protected", "reread", "trusted"):
                failed[key] = f"reading D(a) first failed: {cause_line(exc)}"
    out: dict[str, list[float]] = {k: [] for k, _ in _STEPS}
    for i in range(n + 20):
        for key, tool in _STEPS:
            if key in failed:
                continue
            t0 = time.perf_counter()
            try:
                res = await sessions[key].call_tool(tool, {"n": i})
            except Exception as exc:  # the connection to that server was lost
                failed[key] = f"call {i + 1} of {tool} raised {cause_line(exc)}"
                continue
            dt = (time.perf_counter() - t0) * 1000
            if res.is_error:
                said = " ".join(getattr(c, "text", "") for c in res.content)
                failed[key] = f"call {i + 1} of {tool} was an error: {said[:300]}"
                continue
            if i >= 20:
                out[key].append(dt)
    return out, failed


def _rows(transport: str, t: dict[str, list[float]], deps: int,
          failed: dict[str, str]) -> list[BenchRow]:
    names = {"direct": "direct (upstream)", "proxy": "sdk proxy (no icore)",
             "unprotected": "gateway unprotected", "protected": f"gateway protected d={deps}",
             "reread": f"gateway protected resources d={deps}",
             "trusted": f"gateway protected trusted d={deps}"}
    base = None if "direct" in failed else statistics.median(t["direct"])
    out = []
    for key, _ in _STEPS:
        if key in failed or not t[key]:
            why = failed.get(key, "no call timed")
            out.append(BenchRow(transport, names[key], math.nan, math.nan, None, error=why))
            continue
        p50 = statistics.median(t[key])
        added = None if key == "direct" or base is None else p50 - base
        out.append(BenchRow(transport, names[key], p50, _pct(t[key], 0.99), added))
    return out


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


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


@contextlib.asynccontextmanager
async def _opened(cm: Any, key: str, why_not: dict[str, str]) -> AsyncIterator[Any]:
    """The session of ``cm``, or None with ``why_not[key]`` when it cannot be opened.

    A failure while closing it (its server already gone) is not the benchmark's end.
    """
    try:
        session = await cm.__aenter__()
    except Exception as exc:
        why_not[key] = f"its server did not start: {cause_line(exc)}"
        yield None
        return
    try:
        yield session
    finally:
        with contextlib.suppress(Exception):
            await cm.__aexit__(None, None, None)


async def _run(n: int, deps: int) -> list[BenchRow]:
    up = ["-m", "icore.mcp._bench_upstream"]
    rows: list[BenchRow] = [await _gate_only(n, deps)]
    with tempfile.TemporaryDirectory(prefix="icore-bench-mcp-") as tmp:
        folder = Path(tmp)
        # stdio: the client launches the upstream, the SDK proxy or the gateway (each of
        # which launches its own upstream)
        env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
        man = _manifest(folder, deps, {"command": sys.executable, "args": up, "env": env},
                        {"command": sys.executable, "args": [*up, "--trusted"], "env": env})
        why: dict[str, str] = {}
        async with _opened(_client_stdio(up), "direct", why) as d, \
                _opened(_client_stdio([_PROXY, " ".join([sys.executable, *up])]), "proxy",
                        why) as p, \
                _opened(_client_stdio(["-m", "icore", "mcp", str(man)]), "gateway",
                        why) as g:
            t, failed = await _interleaved(d, p, g, deps, n, why)
            rows += _rows("stdio", t, deps, failed)
        # streamable HTTP: the upstream, the SDK proxy and the gateway on loopback ports
        p_up, p_px, p_gw, p_tr = _free_port(), _free_port(), _free_port(), _free_port()
        url_up = f"http://127.0.0.1:{p_up}/mcp"
        man = _manifest(folder, deps, {"url": url_up},
                        {"url": f"http://127.0.0.1:{p_tr}/mcp"})
        procs = [_spawn([*up, "--http", str(p_up)]),
                 _spawn([*up, "--trusted", "--http", str(p_tr)])]
        why = {}
        try:
            with contextlib.suppress(GatewayError):
                _wait_port(p_tr)  # else the gateway says which upstream it cannot reach
            async with _opened(_client_http(url_up), "direct", why) as d:
                procs.append(_spawn([_PROXY, url_up, "--http", str(p_px)]))
                procs.append(_spawn(["-m", "icore", "mcp", str(man), "--http",
                                     f"127.0.0.1:{p_gw}"]))
                async with _opened(_client_http(f"http://127.0.0.1:{p_px}/mcp"), "proxy",
                                   why) as p, \
                        _opened(_client_http(f"http://127.0.0.1:{p_gw}/mcp"), "gateway",
                                why) as g:
                    t, failed = await _interleaved(d, p, g, deps, n, why)
                    rows += _rows("http", t, deps, failed)
        finally:
            for proc in procs:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                if proc.poll() is None:
                    proc.kill()
    return rows


def run_bench(*, n: int = 300, deps: int = 8) -> list[BenchRow]:
    """Time ``tools/call`` directly and through the gateway, over stdio and HTTP.

    Args:
        n: timed calls per configuration (after 20 warm-up calls).
        deps: d = |D(a)| of the protected tool (facts of ``d`` distinct owners).

    Returns:
        Thirteen :class:`BenchRow`: the gate alone in process (what PlanFence adds), then
        per transport the direct call, the SDK-only pass-through proxy (the floor of any
        MCP hop built on the SDK), the gateway unprotected, protected by gateway facts,
        protected by upstream resources (re-read at every call) and by resources of a
        ``trust_updates`` upstream. All six of a transport are timed in turn within each
        round. A configuration whose server did not start or whose call failed is a
        row with ``error`` saying why (NaN figures); the others still report.

    Raises:
        MissingExtra: the ``mcp`` extra is not installed.
    """
    from icore._extras import require
    require("mcp.client", "mcp", feature="icore bench mcp")
    return anyio.run(_run, n, deps)
