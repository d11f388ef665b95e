"""QA qa-new9b (LangGraph + an own FastMCP server behind ``icore mcp``), #29.

Real processes: ``icore mcp`` over stdio (the SDK's ``stdio_client``) or ``--http`` (the
SDK's streamable-HTTP client) in front of tests/mcp/upstream_server.py or
tests/mcp/upstream_bigres.py. Covered: a stop signal refuses the tool calls that arrive
after it (stdio and HTTP) while the calls in flight finish and reach their clients; a
resource too large to version passes through when no protected tool needs it, and is
refused naming its size and the limit when one does; ``icore_read_resource``'s value in
its structured content; one version numbering in reads and refusals; a stale refusal
caused by the session's own write says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from icore.adapters import audit_trace, load_jsonl

from .conftest import (
    HERE,
    env,
    free_port,
    http_client,
    stdio_gateway,
    stdio_upstream,
    text,
    upstream_log,
    wait_port,
    write_manifest,
)

pytestmark = pytest.mark.timeout(120)


def _slow_manifest(folder: Path) -> Path:
    """``slow`` protected (a call that stays in flight), over the test upstream."""
    return write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 20.0)},
                          tools={"slow": {"depends_on": ["memo://price"]}})


def _pid_of(manifest: Path) -> int:
    """The pid of the ``icore mcp`` process serving ``manifest`` (from /proc)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"icore" in cmd and str(manifest).encode() in cmd:
            return int(d.name)
    raise AssertionError(f"no icore mcp process for {manifest}")


async def _wait_log(log: Path, n: int, tool: str = "slow") -> None:
    """Until the upstream logged ``n`` calls of ``tool``."""
    with anyio.fail_after(30):
        while sum(x["tool"] == tool for x in upstream_log(log)) < n:
            await anyio.sleep(0.05)


def _blocked(path: Path, reason: str) -> list[dict[str, Any]]:
    """The trace's blocked PlanFence decisions with ``reason``."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return [x["planfence"]["decision"] for x in lines
            if x.get("planfence", {}).get("decision", {}).get("reason") == reason]


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_stdio_stop_refuses_calls_sent_after_the_signal(tmp_path: Path) -> None:
    """S2: after one SIGINT, the call in flight runs and is answered; a call sent after
    the signal is refused ``gateway_stopping`` (never sent upstream, recorded blocked); a
    request after the last result (the client's follow-up) is still answered."""
    manifest = _slow_manifest(tmp_path)
    log = tmp_path / "up.log"
    got: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            pid = _pid_of(manifest)

            async def first() -> None:
                got["first"] = await s.call_tool("slow", {"seconds": 2.0})
                await anyio.sleep(0.3)  # a client's follow-up after its last result
                got["tools"] = await s.list_tools()

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await _wait_log(log, 1)
                os.kill(pid, signal.SIGINT)
                await anyio.sleep(0.3)
                got["late"] = await s.call_tool("slow", {"seconds": 0.1})
    anyio.run(main)
    assert not got["first"].is_error and text(got["first"]) == "slept"
    assert "slow" in [t.name for t in got["tools"].tools]  # answered while draining
    late = got["late"]
    assert late.is_error and "PlanFence blocked slow (gateway_stopping)" in text(late)
    assert [x["tool"] for x in upstream_log(log)] == ["slow"]  # the late one never sent
    path = tmp_path / "trace.jsonl"
    assert [d["action"] for d in _blocked(path, "gateway_stopping")] == ["slow"]
    assert audit_trace(load_jsonl(path)).terminated
    js = tmp_path / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(js)], capture_output=True, text=True, env=env(), timeout=120,
                         check=False)
    assert cli.returncode == 0, cli.stderr
    run = json.loads(js.read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"]["total"] == 2 and run["actions"]["blocked"] == 1, run["actions"]
    # each lineage entry names its tool, not only its task (QA qa-new9b S4)
    assert sorted((x["tool"], x["status"]) for x in run["lineage"]) == [
        ("slow", "blocked"), ("slow", "valid")], run["lineage"]


def test_http_stop_answers_the_call_in_flight(tmp_path: Path) -> None:
    """S3: Ctrl-C on ``--http`` with a call in flight: its result reaches the client
    (whose SDK lists the tools after it), a call sent after the signal is refused, and
    the gateway then exits 0."""
    manifest = _slow_manifest(tmp_path)
    log = tmp_path / "up.log"
    port = free_port()
    err = tmp_path / "gw.err"
    got: dict[str, Any] = {}
    with open(err, "w", encoding="utf-8") as ef:
        gw = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest),
                               "--http", f"127.0.0.1:{port}"], env=env(),
                              stdout=subprocess.DEVNULL, stderr=ef)
    try:
        wait_port(port, gw)

        async def main() -> None:
            async with http_client(f"http://127.0.0.1:{port}/mcp") as s:
                await s.read_resource("memo://price")

                async def first() -> None:  # no tools/list before: the SDK lists after
                    got["first"] = await s.call_tool("slow", {"seconds": 2.0})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(first)
                    await _wait_log(log, 1)
                    gw.send_signal(signal.SIGINT)
                    await anyio.sleep(0.3)
                    got["late"] = await s.call_tool("slow", {"seconds": 0.1})
        anyio.run(main)
        assert gw.wait(timeout=30) == 0
    finally:
        if gw.poll() is None:
            gw.kill()
        gw.wait(timeout=10)
    assert not got["first"].is_error and text(got["first"]) == "slept"
    assert got["late"].is_error and "(gateway_stopping)" in text(got["late"])
    assert [x["tool"] for x in upstream_log(log)] == ["slow"]
    assert "waiting for 1 call(s) in flight" in err.read_text(encoding="utf-8")


