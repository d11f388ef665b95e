"""Every development trace of Who&When imports and audits; timing and accuracy are measured."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from icore.adapters import (
    PUBLISHED_BEST,
    AuditResult,
    audit_path,
    collect_paths,
    read_prov,
    score,
    validate_prov,
    write_prov,
)

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


def test_attribution_accuracy(dev_results: tuple[list[AuditResult], float]) -> None:
    """Agent- and step-level accuracy, printed next to random and published results."""
    results, _ = dev_results
    s = score(results)
    print(f"\nattribution on {s.n} development runs: agent {s.agent_accuracy:.1%} "
          f"(random {s.random_agent:.1%}, published {PUBLISHED_BEST['agent']:.1%}), "
          f"step {s.step_accuracy:.1%} (random {s.random_step:.1%}, "
          f"published {PUBLISHED_BEST['step']:.1%})")
    for fam, v in s.by_family.items():
        print(f"  {fam}: {v}")
    assert s.n == len(results)
    assert s.agent_accuracy > s.random_agent
    assert s.step_accuracy > s.random_step


def test_prov_for_a_real_run(dev_results: tuple[list[AuditResult], float],
                             tmp_path: Path) -> None:
    """A real run exports to PROV-JSON that reads back and validates."""
    pytest.importorskip("prov.model")
    results, _ = dev_results
    r = min(results, key=lambda r: r.trace.length)
    p = write_prov(r.state, tmp_path / "r.prov.json", run_id=r.trace.id)
    assert validate_prov(read_prov(p)) == []
