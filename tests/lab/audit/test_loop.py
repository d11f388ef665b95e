"""The iCORE-Audit loop: patience, conditions, log entries and replay (design.md 4.4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.audit import (
    AuditError,
    AuditLoop,
    FunctionPolicy,
    HostView,
    LoopConfig,
    reconstruct,
    run_mas_only,
)
from icore.state import EntryKind, Note, Proposal, SQLiteLog, State, rebuild
from icore_lab.agents._sim_world import SimWorld
from icore_lab.agents._simulated import SimEnvironment, SimTeam, introduce
from icore_lab.workloads._tasks import TaskMode, declaration, make_instance


def scripted(steps: list[Proposal | None]) -> FunctionPolicy:
    it = iter(steps)
    return FunctionPolicy(lambda view: next(it, None))


def test_patience_counter_resets_only_on_progress(kit) -> None:
    """h_o: +1 per iteration without progress on o, reset when a commit changes one of its
    progress fields; o leaves the count once done (o2 is never assigned: no counter)."""
    x, team = kit.state(patience=50)
    steps = [
        team.assign("o1", "alice"),  # productive (status change): h = 0
        team.message("o1", "alice"),  # legal, nonproductive: 1
        team.message("o1", "alice"),  # 2
        team.message("o1", "bob"),  # rejected (bob is not the assignee): 3
        None,  # idle: 4
        team.submit("o1", "alice"),  # progress: 0
        team.message("o2", "alice"),  # rejected (o2 is not assigned to alice): 1
    ]
    res = AuditLoop(x, scripted(steps), config=LoopConfig(mode="passive", max_steps=7)).run()
    assert [r.h for r in res.trajectory] == [0, 1, 2, 3, 4, 0, 0]
    assert [r.decision for r in res.trajectory][:4] == ["commit", "commit", "commit", "reject"]


def test_passive_never_intervenes(kit) -> None:
    """Passive observation writes no diagnosis or feedback, whatever fires."""
    x, team = kit.state()
    steps = [team.assign("o1", "bob"), team.submit("o1", "bob", evidence=False)]
    res = AuditLoop(x, scripted(steps), config=LoopConfig(mode="passive", max_steps=4)).run()
    assert res.fired  # triggers fired ...
    assert not res.interventions  # ... and nothing intervened
    assert not [e for e in x.entries if isinstance(e.body, Note)]


@pytest.mark.parametrize("mode", [TaskMode.BUILD_CHAIN, TaskMode.REVIEW])
def test_passive_changes_nothing_for_the_host(mode: TaskMode) -> None:
    """Same seed: passive observation ends in exactly the MAS-only world."""
    for seed in range(3):
        inst = make_instance(mode, seed)
        w1 = SimWorld(inst)
        run_mas_only(SimTeam(inst, w1), max_steps=inst.budget, env=SimEnvironment(w1))
        w2 = SimWorld(inst)
        x = State(declaration(inst))
        introduce(x, inst)
        AuditLoop(
            x, SimTeam(inst, w2), env=SimEnvironment(w2),
            config=LoopConfig(mode="passive", max_steps=inst.budget, head_view=w2.head_view),
        ).run()
        assert w1.truth == w2.truth
        assert w1.performance() == w2.performance()


def run_audit(tmp_path: Path, mode: TaskMode, seed: int):
    inst = make_instance(mode, seed)
    w = SimWorld(inst)
    decl = declaration(inst)
    log = SQLiteLog(tmp_path / f"{mode}-{seed}.sqlite", declaration=decl)
    x = State(decl, log=log)
    introduce(x, inst)
    res = AuditLoop(
        x, SimTeam(inst, w), env=SimEnvironment(w),
        config=LoopConfig(mode="audit", max_steps=inst.budget, head_view=w.head_view),
    ).run()
    return decl, log, x, res


def test_replay_reconstructs_who_was_told_what(tmp_path: Path) -> None:
    """From the SQLite log alone: each diagnosis, who was told what, what changed."""
    decl, log, x, res = run_audit(tmp_path, TaskMode.BUILD_CHAIN, 0)
    assert res.interventions and res.accepted_recoveries
    log.close()
    with SQLiteLog(tmp_path / "build_chain-0.sqlite", declaration=decl) as again:
        y = rebuild(again, decl)
    traces = reconstruct(y.entries)
    assert len(traces) == len(res.interventions)
    for t, i in zip(traces, res.interventions, strict=True):
        assert t.diagnosis == i.diagnosis.id
        assert t.told == i.agent
        assert t.feedback == (i.feedback.text if i.feedback else None)
        assert t.accepted == i.accepted
        assert t.proposals == i.proposals
        assert {c[0] for c in t.changes} == set(i.changed)
        if not i.accepted:
            assert t.violations == i.violations
    assert y.metrics() == x.metrics()


def test_every_intervention_is_logged(tmp_path: Path) -> None:
    """Diagnoses, feedback, recoveries/failures and rejections are all log entries."""
    _, log, x, res = run_audit(tmp_path, TaskMode.DECOMPOSITION, 0)
    notes = [e.body for e in x.entries if isinstance(e.body, Note)]
    kinds = [n.kind for n in notes]
    assert kinds.count("diagnosis") == len(res.interventions)
    assert kinds.count("feedback") == sum(1 for i in res.interventions if i.feedback)
    outcomes = kinds.count("recovery") + sum(
        1 for n in notes if n.kind == "failure" and "flag" not in n.payload
    )
    assert outcomes == len(res.interventions)
    rejected = sum(1 for e in x.entries if e.kind == EntryKind.REJECTION)
    assert rejected >= res.rejections
    assert len(log) == x.seq
    log.close()


def test_incremental_metrics_match_full_recompute(tmp_path: Path) -> None:
    """After a whole audited run, incremental metrics equal a full recompute."""
    _, log, x, _ = run_audit(tmp_path, TaskMode.COMPAT_MERGE, 1)
    assert x.metrics() == x.recompute_metrics()
    log.close()


def test_audit_mode_asks_host_only_when_work_enabled(kit) -> None:
    """With no enabled productive work, iCORE-Audit does not call the host."""
    x, team = kit.state()
    calls: list[int] = []

    def step(view: HostView) -> Proposal | None:
        calls.append(view.step)
        return None

    x.submit(team.assign("o1", "alice"))
    x.submit(team.fail("o1", "alice"))
    res = AuditLoop(x, FunctionPolicy(step), config=LoopConfig(max_steps=3)).run()
    assert res.fired.get("no_productive_work", 0) >= 1
    assert calls == []


def test_host_must_return_proposals(kit) -> None:
    """A host returning something else is a usage error."""
    x, _ = kit.state()
    bad = FunctionPolicy(lambda view: "not a proposal")  # type: ignore[arg-type,return-value]
    with pytest.raises(AuditError):
        AuditLoop(x, bad, config=LoopConfig(max_steps=1)).run()


def test_plain_loop_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/audit_plain_loop.py wraps a plain agent loop and reaches terminal."""
    import runpy

    path = Path(__file__).resolve().parents[3] / "examples" / "audit_plain_loop.py"
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "terminal=True" in out
    assert "told boss, accepted=True" in out