def _big_manifest(folder: Path, needs: str) -> Path:
    up = {"command": sys.executable, "args": [str(HERE / "upstream_bigres.py")],
          "timeout_s": 30}
    return write_manifest(folder, {"big": up}, facts={},
                          tools={"use": {"depends_on": [needs]}})


@pytest.mark.parametrize("needed", [False, True])
def test_resource_over_the_version_limit(tmp_path: Path, needed: bool) -> None:
    """S2: a 5 MiB resource no protected tool depends on passes through unversioned;
    one a protected tool depends on is refused naming it, its size and the limit."""
    manifest = _big_manifest(tmp_path, "memo://huge" if needed else "memo://small")
    got: dict[str, Any] = {}

    async def main() -> None:
        from mcp.shared.exceptions import MCPError
        async with stdio_gateway(manifest) as s:
            try:
                got["read"] = await s.read_resource("memo://huge")
            except MCPError as exc:
                got["error"] = exc.error.message
    anyio.run(main)
    if not needed:
        res = got["read"]
        assert len(res.contents[0].text) == 5 << 20
        assert not (res.meta or {}).get("icore/version")  # unversioned
        return
    msg = got["error"]
    assert "memo://huge" in msg and "4194304 bytes" in msg, msg
    size = len(json.dumps({"contents": [{"mimeType": "text/plain", "text": "x" * (5 << 20),
                                         "uri": "memo://huge"}], "uri": "memo://huge"},
                          separators=(",", ":")))
    assert f"{size} bytes" in msg, msg
    assert "no JSON value" not in msg


def _trip_manifest(folder: Path) -> Path:
    return write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 20.0)})


def test_read_tool_value_and_one_numbering(tmp_path: Path) -> None:
    """S3/S4: ``icore_read_resource`` gives the value in its structured content (its text
    that JSON); its version is numbered as the stale refusal numbers it."""
    manifest = _trip_manifest(tmp_path)
    got: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            got["r1"] = await s.call_tool("icore_read_resource", {"uri": "memo://price"})
            await s.call_tool("icore_read_resource", {"uri": "memo://city"})
            await s.call_tool("set_price", {"value": "120"})  # unprotected: a change
            got["book"] = await s.call_tool("book", {"city": "Porto", "price": 100})
            got["r2"] = await s.call_tool("icore_read_resource", {"uri": "memo://price"})
    anyio.run(main)
    r1 = got["r1"]
    assert r1.structured_content["text"] == "100"
    assert json.loads(text(r1)) == r1.structured_content
    assert r1.structured_content["version"]["version"] == 1
    assert "seq" not in r1.structured_content["version"]
    r2 = got["r2"].structured_content
    assert r2["text"] == "120" and r2["version"]["version"] == 2
    book = got["book"]
    assert book.is_error and "memo://price = 120 (version 2)" in text(book), text(book)
    changed = book.meta["icore/gate"]["changed"]["memo://price"]
    assert changed == r2["version"]  # the same record, the same number


