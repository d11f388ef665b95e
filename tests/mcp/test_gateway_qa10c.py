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
import time
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
def _http_gateway(manifest: Path) -> Iterator[tuple[str, list[str]]]:
    """``icore mcp MANIFEST --http 127.0.0.1:0``; yields its URL and a list that holds its
    stderr lines once it stopped (after the ``with``)."""
    from .conftest import process
    err, lines = manifest.parent / "gw.err", []
    try:
        with open(err, "w", encoding="utf-8") as f, process(
                [sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                 "127.0.0.1:0"], stdin=subprocess.DEVNULL, stderr=f) as p:
            deadline = time.monotonic() + 60
            while not (m := re.search(r"serving (http://127.0.0.1:\d+/mcp)",
                                      err.read_text(encoding="utf-8"))):
                assert p.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)
            yield m.group(1), lines
    finally:
        lines.extend(err.read_text(encoding="utf-8").splitlines(keepends=True))


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


GARBAGE = HERE / "upstream_garbage.py"
GARBAGE_TOOLS = ("ok", "refuse", "refuse500", "not_json", "empty_body", "wrong_shape",
                 "html500")


@contextlib.contextmanager
def _garbage_upstream(folder: Path) -> Iterator[str]:
    """tests/mcp/upstream_garbage.py on a free port; yields its URL."""
    from .conftest import process
    port = free_port()
    with process([sys.executable, str(GARBAGE), str(port)],
                 extra_env={"GARBAGE_LOG": str(folder / "garbage.log")}) as up:
        wait_port(port, up)
        yield f"http://127.0.0.1:{port}/mcp"


def _garbage_manifest(folder: Path, url: str, **extra: Any) -> Path:
    return write_manifest(folder, {"g": {"url": url, "timeout_s": 10}}, facts={}, tools={
        n: {"depends_on": ["g://seats"]} for n in GARBAGE_TOOLS}, **extra)


