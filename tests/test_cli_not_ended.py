"""``icore audit`` says on the console that a run did not end (QA qa-new16 S3).

A run killed mid-way (its trace has no end line) was visible only under ``--fail-on
not-ended`` or in ``--json``; the console showed its metrics and nothing else. A run that
ended, and one paused at a human's question, are not named.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import invoke


def _trace(path: Path, *steps: dict) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in ({"run": {"id": path.stem}}, *steps))
                    + "\n", encoding="utf-8")
    return path


def test_a_run_without_an_end_line_is_named(tmp_path: Path) -> None:
    task = {"agent": "user", "kind": "task", "content": "go"}
    killed = _trace(tmp_path / "killed.jsonl", task,
                    {"agent": "a", "kind": "output", "content": "working"})
    ended = _trace(tmp_path / "ended.jsonl", task,
                   {"agent": "a", "kind": "termination", "content": "done",
                    "final_answer": "42"})
    code, out = invoke("audit", str(killed), str(ended), "--no-report")
    assert code == 0, out
    said = [x for x in out.splitlines() if x.startswith("did not end")]
    assert len(said) == 1 and said[0].endswith(": killed."), out
    assert "--fail-on not-ended" in said[0]
    code, out = invoke("audit", str(ended), "--no-report")
    assert code == 0 and "did not end" not in out
    code, _ = invoke("audit", str(killed), "--no-report", "--fail-on", "not-ended")
    assert code == 3
