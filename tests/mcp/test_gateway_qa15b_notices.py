"""The log of a start that is refused says no move (QA qa-new15b S4).

"moved the earlier trace ... to trace-1.jsonl" was logged by every run whose manifest
was then refused (exit 2), although the refusal puts the file back: each bad manifest
repeated a move that did not stand. Real processes: ``icore mcp`` and the test upstream.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import env, stdio_upstream, write_manifest

pytestmark = pytest.mark.timeout(120)


def _gateway_once(manifest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env(), timeout=120, check=False)


def test_a_refused_manifest_says_no_move_and_keeps_the_trace(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")})
    assert _gateway_once(manifest).returncode == 0  # an earlier run's trace
    earlier = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    bad = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                         tools={"no_such_tool": {"depends_on": ["memo://price"]}})
    got = _gateway_once(bad)
    assert got.returncode == 2, got.stderr
    assert "moved the earlier trace" not in got.stderr, got.stderr
    assert (tmp_path / "trace.jsonl").read_text(encoding="utf-8") == earlier
    assert not (tmp_path / "trace-1.jsonl").exists()
