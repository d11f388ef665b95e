"""``icore mcp --http HOST:0`` announces the port the system bound (QA r8-bad D14: it
announced ``:0``, so no client could find the gateway)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import UPSTREAM, process, write_manifest


@pytest.mark.timeout(60)
def test_port_zero_announces_the_bound_port(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": {
        "command": sys.executable, "args": [str(UPSTREAM)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 10}})
    args = [sys.executable, "-m", "icore", "mcp", str(manifest), "--http", "127.0.0.1:0"]
    with process(args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE) as gw:
        assert gw.stderr is not None
        line = ""
        for raw in gw.stderr:
            line = raw.decode("utf-8", "replace")
            if "serving http" in line:
                break
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/mcp", line)
        assert m is not None, line
        port = int(m.group(1))
        assert port != 0
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_serving_beyond_loopback_without_tokens_warns(tmp_path: Path, host: str) -> None:
    """QA qa-mcp7 S4 (#25): ``--http 0.0.0.0:0`` with no ``http.clients`` served tools
    that may be destructive to anyone, saying nothing; now a warning on stderr names them
    (none on loopback)."""
    manifest = write_manifest(tmp_path, {"trip": {
        "command": sys.executable, "args": [str(UPSTREAM)],
        "env": {"UPSTREAM_LOG": str(tmp_path / "up.log")}, "timeout_s": 10}})
    args = [sys.executable, "-m", "icore", "mcp", str(manifest), "--http", f"{host}:0"]
    with process(args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE) as gw:
        assert gw.stderr is not None
        lines = []
        for raw in gw.stderr:
            lines.append(raw.decode("utf-8", "replace"))
            if "serving http" in lines[-1]:
                break
        port = int(re.findall(r":(\d+)/mcp", lines[-1])[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # served by now: a warning was printed right after the ready line
        gw.terminate()
        rest = gw.stderr.read().decode("utf-8", "replace")
    warned = [x for x in rest.splitlines() if "warning: serving on" in x]
    if host == "127.0.0.1":
        assert warned == [], warned
    else:
        assert len(warned) == 1 and "without http.clients" in warned[0], rest
        assert "book" in warned[0] and "bind 127.0.0.1" in warned[0], warned
