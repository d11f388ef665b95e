"""``icore audit`` audits one file once, however it is named (#29, QA qa-new8 S4).

``icore audit DIR DIR/t.jsonl`` audited ``t.jsonl`` twice (``run-2``), doubling every
count, INVALID included. A real subprocess and real files (a symlink, ``x/../``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

_RUN = ('{"run": {"id": "desk", "question": "q"}}\n'
        '{"agent": "user", "kind": "task", "content": "book"}\n'
        '{"agent": "terminal", "kind": "tool_output", "exitcode": 0, "content": "42"}\n')


def test_one_file_named_many_ways_is_audited_once(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    d.mkdir()
    t = d / "t.jsonl"
    t.write_text(_RUN, encoding="utf-8")
    (d / "link.jsonl").symlink_to(t)
    src = str(Path(__file__).resolve().parents[1] / "src")
    got = subprocess.run(
        [sys.executable, "-m", "icore", "audit", str(d), str(t), str(d / ".." / "traces" /
         "t.jsonl"), str(t), "--no-report", "--json", str(tmp_path / "a.json")],
        capture_output=True, text=True, timeout=100, check=False,
        env={**os.environ, "PYTHONPATH": src})
    assert got.returncode == 0, got.stderr
    runs = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["runs"]
    assert [r["id"] for r in runs] == ["desk"], [r["id"] for r in runs]
    said = [x for x in got.stderr.splitlines() if x.endswith(": audited once")]
    assert len(said) == 4 and all(f"is the same file as {d / 'link.jsonl'}" in x
                                  for x in said), got.stderr
    again = subprocess.run([sys.executable, "-m", "icore", "audit", str(t), str(t),
                            "--no-report"], capture_output=True, text=True, timeout=100,
                           check=False, env={**os.environ, "PYTHONPATH": src})
    assert again.returncode == 0 and f"{t} is named twice: audited once" in again.stderr
    assert "desk-2" not in again.stdout
