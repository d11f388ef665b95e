"""QA qa-crew findings on the MCP gateway (S2 trace replaced at stop, S3 ``1e+300`` as
an integer, S4 busy port and IPv6 URLs, S4 unknown outcome after a double Ctrl-C).

Real processes: ``icore mcp`` spoken to line by line over stdio, or over ``--http`` with
the SDK's client, in front of tests/mcp/upstream_server.py.
"""

from __future__ import annotations

import json
import math
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._gateway_args import is_integer

from .conftest import (
    env,
    http_client,
    stdio_gateway,
    stdio_upstream,
    text,
    upstream_log,
    write_manifest,
)
from .test_gateway_stop import _lines, _manifest, _Raw, _wait_for


def test_stop_never_overwrites_a_file_put_at_the_trace_path(tmp_path: Path) -> None:
    """The trace moved away while the gateway ran and the user's own file put at its
    path: the stop's rewrite leaves that file as it is and writes the trace beside it,
    saying where (#29); the stop is still normal (exit 0)."""
    err = tmp_path / "stderr.txt"
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(_manifest(tmp_path), stderr=fh)
        try:
            gw.start()
            trace = tmp_path / "trace.jsonl"
            _wait_for(trace, "memo://price")
            trace.rename(tmp_path / "moved-away.jsonl")
            trace.write_text("my precious notes\n", encoding="utf-8")
            gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 0}})
            gw.p.send_signal(signal.SIGTERM)
            assert gw.p.wait(timeout=30) == 0
        finally:
            gw.stop()
    assert trace.read_text(encoding="utf-8") == "my precious notes\n"
    final = tmp_path / "trace-stopped-1.jsonl"
    lines = _lines(final)
    assert any(x.get("kind") == "termination" for x in lines)
    assert any(x.get("tool") == "slow" for x in lines)
    said = err.read_text(encoding="utf-8")
    assert str(trace) in said and str(final) in said, said


def test_stop_rewrites_its_own_trace_in_place(tmp_path: Path) -> None:
    """The file the gateway created is still at the path: rewritten there, no sibling."""
    gw = _Raw(_manifest(tmp_path))
    try:
        gw.start()
        gw.p.send_signal(signal.SIGTERM)
        assert gw.p.wait(timeout=30) == 0
    finally:
        gw.stop()
    assert any(x.get("kind") == "termination" for x in _lines(tmp_path / "trace.jsonl"))
    assert not list(tmp_path.glob("trace-stopped-*"))


def test_a_huge_float_is_no_integer_argument(tmp_path: Path) -> None:
    """``price: 1e+300`` used to pass the gateway's check of ``"type": "integer"`` and
    reach the upstream, which refused it (#29): now the gateway refuses it, naming the
    argument; an integer written ``5.0`` (JSON Schema: an integer) still goes through,
    as the tool reads it. A big integer written without an exponent (``10**20``) is
    refused for this protected tool too (h32seam, #29): a JSON tool reading doubles
    holds another integer than the one the gate checks."""
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            await s.read_resource("memo://city")
            for bad in (1e300, 1e16, -1e300):
                r = await s.call_tool("book", {"city": "Oslo", "price": bad})
                said = text(r)
                assert r.is_error and "price" in said and "integer" in said, said
            for good, seen in ((5.0, 5),):
                r = await s.call_tool("book", {"city": "Oslo", "price": good})
                assert not r.is_error and f"at {seen}" in text(r), text(r)
            for big in (10**20, 2**53 + 1, -(2**53) - 1):
                r = await s.call_tool("book", {"city": "Oslo", "price": big})
                said = text(r)
                assert r.is_error and "price" in said and "safe range" in said, said
            r = await s.call_tool("book", {"city": "Oslo", "price": 2**53 - 1})
            assert not r.is_error, text(r)
    anyio.run(main)
    prices = [x["args"]["price"] for x in upstream_log(log) if x.get("tool") == "book"]
    assert prices == [5, 2**53 - 1], prices


