"""Client messages over ``max_message_mb`` are refused unread (big results are cut in
the trace, as before); a huge manifest is refused unparsed (#29, QA qa-new8 S3).

Real ``icore mcp`` subprocesses over stdio pipes in front of tests/mcp/upstream_server.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore.mcp import GatewayManifestError, load_manifest

from .conftest import stdio_upstream, write_manifest
from .test_gateway_stop import _Raw


def _big_call(gw: _Raw, rid: int, text_bytes: int) -> dict:
    assert gw.p.stdin is not None and gw.p.stdout is not None
    gw.p.stdin.write(f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":'
                     f'{{"name":"echo","arguments":{{"text":"{"x" * text_bytes}"}}}}}}\n')
    gw.p.stdin.flush()
    return json.loads(gw.p.stdout.readline())


def test_over_the_cap_is_answered_and_dropped_unread(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              max_message_mb=2)
    gw = _Raw(manifest)
    try:
        gw.start()
        got = _big_call(gw, 77, 3 << 20)  # over 2 MiB: answered with its own id
        assert got["id"] == 77 and got["error"]["code"] == -32600, got
        assert "max_message_mb (2 MiB" in got["error"]["message"]
        # under the cap: forwarded, echoed back (the answer holds the text twice, as
        # content and structuredContent: under the cap too, which holds for it as well)
        ok = _big_call(gw, 78, (3 << 20) // 4)
        assert ok["id"] == 78 and not ok["result"]["isError"], str(ok)[:300]
        assert len(ok["result"]["content"][0]["text"]) == (3 << 20) // 4
        gw.n = 100
        assert gw.send("tools/call", {"name": "echo", "arguments": {"text": "hi"}}
                       )["result"]["content"][0]["text"] == "hi"  # the session goes on
    finally:
        gw.p.stdin.close()  # type: ignore[union-attr]
        gw.p.wait(timeout=30)
        gw.stop()
    trace = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert len(trace) < 2 << 20  # neither the 3 MiB line nor the 0.75 MiB echo in full
    outs = [json.loads(x) for x in trace.splitlines() if '"tool_output"' in x]
    cut = [o for o in outs if o.get("tool") == "echo" and o["content"].endswith("[cut]")]
    assert len(cut) == 1, [o["content"][-80:] for o in outs]


def test_max_message_mb_is_checked(tmp_path: Path) -> None:
    m = tmp_path / "gw.yaml"
    for bad in ("0", "-1", ".nan", "'4'", "2000"):
        m.write_text(f"upstreams: {{h: {{command: python}}}}\nmax_message_mb: {bad}\n",
                     encoding="utf-8")
        with pytest.raises(GatewayManifestError, match="max_message_mb") as err:
            load_manifest(m)
        assert err.value.fields["line"] == 2


def test_a_huge_manifest_is_refused_before_parsing(tmp_path: Path) -> None:
    m = tmp_path / "gw.yaml"
    m.write_text("upstreams: {h: {command: python}}\n#" + "x" * (17 << 20) + "\n",
                 encoding="utf-8")
    with pytest.raises(GatewayManifestError, match="over 16 MiB"):
        load_manifest(m)


def test_nan_and_infinity_are_refused_as_json(tmp_path: Path) -> None:
    """A bare NaN/Infinity is no JSON (docs/mcp.md): a -32700 with the request's id, and
    the trace stays standard JSON (it held ``"price": NaN``; QA qa-new8 S4)."""
    from icore.mcp._http_shape import shape_problem

    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})
    gw = _Raw(manifest)
    try:
        gw.start()
        assert gw.p.stdin is not None and gw.p.stdout is not None
        for rid, value in ((41, "NaN"), (42, "-Infinity"), (43, "Infinity")):
            gw.p.stdin.write(f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call",'
                             f'"params":{{"name":"book","arguments":{{"city":"NaN",'
                             f'"price":{value}}}}}}}\n')
            gw.p.stdin.flush()
            got = json.loads(gw.p.stdout.readline())
            assert got["id"] == rid and got["error"]["code"] == -32700, got
            assert "not JSON" in got["error"]["message"]
        gw.n = 100  # a string "NaN" is fine: the call goes on to the gate
        ok = gw.send("tools/call", {"name": "echo", "arguments": {"text": "NaN Infinity"}})
        assert ok["result"]["content"][0]["text"] == "NaN Infinity"
    finally:
        gw.p.stdin.close()  # type: ignore[union-attr]
        gw.p.wait(timeout=30)
        gw.stop()
    for line in (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the trace"))
    assert shape_problem(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}'
                         )[0] == -32700  # type: ignore[index]
