"""Issue 29, fourth sweep round: gateway manifests that validate but cannot start.

An upstream that prints lines that are no JSON-RPC message, and a trace path that is a
symbolic link loop, each end in one line naming what failed, never a Python traceback.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from icore.cli._mcp import _RedactingFormatter

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
UPSTREAM = ROOT / "examples" / "mcp" / "notes_server.py"


def _run(tmp: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    shutil.copy(UPSTREAM, tmp)
    p = tmp / "gw.yaml"
    p.write_text(yaml.safe_dump(doc))
    return subprocess.run([sys.executable, "-m", "icore", "mcp", str(p)], cwd=tmp, env=ENV,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=100)


@pytest.mark.timeout(120)
def test_an_upstream_printing_no_jsonrpc_logs_one_line_not_a_traceback(tmp_path: Path
                                                                       ) -> None:
    sh = shutil.which("sh") or "/bin/sh"
    r = _run(tmp_path, {"upstreams": {"notes": {
        "command": sh, "args": ["-c", "echo 'not json'; echo '{\"jsonrpc\": 5}'; exit 1"],
        "timeout_s": 3}}})
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "Failed to parse JSONRPC message" in r.stderr  # as the SDK's line
    assert "ValidationError" in r.stderr and "upstream notes" in r.stderr


@pytest.mark.parametrize("level", [logging.WARNING, logging.DEBUG])
def test_the_gateway_formatter_shows_a_traceback_only_at_debug(level: int) -> None:
    fmt = _RedactingFormatter("%(levelname)s %(name)s: %(message)s",
                              tracebacks=level <= logging.DEBUG)
    try:
        raise ValueError("first line\nsecond line\nthird line")
    except ValueError:
        rec = logging.LogRecord("mcp.client.stdio", logging.ERROR, __file__, 1,
                                "Failed to parse", None, sys.exc_info())
    text = fmt.format(rec)
    assert ("Traceback" in text) is (level == logging.DEBUG)
    if level != logging.DEBUG:
        assert text.endswith("(ValueError: first line; second line)")


@pytest.mark.timeout(120)
def test_a_trace_path_that_is_a_link_loop_is_refused_naming_trace(tmp_path: Path) -> None:
    (tmp_path / "t").symlink_to(tmp_path / "t2")
    (tmp_path / "t2").symlink_to(tmp_path / "t")
    r = _run(tmp_path, {"upstreams": {"notes": {"command": sys.executable,
                                                "args": ["notes_server.py"]}},
                        "trace": "t"})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "trace" in r.stderr and "never moved or overwritten" in r.stderr
    assert (tmp_path / "t").is_symlink() and (tmp_path / "t2").is_symlink()
