"""``icore audit`` links a call reissued after an unknown outcome (QA qa-new14 S2).

``data/qa_new14_repeat.jsonl`` is the QA's recorded LangGraph run (before the workspace
refused the repeat): ``dispatch-1`` made its effect and raised ``TimeoutError``; the
model's next message called ``dispatch`` again with the same arguments and it was
authorized from the same version of ``stock/bolt`` (``dispatch-2``): the goods went out
twice. The audit counts both outcome unknown and now says the second is a reissue of the
first, in the console, ``--json`` and the report.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.adapters import REISSUED, load_jsonl, trace_lineages
from icore.adapters._reissued import reissued
from icore.cli import app

pytestmark = pytest.mark.timeout(120)

TRACE = Path(__file__).parent / "data" / "qa_new14_repeat.jsonl"


def test_the_repeat_is_linked_in_console_json_and_report(tmp_path: Path) -> None:
    path = tmp_path / "r1.jsonl"
    shutil.copy(TRACE, path)
    js, out = tmp_path / "r1.json", tmp_path / "rep"
    res = CliRunner().invoke(app, ["audit", str(path), "--out", str(out), "--json", str(js),
                                   "--fail-on", "unknown"], env={"COLUMNS": "300"})
    assert res.exit_code == 3, res.output
    assert "2 outcome unknown" in res.output and f"1 {REISSUED}" in res.output
    run = json.loads(js.read_text(encoding="utf-8"))["runs"][0]
    got = {a["action"]: a for a in run["lineage"]}
    assert got["dispatch-2"]["reissue_of"] == "dispatch-1"
    assert f"{REISSUED}: the same call as dispatch-1" in got["dispatch-2"]["reason"]
    assert [a["action"] for a in run["lineage"] if "reissue_of" in a] == ["dispatch-2"]
    html = (out / "dock-run.html").read_text(encoding="utf-8")
    assert REISSUED in html


def test_other_arguments_or_versions_are_no_reissue() -> None:
    """Only the same tool, arguments and versions link: another quantity does not, and
    neither does a call authorized from another version."""
    t = load_jsonl(TRACE)
    lins = trace_lineages(t.extras["planfence"], t.steps)
    first, second = (a for a in lins if a.action in ("dispatch-1", "dispatch-2"))
    assert second.reissue_of == "dispatch-1"  # as the audit built it
    second = dataclasses.replace(second, reissue_of=None)
    assert reissued([first, second])[1].reissue_of == "dispatch-1"
    other = dataclasses.replace(second, args=second.args.replace("5", "6"))  # type: ignore[union-attr]
    assert reissued([first, other])[1].reissue_of is None
    last = second.points[-1]
    moved = dataclasses.replace(last, frontier={k: "0" * 64 for k in last.frontier})
    elsewhere = dataclasses.replace(second, points=(*second.points[:-1], moved))
    assert reissued([first, elsewhere])[1].reissue_of is None
    known = dataclasses.replace(first, outcome_unknown=False)  # a known outcome: no repeat
    assert reissued([known, second])[1].reissue_of is None
