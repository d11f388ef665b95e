"""An upstream's ``roots/list`` forwarded to the client through the gateway (#29).

Real parts: the SDK's client (over stdio, launching ``icore mcp``; over HTTP, to
``icore mcp --http`` in a subprocess) with a ``list_roots_callback``, and a real upstream
(tests/mcp/upstream_asks.py, the SDK's ``MCPServer``, over stdio or streamable HTTP)
whose ``where`` tool calls ``ctx.session.list_roots()`` and which lists the roots again
when told ``notifications/roots/list_changed``. The roots the upstream gets are the
calling client's, and the trace records them with the call's ``task``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import text, upstream_log
from .test_gateway_asks import (
    _concurrently,
    _http,
    _http_gateway,
    _manifest,
    _stdio,
    _stdio_upstream,
)


def _roots(*uris: str) -> Any:
    """A ``list_roots_callback`` answering ``uris`` (the list can be changed in place)."""
    import mcp_types as types
    listed = list(uris)

    async def roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri=u, name=u.rsplit("/", 1)[-1])
                                            for u in listed])
    roots.listed = listed  # type: ignore[attr-defined]
    return roots


async def _logged(log: Path, tool: str) -> dict[str, Any]:
    """The upstream's first log line of ``tool`` (polled; bounded as a hang guard)."""
    with anyio.fail_after(60):
        while not (hit := [x for x in upstream_log(log) if x["tool"] == tool]):
            await anyio.sleep(0.05)
    return hit[0]


def test_stdio_roots_reach_the_upstream_and_follow_a_change(tmp_path: Path) -> None:
    """The upstream's ``roots/list`` during a call gets the stdio client's roots; the
    client's ``notifications/roots/list_changed`` reaches the upstream, whose
    ``roots/list`` outside any call then gets the new roots; the trace records the
    roots the client listed, with the task of the call that asked."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log))
    roots = _roots("file:///work/a", "file:///work/b")

    async def main() -> None:
        async with _stdio(manifest, list_roots_callback=roots) as s:
            r = await s.call_tool("where", {})
            assert not r.is_error and text(r) == "file:///work/a file:///work/b", text(r)
            roots.listed[:] = ["file:///work/c"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots are deprecated in 2026-07-28
                await s.send_roots_list_changed()
            changed = await _logged(log, "roots_changed")
            assert changed.get("roots") == ["file:///work/c"], changed

    anyio.run(main)
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    listed = [x for x in lines if isinstance(x.get("ask"), dict) and "roots" in x["ask"]]
    assert [x["ask"]["roots"] for x in listed] == [["file:///work/a", "file:///work/b"],
                                                   ["file:///work/c"]]
    assert listed[0]["task"] == listed[0]["ask"]["task"] and listed[0]["task"].endswith("/1")
    assert "task" not in listed[1]  # outside any call
    assert any("roots changed; passed to upstream(s) asks" in str(x.get("content"))
               for x in lines)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk-path"])
def test_http_roots_go_to_the_calling_session(tmp_path: Path, lean: bool) -> None:
    """Over ``--http`` and an HTTP upstream, the upstream's ``roots/list`` during a call
    (sent on its GET stream, not the call's) goes to the session whose call is in
    flight: its roots, not another session's."""
    log = tmp_path / "up.log"

    async def where(url: str, name: str, uri: str) -> str:
        async with _http(url, name, list_roots_callback=_roots(uri)) as s:
            r = await s.call_tool("where", {})
            assert not r.is_error, text(r)
            return text(r)

    with _http_gateway(tmp_path, log, lean=lean) as url:
        async def main() -> None:
            assert await where(url, "alice", "file:///alice") == "file:///alice"
            assert await where(url, "bob", "file:///bob") == "file:///bob"
        anyio.run(main)
    assert [x.get("roots") for x in upstream_log(log) if x["tool"] == "where_done"] == [
        ["file:///alice"], ["file:///bob"]]


@pytest.mark.parametrize("bob_has_roots", [False, True])
def test_http_roots_with_another_sessions_call_in_flight(tmp_path: Path,
                                                         bob_has_roots: bool) -> None:
    """Over ``--http`` and an HTTP upstream, alice's ``where`` asks ``roots/list`` (on
    the upstream's GET stream: no link to the call) while bob's call to the same
    upstream is in flight (waiting on his human). Bob declared no roots: only alice's
    session can answer, so it goes there (it was refused). Bob declared roots too: truly
    ambiguous, refused with an error saying so (never guessed)."""
    import mcp_types as types
    log = tmp_path / "up.log"
    bob_asked, alice_done = anyio.Event(), anyio.Event()
    said: list[str] = []

    async def bob_says(context: Any, params: Any) -> Any:
        bob_asked.set()
        with anyio.fail_after(60):
            await alice_done.wait()
        return types.ElicitResult(action="accept", content={"approve": True})

    async def alice(url: str) -> None:
        async with _http(url, "alice", list_roots_callback=_roots("file:///alice")) as s:
            with anyio.fail_after(60):
                await bob_asked.wait()
            said.append(text(await s.call_tool("where", {})))
        alice_done.set()

    async def bob(url: str) -> None:
        extra = {"list_roots_callback": _roots("file:///bob")} if bob_has_roots else {}
        async with _http(url, "bob", elicitation_callback=bob_says, **extra) as s:
            await s.call_tool("icore_get_fact", {"key": "fact://plan/budget"})
            r = await s.call_tool("approve", {"amount": 3})
            assert not r.is_error and "accept" in text(r), text(r)

    with _http_gateway(tmp_path, log) as url:
        _concurrently(url, bob, alice)
    done = [x for x in upstream_log(log) if x["tool"] == "where_done"]
    if not bob_has_roots:
        assert said == ["file:///alice"] and done[0]["roots"] == ["file:///alice"], said
        return
    assert "roots not forwarded: 2 calls of 2 client sessions that can answer roots are " \
           "in flight at upstream asks" in done[0]["error"], done
    assert "cannot tell which one asked" in said[0], said
