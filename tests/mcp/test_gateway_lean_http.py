"""The lean HTTP path against a real SDK upstream's HTTP quirks (#25).

Real processes: the SDK upstream served by uvicorn (``upstream_server.py --http``, or
behind the quirks middleware of ``upstream_quirks.py``) and ``icore mcp`` over stdio,
launched by the SDK's client. A same-origin 307 is the real server's own (Starlette
redirects ``/mcp/`` to ``/mcp``); the middleware adds a cross-origin 307, an SSE answer
starting with a UTF-8 BOM and a connection dropped mid-answer after the tool ran.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from . import conftest as cf
from .conftest import UPSTREAM, stdio_gateway, text

pytest.importorskip("httptools")

QUIRKS = Path(__file__).with_name("upstream_quirks.py")


@contextlib.contextmanager
def _upstream(tmp_path: Path, script: Path, path: str) -> Iterator[tuple[Path, Path, int]]:
    """The upstream running; yields the gateway manifest in front of it, its log, port."""
    log, port = tmp_path / "up.log", cf.free_port()
    args = [str(script), "--http", str(port)] if script == UPSTREAM else [str(script),
                                                                          str(port)]
    manifest = cf.write_manifest(tmp_path, {"trip": {"url": f"http://127.0.0.1:{port}{path}",
                                                  "timeout_s": 10}})
    with cf.process([sys.executable, *args], extra_env={"UPSTREAM_LOG": str(log)}) as up:
        cf.wait_port(port, up)
        yield manifest, log, port


def _echoes(log: Path) -> list[tuple[str, Any]]:
    return [(x["args"]["text"], x.get("agent")) for x in cf.upstream_log(log)
            if x["tool"] == "echo"]


def test_a_same_origin_307_is_followed_on_the_lean_path(tmp_path: Path) -> None:
    """The endpoint configured as ``/mcp/``: the real server answers every POST 307 to
    ``/mcp``; the SDK's client follows it for the handshake, and so does the gateway's
    direct POST (it used to fail each call with "Redirect to ... not followed")."""
    with _upstream(tmp_path, UPSTREAM, "/mcp/") as (manifest, log, _):

        async def main() -> None:
            async with stdio_gateway(manifest) as s:
                for t in ("one", "two"):
                    r = await s.call_tool("echo", {"text": t})
                    assert not r.is_error and text(r) == t, text(r)
                await s.read_resource("memo://price")
                await s.read_resource("memo://city")
                r = await s.call_tool("book", {"city": "Porto", "price": 100})
                assert not r.is_error, text(r)

        anyio.run(main)
    assert _echoes(log) == [("one", "icore-mcp"), ("two", "icore-mcp")]  # the lean POST


def test_cross_origin_redirect_bom_and_a_drop_mid_answer(tmp_path: Path) -> None:
    """A 307 to another origin is refused clearly and never sent there; an SSE answer
    starting with a BOM is read; a connection lost mid-answer fails that call once with
    a clear error (the tool ran once, it is not sent again) and the session goes on."""
    with _upstream(tmp_path, QUIRKS, "/mcp") as (manifest, log, port):
        away = f"http://127.0.0.1:{port + 1}/mcp"
        said: dict[str, Any] = {}

        async def main() -> None:
            async with stdio_gateway(manifest) as s:
                said["away"] = await s.call_tool("echo", {"text": f"away:{away}"})
                said["bom"] = await s.call_tool("echo", {"text": "bom"})
                said["cut"] = await s.call_tool("echo", {"text": "cut"})
                said["after"] = await s.call_tool("echo", {"text": "after"})

        anyio.run(main)
    r = said["away"]
    assert r.is_error and "not followed: it leaves the upstream's origin " \
        f"http://127.0.0.1:{port}" in text(r), text(r)
    assert not said["bom"].is_error and text(said["bom"]) == "bom", text(said["bom"])
    r = said["cut"]
    assert r.is_error, text(r)
    assert "connection was lost mid-answer" in text(r) and "not sent again" in text(r)
    assert not said["after"].is_error and text(said["after"]) == "after"
    # the redirected call never ran; the dropped one ran exactly once
    assert [t for t, _ in _echoes(log)] == ["bom", "cut", "after"]


def test_an_upstream_down_is_never_said_to_have_run_the_call(tmp_path: Path) -> None:
    """QA qa-mcp7 S3 (#25): a refused connection means the call was never sent; the lean
    path said "the upstream may have run it (it was sent)" (the SDK path did not)."""
    with contextlib.ExitStack() as stack:
        manifest, log, _ = stack.enter_context(_upstream(tmp_path, UPSTREAM, "/mcp"))

        async def main() -> Any:
            async with stdio_gateway(manifest) as s:
                stack.close()  # the upstream's process ends: its port refuses connections
                return await s.call_tool("echo", {"text": "lost?"})

        r = anyio.run(main)
    assert r.is_error, text(r)
    assert "may have run" not in text(r) and not (r.meta or {}).get("icore/upstream"), text(r)
    assert "Connect" in text(r), text(r)
    assert _echoes(log) == []
