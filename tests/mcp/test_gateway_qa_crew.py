"""QA qa-crew findings on the MCP gateway (S2 trace replaced at stop, S3 ``1e+300`` as
an integer, S4 busy port and IPv6 URLs, S4 unknown outcome after a double Ctrl-C).

Real processes: ``icore mcp`` spoken to line by line over stdio, or over ``--http`` with
the SDK's client, in front of tests/mcp/upstream_server.py.
"""

from __future__ import annotations

import signal
from pathlib import Path

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
