"""The gateway as a subprocess launched by the SDK's real client over stdio.

The upstream is an SDK server (tests/mcp/upstream_server.py) the gateway launches over
stdio; it logs every call it receives, so a refused call is proven never to reach it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from icore.adapters import audit_trace, load_jsonl

from .conftest import (
    UPSTREAM,
    env,
    stdio_gateway,
    stdio_upstream,
    text,
    upstream_log,
    write_manifest,
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gw-stdio")


@pytest.fixture(scope="module")
def manifest(folder: Path) -> Path:
    return write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 2.0)},
                          otel=f"file:{folder / 'spans.jsonl'}")


async def _direct_listing() -> tuple[list[Any], list[Any], list[Any]]:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)], env=env())
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return ((await s.list_tools()).tools, (await s.list_resources()).resources,
                    (await s.list_prompts()).prompts)


def test_listings_unchanged(manifest: Path) -> None:
    async def main() -> None:
        tools, resources, prompts = await _direct_listing()
        async with stdio_gateway(manifest) as s:
            gt = {t.name: t for t in (await s.list_tools()).tools}
            for t in tools:  # names, descriptions, input schemas unchanged
                assert gt[t.name].model_dump() == t.model_dump()
            assert set(gt) - {t.name for t in tools} == {"icore_put_fact", "icore_get_fact",
                                                         "icore_read_resource"}
            gr = {r.uri: r for r in (await s.list_resources()).resources}
            for r in resources:
                assert gr[r.uri].model_dump() == r.model_dump()
            assert "fact://plan/goal" in gr
            gp = (await s.list_prompts()).prompts
            assert [p.model_dump() for p in gp] == [p.model_dump() for p in prompts]
            got = await s.get_prompt("plan_trip", {"city": "Faro"})
            assert "Faro" in got.messages[0].content.text  # type: ignore[union-attr]
            init = s.initialize_result  # the upstream's instructions passed on, named
            assert init is not None and init.instructions is not None
            assert init.instructions.startswith("icore MCP gateway: ")
            assert "\n\n[trip] Trips: read memo://price before booking." in init.instructions
    anyio.run(main)


def test_protected_call_stale_replan_and_block(manifest: Path, folder: Path) -> None:
    log = folder / "up.log"

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            # never read: blocked, shown the current values, not forwarded
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            assert r.is_error and "(not_read)" in text(r) and "Porto" in text(r)
            assert not [x for x in upstream_log(log) if x["tool"] == "book"]
            # the refusal showed the values: the next call runs
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            assert not r.is_error, text(r)
            assert upstream_log(log)[-1] == {"tool": "book", "pid": upstream_log(log)[-1][
                "pid"], "args": {"city": "Porto", "price": 100}}
            got = await s.read_resource("memo://price")
            assert got.contents[0].text == "100"  # type: ignore[union-attr]
            assert got.meta is not None and "icore/version" in got.meta
            # a write through the gateway (upstream notifies resources/updated)
            await s.call_tool("set_price", {"value": "120"})
            for _ in range(50):
                r = await s.call_tool("book", {"city": "Porto", "price": 100})
                if r.is_error:
                    break
                await anyio.sleep(0.05)
            assert r.is_error and "(stale)" in text(r) and "120" in text(r), text(r)
            assert r.meta is not None and r.meta["icore/gate"]["reason"] == "stale"
            n_book = len([x for x in upstream_log(log) if x["tool"] == "book"])
            # the one replan: the session now knows 120 (the client's trace continues)
            r = await s.call_tool("book", {"city": "Porto", "price": 120},
                                  meta={"traceparent": f"00-{TRACE_ID}-{'1' * 16}-01"})
            assert not r.is_error, text(r)
            assert len([x for x in upstream_log(log) if x["tool"] == "book"]) == n_book + 1
            # stale, then changed again before the replan: second_change, blocked
            await s.call_tool("set_price", {"value": "130"})
            await anyio.sleep(0.3)
            r = await s.call_tool("book", {"city": "Porto", "price": 120})
            assert "(stale)" in text(r)
            await s.call_tool("set_price", {"value": "140"})
            await anyio.sleep(0.3)
            r = await s.call_tool("book", {"city": "Porto", "price": 130})
            assert r.is_error and "second_change" in text(r)
            r = await s.call_tool("book", {"city": "Porto", "price": 130})
            assert r.is_error  # the same plan stays blocked until a new read
            await s.read_resource("memo://price")
            r = await s.call_tool("book", {"city": "Porto", "price": 140})
            assert not r.is_error, text(r)
            # a declared write: set_city is protected by a fact, and re-reads memo://city
            r = await s.call_tool("set_city", {"value": "Faro"})
            assert r.is_error and "Porto" in text(r)  # fact never read: shown
            r = await s.call_tool("set_city", {"value": "Faro"})
            assert not r.is_error
            r = await s.call_tool("book", {"city": "Faro", "price": 140})
            assert r.is_error and "Faro" in text(r) and "stale" in text(r)
            # publishing a fact makes plans citing the old version stale
            r = await s.call_tool("icore_put_fact", {"key": "fact://plan/goal",
                                                     "value": "Lisbon"})
            assert not r.is_error and text(r).startswith("fact://plan/goal written; ")
            assert r.structured_content is not None and r.structured_content["changed"]
            r = await s.call_tool("icore_put_fact", {"key": "fact://plan/goal",
                                                     "value": "Lisbon"})  # same value
            assert not r.is_error and "unchanged" in text(r)
            assert r.structured_content is not None and not r.structured_content["changed"]
            r = await s.call_tool("icore_get_fact", {"key": "fact://plan/goal"})
            assert json.loads(text(r)) == "Lisbon"
        books = [x["args"] for x in upstream_log(log) if x["tool"] == "book"]
        assert {"city": "Porto", "price": 100} in books and books.count(
            {"city": "Porto", "price": 130}) == 0
    anyio.run(main)

    # the trace is what icore audit reads: sessions, reads, calls, gate decisions
    trace = load_jsonl(folder / "trace.jsonl")
    pf = trace.extras["planfence"]
    reasons = [d["reason"] for d in pf["decisions"]]
    assert {"valid", "stale", "second_change"} <= set(reasons)
    assert "BLOCKED: not_read" in (folder / "trace.jsonl").read_text()
    assert any(r["key"] == "memo://price" for r in pf["records"])
    result = audit_trace(trace)
    assert result.summary()
    # icore audit reads it: lineage pictures of the protected calls, no invalid action
    out = folder / "audit"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(folder / "trace.jsonl"),
                          "--fail-on", "invalid", "--out", str(out)], capture_output=True,
                         text=True, env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    page = (out / "test-gateway.html").read_text()
    assert "lineage status-valid" in page and "lineage status-blocked" in page
    # OpenTelemetry: the gate's spans continue the MCP client's trace context (_meta)
    spans = (folder / "spans.jsonl").read_text()
    assert TRACE_ID in spans and "apply_guardrail PlanFence" in spans  # GenAI conventions


def test_bad_input_and_upstream_faults(manifest: Path, folder: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            with pytest.raises(MCPError, match="Unknown tool"):
                await s.call_tool("no_such_tool", {})
            r = await s.call_tool("echo", {"text": 5})
            assert r.is_error and "text" in text(r) and "string" in text(r)
            r = await s.call_tool("echo", {})
            assert r.is_error and "required" in text(r)
            n = len(upstream_log(folder / "up.log"))
            # an upstream hang: an error result within the timeout, the gateway stays up
            async with anyio.create_task_group() as tg:
                hung: list[Any] = []

                async def hang() -> None:
                    hung.append(await s.call_tool("slow", {"seconds": 30}))

                tg.start_soon(hang)
                await anyio.sleep(0.3)
                r = await s.call_tool("echo", {"text": "meanwhile"})  # others unaffected
                assert text(r) == "meanwhile"
            assert hung[0].is_error and "did not answer" in text(hung[0])
            # an upstream crash mid-call: an error result, then the upstream is relaunched
            r = await s.call_tool("crash", {})
            assert r.is_error and "trip" in text(r)
            r = await s.call_tool("echo", {"text": "back"})
            assert text(r) == "back"
            pids = {x["pid"] for x in upstream_log(folder / "up.log")[n:]}
            assert len(pids) == 3  # relaunched after the timeout, then after the crash
    anyio.run(main)


def test_malformed_json_rpc_keeps_serving(manifest: Path) -> None:
    """Raw bytes on the gateway's stdin: garbage and malformed requests are refused, and
    the gateway goes on serving the same connection."""
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env(), text=True)
    assert p.stdin is not None and p.stdout is not None
    seen: dict[Any, dict[str, Any]] = {}

    def send(*msgs: Any) -> None:
        assert p.stdin is not None
        p.stdin.write("".join(m if isinstance(m, str) else json.dumps(m) + "\n"
                              for m in msgs))
        p.stdin.flush()

    def until(rid: int) -> dict[str, Any]:
        assert p.stdout is not None
        while rid not in seen:
            line = p.stdout.readline()
            assert line, "the gateway closed its stdout"
            msg = json.loads(line)
            seen[msg.get("id")] = msg
        return seen[rid]

    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}
        send("{not json\n", "[1, 2\n", {"jsonrpc": "2.0"}, init)
        assert until(1)["result"]["serverInfo"]["name"] == "test-gateway"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 5}},
             {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
             "\x00\x01garbage\n",
             {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "still here"}}})
        assert until(2)["error"]["code"] == -32602
        assert until(3)["error"]["code"] == -32601
        assert until(4)["result"]["content"][0]["text"] == "still here"
    finally:
        p.kill()
        p.wait(timeout=5)
        p.stdin.close()
        p.stdout.close()


def test_malformed_lines_are_answered(manifest: Path) -> None:
    """JSON-RPC 2.0 Sec. 5.1 over stdio (QA r3 U4): what is not JSON gets -32700, JSON that
    is no valid message -32600, with the message's own id when it has a usable one (so the
    waiting request is answered); a lone surrogate escape is a parse error; the session
    goes on serving."""
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env(), text=True)
    assert p.stdin is not None and p.stdout is not None and p.stderr is not None
    seen: dict[Any, list[dict[str, Any]]] = {}

    def send(*lines: str) -> None:
        assert p.stdin is not None
        p.stdin.write("".join(x + "\n" for x in lines))
        p.stdin.flush()

    def until(rid: Any, n: int = 1) -> list[dict[str, Any]]:
        assert p.stdout is not None
        while len(seen.get(rid, ())) < n:
            line = p.stdout.readline()
            assert line, "the gateway closed its stdout"
            msg = json.loads(line)
            seen.setdefault(msg.get("id"), []).append(msg)
        return seen[rid]

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}))
        until(1)
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}',
             "this is not json",
             "",
             "[1,2,3]",
             '[{"jsonrpc":"2.0","id":21,"method":"tools/list"},'
             '{"jsonrpc":"2.0","id":22,"method":"ping"}]',
             '{"jsonrpc":"2.0","id":23}',
             '{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"echo",'
             '"arguments":{"text":"\\ud800"}}}',
             '{"jsonrpc":"2.0","id":true,"method":"ping"}',
             '{"jsonrpc":"2.0","id":25,"method":"ping","params":[1]}',
             '{"jsonrpc":"2.0","id":99,"result":{}, "junk": [}',
             '{"jsonrpc":"2.0","id":98,"result":5}',
             json.dumps({"jsonrpc": "2.0", "id": 26, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": "still here"}}}))
        assert until(26)[0]["result"]["content"][0]["text"] == "still here"
        for rid in (21, 22, 23, 25):
            assert until(rid)[0]["error"]["code"] == -32600, seen[rid]
        assert until(24)[0]["error"]["code"] == -32700
        assert "hex escape" in seen[24][0]["error"]["message"]
        nulls = until(None, 4)  # not JSON, [1,2,3], id true, the broken response line
        codes = sorted(m["error"]["code"] for m in nulls)
        assert codes == [-32700, -32700, -32600, -32600], nulls
        assert 99 not in seen and 98 not in seen  # a response is never answered
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        err = p.stderr.read()
        assert err.count("malformed JSON-RPC line on stdin") == 9, err
        assert "Traceback" not in err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
        p.stdout.close()
        p.stderr.close()


@pytest.mark.timeout(90)
def test_a_timed_out_stdio_upstream_is_relaunched(tmp_path: Path) -> None:
    """QA qa-mcp S4: a stdio upstream whose answer timed out (blocked, or writing a huge
    result) would hold the pipe, so every later call timed out too until it drained. The
    timed-out call fails closed and the upstream is relaunched: the next call answers."""
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 2.0)})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            assert text(await s.call_tool("echo", {"text": "first"})) == "first"
            r = await s.call_tool("freeze", {"seconds": 60})  # blocks the whole server
            assert r.is_error and "did not answer tools/call within 2 s" in text(r), text(r)
            assert "relaunched" in text(r)
            r = await s.call_tool("echo", {"text": "after"})
            assert not r.is_error and text(r) == "after", text(r)

    anyio.run(main)
    rows = upstream_log(log)
    assert [x["tool"] for x in rows] == ["echo", "freeze", "echo"]
    assert rows[0]["pid"] == rows[1]["pid"] != rows[2]["pid"]  # a new process answered


def test_elicitation_to_a_client_without_it_is_said_unsupported(manifest: Path,
                                                                 folder: Path) -> None:
    """QA qa-mcp S3: an upstream tool asking for approval (``ctx.elicit``) through the
    gateway, whose client declared no elicitation: the error says this client does not
    support it, not that the upstream refused the call (a client that does is asked:
    tests/mcp/test_gateway_asks.py, #29)."""

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            r = await s.call_tool("approve", {"amount": 3})
            assert r.is_error, text(r)
            assert "which this client does not support" in text(r), text(r)
            assert "elicitation" in text(r) and "refused" not in text(r), text(r)

    anyio.run(main)
    assert any(x["tool"] == "approve" for x in upstream_log(folder / "up.log"))


@pytest.mark.parametrize("command", ["python", "python3"])
def test_bare_python_is_the_gateways_interpreter(tmp_path: Path, command: str) -> None:
    """QA qa-mcp S3: ``command: python`` as in examples/mcp/gateway.yaml, the gateway
    launched (by a desktop client) with its venv not active: PATH finds no python, or a
    system one without ``mcp``. A bare python is the gateway's own interpreter."""
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    log = tmp_path / "up.log"
    up = {**stdio_upstream(log, 10.0), "command": command}
    manifest = write_manifest(tmp_path, {"trip": up})
    bare = {**env(), "PATH": "/usr/bin:/bin"}  # no venv on it
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "icore", "mcp", str(manifest)], env=bare)

    async def main() -> None:
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w), \
                    ClientSession(r, w) as s:
                await s.initialize()
                r2 = await s.call_tool("echo", {"text": "venv"})
                assert not r2.is_error and text(r2) == "venv", text(r2)

    anyio.run(main)
    assert [x["tool"] for x in upstream_log(log)] == ["echo"]
