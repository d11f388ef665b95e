"""Sweep round 8 (#29): an upstream's ``connect_timeout_s`` given no value is refused.

``connect_timeout_s:`` with no value (YAML null) was taken for "use the default" while
every other number of the manifest refuses null; now it is a manifest error naming the
field and its line (exit 2). The real ``icore mcp`` command in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import env


@pytest.mark.parametrize("value", ["", " null", " ~"])
def test_connect_timeout_given_no_value_is_a_manifest_error(tmp_path: Path,
                                                             value: str) -> None:
    p = tmp_path / "gw.yaml"
    p.write_text("name: g\nupstreams:\n  notes:\n    command: python\n    args: [x.py]\n"
                 f"    connect_timeout_s:{value}\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "icore", "mcp", str(p)], env=env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 2, r.stderr
    assert "line 6" in r.stderr and "upstreams.notes.connect_timeout_s" in r.stderr
    assert "not null" in r.stderr and "gw.yaml" in r.stderr
