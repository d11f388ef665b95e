"""Gateway settings of issue #29: the wait for a client's answer, an untraced stdio run.

Real parts: the SDK's client launching ``icore mcp`` over stdio, a real upstream
(tests/mcp/upstream_asks.py) that asks the client mid-call, and the gateway's process
read byte for byte (stdout: the protocol; stderr: its warnings).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.mcp import GatewayManifestError, load_manifest

from .conftest import env, text, upstream_log
from .test_gateway_asks import _answer, _manifest, _stdio, _stdio_upstream

UNTRACED = "no trace: line, so this run is not recorded"


@pytest.mark.timeout(120)
def test_ask_timeout_s_bounds_the_wait_for_an_answer(tmp_path: Path) -> None:
    """``ask_timeout_s: 1``: a client that answers after 4 s is past it; the upstream
    gets "the client did not answer within 1 s" and its call ends (with the default
    300 s the same answer would arrive and be the call's result: test_gateway_asks)."""
    log = tmp_path / "up.log"
    manifest = _manifest(tmp_path, _stdio_upstream(log, timeout_s=10))
    doc = yaml.safe_load(manifest.read_text())
    manifest.write_text(yaml.safe_dump({**doc, "ask_timeout_s": 1}))
    assert load_manifest(manifest).ask_timeout_s == 1

    async def main() -> Any:
        async with _stdio(manifest, elicitation_callback=_answer("accept", True,
                                                                  wait_s=4)) as s:
            await s.call_tool("icore_get_fact", {"key": "fact://plan/budget"})
            return await s.call_tool("approve", {"amount": 5})

    got = anyio.run(main)
    done = [x for x in upstream_log(log) if x["tool"] == "approve_done"]
    assert len(done) == 1 and "did not answer within 1 s" in done[0]["error"], (
        done, text(got))
    noted = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()
             if '"ask"' in x]
    assert any("did not answer within 1 s" in (n["ask"].get("error") or "")
               for n in noted), noted


@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "5", True, 86401])
def test_ask_timeout_s_is_checked(tmp_path: Path, value: Any) -> None:
    """Not a finite number in (0, 86400] (a string or a bool included): a manifest error
    naming the file, the line and the field."""
    path = tmp_path / "gw.yaml"
    path.write_text("upstreams: {u: {command: python}}\n"
                    f"ask_timeout_s: {yaml.safe_dump(value).splitlines()[0]}\n")
    with pytest.raises(GatewayManifestError) as info:
        load_manifest(path)
    said = str(info.value)
    assert "ask_timeout_s" in said and "gw.yaml" in said and "line 2" in said, said
    assert "path='ask_timeout_s'" in said, said


def test_ask_timeout_s_default() -> None:
    from icore.mcp._gateway_manifest import manifest_from_dict
    assert manifest_from_dict({"upstreams": {"u": {"command": "python"}}}
                              ).ask_timeout_s == 300


def _stdio_run(manifest: Path) -> tuple[str, str]:
    """``icore mcp MANIFEST`` over stdio: initialize, then stdin closed; (stdout, stderr)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    p = subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                       input=json.dumps(init) + "\n", capture_output=True, text=True,
                       env=env(), timeout=90)
    assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr


@pytest.mark.timeout(120)
def test_stdio_without_a_trace_warns_on_stderr(tmp_path: Path) -> None:
    """No ``trace:`` line: the stdio gateway says on stderr that the run is not recorded
    (as ``--http`` does after its ready line); stdout holds only the protocol. With a
    trace it says nothing of the kind."""
    manifest = _manifest(tmp_path, _stdio_upstream(tmp_path / "up.log"))
    doc = yaml.safe_load(manifest.read_text())
    out, err = _stdio_run(manifest)
    assert UNTRACED not in err and UNTRACED not in out, err
    del doc["trace"]
    manifest.write_text(yaml.safe_dump(doc))
    out, err = _stdio_run(manifest)
    assert UNTRACED in err, err
    assert UNTRACED not in out
    lines = out.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == 1, out
