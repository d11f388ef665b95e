"""Diagnosis, routing and the recovery audit (icore Sec. 4; design.md 4.4)."""

from __future__ import annotations

import pytest

from icore.audit import (
    RecoveryCode,
    Trigger,
    WorkIndex,
    audit_recovery,
    build_feedback,
    commit_recovery,
    diagnose,
    evaluate_triggers,
    matched_quality,
    removal_supported,
    responsible_agent,
)
from icore.state import State, Status


def diagnosis(x: State, *, h: int = 0):
    hits = evaluate_triggers(
        x, index=WorkIndex(x), h=h, metrics=x.metrics(), terminal=x.terminal()
    )
    f = diagnose(x, hits, diagnosis_id="d1", step=0)
    assert f is not None
    return f


# ----------------------------------------------------------------------- routing
def test_work_defect_routes_to_assignee(kit) -> None:
    """An unsupported claim by the assignee is routed to the assignee."""
    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    x.submit(team.submit("o1", "alice", evidence=False))
    f = diagnosis(x)
    assert (f.primary, f.defect, f.proposer) == (Trigger.HARD_FLAG, "work", "alice")
    assert responsible_agent(x, f) == "alice"


@pytest.mark.parametrize(("priority", "expected"), [("assignee", "alice"), ("proposer", "bob")])
def test_work_defect_priority_fixed_in_d(kit, priority: str, expected: str) -> None:
    """bob attempts alice's work: D's priority rule picks assignee or proposer."""
    x, team = kit.state(responsible_priority=priority)
    x.submit(team.assign("o1", "alice"))
    v = x.submit(team.submit("o1", "bob"))
    assert not v.committed
    f = diagnosis(x)
    assert f.proposer == "bob"
    assert responsible_agent(x, f) == expected


def test_assignment_defect_routes_to_assigner(kit) -> None:
    """A beneficial reassignment goes to the agent D authorizes to assign (lead)."""
    x, team = kit.state()
    x.submit(team.assign("o1", "bob"))
    f = diagnosis(x)
    assert (f.primary, f.defect) == (Trigger.REASSIGNMENT, "assignment")
    assert responsible_agent(x, f) == "lead"
    assert f.alternatives[0][1][0] == ("alice", 0.9)


def test_diagnosis_freezes_matched_set(kit) -> None:
    """W_F holds the affected obligations with their weights at freeze time."""
    x, team = kit.state()
    x.submit(team.assign("o1", "bob"))
    f = diagnosis(x)
    assert f.matched.obligations == ("o1",)
    assert f.matched.weights == (1.0,)
    assert f.cq_before == x.metrics(over=f.matched).cq


def test_feedback_is_grounded_in_state(kit) -> None:
    """The feedback names the obligation, its missing evidence and the reasons."""
    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    x.submit(team.submit("o1", "alice", evidence=False))
    f = diagnosis(x)
    fb = build_feedback(x, f, feedback_id="fb1", to="alice")
    b = fb.brief("o1")
    assert b is not None and b.assignee == "alice"
    assert any("missing_certificate" in r for r in b.reasons)
    assert "o1" in fb.text and "tests_pass" in fb.text and fb.tokens > 10
    assert "submit" in fb.operations and "assign" not in fb.operations


# ----------------------------------------------------------------------- recovery audit
def flagged(kit):
    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    x.submit(team.submit("o1", "alice", evidence=False))
    return x, team, diagnosis(x)


def test_valid_repair_is_accepted_and_resolves_flag(kit) -> None:
    """A resubmission with evidence is legal, sound, resolves the flag, keeps cq."""
    x, team, f = flagged(kit)
    rv = audit_recovery(x, f, [team.submit("o1", "alice")], agent="alice")
    assert rv.accepted, rv.violations
    assert rv.resolves == f.flags
    assert rv.after is not None and rv.after.cq >= rv.before.cq
    commit_recovery(x, rv, agent="alice", note="test")
    assert x.obligations["o1"].status == Status.DISCHARGED
    assert not x.open_flags()


