"""A folder that holds runs and their ``icore audit --json`` reports (QA qa-new12b S4):
the reports are skipped, in one line, and never read as Who&When traces."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import CLI_ENV as _ENV
from typer.testing import CliRunner

from icore.cli import app


def _run(folder: Path, name: str) -> Path:
    lines = [{"run": {"id": name, "question": "q"}},
             {"agent": "user", "kind": "task", "content": "q"},
             {"agent": "a", "kind": "output", "content": "done"}]
    p = folder / f"{name}.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def test_reports_beside_their_runs_are_skipped_in_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "out"
    runs.mkdir()
    for name in ("r1", "r2"):
        trace = _run(runs, name)
        res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--json",
                                       str(runs / f"{name}.jsonl.audit.json")], env=_ENV)
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--json",
                                   str(tmp_path / "all.json")], env=_ENV)
    assert res.exit_code == 0, res.output
    assert "skipped 2 icore audit report(s) (--json)" in res.output
    assert "error" not in res.output
    got = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert sorted(r["id"] for r in got["runs"]) == ["r1", "r2"] and not got["errors"]
    assert len(got["skipped"]) == 2


def test_a_json_trace_that_is_not_a_report_is_still_read(tmp_path: Path) -> None:
    """Only a file that starts as a report does (``"icore"`` then ``"runs"``)."""
    runs = tmp_path / "out"
    runs.mkdir()
    (runs / "odd.json").write_text(json.dumps({"runs": [], "icore": "x"}), encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report"], env=_ENV)
    assert "skipped" not in res.output
    assert "odd.json" in res.output  # read, and its problem named


def test_a_report_given_by_name_is_named_as_a_report(tmp_path: Path) -> None:
    """QA qa-new14 S4: ``icore audit report.json`` read it as a Who&When trace
    ("history: missing field"); it is now skipped as in a folder, named as icore's own
    report, and a trace given with it is still audited."""
    trace = _run(tmp_path, "r1")
    report = tmp_path / "r1.audit.json"
    res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--json",
                                   str(report)], env=_ENV)
    assert res.exit_code == 0, res.output
    alone = CliRunner().invoke(app, ["audit", str(report), "--no-report"], env=_ENV)
    assert alone.exit_code == 2 and "skipped 1 icore audit report(s)" in alone.output
    assert "history" not in alone.output and "Who&When" not in alone.output
    both = CliRunner().invoke(app, ["audit", str(report), str(trace), "--no-report"],
                              env=_ENV)
    assert both.exit_code == 0, both.output
    assert "skipped 1 icore audit report(s)" in both.output and "r1" in both.output
