"""The HTTP sessions' GET streams as the gateway's front counts them (#29).

:class:`icore.mcp._client_reach.GetStreams` wraps each ``GET /mcp``: a real ASGI app
here answers it (200 and a held stream, or 409 as the SDK answers a second stream) and
ends it when told. No clock is read: the grace given to a session's first stream is an
hour, so a wait that should not happen hangs into the guard instead of passing.
"""

from __future__ import annotations

from typing import Any

import anyio

from icore.mcp._client_reach import GetStreams

HOUR_S = 3600.0


def _app(status: int, release: anyio.Event) -> Any:
    """An ASGI app answering ``status`` and holding the stream until ``release``."""
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        if status == 200:
            await release.wait()
        await send({"type": "http.response.body", "body": b""})
    return app


def _get(sid: str) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/mcp",
            "headers": [(b"mcp-session-id", sid.encode())]}


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b""}


async def _send(message: Any) -> None:
    return None


def test_a_stream_counts_while_open_and_a_closed_one_is_not_waited_for() -> None:
    """Open from its 200 until the app returns; a 409 never counts; after its stream
    closed, a session gets no grace (it had its chance)."""
    streams = GetStreams()

    async def main() -> None:
        release = anyio.Event()
        with anyio.fail_after(60):  # a hang guard, not a measure
            async with anyio.create_task_group() as tg:
                tg.start_soon(streams.serve, _app(200, release), _get("s1"), _receive, _send)
                assert await streams.first_open("s1", HOUR_S)
                await streams.serve(_app(409, release), _get("s1"), _receive, _send)
                assert streams.is_open("s1") and not streams.is_open("s2")
                release.set()
            assert not streams.is_open("s1")
            assert not await streams.first_open("s1", HOUR_S)  # at once: it had one

    anyio.run(main)


def test_a_first_stream_ends_the_wait_for_it() -> None:
    """A question waiting for a new session's first stream goes on as soon as it opens."""
    streams = GetStreams()

    async def main() -> None:
        release = anyio.Event()
        got: list[bool] = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                async def wait() -> None:
                    got.append(await streams.first_open("s9", HOUR_S))
                    release.set()
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                assert got == []  # still waiting: no stream yet
                await streams.serve(_app(200, release), _get("s9"), _receive, _send)
        assert got == [True]

    anyio.run(main)
