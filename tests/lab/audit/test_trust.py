"""Issue 14 regression tests: the matched-set loopholes of iCORE-Audit, each as the
scenario that used to be accepted (icore Sec. 4, Def. 6; docs/audit.md)."""

from __future__ import annotations

from icore.audit import AuditLoop, FunctionPolicy, LoopConfig, RecoveryCode, audit_recovery
from icore.state import CertificateRequest, Effect, EventSpec, Proposal, State, Status
from icore_lab.workloads._tasks import WorkItem

from .conftest import Kit, Team
from .test_recovery import diagnosis

THREE = (
    WorkItem("o1", "code:easy", 1.0, spec="spec/o1"),
    WorkItem("o2", "code:easy", 1.0, spec="spec/o2"),
    WorkItem("o3", "code:easy", 1.0, spec="spec/o3"),
)


def _flagged(kit: Kit) -> tuple[State, Team]:
    """alice has o1 and o2; her completion claim on o1 is rejected (hard flag)."""
    x, team = kit.state(inst=kit.instance(items=THREE))
    for o in ("o1", "o2"):
        assert x.submit(team.assign(o, "alice")).committed
    assert not x.submit(team.submit("o1", "alice", evidence=False)).committed
    return x, team


def _drop_to(team: Team, oid: str, to: str, *, tie: tuple[str, ...] | None = None) -> Proposal:
    e, t = team.eid(), team.eid()
    events = (
        EventSpec("work", "alice", {"item": oid, "spec": 1}, id=e),
        EventSpec("test", "alice", {"item": oid, "passed": True}, (e,), id=t),
    )
    certs = () if tie is None else (CertificateRequest("tests_pass", events=(e, t),
                                                       obligations=tie),)
    return Proposal(
        "alice", "drop", oid, events=events,
        effects=(Effect.status(oid, Status.SUPERSEDED), Effect.relation(oid, "transported_to", to)),
        justification=(e, t), certificates=certs,
    )


def test_fake_transport_to_an_unrelated_open_obligation_is_rejected(kit: Kit) -> None:
    """Scenario: the flagged o1 is "repaired" by dropping it with transported_to pointing
    at alice's unrelated open o2. Nothing ties o2 to o1, so the removal is unsupported:
    rejected, X unchanged, the hard flag stays open (it used to be accepted, cq 0.5 -> 1)."""
    x, team = _flagged(kit)
    f = diagnosis(x)
    seq = x.seq
    rv = audit_recovery(x, f, [_drop_to(team, "o1", "o2")], agent="alice")
    assert not rv.accepted
    assert rv.violations[0].code == RecoveryCode.ILLEGAL
    assert "unsupported_removal" in rv.violations[0].detail
    assert x.seq == seq and x.obligations["o1"].status == Status.ASSIGNED
    assert x.open_flags()
    # a certificate citing only the removed obligation does not tie the replacement
    rv = audit_recovery(x, f, [_drop_to(team, "o1", "o2", tie=("o1",))], agent="alice")
    assert not rv.accepted and "unsupported_removal" in rv.violations[0].detail


def test_transport_to_a_tied_or_created_replacement_is_accepted_by_def6(kit: Kit) -> None:
    """Transport counts to a replacement the proposal creates (with the same required
    coverage) or one a passing certificate ties to the removed obligation."""
    x, team = _flagged(kit)
    v = x.submit(_drop_to(team, "o1", "o2", tie=("o1", "o2")))
    assert v.committed, v.reasons
    assert x.removal_supported("o1") and x.is_sound("o1")
    # a created replacement must carry the required-root coverage of the removed one
    e = team.eid()
    bad = Proposal(
        "alice", "decompose", "o2", events=(EventSpec("decompose", "alice", {"item": "o2"}, id=e),),
        effects=(Effect.node("o2a", "code:easy"), Effect.status("o2", Status.SUPERSEDED),
                 Effect.relation("o2", "transported_to", "o2a")),
        justification=(e,),
    )
    v = x.submit(bad)
    assert not v.committed and "not a required root" in v.reasons[0].detail


def test_change_outside_the_matched_set_rejects_the_recovery(kit: Kit) -> None:
    """Scenario: the lead's recovery fixes o1 (weak bob -> alice) and also moves o3 from
    its best worker to its worst. o3 is not in W_F: ``outside_matched_set``."""
    x, team = kit.state(inst=kit.instance(items=THREE))
    assert x.submit(team.assign("o1", "bob")).committed
    assert x.submit(team.assign("o3", "alice")).committed
    f = diagnosis(x)
    assert f.defect == "assignment" and "o3" not in f.matched.obligations
    ok = audit_recovery(x, f, [team.assign("o1", "alice")], agent="lead")
    assert ok.accepted, ok.violations
    rv = audit_recovery(x, f, [team.assign("o1", "alice"), team.assign("o3", "bob")],
                        agent="lead")
    assert not rv.accepted
    assert [(v.code, v.subject) for v in rv.violations] == [
        (RecoveryCode.OUTSIDE_MATCHED_SET, "o3")
    ]
    assert x.obligations["o3"].assignee == "alice"


