"""Live five-agent runs over real processes and mutual-TLS TCP (scripted backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.live import RunManifest, run_live, run_matched
from icore.memory import SQLiteStore
from icore.report import write_live_report


def test_planfence_replans_and_completes(manifest: RunManifest, run_dir: Path) -> None:
    """PlanFence detects the post-plan revision, replans once, acts validly; report written."""
    res = run_live(manifest, run_dir, policy="planfence", reporter=write_live_report)
    assert res.succeeded == 1 and res.invalid_actions == 0
    assert res.successful_replans == 1 and not res.crashes and not res.error
    t = res.tasks[0]
    assert [d["outcome"] for d in t.gate] == ["replan_required", "authorized"]
    assert t.gate[0]["reason"] == "stale" and t.gate[1]["replanned"] is True
    assert t.audit_verdict == "accept" and t.accepted == t.responses == 5
    # iCORE: the revision revoked the plan's certificate; the replan repaired it
    assert res.icore["rejected"] == 0 and res.icore["hard_flags"] == 1
    assert res.icore["open_flags"] == 0 and res.icore["cq"] == pytest.approx(1.0)
    # clean stop, durable records, report and run.json
    assert res.processes_left == () and res.records_lost == () and res.records_checked >= 8
    assert res.report is not None and "icore run" in res.report.read_text(encoding="utf-8")
    data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert data["succeeded"] == 1
    assert (run_dir / "team.yaml").is_file() and (run_dir / "icore.sqlite").is_file()
    # the iCORE state renders through the shared offline report layer
    page = run_dir / "icore-report" / "reservation-live.html"
    assert "obligation-graph" in page.read_text(encoding="utf-8")
    assert 'href="icore-report/reservation-live.html"' in res.report.read_text(
        encoding="utf-8")
    # the planner's memory holds the replanned plan (owner sequence 2)
    om = manifest.ownership_map()
    with SQLiteStore(run_dir / "agents" / "planner-1.sqlite", om, "planner-1") as s:
        head = s.head("plan/reservation-00")
        assert head is not None and head.seq == 2


def test_owner_head_freshness_acts_on_the_stale_plan(manifest: RunManifest,
                                                     run_dir: Path) -> None:
    """Owner-head freshness reads the fresh record but issues the obsolete action."""
    res = run_live(manifest, run_dir, policy="owner_head_freshness")
    t = res.tasks[0]
    assert t.executed and t.invalid and not t.success and not t.replanned
    assert t.gate[0]["reason"] == "not_validated"
    assert t.audit_verdict == "reject"
    # iCORE rejects the action's proposal: it cites a record that is no longer the head
    ops = {v["operation"]: v["decision"] for v in t.icore}
    assert ops["execute"] == "reject"
    assert res.processes_left == () and res.records_lost == ()


@pytest.mark.parametrize("policy", ["owner_head_freshness", "centralized_lineage",
                                    "planfence"])
def test_matched_study(policy: str, tmp_path: Path) -> None:
    """planfence App. A.5 / Table 2 over live teams: 3 families x 10 seeds per policy."""
    res = run_matched(tmp_path / "m", policies=[policy], concurrency=10)
    row = res.row(policy)
    assert row.tasks == 30 and row.accepted == row.responses
    assert set(row.by_family) == {"reservation", "fulfillment", "deployment"}
    run = res.runs[policy]
    assert not run.crashes and not run.error and run.processes_left == ()
    assert run.records_lost == ()
    if policy == "owner_head_freshness":
        assert row.succeeded == 0 and row.invalid == 30 and row.successful_replans == 0
        assert all(t.invalid and t.executed for t in run.tasks)
    else:
        assert row.succeeded == 30 and row.invalid == 0 and row.successful_replans == 30
        assert all(len(t.gate) == 2 for t in run.tasks)  # one replan, two validations
    assert (tmp_path / "m" / "matched.md").is_file()


def test_cli_help_lists_the_options() -> None:
    """``icore run --help`` documents the manifest, policies, backends and --matched."""
    out = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    assert out.exit_code == 0
    for word in ("manifest", "--policy", "--matched", "--backend", "--llm-base-url",
                 "--llm-model", "--concurrency"):
        assert word in out.output, word


@pytest.mark.parametrize(("args", "where"), [
    (["--family", "nosuch"], "--family"),
    (["--seeds", "a,b"], "--seeds"),
    (["--repeat", "-1"], "repeat"),
])
def test_cli_bad_options_are_clean_errors(args: list[str], where: str,
                                          tmp_path: Path) -> None:
    """Wrong option values give a usage error naming the option, never a traceback."""
    # a wide terminal: rich folds a long temporary path inside its error box otherwise
    res = CliRunner().invoke(app, ["run", *args, "--out", str(tmp_path)],
                             terminal_width=500, env={"COLUMNS": "500"})
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert where in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("text", ["agents: [\n  - a", "", "name: x\nagents: 5\n"])
def test_cli_malformed_manifest_is_a_clean_error(text: str, tmp_path: Path) -> None:
    """A truncated, empty or ill-typed manifest is named in a usage error (exit 2)."""
    m = tmp_path / "bad.yaml"
    m.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(app, ["run", str(m), "--out", str(tmp_path / "out")],
                             terminal_width=500, env={"COLUMNS": "500"})
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)
    assert "bad.yaml" in res.output and not (tmp_path / "out").exists()


def test_second_run_into_same_folder_keeps_the_first(tmp_path: Path) -> None:
    """A second run into the same folder starts fresh; the first run is moved aside."""
    from icore.live import default_manifest

    out = tmp_path / "run"
    first = run_live(default_manifest("reservation"), out, policy="planfence")
    second = run_live(default_manifest("reservation"), out, policy="owner_head_freshness")
    assert first.succeeded == 1 and second.invalid_actions == 1
    assert (tmp_path / "run.1" / "icore.sqlite").exists()
    assert (out / "icore.sqlite").exists()
