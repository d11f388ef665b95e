"""``icore bench planfence`` smoke tests on the tiny preset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption, run_cells, run_planfence


def test_tiny_preset_writes_every_output(tmp_path: Path) -> None:
    """The tiny preset writes CSV, JSON, PNG and markdown and exits 0."""
    out = tmp_path / "tiny"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--out", str(out),
                                   "--jobs", "2", "--seed", "3"])
    assert res.exit_code == 0, res.output
    for name in ("rows.csv", "summary.csv", "summary.json", "summary.md", "table1.png"):
        if name == "table1.png":
            continue  # the tiny preset is its own study
        assert (out / name).is_file(), name
    doc = json.loads((out / "summary.json").read_text())
    assert doc["seed"] == 3 and doc["preset"] == "tiny"
    assert doc["scheduled_actions"] == 3 * 11 * 5
    agg = {a["policy"]: a for a in doc["aggregates"]}
    assert agg["planfence"]["invalid"] == 0 and agg["planfence"]["completed"] == 33
    assert agg["local_replica"]["invalid"] == 33
    md = (out / "summary.md").read_text()
    assert "tiny" in md and "No paper ordering covers this preset" in md


def test_same_seed_same_outputs(tmp_path: Path) -> None:
    """Two runs with the same seed write identical rows (1 vs 2 workers)."""
    a, b = tmp_path / "a", tmp_path / "b"
    r = CliRunner()
    assert r.invoke(app, ["bench", "planfence", "tiny", "--out", str(a), "--jobs", "1",
                          "--no-plots"]).exit_code == 0
    assert r.invoke(app, ["bench", "planfence", "tiny", "--out", str(b), "--jobs", "2",
                          "--no-plots"]).exit_code == 0
    assert (a / "rows.csv").read_text() == (b / "rows.csv").read_text()


def test_unknown_preset_fails_cleanly(tmp_path: Path) -> None:
    """An unknown preset exits 2 and names the valid ones."""
    res = CliRunner().invoke(app, ["bench", "planfence", "nope", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "table1" in res.output


def test_tcp_transport_runs_over_real_loopback(tmp_path: Path) -> None:
    """``--transport tcp --link loopback``: real owner services with mutual TLS; the
    safety counts are the same as on the virtual transport."""
    out = tmp_path / "tcp"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--out", str(out),
                                   "--jobs", "1", "--transport", "tcp", "--link",
                                   "loopback", "--no-plots"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "summary.json").read_text())
    assert doc["transport"] == "tcp"
    agg = {a["policy"]: a for a in doc["aggregates"]}
    assert agg["planfence"]["invalid"] == 0 and agg["planfence"]["completed"] == 33
    assert agg["owner_head_freshness"]["invalid"] == 33
    assert 7.0 < agg["planfence"]["kib_per_action"] < 10.0


def test_tcp_refuses_fault_injection(tmp_path: Path) -> None:
    """App. C fault injection runs on the in-process transport only."""
    res = CliRunner().invoke(app, ["bench", "planfence", "appc", "--out", str(tmp_path),
                                   "--transport", "tcp"])
    assert res.exit_code == 2
    assert "in-process" in res.output


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
def test_base_delay_is_a_recorded_sensitivity(tmp_path: Path) -> None:
    """``--base-delay-ms`` adds propagation delay on trace links: same safety counts,
    more stall, and the delay is named in every cell; a bad value exits 2."""
    r = CliRunner()
    runs = {}
    for delay in ("0", "10"):
        out = tmp_path / delay
        res = r.invoke(app, ["bench", "planfence", "tiny", "--out", str(out), "--jobs", "1",
                             "--no-plots", "--link", "att", "--base-delay-ms", delay])
        assert res.exit_code == 0, res.output
        runs[delay] = {a["policy"]: a for a in
                       json.loads((out / "summary.json").read_text())["aggregates"]}
    for agg in runs.values():
        assert agg["planfence"]["invalid"] == 0 and agg["planfence"]["completed"] == 33
    assert "delay=10ms" in runs["10"]["planfence"]["cell"]
    assert (runs["10"]["planfence"]["stall_ms_per_action"]
            > runs["0"]["planfence"]["stall_ms_per_action"])
    for bad in ("-1", "nan"):
        res = r.invoke(app, ["bench", "planfence", "tiny", "--out", str(tmp_path / "x"),
                             "--base-delay-ms", bad])
        assert res.exit_code == 2, (bad, res.output)


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
def test_orderings_read_facets_not_labels(tmp_path: Path) -> None:
    """Cell labels carry suffixes such as " [delay=5ms]" under overrides; the Table 6
    ordering still finds d = 1, 2, 8 (it reads the cell facets)."""
    from icore_lab.bench import run_planfence

    _res, doc = run_planfence("table6", tmp_path, jobs=2, plots=False, base_delay_ms=5.0)
    ords = {o["id"]: o for o in doc["orderings"]}
    assert {"table6.d1", "table6.d2", "table6.d8_convergence"} <= set(ords)
    assert all(f"d={d}:" in ords["table6.d1"]["measured"] for d in (1, 2, 8))
    assert ords["table6.d8_convergence"]["reproduced"] is True


def test_jobs_below_one_is_refused(tmp_path: Path) -> None:
    """``--jobs 0`` exits 2 naming the option; the library refuses it with a typed error
    (it used to fall back to inline silently); nothing is written."""
    out = tmp_path / "x"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--out", str(out),
                                   "--jobs", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "'--jobs'" in res.output
    with pytest.raises(BadOption) as ei:
        run_planfence("tiny", out, jobs=0, plots=False)
    assert ei.value.fields == {"option": "jobs", "value": 0}
    with pytest.raises(BadOption) as ei:
        run_cells([], workers=-1)
    assert ei.value.fields == {"option": "workers", "value": -1}
    assert not out.exists()


def test_infinite_base_delay_is_refused(tmp_path: Path) -> None:
    """``--base-delay-ms inf`` passes typer's ``min=0`` but not the library check: exit 2
    with a message naming the option and the value."""
    out = tmp_path / "x"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--out", str(out),
                                   "--base-delay-ms", "inf"])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.replace("│", " ").split())  # the error box may wrap
    assert "--base-delay-ms" in said and "not inf" in said, said
    assert not out.exists()


def _traces_with_att_up(tmp_path: Path, shared_data: Path, text: str) -> Path:
    """A private trace folder whose AT&T uplink file holds ``text``."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for f in (shared_data / "traces").glob("*LTE-driving*"):
        (traces / f.name).write_bytes(f.read_bytes())
    (traces / "ATT-LTE-driving.up").write_text(text)
    return traces