def test_deleting_hard_work_without_evidence_is_rejected(kit) -> None:
    """Dropping the flagged obligation without transport/settlement evidence is rejected."""
    x, team, f = flagged(kit)
    seq = x.seq
    rv = audit_recovery(x, f, [team.drop("o1", "alice")], agent="alice")
    assert not rv.accepted
    assert rv.violations[0].code == RecoveryCode.ILLEGAL
    assert "unsupported_removal" in rv.violations[0].detail
    assert x.seq == seq  # nothing was committed to X


def test_removal_without_evidence_counts_unsound_in_w_f(kit) -> None:
    """On W_F a member removed without evidence stays in and counts as unsound."""
    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    m = x.freeze(["o1", "o2"])
    base = matched_quality(x, m)
    assert base.snd == 1.0
    worse = matched_quality(x, m, unsupported=frozenset({"o2"}))
    assert worse.snd == pytest.approx(1.0 / 3.0)
    assert not removal_supported(x, "o1")


def test_decomposition_with_transport_evidence_is_accepted(kit) -> None:
    """Removal with a transported_to relation to new sub-work is a valid replacement."""
    x, team, f = flagged(kit)
    rv = audit_recovery(x, f, [team.decompose("o1", "alice", ("o1a", "o1b"))], agent="alice")
    assert not any(v.code == RecoveryCode.UNSUPPORTED_REMOVAL for v in rv.violations)
    assert not any(v.code == RecoveryCode.ILLEGAL for v in rv.violations)


def test_repair_lowering_cq_on_w_f_is_rejected(kit) -> None:
    """The assigner 'repairs' by moving stable work to a worse agent: cq on W_F drops."""
    from dataclasses import replace

    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    x.submit(team.assign("o2", "bob"))
    f = diagnosis(x)
    assert (f.defect, f.obligations) == ("assignment", ("o2",))
    f = replace(f, matched=x.freeze(["o1", "o2"]))  # o1 is support the recovery may change
    rv = audit_recovery(x, f, [team.assign("o1", "bob")], agent="lead")
    assert not rv.accepted
    assert [v.code for v in rv.violations] == [RecoveryCode.QUALITY_DECREASED]
    assert rv.after is not None and rv.after.cq < rv.before.cq
    good = audit_recovery(x, f, [team.assign("o2", "alice")], agent="lead")
    assert good.accepted and good.after is not None and good.after.cq > good.before.cq


def test_recovery_that_ignores_the_flag_is_rejected(kit) -> None:
    """A legal step on other work does not resolve the diagnosed flag."""
    x, team, f = flagged(kit)
    rv = audit_recovery(x, f, [team.message("o1", "alice")], agent="alice")
    assert not rv.accepted
    assert RecoveryCode.UNRESOLVED_FLAG in {v.code for v in rv.violations}


def test_recovery_from_another_agent_or_empty_is_rejected(kit) -> None:
    """Only the routed agent may answer, and it must answer something."""
    x, team, f = flagged(kit)
    rv = audit_recovery(x, f, [team.submit("o1", "bob")], agent="alice")
    assert [v.code for v in rv.violations] == [RecoveryCode.WRONG_AGENT]
    rv = audit_recovery(x, f, [], agent="alice")
    assert [v.code for v in rv.violations] == [RecoveryCode.NO_RECOVERY]


def test_settlement_with_evidence_is_accepted(kit) -> None:
    """Settling flagged work with a passing settlement certificate is a valid removal."""
    from icore.state import CertificateRequest, Effect, EventSpec, Proposal

    x, _team, f = flagged(kit)
    p = Proposal(
        "alice", "settle", "o1",
        events=(EventSpec("confirm", "alice", {"item": "o1", "obsolete": True}, id="c1"),),
        effects=(Effect.status("o1", Status.SETTLED),), justification=("c1",),
        certificates=(CertificateRequest("settlement", events=("c1",), obligations=("o1",)),),
    )
    rv = audit_recovery(x, f, [p], agent="alice")
    assert rv.accepted, rv.violations
    commit_recovery(x, rv, agent="alice", note="obsolete")
    assert x.obligations["o1"].status == Status.SETTLED
    assert removal_supported(x, "o1")
    assert not x.open_flags()