@pytest.mark.parametrize("declared", [True, False])
def test_stale_by_own_write_says_so(tmp_path: Path, declared: bool) -> None:
    """S4: ``set_city`` declares ``writes: memo://city``; the session's next ``book``
    (D(a) memo://city) is refused stale, naming this session's call that changed it. A
    change by a tool that declares no ``writes`` (``set_price``) is a plain change."""
    manifest = _trip_manifest(tmp_path)
    got: dict[str, Any] = {}
    call = ("set_city", {"value": "Lyon"}) if declared else ("set_price", {"value": "130"})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for uri in ("memo://price", "memo://city", "fact://plan/goal"):
                await s.read_resource(uri)
            got["set"] = await s.call_tool(*call)
            got["book"] = await s.call_tool("book", {"city": "Porto", "price": 100})
    anyio.run(main)
    assert not got["set"].is_error
    said = text(got["book"])
    assert got["book"].is_error and "(stale)" in said, said
    if not declared:
        assert "memo://price = 130 (version 2)" in said, said
        assert "this session's" not in said and "own earlier call" not in said, said
        return
    assert "memo://city = Lyon (version 2) (changed by this session's call set_city)" \
        in said, said
    assert "This session's own earlier call changed memo://city (its call set_city)" \
        in said, said


def _start(manifest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env(), timeout=120, check=False)


def test_manifest_refused_after_start_leaves_no_trace(tmp_path: Path) -> None:
    """S4: a protected name no upstream serves (found once the upstreams listed their
    tools) exits 2 and leaves no trace file for the next run to move aside."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              tools={"bok": {"depends_on": ["memo://price"]}})
    res = _start(manifest)
    assert res.returncode == 2 and "'bok'" in res.stderr, res.stderr
    assert not (tmp_path / "trace.jsonl").exists()
    assert not list(tmp_path.glob("trace-*.jsonl"))


def test_started_gateway_keeps_its_trace(tmp_path: Path) -> None:
    """The other side: a manifest that passes keeps its trace (the check above can
    fail)."""
    async def main() -> None:
        async with stdio_gateway(_trip_manifest(tmp_path)) as s:
            await s.read_resource("memo://price")
    anyio.run(main)
    assert (tmp_path / "trace.jsonl").exists()


def test_nested_placeholder_is_said_unsupported(tmp_path: Path) -> None:
    """S4: ``{city.name}`` on an argument says nested fields are not supported."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              tools={"book": {"depends_on": ["memo://{city.name}"]}})
    res = _start(manifest)
    assert res.returncode == 2, res.stderr
    assert "names a field inside argument 'city' of book: nested fields are not " \
        "supported" in res.stderr, res.stderr
    assert not (tmp_path / "trace.jsonl").exists()


def test_refused_start_removes_its_lock_and_folders_and_puts_back_the_earlier_trace(
        tmp_path: Path) -> None:
    """#29: a start refused after the listing left ``.trace.jsonl.lock`` (and the folder
    it made); now it removes what it created, and the earlier run's trace it had moved
    aside is back at its path."""
    folder = tmp_path / "new" / "deeper"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              tools={"bok": {"depends_on": ["memo://price"]}},
                              trace=str(folder / "trace.jsonl"))
    res = _start(manifest)
    assert res.returncode == 2 and "'bok'" in res.stderr, res.stderr
    assert not (tmp_path / "new").exists()  # the folders it made, gone
    earlier = tmp_path / "trace.jsonl"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              tools={"bok": {"depends_on": ["memo://price"]}})
    earlier.write_text(json.dumps({"run": {"question": "MCP gateway earlier"}}) + "\n")
    before = earlier.read_bytes()
    res = _start(manifest)
    assert res.returncode == 2, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "trace" in p.name) == [
        "trace.jsonl"], list(tmp_path.iterdir())
    assert earlier.read_bytes() == before


def test_undo_never_removes_a_lock_another_claim_holds(tmp_path: Path) -> None:
    """The refused claim removes its lock file only while it holds it: a claim that
    opened the file before the removal finds it gone and claims again; a lock file a
    live claim holds is never removed by another's undo."""
    import fcntl

    from icore.mcp._trace_claim import claim_trace
    path = tmp_path / "t" / "trace.jsonl"
    first = claim_trace(path)
    second = claim_trace(path)  # the path is held: the next one
    assert second.path.name == "trace-gw2.jsonl"
    lock = first.lock
    fd = os.open(lock, os.O_RDWR)  # another gateway opened it, not locked yet
    first.undo()
    assert not lock.exists() and (tmp_path / "t").exists()  # second's folder stays
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # it gets a lock on a removed file
    os.close(fd)
    third = claim_trace(path)  # so a claim opens the path's file again: one holder
    assert third.path == path and third.lock.exists()
    second.undo()
    assert third.lock.exists()
    third.undo()
    assert list((tmp_path / "t").iterdir()) == []  # (made by first: left, held then)
