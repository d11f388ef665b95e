"""``icore bench icore``: matched instances, statistics, outputs, CLI (design.md 4.5)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from icore_lab.bench._errors import UnknownPreset
from icore_lab.bench.icore._evaluate import CONDITIONS, evaluate, get_preset, run_instance
from icore_lab.bench.icore._stats import paired
from icore_lab.workloads._tasks import (
    TASK_MODES,
    TaskMode,
    declaration,
    make_instance,
    terminal_performance,
)


@pytest.mark.parametrize("mode", TASK_MODES)
def test_task_modes_declare_valid_d_and_perf(mode: TaskMode) -> None:
    """Each mode builds a valid D; Perf is 1 with every item correct and 0 with none."""
    inst = make_instance(mode, 3)
    assert inst == make_instance(mode, 3)  # matched: a function of (mode, seed) only
    d = declaration(inst)
    assert {"tests_pass", "review_pass", "settlement", "completed"} <= set(d.validators)
    assert d.parameters.bound_declared == inst.declares_bound
    ids = [i.id for i in inst.items]
    assert terminal_performance(inst, dict.fromkeys(ids, True)) == pytest.approx(1.0)
    assert terminal_performance(inst, dict.fromkeys(ids, False)) == 0.0
    for w in inst.workers:  # calibrated capability values are probabilities
        assert all(0.05 <= p <= 0.98 for p in w.capability.values())


@given(st.sampled_from(TASK_MODES), st.integers(0, 10_000), st.data())
def test_perf_is_monotone_in_correct_items(mode: TaskMode, seed: int, data: st.DataObject) -> None:
    """Making one more item correct never lowers Perf, and Perf stays in [0, 1]."""
    inst = make_instance(mode, seed)
    ids = [i.id for i in inst.items]
    correct = {i: data.draw(st.booleans()) for i in ids}
    base = terminal_performance(inst, correct)
    assert 0.0 <= base <= 1.0
    flip = data.draw(st.sampled_from(ids))
    assert terminal_performance(inst, {**correct, flip: True}) >= base - 1e-12


def test_matched_instance_runs_every_condition() -> None:
    """One matched instance: the three conditions and the G/Q/X ablation rows."""
    res = run_instance("build_chain", 0)
    assert [r.condition for r in res.runs] == list(CONDITIONS)
    mas, pas, aud = res.runs
    assert mas.perf == pas.perf  # passive observation changes nothing for the host
    assert mas.quality is None and pas.quality is not None and aud.quality is not None
    assert aud.interventions >= aud.accepted and aud.extra_calls == aud.interventions
    assert {r.representation for r in res.repr} == {"G", "Q", "X"}


def test_prop4_is_checked_as_an_expectation_bound_with_slack() -> None:
    """Prop. 4 where D declares it: mean Perf vs p_min·max(0, 2·mean cq − 1) minus the
    Hoeffding slack at δ, per mode and condition; per-run violations are only a
    diagnostic (the old per-run assertion failed on deadline seed 36, allocation 68/81)."""
    from dataclasses import asdict

    from icore_lab.bench.icore._stats import expectation_bound, prop4_check

    runs = [asdict(r) for m in ("deadline", "allocation") for s in range(6)
            for r in run_instance(m, s).runs]
    p4 = prop4_check(runs)
    assert {(e["mode"], e["condition"]) for e in p4["expectation"]} == {
        (m, c) for m in ("deadline", "allocation") for c in ("passive", "audit")
    }
    for e in p4["expectation"]:
        assert e["n"] == 6 and 0.0 < e["slack"] < 3.0
        assert e["holds"] == (e["mean_perf"] >= e["bound"] - e["slack"] - 1e-12)
    # the slack shrinks as 1/sqrt(n) and is zero-width nowhere
    one = expectation_bound([0.2] * 100, [0.9] * 100, 0.8, 0.05)
    four = expectation_bound([0.2] * 400, [0.9] * 400, 0.8, 0.05)
    assert abs(one["slack"] / four["slack"] - 2.0) < 1e-9
    assert abs(one["bound"] - 0.64) < 1e-9 and not one["holds"]


def test_only_full_x_detects_unsupported_work_and_revocation() -> None:
    """Representation ablation on injected defects: G and Q miss what needs Π."""
    rows = [r for s in range(3) for r in run_instance("compat_merge", s).repr]
    for d in ("unsupported_work", "evidence_revocation"):
        g = [r for r in rows if r.defect == d and r.representation == "G"]
        q = [r for r in rows if r.defect == d and r.representation == "Q"]
        x = [r for r in rows if r.defect == d and r.representation == "X"]
        assert sum(r.detected for r in g) == sum(r.detected for r in q) == 0
        if sum(r.injected for r in x):
            assert sum(r.detected for r in x) > 0


def test_paired_statistics() -> None:
    """Mean paired difference, its interval, and Wilcoxon on known data."""
    p = paired("perf", "m", [0.1, 0.2, 0.3, 0.4], [0.2, 0.4, 0.3, 0.6], draws=500)
    assert p.diff == pytest.approx(0.125)
    assert p.lo <= p.diff <= p.hi
    assert 0.0 < p.wilcoxon_p <= 1.0
    z = paired("perf", "m", [0.5, 0.5], [0.5, 0.5], draws=100)
    assert z.diff == 0.0 and z.wilcoxon_p == 1.0


def test_unknown_preset() -> None:
    """A wrong preset name is a ValueError naming the known ones."""
    with pytest.raises(UnknownPreset) as exc:
        get_preset("huge")
    assert exc.value.fields["known"] == ["full", "quick"]


def test_evaluate_writes_all_outputs_and_jobs_do_not_change_results(tmp_path: Path) -> None:
    """CSV, JSON, PNG and markdown are written; two jobs give the same rows as one."""
    one, paths = evaluate(preset="quick", per_mode=2, modes=["deadline", "review"],
                          jobs=1, out=tmp_path / "a")
    two, _ = evaluate(preset="quick", per_mode=2, modes=["deadline", "review"],
                      jobs=2, out=tmp_path / "b")
    assert one["instances"] == 4 and one["comparisons"] == two["comparisons"]
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "+11.5 pp trajectory quality" in md and "Proposition 4" in md
    with paths["runs"].open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 * len(CONDITIONS)
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert {"comparisons", "representation", "prop4", "costs", "loop_ablation"} <= set(data)
    assert one["loop_ablation"] == two["loop_ablation"]
    assert [r["representation"] for r in data["loop_ablation"]] == ["G", "Q", "X"]
    assert "Loop-level representation ablation" in md
    with paths["loop_runs"].open(encoding="utf-8") as fh:
        assert {r["condition"] for r in csv.DictReader(fh)} == {"audit_G", "audit_Q"}


def test_cli_bench_icore(tmp_path: Path) -> None:
    """``icore bench icore`` runs a tiny evaluation and prints the tables."""
    from icore.cli import app

    r = CliRunner().invoke(app, ["bench", "icore", "--per-mode", "1", "--mode", "deadline",
                                 "--jobs", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "Representation sufficiency" in r.output
    assert (tmp_path / "summary.md").exists()


def test_fault_model_can_fool_a_naive_auditor_but_not_the_authorship_check() -> None:
    """Issue 14 fault model: a settings grid of declared probabilities. Fabricated
    evidence (a passing test authored by another agent) fails the authorship check;
    capability noise makes declared values differ from the true ones (and Prop. 4 is
    then not declared); the default setting is the unchanged matched instance."""
    from icore.audit import AuditLoop, LoopConfig
    from icore.state import Event, State, ValidatorInput
    from icore_lab.agents._sim_world import SimWorld
    from icore_lab.agents._simulated import SimEnvironment, SimTeam, introduce
    from icore_lab.bench.icore._evaluate import GRID
    from icore_lab.workloads._tasks import FaultSettings, declaration

    assert make_instance("deadline", 5, FaultSettings()) == make_instance("deadline", 5)
    noisy = make_instance("deadline", 5, FaultSettings(sigma=0.15))
    assert noisy.items == make_instance("deadline", 5).items
    assert any(w.declared != w.capability for w in noisy.workers)
    assert not noisy.declares_bound
    assert len({fs.label() for fs in GRID}) == len(GRID) >= 6
    # the validator checks authorship
    ok = declaration(noisy).validators["tests_pass"].fn
    work = Event("w", "work", "artifact", "w1", {"item": "d1", "spec": 1}, (), 0.0)

    def test(agent: str) -> Event:
        return Event("t", "test", "action", agent, {"item": "d1", "passed": True}, ("w",), 0.0)

    assert ok(ValidatorInput((work, test("w1")), (), None, {}))
    assert not ok(ValidatorInput((work, test("w2")), (), None, {}))
    assert not ok(ValidatorInput((test("w1"),), (), None, {}))
    # fabricating workers: every fabricated certificate is refused by Def. 6
    inst = make_instance("deadline", 2, FaultSettings(fabricate=1.0))
    world = SimWorld(inst)
    x = State(declaration(inst))
    introduce(x, inst)
    AuditLoop(x, SimTeam(inst, world), env=SimEnvironment(world),
              config=LoopConfig(mode="audit", max_steps=inst.budget,
                                head_view=world.head_view)).run()
    fabricated = {i for k, i in world.injected if k == "fabricated_evidence"}
    assert fabricated
    for oid in fabricated:
        assert not (x.obligations[oid].status == "discharged" and not x.is_sound(oid))


def test_ignored_feedback_gets_no_recovery() -> None:
    """An agent that ignores feedback proposes nothing (the recovery is then refused)."""
    from icore.audit import AuditLoop, LoopConfig
    from icore.state import State
    from icore_lab.agents._sim_world import SimWorld
    from icore_lab.agents._simulated import SimEnvironment, SimTeam, introduce
    from icore_lab.workloads._tasks import FaultSettings, declaration

    inst = make_instance("deadline", 1, FaultSettings(ignore_feedback=1.0))
    world = SimWorld(inst)
    x = State(declaration(inst))
    introduce(x, inst)
    res = AuditLoop(x, SimTeam(inst, world), env=SimEnvironment(world),
                    config=LoopConfig(mode="audit", max_steps=inst.budget,
                                      head_view=world.head_view)).run()
    assert res.interventions and res.accepted_recoveries == 0