@settings(max_examples=12)
@given(mode=st.sampled_from(list(TaskMode)), seed=st.integers(0, 50_000))
def test_audited_runs_keep_recovery_invariants(mode: TaskMode, seed: int) -> None:
    """Any audited run: accepted recoveries never lower cq on W_F, come from the routed
    agent, nothing leaves W without evidence, and incremental == full metrics."""
    from icore.audit import removal_supported
    from icore.state import CLOSED_STATUSES

    inst = make_instance(mode, seed)
    w = SimWorld(inst)
    x = State(declaration(inst))
    introduce(x, inst)
    res = AuditLoop(
        x, SimTeam(inst, w), env=SimEnvironment(w),
        config=LoopConfig(max_steps=inst.budget, head_view=w.head_view),
    ).run()
    for i in res.interventions:
        if i.accepted:
            assert i.cq_after is not None and i.cq_after >= i.cq_before
            assert i.agent == i.diagnosis.responsible
    for oid, o in x.obligations.items():
        if o.status in CLOSED_STATUSES:
            assert removal_supported(x, oid)
    assert x.metrics() == x.recompute_metrics()


def test_bad_configuration_is_an_audit_error(kit) -> None:
    """Unknown mode, negative budget, or auditing a state without kept entries."""
    x, _ = kit.state()
    host = FunctionPolicy(lambda view: None)
    with pytest.raises(AuditError):
        AuditLoop(x, host, config=LoopConfig(mode="observe"))  # type: ignore[arg-type]
    with pytest.raises(AuditError):
        AuditLoop(x, host, config=LoopConfig(max_steps=-1))
    y = State(x.decl, keep_entries=False)
    with pytest.raises(AuditError) as exc:
        AuditLoop(y, host)
    assert exc.value.code == "audit"
