"""An upstream's progress notifications relayed to the calling client (QA qa-new13c S2).

Real parts: the SDK's client with a ``progress_callback`` (over stdio, launching
``icore mcp``; over HTTP, to ``icore mcp --http`` in a subprocess) and a real upstream
(tests/mcp/upstream_progress.py, the SDK's ``MCPServer``, over stdio or streamable HTTP)
whose ``count`` tool calls ``ctx.report_progress``. Each client gets its own call's
progress, with its own token, and nothing of another client's; a protected call's
progress is relayed as an unprotected one's.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.mcp._gateway_progress import ProgressRelay, client_token

from .conftest import free_port, http_client, process, stdio_gateway, text, wait_port

UPSTREAM = Path(__file__).resolve().parent / "upstream_progress.py"
FACT = "fact://plan/goal"


def _manifest(folder: Path, upstream: dict[str, Any]) -> Path:
    m = {"name": "progress-gateway", "upstreams": {"up": upstream},
         "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {FACT: "Porto"}},
         "tools": {"count": {"depends_on": [FACT]}},  # protected; `plain` is not
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _seen() -> tuple[list[tuple[float, float | None, str | None]], Any]:
    got: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        got.append((done, total, message))
    return got, progress


async def _count(s: Any, label: str, steps: int) -> list[tuple[float, float | None, str | None]]:
    got, progress = _seen()
    await s.call_tool("icore_get_fact", {"key": FACT})  # the plan's read
    r = await s.call_tool("count", {"label": label, "steps": steps},
                          progress_callback=progress)
    assert not r.is_error and text(r) == f"{label} counted {steps}", text(r)
    with anyio.fail_after(10):  # notifications are handled as they come: bounded wait
        while len(got) < steps:
            await anyio.sleep(0.02)
    return got


def _expected(label: str, steps: int) -> list[tuple[float, float | None, str | None]]:
    return [(float(i), float(steps), f"{label} {i}/{steps}") for i in range(1, steps + 1)]


def test_stdio_client_gets_its_calls_progress(tmp_path: Path) -> None:
    """Over stdio, a protected call's three progress notifications reach the client in
    order, with its numbers and messages; a call without a callback still answers."""
    manifest = _manifest(tmp_path, {"command": sys.executable, "args": [str(UPSTREAM)],
                                    "timeout_s": 10})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            assert await _count(s, "a", 3) == _expected("a", 3)
            await s.call_tool("icore_get_fact", {"key": FACT})
            r = await s.call_tool("count", {"label": "quiet", "steps": 2})
            assert not r.is_error and text(r) == "quiet counted 2"
            assert text(await s.call_tool("plain", {"label": "x"})) == "x"

    anyio.run(main)


@contextlib.contextmanager
def _http_gateway(folder: Path, lean: bool) -> Iterator[str]:
    """The upstream over streamable HTTP and ``icore mcp --http`` in front of it."""
    p_up, p_gw = free_port(), free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(p_up)]) as up:
        wait_port(p_up, up)
        manifest = _manifest(folder, {"url": f"http://127.0.0.1:{p_up}/mcp",
                                      "timeout_s": 10})
        with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                      f"127.0.0.1:{p_gw}"],
                     extra_env={"ICORE_MCP_LEAN": "1" if lean else "0"}) as gw:
            wait_port(p_gw, gw)
            yield f"http://127.0.0.1:{p_gw}/mcp"


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk-path"])
def test_http_sessions_each_get_their_own_progress(tmp_path: Path, lean: bool) -> None:
    """Two HTTP sessions call ``count`` at once (their SDK clients pick the same
    progress token, their request id): each gets exactly its own call's progress."""
    with _http_gateway(tmp_path, lean) as url:

        async def main() -> None:
            got: dict[str, Any] = {}

            async def one(label: str, steps: int) -> None:
                async with http_client(url, label) as s:
                    got[label] = await _count(s, label, steps)

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "left", 4)
                tg.start_soon(one, "right", 3)
            assert got == {"left": _expected("left", 4), "right": _expected("right", 3)}

        anyio.run(main)


class _Note:
    def __init__(self, method: str, token: Any = None) -> None:
        from types import SimpleNamespace
        self.method = method
        self.params = SimpleNamespace(progress_token=token, progress=1.0, total=None,
                                      message=None)


class _Session:
    can_send_request = True

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    async def send_progress_notification(self, *a: Any, **kw: Any) -> None:
        self.sent.append((*a, kw.get("related_request_id")))


def test_relay_routes_by_token_and_upstream_and_forgets_after_the_call() -> None:
    """Only a token the relay handed out, from the upstream it was handed to, while its
    call is in flight, reaches that call's client (with the client's own token); other
    notifications are left to the caller."""
    from types import SimpleNamespace
    relay = ProgressRelay()
    session = _Session()
    ctx = SimpleNamespace(session=session, request_id="7")

    async def main() -> None:
        assert not await relay.relay("up", _Note("notifications/resources/updated"))
        with relay.relayed(ctx, {"progressToken": 7, "k": 1}, "up", {"k": 1}) as meta:
            assert meta["k"] == 1 and meta["progressToken"].startswith("icore-progress-")
            assert len(relay) == 1
            assert await relay.relay("other", _Note("notifications/progress",
                                                    meta["progressToken"]))
            assert await relay.relay("up", _Note("notifications/progress", "7"))
            assert session.sent == []
            assert await relay.relay("up", _Note("notifications/progress",
                                                 meta["progressToken"]))
            assert session.sent == [(7, 1.0, None, None, "7")]
        assert len(relay) == 0
        assert await relay.relay("up", _Note("notifications/progress", meta["progressToken"]))
        assert len(session.sent) == 1
        with relay.relayed(ctx, None, "up", {"k": 1}) as plain:
            assert plain == {"k": 1} and len(relay) == 0

    anyio.run(main)


@pytest.mark.parametrize(("meta", "token"), [
    (None, None), ({}, None), ({"progressToken": True}, None),
    ({"progressToken": 1.5}, None), ({"progressToken": "t"}, "t"),
    ({"progressToken": 0}, 0), ({"progress_token": 3}, 3)])
def test_client_token_takes_strings_and_integers_only(meta: Any, token: Any) -> None:
    assert client_token(meta) == token


@pytest.mark.parametrize("key", ["progressToken", "progress_token"])
def test_the_clients_token_is_never_sent_upstream(key: str) -> None:
    """In either spelling (the wire's, or the SDK's parsed ``_meta``) the client's own
    token is dropped; trace context and the application's keys go on."""
    from icore.mcp._gateway_forward import forward_meta
    assert forward_meta({key: 4, "traceparent": "00-a-b-01", "app": 1}) == {
        "traceparent": "00-a-b-01", "app": 1}
    assert forward_meta({key: 4}) is None
