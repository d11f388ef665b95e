"""What the gateway and RunRecorder say by default (#29, QA qa-new8 S4).

An earlier trace moved aside is a WARNING (visible with no logging set up); writing a run
over a running gateway's trace names the gateway; ``--http HOST:99999`` names the range.
Real ``icore mcp`` and Python subprocesses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from icore.errors import IntegrationError
from icore.integrations import RunRecorder

from .conftest import env, stdio_upstream, write_manifest
from .test_gateway_stop import _Raw


def _gateway_once(manifest: Path) -> str:
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=env(), timeout=120, check=False)
    assert got.returncode == 0, got.stderr
    return got.stderr


def test_gateway_says_it_moved_the_earlier_trace(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})
    assert "moved the earlier trace" not in _gateway_once(manifest)
    err = _gateway_once(manifest)
    assert "WARNING" in err and f"moved the earlier trace at {tmp_path / 'trace.jsonl'} " \
        f"to {tmp_path / 'trace-1.jsonl'}" in err, err


def test_run_recorder_says_it_moved_the_earlier_run(tmp_path: Path) -> None:
    code = ("from icore.integrations import RunRecorder\n"
            "for _ in range(2):\n"
            "    r = RunRecorder('a'); r.add('user', 'task', 'x'); r.write('a.jsonl')\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env(), timeout=120, check=False, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "moved the earlier run at a.jsonl to a-1.jsonl" in got.stderr, got.stderr
    assert (tmp_path / "a-1.jsonl").is_file()


def test_writing_a_run_over_a_running_gateways_trace_names_the_gateway(
        tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})
    gw = _Raw(manifest)
    try:
        gw.start()  # the gateway runs, holding its trace
        rec = RunRecorder("app")
        rec.add("user", "task", "x")
        for overwrite in (False, True):
            with pytest.raises(IntegrationError, match="running icore MCP gateway"):
                rec.write(tmp_path / "trace.jsonl", overwrite=overwrite)
    finally:
        gw.stop()
    assert "session" in (tmp_path / "trace.jsonl").read_text(encoding="utf-8")


def test_http_port_out_of_range_names_the_range(tmp_path: Path) -> None:
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(tmp_path / "x.yaml"),
                          "--http", "127.0.0.1:99999"], capture_output=True, text=True,
                         env={**env(), "COLUMNS": "200"}, timeout=120, check=False)
    assert got.returncode == 2 and "1-65535" in got.stderr, got.stderr
