"""QA qa-new10c (an own MCP server over streamable HTTP behind ``icore mcp --http``), #28.

Real processes: ``icore mcp --http`` (the SDK's streamable-HTTP client, or raw POSTs) in
front of tests/mcp/upstream_server.py (stdio or HTTP) or tests/mcp/upstream_garbage.py
(an HTTP upstream answering garbage). Covered: the HTTP body cap is the manifest's
``max_message_mb`` (not the SDK's 4 MiB) and every body over it is a JSON-RPC error
naming it; a garbage answer to a forwarded call is "may have run", never "refused".
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    HERE,
    env,
    free_port,
    http_client,
    stdio_upstream,
    text,
    wait_port,
    write_manifest,
)

pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def _http_gateway(manifest: Path, extra_env: dict[str, str] | None = None
                  ) -> Iterator[tuple[str, list[str]]]:
    """``icore mcp MANIFEST --http 127.0.0.1:0``; yields its URL and its stderr lines
    (read up to the ready line; the rest is appended once it exits)."""
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                          "127.0.0.1:0"], env={**env(), **(extra_env or {})},
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert p.stderr is not None
        url = None
        for line in p.stderr:
            lines.append(line)
            if m := re.search(r"serving (http://127.0.0.1:\d+/mcp)", line):
                url = m.group(1)
                break
        assert url is not None, "".join(lines)
        yield url, lines
    finally:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        if p.stderr is not None:
            lines.extend(p.stderr.read().splitlines(keepends=True))
            p.stderr.close()


def _post(url: str, body: bytes) -> tuple[int, Any]:
    """One raw POST of ``body`` (no MCP session); ``(HTTP status, the JSON answer)``."""
    import httpx2
    r = httpx2.post(url, content=body, timeout=120, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


@pytest.mark.parametrize("cap_mb", [16, 64])
def test_http_body_cap_is_the_manifests_max_message_mb(tmp_path: Path, cap_mb: int) -> None:
    """5 and 12 MiB of arguments reach the gateway (a protected call's own
    ``args_too_large``, a tool error), not the SDK's plain-text 4 MiB 413; a body over the
    cap is a JSON-RPC error naming it (QA qa-new10c S2)."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 20)},
                              max_message_mb=cap_mb)
    with _http_gateway(manifest) as (url, _):
        async def calls() -> list[Any]:
            out = []
            async with http_client(url) as s:
                await s.read_resource("memo://price")
                await s.read_resource("memo://city")
                for mib in (5, 12):
                    out.append(await s.call_tool("book", {"city": "x" * (mib << 20),
                                                          "price": 1}))
            return out

        for got in anyio.run(calls):
            assert got.is_error and "args_too_large" in text(got), text(got)[:300]
        over = (cap_mb + 1) << 20
        status, answer = _post(url, json.dumps({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "y" * over}}}).encode())
        assert status == 413, (status, str(answer)[:300])
        assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == -32600
        assert f"max_message_mb ({cap_mb} MiB" in answer["error"]["message"]
