"""Every development trace of Who&When imports and audits; timing and cross-validated
attribution accuracy are measured."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from icore.adapters import (
    AuditResult,
    audit_path,
    collect_paths,
    fit_model_set,
    load_shipped_model,
    read_prov,
    validate_prov,
    write_prov,
)
from icore_lab.bench.icore._attribution import RANDOM, SCORER, cross_validate, markdown

BUDGET_S = 30.0


@pytest.fixture(scope="module")
def dev_results(shared_data: Path) -> tuple[list[AuditResult], float]:
    """All development traces, imported and audited once (timed)."""
    files = collect_paths([shared_data / "who_and_when"])
    assert len(files) >= 90
    t0 = time.perf_counter()
    results = [audit_path(f) for f in files]
    return results, time.perf_counter() - t0


def test_all_import_and_audit(dev_results: tuple[list[AuditResult], float]) -> None:
    """No crash; every run has X, a timeline and a failing outcome to diagnose."""
    results, elapsed = dev_results
    print(f"\nimported and audited {len(results)} development traces in {elapsed:.2f} s")
    assert elapsed <= BUDGET_S
    fams = {r.trace.family for r in results}
    assert fams == {"magentic_one", "captain_agent"}
    for r in results:
        assert r.timeline and r.state.events
        assert 0.0 <= r.final.cq <= 1.0
        assert r.trace.annotation is not None


@pytest.mark.slow
def test_attribution_cross_validated(dev_results: tuple[list[AuditResult], float]) -> None:
    """Cross-validated per subset (grouped folds, both settings, ±0..±5, 95% intervals):
    printed next to every baseline; the scorer beats the uniform guess on each subset."""
    results, _ = dev_results
    ev = cross_validate(results, folds=5, repeats=1)
    print("\n" + markdown(ev, weights=False))
    assert ev.subsets == ["magentic_one", "captain_agent"]
    for fam in ev.subsets:
        s = ev.row(fam, SCORER, False)
        rnd = ev.row(fam, RANDOM)
        assert s is not None and rnd is not None and s.n == rnd.n
        assert s.agent > rnd.agent and s.step[0] > rnd.step[0]
        assert ev.row(fam, SCORER, True) is not None
        assert len([r for r in ev.rows if r.subset == fam]) == 8


@pytest.mark.slow
def test_shipped_model_is_the_development_fit(dev_results: tuple[list[AuditResult], float],
                                              ) -> None:
    """The shipped model is exactly the scorer fitted on the whole development half with
    the current features (regenerate: ``icore bench attribution --write-model``)."""
    results, _ = dev_results
    ms = fit_model_set(results, trained_on="")
    shipped = load_shipped_model()
    assert set(shipped.models) == set(ms.models)
    for key, m in ms.models.items():
        got = shipped.models[key]
        assert got.features == m.features and got.runs == m.runs and got.mix == m.mix
        assert got.agent_step is not None and m.agent_step is not None
        for a, b in ((got.step, m.step), (got.agent, m.agent), (got.agent_step, m.agent_step)):
            assert a.coef == pytest.approx(b.coef, abs=1e-6)
            assert a.intercept == pytest.approx(b.intercept, abs=1e-6)


def test_prov_for_a_real_run(dev_results: tuple[list[AuditResult], float],
                             tmp_path: Path) -> None:
    """A real run exports to PROV-JSON that reads back and validates."""
    pytest.importorskip("prov.model")
    results, _ = dev_results
    r = min(results, key=lambda r: r.trace.length)
    p = write_prov(r.state, tmp_path / "r.prov.json", run_id=r.trace.id)
    assert validate_prov(read_prov(p)) == []