@pytest.mark.parametrize("lean", ["1", "0"])
def test_garbage_answers_may_have_run(tmp_path: Path, lean: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a well-formed JSON-RPC error answer is "refused" (did not run); a 200 that is
    no JSON, an empty body, a result of the wrong shape, an HTTP 500 page: the call may
    have run, said so to the model (no blind retry) and audited "outcome unknown" (QA
    qa-new10c S2). Both HTTP paths: the lean one and the SDK's (ICORE_MCP_LEAN=0)."""
    from .conftest import audited_actions, stdio_gateway
    monkeypatch.setenv("ICORE_MCP_LEAN", lean)
    with _garbage_upstream(tmp_path) as url:
        manifest = _garbage_manifest(tmp_path, url)

        async def calls() -> dict[str, Any]:
            out = {}
            async with stdio_gateway(manifest) as s:
                for n in GARBAGE_TOOLS:  # a call that may have run spends the read
                    await s.read_resource("g://seats")
                    out[n] = await s.call_tool(n, {"route": "x"})
            return out

        got = anyio.run(calls)
    assert not got["ok"].is_error
    for n in ("refuse", "refuse500"):  # the upstream's own error: it did not run
        said = text(got[n])
        assert got[n].is_error and f"upstream g refused {n}: no such route" in said, said
        assert "icore/upstream" not in (got[n].meta or {})
    for n in ("not_json", "empty_body", "wrong_shape", "html500"):
        said = text(got[n])
        assert got[n].is_error and "refused" not in said, said
        assert f"upstream g sent no valid answer to {n}" in said, said
        assert f"its outcome is unknown: check its effect before calling {n} again" in \
            said, said
        assert "pydantic" not in said and len(said) < 600, said
        assert (got[n].meta or {})["icore/upstream"] == {"upstream": "g",
                                                         "may_have_run": True}
    # both paths name the upstream's HTTP status (#29; the SDK's own error has none)
    said = text(got["html500"])
    assert "error response (HTTP 500 Internal Server Error, text/html)" in said, said
    assert "no such route (HTTP 500)" in text(got["refuse500"]), text(got["refuse500"])
    assert "(HTTP" not in text(got["refuse"]), text(got["refuse"])  # a 200: none
    counts = audited_actions(tmp_path / "trace.jsonl")
    assert counts["outcome unknown"] == 4, counts
    assert counts["failed after authorization"] == 2 and counts["valid"] == 1, counts


def test_every_sdk_stand_in_error_is_known() -> None:
    """Each error the SDK's HTTP client makes up for an answer that is no JSON-RPC answer
    is told apart from the upstream's own (:data:`STAND_INS`): a new one in a later SDK
    fails here instead of being taken for "the upstream refused, it did not run"."""
    import mcp.client.streamable_http as sh

    from icore.mcp._upstream_answer import STAND_INS
    src = Path(sh.__file__).read_text(encoding="utf-8")
    made = re.findall(r'ErrorData\(\s*code=\w+,\s*message=f?"([^"{]*)', src)
    made += re.findall(r'_resolve_abandoned_request\(\s*[\w.]+,\s*[\w.]+,\s*f?"([^"{]+)', src)
    made += re.findall(r'return f?"(Redirect to )', src)
    assert len(made) >= 5, made
    for m in made:
        assert m.startswith(STAND_INS) or m == "Not Found", m


def _resend_run(folder: Path, prices: tuple[str, ...], second: dict[str, Any]
                ) -> tuple[list[Any], dict[str, Any]]:
    """Read, change the price through ``prices`` (each notified), ``book`` (refused
    stale), then ``book`` with ``second``; the two results and the audit's ``--json``."""
    from .conftest import stdio_gateway
    manifest = write_manifest(folder, {"trip": stdio_upstream(folder / "up.log")})

    async def run() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            await s.read_resource("memo://city")
            for p in prices:
                await s.call_tool("set_price", {"value": p})
                await anyio.sleep(0.5)  # its resources/updated read by the gateway
            first = await s.call_tool("book", {"city": "Porto", "price": 100})
            return [first, await s.call_tool("book", second)]

    got = anyio.run(run)
    out = folder / "a.json"
    r = subprocess.run([sys.executable, "-m", "icore", "audit", str(folder / "trace.jsonl"),
                        "--json", str(out)], env=env(), cwd=folder, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return got, {"console": r.stdout, **json.loads(out.read_text(encoding="utf-8"))}


def test_a_stale_call_resent_unchanged_is_flagged(tmp_path: Path) -> None:
    """The host resends the refused call as it was although the price handed over
    changed: the replan runs (the gate cannot tell a blind retry from a replan whose
    arguments do not depend on the change) and the audit flags it ``resent_unchanged``
    in the console, ``--json`` and the report (QA qa-new10c S2)."""
    (first, again), audit = _resend_run(tmp_path, ("250",), {"city": "Porto", "price": 100})
    assert first.is_error and first.meta["icore/gate"]["reason"] == "stale", text(first)
    assert "do not resend it unchanged" in text(first), text(first)
    assert not again.is_error, text(again)
    lineage = audit["runs"][0]["lineage"]
    flagged = [lv for lv in lineage if lv.get("resent_unchanged")]
    assert [lv["resent_unchanged"] for lv in flagged] == [["memo://price"]], lineage
    assert "replan resent unchanged" in flagged[0]["reason"]
    assert "1 replan(s) resent unchanged" in audit["console"], audit["console"]
    page = (tmp_path / audit["runs"][0]["report"]).read_text(encoding="utf-8")
    assert "resent unchanged" in page


@pytest.mark.parametrize(("prices", "second"), [
    (("250",), {"city": "Porto", "price": 250}),  # a real replan: new arguments
    (("250", "100"), {"city": "Porto", "price": 100})])  # the price changed back
def test_a_replan_is_not_flagged(tmp_path: Path, prices: tuple[str, ...],
                                 second: dict[str, Any]) -> None:
    """New arguments, or the same ones when the value handed over is the one the call was
    planned from (changed and changed back: a new version, the same value): no flag."""
    (first, again), audit = _resend_run(tmp_path, prices, second)
    assert first.is_error and first.meta["icore/gate"]["reason"] == "stale", text(first)
    assert not again.is_error, text(again)
    assert not any(lv.get("resent_unchanged") for lv in audit["runs"][0]["lineage"])
    assert "resent unchanged" not in audit["console"]


def test_a_protected_tool_of_a_dead_http_upstream_is_a_tool_error(tmp_path: Path) -> None:
    """The HTTP upstream dies: a protected call answers a tool error naming the upstream
    down (fail closed), not JSON-RPC ``Unknown tool`` (the gateway lists again and drops
    its tools), which the SDK's client raises and a host crashes on (QA qa-new10c S3)."""
    from .conftest import UPSTREAM, process, stdio_gateway
    port = free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(port)],
                 extra_env={"UPSTREAM_LOG": str(tmp_path / "up.log")}) as up:
        wait_port(port, up)
        manifest = write_manifest(tmp_path, {"trip": {
            "url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 5}})

        async def run() -> Any:
            async with stdio_gateway(manifest) as s:
                await s.read_resource("memo://price")
                await s.read_resource("memo://city")
                up.terminate()
                up.wait(timeout=10)
                await s.list_tools()  # a host's listing: the dead upstream's tools dropped
                return await s.call_tool("book", {"city": "Porto", "price": 100})

        got = anyio.run(run)
    said = text(got)
    assert got.is_error and got.meta["icore/gate"]["reason"] == "owner_unavailable", said
    assert "upstream trip (" in said and "is down or unavailable" in said, said


def test_a_malformed_read_answer_is_the_upstreams_error(tmp_path: Path) -> None:
    """A ``resources/read`` the upstream answers with garbage is an internal error naming
    the upstream, never ``-32602 Invalid request parameters`` (the client's fault) nor
    ``-32700`` (as if the client's request did not parse); the upstream's own JSON-RPC
    error passes on as it is (QA qa-new10c S3)."""
    from mcp.shared.exceptions import MCPError

    from .conftest import stdio_gateway
    with _garbage_upstream(tmp_path) as url:
        manifest = _garbage_manifest(tmp_path, url)

        async def run() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with stdio_gateway(manifest) as s:
                for mode in ("not_json", "wrong_shape", "html500", "ok"):
                    await s.call_tool("set_read_mode", {"route": mode})
                    try:
                        out[mode] = await s.read_resource("g://seats")
                    except MCPError as exc:
                        out[mode] = exc
            return out

        got = anyio.run(run)
    for mode in ("not_json", "wrong_shape", "html500"):
        exc = got[mode]
        assert isinstance(exc, MCPError) and exc.code == -32603, (mode, exc)
        assert exc.message.startswith("upstream g sent no valid answer to resources/read "
                                      "g://seats ("), exc.message
        assert "pydantic" not in exc.message
    assert not isinstance(got["ok"], Exception)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_stale_refusal_while_stopping_does_not_say_call_again(tmp_path: Path) -> None:
    """A call in flight at the stop signal refused ``stale`` after it: its text says not
    to call again through this gateway (every new call is refused ``gateway_stopping``),
    not "call again" (QA qa-new10c S4)."""
    import os
    import signal

    from .conftest import stdio_gateway
    from .test_gateway_qa9b import _pid_of
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 20)})

    async def run() -> Any:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            await s.read_resource("memo://city")
            await s.call_tool("set_price", {"value": "250"})
            await anyio.sleep(0.5)  # its resources/updated read by the gateway
            await s.call_tool("set_read_delay", {"seconds": 2.0})  # the gate's re-read waits
            got: dict[str, Any] = {}

            async def book() -> None:
                got["book"] = await s.call_tool("book", {"city": "Porto", "price": 100})

            async with anyio.create_task_group() as tg:
                tg.start_soon(book)
                await anyio.sleep(0.7)
                os.kill(_pid_of(manifest), signal.SIGINT)
            return got["book"]

    got = anyio.run(run)
    said = text(got)
    assert got.is_error and got.meta["icore/gate"]["reason"] == "stale", said
    assert "do not call again through this gateway" in said, said
    assert "call again (this is the one replan)" not in said, said