@given(st.one_of(st.floats(), st.integers(), st.booleans()))
def test_is_integer_means_one_exact_integer(value: object) -> None:
    """A value counted as an integer names exactly one integer a JS or Python tool
    holds: a float only when finite, whole and within the safe range."""
    ok = is_integer(value)
    if isinstance(value, bool):
        assert not ok
    elif isinstance(value, int):
        assert ok
    else:
        assert isinstance(value, float)
        assert ok == (math.isfinite(value) and value == int(value)
                      and abs(int(value)) <= 2**53 - 1)
        if ok:
            assert float(int(value)) == value and float(int(value) + 1) != value


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_a_port_in_use_is_said_as_such_not_blamed_on_the_manifest(tmp_path: Path) -> None:
    """QA qa-crew S4: ``error: gateway manifest ...: [Errno 98] cannot listen`` blamed the
    manifest; the line now names the address and says it is in use (exit 1)."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 10)})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                              f"127.0.0.1:{port}"], capture_output=True, text=True,
                             env=env(), timeout=60, check=False)
    assert res.returncode == 1, res.stderr
    said = res.stderr.strip()
    assert said.startswith(f"error: cannot listen on 127.0.0.1:{port}: the address is "
                           "already in use"), said
    assert "manifest" not in said and "Errno" not in said and "\n" not in said, said


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_url_is_bracketed_and_serves(tmp_path: Path) -> None:
    """``--http [::1]:0`` printed ``http://::1:PORT/mcp`` (no URL); now
    ``http://[::1]:PORT/mcp``, which the SDK's client connects to."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 10)})
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                          "[::1]:0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    try:
        assert p.stderr is not None
        line = ""
        for line in p.stderr:
            if "serving http" in line:
                break
        m = re.search(r"serving (http://\[::1\]:(\d+)/mcp)$", line.strip())
        assert m is not None, line

        async def main() -> list[str]:
            async with http_client(m.group(1)) as c:
                return [t.name for t in (await c.list_tools()).tools]
        assert "book" in anyio.run(main)
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stderr is not None:
            p.stderr.close()


def test_a_call_cut_off_by_a_double_ctrl_c_has_an_unknown_outcome(tmp_path: Path) -> None:
    """QA qa-crew S4: after a double Ctrl-C the forwarded call with no recorded result
    was audited plain ``valid``; now its lineage stays valid (the plan was current) and
    the audit counts and says its outcome unknown. The call before it, whose result was
    recorded, stays valid."""
    err = tmp_path / "stderr.txt"
    log = tmp_path / "up.log"
    with open(err, "w", encoding="utf-8") as fh:
        gw = _Raw(_manifest(tmp_path), stderr=fh)
        try:
            gw.start()
            done = gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 0}})
            assert done["result"]["content"][0]["text"] == "slept", done
            gw.send("resources/read", {"uri": "memo://price"})
            gw.send("tools/call", {"name": "slow", "arguments": {"seconds": 30}},
                    answer=False)
            _wait_for(log, '"seconds": 30')  # the upstream runs it
            gw.p.send_signal(signal.SIGINT)
            _wait_for(err, "waiting for 1 call(s)")
            gw.p.send_signal(signal.SIGINT)
            assert gw.p.wait(timeout=10) == 130
        finally:
            gw.stop()
    path = tmp_path / "trace.jsonl"
    out = tmp_path / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(out)], capture_output=True, text=True, env=env(), timeout=120,
                         check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "1 valid, 1 outcome unknown" in cli.stdout, cli.stdout
    run = json.loads(out.read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"]["valid"] == 1 and run["actions"]["outcome unknown"] == 1, run
    last = run["lineage"][-1]
    assert last["status"] == "valid" and last["outcome"] == "unknown", last
    assert "outcome is unknown" in last["reason"] and "no result" in last["reason"], last
    assert "outcome" not in run["lineage"][0], run["lineage"][0]
