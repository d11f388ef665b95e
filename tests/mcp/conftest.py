"""Shared servers for the gateway tests: real processes, started once per module."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mcp")

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
UPSTREAM = HERE / "upstream_server.py"


def env() -> dict[str, str]:
    """The environment of a subprocess: this worktree's icore first."""
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a listening TCP socket on ``port`` (None: unknown).

    ``free_port`` hands out a port that is free now; on a machine running several test
    sessions another process may take it before the server binds it. A connection that
    succeeds then reaches that other process's server (another session's upstream),
    whose later exit looks like "Connection closed" in this test (#29: the one failure
    of ``test_icore_mcp_lean_0_keeps_the_sdks_client`` under load). Linux's /proc tells
    whose socket it is.
    """
    inodes: set[str] = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table, encoding="ascii") as f:
                for row in f.read().splitlines()[1:]:
                    cols = row.split()
                    if len(cols) > 9 and cols[3] == "0A" and \
                            int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(cols[9])
        os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    family, i = [pid], 0
    while i < len(family) < 64:  # the process and its children (a launcher's server)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{family[i]}/task"):
                with open(f"/proc/{family[i]}/task/{task}/children", encoding="ascii") as f:
                    family += [int(c) for c in f.read().split()]
        i += 1
    for member in family:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{member}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{member}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return True
    return False


def wait_port(port: int, proc: subprocess.Popen[Any], timeout_s: float = 30) -> None:
    """Until ``proc`` serves ``port`` (its own listening socket, where /proc tells).

    Raises:
        AssertionError: ``proc`` exited (e.g. the port was taken by another process
            first: it could not bind), or the port was not ``proc``'s within
            ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        if _listens(proc.pid, port) is not False:
            return
        time.sleep(0.05)  # another process's server on that port: not ours (yet)
    raise AssertionError(f"port {port} was not served by process {proc.pid} in "
                         f"{timeout_s} s")


@contextlib.contextmanager
def process(args: list[str], extra_env: dict[str, str] | None = None,
            **kw: Any) -> Iterator[subprocess.Popen[Any]]:
    p = subprocess.Popen(args, env={**env(), **(extra_env or {})},
                         **{"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **kw})
    try:
        yield p
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
        if p.stderr is not None:
            p.stderr.close()


def write_manifest(folder: Path, upstreams: dict[str, Any], **extra: Any) -> Path:
    m = {"name": "test-gateway", "upstreams": upstreams,
         "facts": {"owners": {"fact://plan/*": "planner"},
                   "initial": {"fact://plan/goal": "Porto"},
                   "stdio_speaks_for": ["planner"]},  # the stdio client writes the plan
         "tools": {"book": {"depends_on": ["memo://price", "memo://city"]},
                   "set_city": {"depends_on": ["fact://plan/goal"],
                                "writes": ["memo://city"]}},
         "trace": str(folder / "trace.jsonl"), **extra}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


@contextlib.contextmanager
def http_upstream_gateway(folder: Path, log: Path) -> Iterator[str]:
    """The test upstream over streamable HTTP (its calls logged to ``log``) and
    ``icore mcp --http`` in front of it, both real processes; yields the gateway's URL."""
    p_up, p_gw = free_port(), free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(p_up)],
                 extra_env={"UPSTREAM_LOG": str(log)}) as up:
        wait_port(p_up, up)
        manifest = write_manifest(folder, {"trip": {
            "url": f"http://127.0.0.1:{p_up}/mcp", "timeout_s": 5}})
        with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                      f"127.0.0.1:{p_gw}"]) as gw:
            wait_port(p_gw, gw)
            yield f"http://127.0.0.1:{p_gw}/mcp"


def stdio_upstream(log: Path, timeout_s: float = 3.0) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(UPSTREAM)],
            "env": {"UPSTREAM_LOG": str(log)}, "timeout_s": timeout_s}


def upstream_log(log: Path) -> list[dict[str, Any]]:
    import json
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


@contextlib.asynccontextmanager
async def stdio_gateway(manifest: Path) -> AsyncIterator[Any]:
    """The SDK's real client launching ``icore mcp MANIFEST`` over stdio."""
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)], env=env())
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


@contextlib.asynccontextmanager
async def http_client(url: str, name: str = "client", token: str | None = None
                      ) -> AsyncIterator[Any]:
    """The SDK's client session over streamable HTTP (``token``: a bearer token)."""
    import httpx2
    from mcp.client import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation
    async with contextlib.AsyncExitStack() as stack:
        http = None
        if token is not None:
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"}, timeout=30))
        r, w = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        s = await stack.enter_async_context(ClientSession(
            r, w, client_info=Implementation(name=name, version="1")))
        await s.initialize()
        yield s


def text(result: Any) -> str:
    """The text of a result: a ``CallToolResult``, or the wire dict the gateway forwards."""
    if isinstance(result, dict):
        return "\n".join(c.get("text", "") for c in result.get("content") or [])
    return "\n".join(getattr(c, "text", "") for c in result.content)


def audited_actions(trace: Path) -> dict[str, int]:
    """``icore audit TRACE --json`` (the CLI, in a subprocess): the run's ``actions`` counts."""
    import json
    folder = trace.parent / "audit"
    folder.mkdir(exist_ok=True)
    out = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "--json",
                          str(folder / "a.json")], env=env(), cwd=folder,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    runs = json.loads((folder / "a.json").read_text(encoding="utf-8"))["runs"]
    return dict(runs[0]["actions"])


def peak_kib(manifest: Path) -> int:
    """VmHWM (peak resident set) of the ``icore mcp`` process serving ``manifest``."""
    for d in Path("/proc").iterdir():
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(manifest).encode() in argv and b"icore" in argv:
            status = (d / "status").read_text()
            return int(next(x for x in status.splitlines() if x.startswith("VmHWM")).split()[1])
    raise AssertionError("the gateway process was not found")