# ----------------------------------------------------------------------- atomic commit
class _CountingLog:
    """Counts the log transactions (``append`` calls) of a wrapped log."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.appends = 0

    def append(self, entries) -> None:
        self.appends += 1
        self.inner.append(entries)

    def entries(self):
        return self.inner.entries()


def _logged_flagged(kit, path):
    """``flagged(kit)`` with X attached to a real SQLite log file."""
    from icore.state import SQLiteLog, rebuild

    x0, team, f = flagged(kit)
    log = SQLiteLog(path, declaration=x0.decl)
    log.append(x0.entries)
    return rebuild(log, x0.decl, attach=True), log, team, f


def _snapshot(x: State, log) -> tuple:
    from icore.state import export_json

    return (x.seq, len(log), x.entries, export_json(x), x.metrics(),
            x.recompute_metrics(), x.open_flags(), x.status_counts())


def _replays_to(path, x: State) -> None:
    from icore.state import SQLiteLog, equivalent, export_json, rebuild

    with SQLiteLog(path, declaration=x.decl) as log:
        assert list(log.entries()) == list(x.entries)
        y = rebuild(log, x.decl)
    assert equivalent(y, x) and export_json(y) == export_json(x)
    assert y.metrics() == x.metrics()


def test_recovery_with_illegal_second_proposal_commits_nothing(kit, tmp_path) -> None:
    """Fail closed: a refused later proposal leaves X and the SQLite log untouched."""
    from dataclasses import replace

    from icore.audit import AuditError

    path = tmp_path / "x.db"
    x, log, team, f = _logged_flagged(kit, path)
    # the second submit is illegal once the first has discharged o1
    rv = audit_recovery(x, f, [team.submit("o1", "alice"), team.submit("o1", "alice")],
                        agent="alice")
    assert [v.committed for v in rv.verdicts] == [True, False]
    forced = replace(rv, accepted=True, violations=(), resolves=f.flags)
    before = _snapshot(x, log)
    with pytest.raises(AuditError, match="no longer commits"):
        commit_recovery(x, forced, agent="alice", note="test")
    assert _snapshot(x, log) == before
    assert x.obligations["o1"].status != Status.DISCHARGED and x.open_flags()
    log.close()
    _replays_to(path, x)


def test_recovery_with_interface_error_commits_nothing(kit, tmp_path) -> None:
    """An interface failing on a later proposal raises InterfaceError; nothing is written."""

    from icore.state import InterfaceError

    path = tmp_path / "x.db"
    x, log, team, f = _logged_flagged(kit, path)
    rv = audit_recovery(x, f, [team.message("o1", "alice"), team.submit("o1", "alice")],
                        agent="alice")
    assert rv.accepted, rv.violations
    calls = []

    def progress(t):
        calls.append(t.proposal.id)
        if t.operation.name == "submit":
            raise RuntimeError("boom")
        return False

    x.decl = replace_interfaces(x.decl, progress=progress)
    before = _snapshot(x, log)
    with pytest.raises(InterfaceError) as info:
        commit_recovery(x, rv, agent="alice", note="test")
    assert info.value.interface == "progress" and calls
    assert _snapshot(x, log) == before
    log.close()
    _replays_to(path, x)


def replace_interfaces(decl, **kw):
    from dataclasses import replace

    from icore.state import DeclarationPackage

    return DeclarationPackage(
        name=decl.name, version=decl.version, observables=decl.observables.values(),
        agents=decl.agents.values(), operations=decl.operations.values(),
        validators=decl.validators.values(), interfaces=replace(decl.interfaces, **kw),
        parameters=decl.parameters,
    )


def test_legal_recovery_commits_all_entries_in_one_transaction(kit, tmp_path) -> None:
    """A legal two-proposal recovery and its flag resolution are one log transaction."""
    path = tmp_path / "x.db"
    x, log, team, f = _logged_flagged(kit, path)
    rv = audit_recovery(x, f, [team.message("o1", "alice"), team.submit("o1", "alice")],
                        agent="alice")
    assert rv.accepted, rv.violations
    seq = x.seq
    x.log = counting = _CountingLog(log)
    got = commit_recovery(x, rv, agent="alice", note="test")
    assert [v.committed for v in got] == [True, True]
    assert counting.appends == 1
    assert x.seq > seq and len(log) == x.seq
    assert x.obligations["o1"].status == Status.DISCHARGED
    assert not x.open_flags()
    log.close()
    _replays_to(path, x)


@pytest.mark.parametrize("bad", ["mallory", 3, ("alice",)], ids=repr)
def test_misbehaving_responsible_is_a_typed_error(kit, bad) -> None:
    """D's routing rule naming no agent of M_D fails closed before anything is logged."""
    from icore.state import InterfaceError

    x, _team, f = flagged(kit)
    x.decl = replace_interfaces(x.decl, responsible=lambda state, diag: bad)
    seq = x.seq
    with pytest.raises(InterfaceError) as info:
        responsible_agent(x, f)
    assert info.value.interface == "responsible" and info.value.value == bad
    assert info.value.field == f"responsible(X, {f.id})"
    assert x.seq == seq