def test_corrupt_trace_is_a_clean_error_before_any_work(tmp_path: Path,
                                                        shared_data: Path) -> None:
    """A malformed trace file is named in an ``error:`` line (exit 2, no traceback,
    no results folder), found before any episode runs."""
    traces = _traces_with_att_up(tmp_path, shared_data, "hello\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--link", "att", "--out",
                                   str(out), "--jobs", "1"],
                             env={"ICORE_TRACES": str(traces), "COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert "ATT-LTE-driving.up" in res.output and "not an integer trace" in res.output
    assert "Traceback" not in res.output and not out.exists()


def test_bad_out_is_refused_before_any_work(tmp_path: Path) -> None:
    """``--out`` naming a file, or a non-empty folder that holds no replay results, is
    refused up front (exit 2) and left untouched."""
    a_file = tmp_path / "afile"
    a_file.write_text("keep me")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me too")
    for out in (a_file, other, a_file / "sub"):
        res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--out", str(out)],
                                 env={"COLUMNS": "300"})
        assert res.exit_code == 2, (out, res.output)
        assert "error" in res.output
        assert not re.search(r"\b[1-9]\d*/\d+\b", res.output)  # no job ran
    assert a_file.read_text() == "keep me"
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_rerun_moves_earlier_results_aside(tmp_path: Path) -> None:
    """A second run into the same folder keeps the first as ``<out>.1``: files of two
    runs are never mixed."""
    out = tmp_path / "res"
    r = CliRunner()
    for seed in ("1", "2"):
        res = r.invoke(app, ["bench", "planfence", "tiny", "--out", str(out), "--jobs",
                             "1", "--no-plots", "--seed", seed])
        assert res.exit_code == 0, res.output
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    assert json.loads((tmp_path / "res.1" / "summary.json").read_text())["seed"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_failed_write_leaves_no_folder(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fails while writing its files leaves neither a half-written results
    folder nor its staging folder; earlier results stay where they were."""
    from icore_lab.bench import OutputUnavailable, run_planfence
    from icore_lab.bench.planfence import _replay_report as report

    out = tmp_path / "res"
    run_planfence("tiny", out, jobs=1, plots=False, seed=1)

    def disk_full(*_a: object, **_k: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "render_markdown", disk_full)
    with pytest.raises(OutputUnavailable, match="No space left"):
        run_planfence("tiny", out, jobs=1, plots=False, seed=2)
    assert json.loads((out / "summary.json").read_text())["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_trace_without_capacity_names_the_episode(tmp_path: Path,
                                                  shared_data: Path) -> None:
    """A trace whose uplink never delivers makes a proactive policy's synchronous step
    give up: the error names policy, template and network (exit 2, no results)."""
    traces = _traces_with_att_up(tmp_path, shared_data, "1\n100000000000\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["bench", "planfence", "tiny", "--link", "att", "--out",
                                   str(out), "--jobs", "1"],
                             env={"ICORE_TRACES": str(traces), "COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert "failed 20 times" in res.output and "att@0s" in res.output
    assert "Traceback" not in res.output and not out.exists()