def test_no_trace_is_said_on_the_ready_line(tmp_path: Path) -> None:
    """A manifest without ``trace:``: stderr says the run is not recorded (QA S4)."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              trace=None)
    with _http_gateway(manifest) as (_, lines):
        pass
    said = "".join(lines)
    assert "no trace: line, so this run is not recorded" in said, said
    traced = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})
    with _http_gateway(traced) as (_, lines):
        pass
    assert "not recorded" not in "".join(lines)


def test_a_non_mcp_http_upstream_is_named_with_its_status(tmp_path: Path) -> None:
    """An HTTP upstream at a wrong path: the start-up error gives the HTTP status and the
    URL, not "unreachable: MCPError: Not Found" (QA qa-new10c S4)."""
    from .conftest import UPSTREAM, process
    port = free_port()
    with process([sys.executable, str(UPSTREAM), "--http", str(port)]) as up:
        wait_port(port, up)
        url = f"http://127.0.0.1:{port}/wrong"
        manifest = write_manifest(tmp_path, {"trip": {"url": url, "timeout_s": 5}})
        r = subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)], env=env(),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
    assert r.returncode != 0
    assert f"{url} answered HTTP 404" in r.stderr and "no MCP streamable-HTTP endpoint" \
        in r.stderr, r.stderr
    assert "unreachable" not in r.stderr, r.stderr


def test_a_lone_surrogate_is_a_parse_error_not_the_upstreams(tmp_path: Path) -> None:
    """Arguments holding a lone surrogate escape cannot be encoded (no UTF-8 form): over
    HTTP a parse error, as over stdio, never sent upstream nor blamed on it (it was
    "upstream ... may have run it", and killed the SDK path's upstream connection); a
    valid surrogate pair passes (QA qa-new10c S4)."""
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log)})
    with _http_gateway(manifest) as (url, _):
        status, answer = _post(url, (
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo",'
            b'"arguments":{"text":"a\\ud800b"}}}'))
        assert status == 400 and answer["error"]["code"] == -32700, answer
        assert "surrogate" in answer["error"]["message"], answer

        async def pair() -> Any:
            async with http_client(url) as s:
                return await s.call_tool("echo", {"text": "a\U0001F600b"})

        assert text(anyio.run(pair)) == "a\U0001F600b"
    from .conftest import upstream_log
    assert [x["args"]["text"] for x in upstream_log(log)] == ["a\U0001F600b"]


def test_put_fact_refuses_control_and_bidi_characters_in_keys(tmp_path: Path) -> None:
    """``icore_put_fact`` with a key holding U+202E or a newline: refused, nothing
    written (QA qa-new10c S4); a plain key is written."""
    from .conftest import stdio_gateway
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})

    async def run() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            return [await s.call_tool("icore_put_fact", {"key": k, "value": "Lisbon"})
                    for k in ("fact://plan/\u202egoal", "fact://plan/go\nal",
                              "fact://plan/goal")]

    rtl, nl, plain = anyio.run(run)
    for got, shown in ((rtl, "'\\u202e'"), (nl, "'\\n'")):
        assert got.is_error and f"holds {shown}, a control or bidi character" in text(got)
        assert "\u202e" not in text(got), text(got)
    assert not plain.is_error, text(plain)