# ----------------------------------------------------------------------- one audit per proposal
def _counting_validators(x: State) -> list[str]:
    """Wrap every validator of ``x.decl`` so its calls are counted (names, in order)."""
    from dataclasses import replace

    from icore.state import DeclarationPackage

    calls: list[str] = []
    d = x.decl

    def wrap(spec):
        def fn(inp, _fn=spec.fn, _name=spec.name):
            calls.append(_name)
            return _fn(inp)

        return replace(spec, fn=fn)

    x.decl = DeclarationPackage(
        name=d.name, version=d.version, observables=d.observables.values(),
        agents=d.agents.values(), operations=d.operations.values(),
        validators=[wrap(v) for v in d.validators.values()], interfaces=d.interfaces,
        parameters=d.parameters,
    )
    return calls


def test_accepted_recovery_is_committed_as_audited(kit) -> None:
    """The candidate's verdicts are committed as they are: no proposal is audited (or
    validated) again, and the entries equal those of re-auditing (commit_all)."""
    x, team, f = flagged(kit)
    calls = _counting_validators(x)
    props = [team.message("o1", "alice"), team.submit("o1", "alice")]
    rv = audit_recovery(x, f, props, agent="alice")
    assert rv.accepted, rv.violations
    audited = len(calls)
    assert audited > 0
    y = x.copy()
    y.decl = x.decl
    expected = y.commit_all([v.proposal for v in rv.verdicts], resolve=rv.resolves,
                            by="alice", note="test")
    calls.clear()
    got = commit_recovery(x, rv, agent="alice", note="test")
    assert calls == []  # validators ran once per proposal (in the recovery audit) only
    assert got == list(rv.verdicts) == expected
    assert x.entries == y.entries and x.metrics() == y.metrics()
    assert not x.open_flags()


def test_recovery_is_audited_again_when_x_changed(kit) -> None:
    """X changed after the recovery audit: the commit audits the proposals again."""
    x, team, f = flagged(kit)
    rv = audit_recovery(x, f, [team.submit("o1", "alice")], agent="alice")
    assert rv.accepted, rv.violations
    x.record_note("elsewhere")  # X moved on (seq changed)
    calls = _counting_validators(x)
    rv2 = type(rv)(**{**{k: getattr(rv, k) for k in rv.__dataclass_fields__},
                      "declaration": x.decl})
    got = commit_recovery(x, rv2, agent="alice", note="test")
    assert [v.committed for v in got] == [True] and calls  # audited (validated) again


def test_matched_quality_is_exact(kit) -> None:
    """cq on W_F from fixed-point sums equals the exact rational computation."""
    from fractions import Fraction

    from icore.state import MatchedSet

    x, _, _ = flagged(kit)
    weights = (0.1, 0.2, 1e-9, 3.0, 0.0)
    oids = tuple(x.obligations)[: len(weights)]
    ws = weights[: len(oids)]
    m = MatchedSet(oids, ws)
    got = matched_quality(x, m, unsupported=frozenset(oids[:1]))
    w = sum(Fraction(v) for v in ws)
    s = sum(Fraction(v) for o, v in zip(oids, ws, strict=True)
            if o != oids[0] and x.is_sound(o))
    st = sum(Fraction(v) for o, v in zip(oids, ws, strict=True) if x.is_stable(o))
    assert (got.snd, got.astab, got.cq) == (float(s / w), float(st / w),
                                            float((s / w + st / w) / 2))
