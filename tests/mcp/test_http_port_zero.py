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