def test_settlement_certificate_must_cite_the_settled_obligation(kit: Kit) -> None:
    """A passing settlement certificate about o2 does not settle the flagged o1."""
    x, team = _flagged(kit)
    f = diagnosis(x)

    def settle(cites: tuple[str, ...]) -> Proposal:
        e = team.eid()
        return Proposal(
            "alice", "settle", "o1",
            events=(EventSpec("confirm", "alice", {"item": "o1", "obsolete": True}, id=e),),
            effects=(Effect.status("o1", Status.SETTLED),), justification=(e,),
            certificates=(CertificateRequest("settlement", events=(e,), obligations=cites),),
        )

    rv = audit_recovery(x, f, [settle(("o2",))], agent="alice")
    assert not rv.accepted and "unsupported_removal" in rv.violations[0].detail
    assert audit_recovery(x, f, [settle(("o1",))], agent="alice").accepted


def _scripted(steps: list[Proposal | None]) -> FunctionPolicy:
    it = iter(steps)
    return FunctionPolicy(lambda view: next(it, None))


def test_patience_is_per_obligation(kit: Kit) -> None:
    """Scenario: bob's obligation is untouched for many steps while alice progresses
    every step. The global counter never fired; the per-obligation one names bob's."""
    items = tuple(WorkItem(f"a{i}", "code:easy", 1.0, spec=f"spec/a{i}") for i in range(12))
    items += (WorkItem("b1", "code:easy", 1.0, spec="spec/b1"),)
    x, team = kit.state(inst=kit.instance(items=items), patience=4)
    steps: list[Proposal | None] = [team.assign("b1", "bob")]
    for i in range(12):
        steps += [team.assign(f"a{i}", "alice"), team.submit(f"a{i}", "alice")]
    loop = AuditLoop(x, _scripted(steps), config=LoopConfig(mode="passive", max_steps=12))
    res = loop.run()
    assert all(r.decision == "commit" for r in res.trajectory)
    fired = [r.step for r in res.trajectory if "patience" in r.triggers]
    assert fired and fired[0] == 4  # b1 assigned at step 0, no progress since
    assert loop._patience(res.trajectory[-1].step) == ["b1"]


def test_reasserting_the_same_status_is_not_progress(kit: Kit) -> None:
    """Scenario: the lead re-assigns o1 to alice again and again: every commit is
    productive but changes no progress field, so the patience counter keeps growing
    (it used to stay 0 for 20 commits)."""
    x, team = kit.state(patience=4)
    steps: list[Proposal | None] = [team.assign("o1", "alice") for _ in range(8)]
    res = AuditLoop(x, _scripted(steps), config=LoopConfig(mode="passive", max_steps=8)).run()
    assert all(r.decision == "commit" for r in res.trajectory)
    assert [r.h for r in res.trajectory] == list(range(8))
    assert "patience" in res.trajectory[4].triggers


def test_task_obligations_are_required_roots_so_a_drop_cannot_raise_cq() -> None:
    """Scenario: passive observation of an unsupported drop. Task obligations are
    required roots, so the dropped one stays in W(X) and counts unsound: snd falls by
    its weight (and astab can rise by at most that, a closed obligation being stable),
    so cq cannot rise."""
    from icore.audit import observe_unaudited
    from icore_lab.agents._simulated import introduce
    from icore_lab.workloads._tasks import TaskMode, declaration, make_instance

    inst = make_instance(TaskMode.DEADLINE, 0)
    x = State(declaration(inst))
    introduce(x, inst)
    assert all(o.required_root for o in x.obligations.values())
    oid = inst.items[0].id
    before = x.metrics()
    drop = Proposal(
        "lead", "drop", oid, events=(EventSpec("message", "lead", {"item": oid}, id="m"),),
        effects=(Effect.status(oid, Status.SUPERSEDED),), justification=("m",),
    )
    assert not x.submit(drop).committed
    observe_unaudited(x, drop)
    assert x.obligations[oid].status == Status.SUPERSEDED
    assert oid in x.evaluated() and not x.is_sound(oid)
    after = x.metrics()
    assert after.snd < before.snd and after.cq <= before.cq
    assert x.metrics() == x.recompute_metrics()
