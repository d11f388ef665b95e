"""``icore run`` reports and exit codes on real live runs (processes, mutual-TLS TCP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.report import live_run_view


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_run_fail_on_invalid_and_linked_pages(tmp_path: Path) -> None:
    """Owner-head freshness acts from the stale plan: ``--fail-on invalid`` exits 3, the
    run page says why at the top and links the iCORE page (and back); PlanFence exits
    0 with the same flag."""
    out = tmp_path / "ohf"
    res = CliRunner().invoke(app, ["run", "--policy", "owner_head_freshness", "-o", str(out),
                                   "--fail-on", "invalid"], env={"COLUMNS": "200"})
    assert res.exit_code == 3, res.output
    assert "--fail-on invalid: 1 primary action(s)" in res.output
    page = (out / "report.html").read_text(encoding="utf-8")
    top = page.index('id="notices"')
    assert top < page.index('id="lineage"') < page.index('id="summary"')
    assert "reservation-00: INVALID" in page[top:page.index('id="lineage"')]
    assert 'href="icore-report/reservation-live.html"' in page
    icore = (out / "icore-report" / "reservation-live.html").read_text(encoding="utf-8")
    assert 'href="../report.html"' in icore and 'class="g-page"' in icore
    assert not (out / "assets").exists() and not (out / "icore-report" / "assets").exists()
    ok = CliRunner().invoke(app, ["run", "--policy", "planfence", "-o", str(tmp_path / "pf"),
                                  "--fail-on", "invalid", "--no-single-file"],
                            env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "pf" / "assets" / "report.css").is_file()


def test_fail_on_unknown_condition_is_a_usage_error(tmp_path: Path) -> None:
    """A --fail-on condition ``icore run`` does not know: exit 2 before any agent starts."""
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "r"), "--fail-on", "unsound"])
    assert res.exit_code == 2 and "unsound" in res.output
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_live_view_flags_and_diagnoses_have_step_agent_records(tmp_path: Path) -> None:
    """Every hard flag of the live run carries its step and agent, stale records are
    cited, and each flag has a routed diagnosis."""
    from icore.live import default_manifest, run_live

    res = run_live(default_manifest("reservation"), tmp_path / "run",
                   policy="owner_head_freshness")
    v = live_run_view(res)
    assert v.verdict == "bad" and v.notices and v.notices[0].href == "#lin-reservation-00"
    assert len(v.flags) == 2 and all(f.step and f.agent for f in v.flags)
    (lin,) = v.lineage
    stale_req = lin.points[0].frontier[0][1]
    assert all(stale_req in f.records for f in v.flags)
    assert [d.responsible for d in v.diagnoses] == ["planner-1", "executor-1"]
    assert {f.kind for f in v.flags} == {"revocation", "unsupported_assertion"}
