"""``icore bench planfence`` smoke tests on the tiny preset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.bench import BadOption, run_cells, run_planfence
from icore.cli import app


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
    assert "tiny" in (out / "summary.md").read_text()


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


def test_orderings_read_facets_not_labels(tmp_path: Path) -> None:
    """Cell labels carry suffixes such as " [delay=5ms]" under overrides; the Table 6
    ordering still finds d = 1, 2, 8 (it reads the cell facets)."""
    from icore.bench import run_planfence

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
    assert "base_delay_ms" in res.output and "got inf" in res.output
    assert not out.exists()
