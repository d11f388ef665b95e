"""``icore audit``: summary table, reports, attribution, PROV, typed errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app


def _write(tmp_path: Path, magentic: dict[str, Any], captain: dict[str, Any]) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "1.json").write_text(json.dumps(magentic), encoding="utf-8")
    (runs / "2.json").write_text(json.dumps(captain), encoding="utf-8")
    return runs


def test_audit_folder(tmp_path: Path, magentic: dict[str, Any],
                      captain: dict[str, Any]) -> None:
    """A folder is audited; reports, index and PROV files are written."""
    runs = _write(tmp_path, magentic, captain)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", str(runs), "--out", str(out), "--attribution",
                                   "--prov"])
    assert res.exit_code == 0, res.output
    for word in ("snd", "astab", "cq", "hard flags", "stalls", "unsupported", "diagnoses",
                 "top candidates", "uniform random", "imported and audited 2 run(s)"):
        assert word in res.output, word
    assert (out / "index.html").exists()
    assert (out / "runs-1.html").exists() and (out / "runs-2.html").exists()
    assert (out / "runs-1.prov.json").exists()
    assert "runs-1.prov.json" in (out / "runs-1.html").read_text(encoding="utf-8")


def test_colliding_ids_get_distinct_reports(tmp_path: Path, magentic: dict[str, Any]) -> None:
    """Runs with the same ``<folder>/<stem>`` id do not overwrite each other's report."""
    for top in ("x", "y"):
        d = tmp_path / top / "runs"
        d.mkdir(parents=True)
        (d / "1.json").write_text(json.dumps(magentic), encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", str(tmp_path / "x"), str(tmp_path / "y"),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "runs-1.html").exists() and (out / "runs-1-2.html").exists()


def test_bad_file_is_reported(tmp_path: Path, magentic: dict[str, Any],
                              captain: dict[str, Any]) -> None:
    """A malformed file is named with its field; the others are still audited; exit 1."""
    runs = _write(tmp_path, magentic, captain)
    (runs / "3.json").write_text('{"history": [', encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report"])
    assert res.exit_code == 1
    assert "3.json" in res.output and "truncated" in res.output
    assert "imported and audited 2 run(s)" in res.output


def test_no_files(tmp_path: Path) -> None:
    """An empty folder is a usage error."""
    res = CliRunner().invoke(app, ["audit", str(tmp_path)])
    assert res.exit_code == 2


def test_help() -> None:
    """The command documents its options."""
    res = CliRunner().invoke(app, ["audit", "--help"])
    assert res.exit_code == 0
    for opt in ("--out", "--attribution", "--prov"):
        assert opt in res.output


def test_unusable_out_folder_is_a_clean_error(tmp_path: Path, magentic: dict[str, Any],
                                              captain: dict[str, Any]) -> None:
    """`--out` naming a file: a usage error naming it (exit 2, before any import), not a
    traceback."""
    runs = _write(tmp_path, magentic, captain)
    (tmp_path / "afile").write_text("", encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--out", str(tmp_path / "afile")])
    assert res.exit_code == 2
    assert isinstance(res.exception, SystemExit)
    assert "error:" in res.output and "afile" in res.output


@pytest.mark.timeout(30)
def test_fifo_is_refused_without_reading_it(tmp_path: Path, magentic: dict[str, Any],
                                            captain: dict[str, Any]) -> None:
    """A named pipe given as PATH would block the import forever: ``error:`` naming it,
    exit 2, and nothing audited or written (even next to good files)."""
    runs = _write(tmp_path, magentic, captain)
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", str(runs), str(fifo), "--out", str(out)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and str(fifo) in res.output and "FIFO" in res.output
    assert "imported and audited" not in res.output
    assert not out.exists()


@pytest.mark.timeout(30)
def test_character_device_is_refused(tmp_path: Path) -> None:
    """A device (here /dev/null) is not a trace file: refused by kind, exit 2."""
    if not Path("/dev/null").is_char_device():
        pytest.skip("no /dev/null character device")
    res = CliRunner().invoke(app, ["audit", "/dev/null", "--out", str(tmp_path / "out")],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and "/dev/null" in res.output
    assert "character device" in res.output


@pytest.mark.timeout(30)
def test_fifo_inside_a_folder_is_skipped(tmp_path: Path, magentic: dict[str, Any],
                                         captain: dict[str, Any]) -> None:
    """Folders are walked for regular files only: a FIFO named ``*.json`` inside is not
    opened, the real runs are audited."""
    runs = _write(tmp_path, magentic, captain)
    os.mkfifo(runs / "3.json")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report"])
    assert res.exit_code == 0, res.output
    assert "imported and audited 2 run(s)" in res.output


def test_version_and_short_help() -> None:
    """``icore --version`` prints the version; ``-h`` works like ``--help`` everywhere."""
    from icore import __version__

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"icore {__version__}"
    for args in (["-h"], ["audit", "-h"], ["run", "-h"], ["bench", "-h"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, (args, res.output)
        assert "Usage" in res.output


def test_nonexistent_path_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """``icore audit /nonexistent`` reads no run: exit 1, no ./icore-audit, no JSON."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["audit", str(tmp_path / "nonexistent"), "--json",
                                   "out.json"], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "nothing written" in res.output and "nonexistent" in res.output
    assert list(tmp_path.iterdir()) == []


def test_json_summary_and_fail_on(tmp_path: Path, magentic: dict[str, Any],
                                  captain: dict[str, Any]) -> None:
    """``--json FILE`` holds per-run summary, flags with step and agent, diagnoses and
    attribution; ``--fail-on`` exits 3 only when its condition holds."""
    runs = _write(tmp_path, magentic, captain)
    out, js = tmp_path / "out", tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit", str(runs), "-o", str(out), "--json", str(js),
                                   "--attribution"])
    assert res.exit_code == 0, res.output
    doc = json.loads(js.read_text(encoding="utf-8"))
    assert [r["id"] for r in doc["runs"]] == ["runs/1", "runs/2"] and doc["errors"] == []
    one = doc["runs"][0]
    assert {"snd", "astab", "cq", "hard_flags", "diagnoses"} <= one["summary"].keys()
    assert len(one["flags"]) == one["summary"]["hard_flags"] > 0
    assert all(f["step"] is not None and f["agent"] for f in one["flags"])
    assert len(one["diagnoses"]) == one["summary"]["diagnoses"]
    assert one["attribution"] is not None and one["attribution"]["agent"]
    assert one["report"].endswith("runs-1.html") and Path(one["report"]).is_file()
    # the score is cross-validated per subset: one run per subset gives no fold to hold out
    assert doc["attribution_score"] is None
    hard = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--fail-on",
                                    "hard-flags"])
    assert hard.exit_code == 3 and "--fail-on hard-flags: 2 run(s)" in hard.output
    both = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--fail-on",
                                    "unsound,invalid"])
    unsound = [r["id"] for r in doc["runs"] if r["summary"]["snd"] < 1.0]
    assert both.exit_code == (3 if unsound else 0), both.output
    assert "invalid:" not in both.output  # no PlanFence records in these traces
    bad = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--fail-on", "typo"])
    assert bad.exit_code == 2 and "typo" in bad.output


def test_fail_on_invalid_reads_planfence_records(tmp_path: Path) -> None:
    """A JSONL trace whose PlanFence records show an action from a stale plan fails
    ``--fail-on invalid``; its report shows the lineage and the reason at the top."""
    r0, r1, plan = "a" * 64, "b" * 64, "c" * 64
    lines = [
        {"agent": "user", "kind": "task", "content": "book"},
        {"planfence": {"record": {"id": r0, "key": "req/t", "owner": "user", "seq": 1,
                                  "parents": []}}},
        {"planfence": {"record": {"id": plan, "key": "plan/t", "owner": "planner", "seq": 1,
                                  "parents": [r0]}}},
        {"planfence": {"record": {"id": r1, "key": "req/t", "owner": "user", "seq": 2,
                                  "parents": [r0]}}},
        {"planfence": {"decision": {"action": "book", "outcome": "authorized",
                                    "reason": "not_validated", "roots": [plan],
                                    "deps": ["req/t"], "heads": {"req/t": r1},
                                    "point": 1, "policy": "owner_head_freshness"}}},
        {"agent": "executor", "kind": "output", "content": "booked"},
    ]
    f = tmp_path / "pf.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    out, js = tmp_path / "out", tmp_path / "a.json"
    res = CliRunner().invoke(app, ["audit", str(f), "-o", str(out), "--json", str(js),
                                   "--fail-on", "invalid"])
    assert res.exit_code == 3, res.output
    lin = json.loads(js.read_text(encoding="utf-8"))["runs"][0]["lineage"]
    assert [x["status"] for x in lin] == ["INVALID"]
    html = (out / "pf.html").read_text(encoding="utf-8")
    assert 'class="notice notice-bad"' in html and 'id="lin-book"' in html


@pytest.mark.timeout(30)
def test_json_to_a_fifo_without_reader_is_refused(tmp_path: Path, magentic: dict[str, Any],
                                                  captain: dict[str, Any]) -> None:
    """``--json`` naming a FIFO nobody reads: exit 2 before anything is audited."""
    runs = _write(tmp_path, magentic, captain)
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    res = CliRunner().invoke(app, ["audit", str(runs), "--json", str(fifo), "-o",
                                   str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "FIFO with no reader" in res.output
    assert not (tmp_path / "out").exists()
