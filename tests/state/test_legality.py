"""Definition 6: every rejection reason, every hard-flag kind, commit semantics."""

from __future__ import annotations

import itertools

import pytest

from icore.records import Record
from icore.state import (
    AgentDecl,
    AssertionKind,
    CertificateRequest,
    CitedRecord,
    Decision,
    DeclarationPackage,
    Effect,
    EffectTemplate,
    EntryKind,
    EventSpec,
    FlagKind,
    ObservableType,
    OperationDecl,
    Preconditions,
    Proposal,
    ReasonCode,
    State,
    StateError,
    StateInputError,
    Status,
    ValidatorInput,
    ValidatorSpec,
    audit,
    normalize,
)


def _snapshot(x: State) -> dict[str, object]:
    """Q, Π and G of the normal form (flags excluded)."""
    n = normalize(x)
    return {"G": n["G"], "Q": n["Q"], "Pi": n["Pi"]}


def _rejected(flow, p: Proposal, code: ReasonCode, *, head_view=None):
    before = _snapshot(flow.x)
    entries_before = flow.x.seq
    v = flow.x.submit(p, head_view=head_view if head_view is not None else flow.heads.get)
    assert v.decision == Decision.REJECT
    assert code in v.codes, v.reasons
    assert _snapshot(flow.x) == before, "a rejected proposal changed G, Q or Π"
    kinds = [e.kind for e in flow.x.entries[entries_before:]]
    assert kinds[:2] == [EntryKind.PROPOSAL, EntryKind.REJECTION]
    assert EntryKind.FLAG in kinds
    assert v.flags
    assert all(f.id in flow.x.flags for f in v.flags)
    return v


@pytest.fixture
def ready(flow):
    """o1 assigned to alice and active; o2 open."""
    flow.introduce("o1", "o2")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    return flow


class TestCommit:
    """Legal proposals commit exactly their effects."""

    def test_submit_commits_assertions_certificate_and_events(self, ready):
        v = ready.submit("o1", "alice")
        x = ready.x
        assert v.committed and not v.reasons and not v.flags
        assert x.obligations["o1"].status == Status.SUBMITTED
        assert x.obligations["o1"].result == {"sha": f"s{ready.n}"}
        assert len(v.certificates) == 1 and v.certificates[0].verdict
        a = v.assertions[0]
        j = x.justifications[a.id]
        assert j.operation == "submit" and j.certificates == (v.certificates[0].id,)
        assert set(j.events) <= set(x.events)
        assert x.is_sound("o1")
        assert x.metrics().snd == 1.0

    def test_supersedes_previous_assertion_in_slot(self, ready):
        x = ready.x
        old = x.active_assertion("o1", AssertionKind.STATUS)
        assert old is not None and old.value == "active"
        ready.submit("o1", "alice")
        new = x.active_assertion("o1", AssertionKind.STATUS)
        assert new is not None and new.value == "submitted"
        assert not x.is_active(old.id) and x.superseded_by(old.id) == new.id

    def test_audit_is_pure(self, ready):
        before = normalize(ready.x)
        seq = ready.x.seq
        v = audit(ready.submit_proposal("o1", "alice"), ready.x)
        assert v.committed
        assert normalize(ready.x) == before and ready.x.seq == seq

    def test_stale_verdict_is_refused(self, ready):
        v1 = audit(ready.submit_proposal("o1", "alice"), ready.x)
        ready.assign("o2", "bob")
        with pytest.raises(StateError, match="stale verdict"):
            ready.x.apply_verdict(v1)

    def test_reused_proposal_id_is_a_typed_error(self, ready):
        p = ready.submit_proposal("o1", "alice")
        ready.ok(Proposal(**{**_fields(p), "id": "P"}))
        with pytest.raises(StateInputError, match="already used"):
            audit(Proposal(**{**_fields(ready.approve_proposal("o1")), "id": "P"}), ready.x)

    def test_labels_describe_g_q_pi(self, ready):
        lab = ready.submit_proposal("o1", "alice").labels()
        assert set(lab) == {"G", "Q", "Pi"}
        assert len(lab["G"]) == 2 and len(lab["Q"]) == 2
        assert lab["Pi"]["operation"] == "submit" and lab["Pi"]["certificates"] == ["ci_green"]


def _fields(p: Proposal) -> dict[str, object]:
    return {f: getattr(p, f) for f in p.__dataclass_fields__}


def _replace(p: Proposal, **kw: object) -> Proposal:
    return Proposal(**{**_fields(p), **kw})


class TestRejectionReasons:
    """One test per ReasonCode of Definition 6."""

    def test_unknown_operation(self, ready):
        p = _replace(ready.submit_proposal("o1", "alice"), operation="teleport")
        _rejected(ready, p, ReasonCode.UNKNOWN_OPERATION)

    def test_unknown_agent_proposer(self, ready):
        p = _replace(ready.submit_proposal("o1", "alice"), proposer="mallory")
        _rejected(ready, p, ReasonCode.UNKNOWN_AGENT)

    def test_unknown_agent_assignee(self, ready):
        p = Proposal(
            "lead",
            "assign",
            target="o2",
            effects=(Effect.assign("o2", "mallory"), Effect.status("o2", "assigned")),
            justification=(ready.any_event(),),
        )
        _rejected(ready, p, ReasonCode.UNKNOWN_AGENT)

    def test_unauthorized_proposer(self, ready):
        p = Proposal(
            "alice",
            "assign",
            target="o2",
            effects=(Effect.assign("o2", "alice"), Effect.status("o2", "assigned")),
            justification=(ready.any_event(),),
        )
        _rejected(ready, p, ReasonCode.UNAUTHORIZED_PROPOSER)

    @pytest.mark.parametrize(
        "spec",
        [
            EventSpec("telepathy", "alice", {}, id="z1"),
            EventSpec("pr_opened", "alice", {"pr": 1}, id="z2"),
            EventSpec("pr_opened", "alice", {"pr": 1, "sha": "x"}, ("nowhere",), "z3"),
            EventSpec("pr_opened", "alice", {"pr": 1, "sha": "x"}, id="task1"),
            EventSpec("pr_opened", "alice", {"pr": 1, "sha": {1, 2}}, id="z5"),
        ],
        ids=["undeclared-type", "missing-field", "unknown-cause", "reused-id", "not-json"],
    )
    def test_invalid_event(self, ready, spec):
        p = ready.submit_proposal("o1", "alice")
        p = _replace(p, events=(spec, *p.events))
        _rejected(ready, p, ReasonCode.INVALID_EVENT)

    def test_unknown_obligation_effect(self, ready):
        p = ready.submit_proposal("o1", "alice")
        p = _replace(p, effects=(Effect.status("ghost", "submitted"), p.effects[1]))
        _rejected(ready, p, ReasonCode.UNKNOWN_OBLIGATION)

    def test_unknown_obligation_recreated_node(self, ready):
        p = Proposal(
            "task",
            "introduce",
            effects=(Effect.node("o1", "code"),),
            justification=(ready.any_event(),),
        )
        _rejected(ready, p, ReasonCode.UNKNOWN_OBLIGATION)

    def test_unknown_obligation_missing_target(self, ready):
        p = _replace(ready.submit_proposal("o1", "alice"), target=None)
        _rejected(ready, p, ReasonCode.UNKNOWN_OBLIGATION)

    def test_precondition_status(self, ready):
        # o2 is open, not active: submit requires active/repair_pending
        _rejected(ready, ready.submit_proposal("o2", "alice"), ReasonCode.PRECONDITION_FAILED)

    def test_precondition_assignee_is_proposer(self, ready):
        _rejected(ready, ready.submit_proposal("o1", "bob"), ReasonCode.PRECONDITION_FAILED)

    def test_precondition_dependencies_done(self, flow):
        flow.introduce("base")
        flow.ok(
            Proposal(
                "lead",
                "decompose",
                target="base",
                effects=(Effect.node("child", "code", deps=("base",), parent="base"),),
                justification=(flow.any_event(),),
            )
        )
        flow.assign("child", "alice")
        p = Proposal(
            "alice",
            "start",
            target="child",
            effects=(Effect.status("child", "active"),),
            justification=(flow.any_event(),),
        )
        _rejected(flow, p, ReasonCode.PRECONDITION_FAILED)

    def test_stale_citation(self, ready):
        old = ready.x.active_assertion("o1", AssertionKind.STATUS)
        ready.submit("o1", "alice")
        p = _replace(ready.approve_proposal("o1"), cites=(old.id,))
        _rejected(ready, p, ReasonCode.STALE_CITATION)

    def test_unsound_citation(self, ready):
        bogus = ready.x.import_assertion(Effect.claim("o2", "coverage", 0.5), justified=False)
        ready.submit("o1", "alice")
        p = _replace(ready.approve_proposal("o1"), cites=(bogus.id,))
        _rejected(ready, p, ReasonCode.UNSOUND_CITATION)

    def test_stale_record_in_proposal(self, ready):
        r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
        r2 = Record.create(key="spec/x", owner="lead", seq=2, content={"v": 2}, parents=[r1.id])
        ready.heads["spec/x"] = r2.id
        p = _replace(ready.submit_proposal("o1", "alice"), records=(CitedRecord.of(r1),))
        _rejected(ready, p, ReasonCode.STALE_RECORD)

    def test_stale_record_in_certificate(self, ready):
        r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
        ready.heads["spec/x"] = "0" * 64
        _rejected(ready, ready.submit_proposal("o1", "alice", record=r1), ReasonCode.STALE_RECORD)

    def test_record_without_head_view_is_stale(self, ready):
        r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
        p = ready.submit_proposal("o1", "alice", record=r1)
        v = ready.x.submit(p)  # no head view: currency cannot be shown
        assert ReasonCode.STALE_RECORD in v.codes

    def test_missing_justification(self, ready):
        p = _replace(ready.submit_proposal("o1", "alice"), justification=())
        _rejected(ready, p, ReasonCode.MISSING_JUSTIFICATION)

    def test_unknown_event(self, ready):
        p = ready.submit_proposal("o1", "alice")
        _rejected(ready, _replace(p, justification=("nope",)), ReasonCode.UNKNOWN_EVENT)
        p2 = _replace(p, certificates=(CertificateRequest("ci_green", events=("nope",)),))
        _rejected(ready, p2, ReasonCode.UNKNOWN_EVENT)

    def test_unknown_validator(self, ready):
        p = ready.submit_proposal("o1", "alice")
        p1 = _replace(p, certificates=(CertificateRequest("oracle"),))
        _rejected(ready, p1, ReasonCode.UNKNOWN_VALIDATOR)
        req = p.certificates[0]
        p2 = _replace(p, certificates=(CertificateRequest("ci_green", req.events, version="9"),))
        _rejected(ready, p2, ReasonCode.UNKNOWN_VALIDATOR)

    def test_certificate_failed(self, ready):
        v = ready.x.submit(
            _replace(ready.submit_proposal("o1", "alice")),
        )
        assert v.committed  # green passes; now red:
        ready.x.submit(
            Proposal(
                "alice",
                "start",
                target="o2",
                effects=(Effect.status("o2", "active"),),
                justification=("task1",),
            )
        )
        ready.assign("o2", "alice")
        ready.start("o2", "alice")
        p = ready.submit_proposal("o2", "alice", status="red")
        v = _rejected(ready, p, ReasonCode.CERTIFICATE_FAILED)
        assert v.certificates and not v.certificates[0].verdict
        assert not any(
            c.validator == "ci_green" and not c.verdict for c in ready.x.certificates.values()
        )

    def test_certificate_inactive(self, ready):
        r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
        ready.heads["spec/x"] = r1.id
        v = ready.submit("o1", "alice", record=r1)
        cid = v.certificates[0].id
        ready.x.on_head_change("spec/x", "1" * 64)
        p = ready.submit_proposal("o1", "alice")
        p = _replace(p, certificates=(), cite_certificates=(cid,))
        _rejected(ready, p, ReasonCode.CERTIFICATE_INACTIVE)
        _rejected(ready, _replace(p, cite_certificates=("c999",)), ReasonCode.CERTIFICATE_INACTIVE)

    def test_missing_certificate(self, ready):
        p = _replace(ready.submit_proposal("o1", "alice"), certificates=())
        _rejected(ready, p, ReasonCode.MISSING_CERTIFICATE)

    @pytest.mark.parametrize("variant", ["missing", "extra", "wrong-value", "dup-slot", "repair"])
    def test_effect_mismatch(self, ready, variant):
        p = ready.submit_proposal("o1", "alice")
        st, res = p.effects
        effects = {
            "missing": (st,),
            "extra": (st, res, Effect.claim("o1", "coverage", 1.0)),
            "wrong-value": (Effect.status("o1", "discharged"), res),
            "dup-slot": (st, res, res),
            "repair": (Effect(AssertionKind.STATUS, "o1", "repair_pending"), res),
        }[variant]
        _rejected(ready, _replace(p, effects=effects), ReasonCode.EFFECT_MISMATCH)

    def test_effect_on_other_obligation_than_target(self, ready):
        p = ready.submit_proposal("o1", "alice")
        p = _replace(p, effects=(Effect.status("o2", "submitted"), Effect.result("o2", 1)))
        _rejected(ready, p, ReasonCode.EFFECT_MISMATCH)

    def test_unsupported_removal_transport_to_self(self, ready):
        p = Proposal(
            "lead",
            "transfer",
            target="o2",
            effects=(
                Effect.status("o2", "superseded"),
                Effect.relation("o2", "transported_to", "o2"),
            ),
            justification=(ready.any_event(),),
        )
        _rejected(ready, p, ReasonCode.UNSUPPORTED_REMOVAL)

    def test_transport_with_evidence_commits(self, ready):
        p = Proposal(
            "lead",
            "transfer",
            target="o2",
            effects=(
                Effect.status("o2", "superseded"),
                Effect.relation("o2", "transported_to", "o1"),
            ),
            justification=(ready.any_event(),),
        )
        # an existing replacement must be tied to the removed obligation by evidence
        _rejected(ready, p, ReasonCode.UNSUPPORTED_REMOVAL)
        rv = EventSpec("review_posted", "bob", {"pr": 1, "verdict": "approve"}, id="tie")
        p = _replace(p, events=(rv,), certificates=(
            CertificateRequest("approved", events=("tie",), obligations=("o2", "o1")),))
        ready.ok(p)
        assert "o2" not in ready.x.evaluated() or ready.x.obligations["o2"].required_root


def _tiny(validators=(), ops=()) -> DeclarationPackage:
    base_ops = (
        OperationDecl(
            "introduce",
            proposers=("*",),
            preconditions=Preconditions(target_required=False),
            effects=(EffectTemplate(AssertionKind.NODE, target="new", many=True),),
        ),
    )
    return DeclarationPackage(
        name="tiny",
        observables=[ObservableType("obs")],
        agents=[AgentDecl("a", {"w": 0.5}), AgentDecl("b", {"w": 0.7})],
        operations=[*base_ops, *ops],
        validators=list(validators),
    )


def _tiny_state(d: DeclarationPackage) -> State:
    x = State(d)
    v = x.submit(
        Proposal(
            "a",
            "introduce",
            events=(EventSpec("obs", "a", id="e0"),),
            effects=(Effect.node("o", "w"),),
            justification=("e0",),
        )
    )
    assert v.committed
    return x


def _raising(inp: ValidatorInput) -> bool:
    raise RuntimeError("boom")


_counter = itertools.count()


def _flaky(inp: ValidatorInput) -> bool:
    return next(_counter) % 2 == 0


def _not_bool(inp: ValidatorInput) -> bool:
    return "yes"  # type: ignore[return-value]


class TestValidatorInconsistency:
    """Validators that raise, flip or return non-booleans give a validator-inconsistency flag."""

    @pytest.mark.parametrize(
        "fn", [_raising, _flaky, _not_bool], ids=["raises", "flaky", "non-bool"]
    )
    def test_flagged(self, fn):
        op = OperationDecl(
            "check",
            effects=(EffectTemplate(AssertionKind.CLAIM, key="ok"),),
            requires=("v",),
        )
        x = _tiny_state(_tiny([ValidatorSpec("v", fn)], [op]))
        p = Proposal(
            "a",
            "check",
            target="o",
            effects=(Effect.claim("o", "ok"),),
            justification=("e0",),
            certificates=(CertificateRequest("v", events=("e0",)),),
        )
        v = x.submit(p)
        assert v.decision == Decision.REJECT
        assert ReasonCode.VALIDATOR_INCONSISTENT in v.codes
        kinds = {f.kind for f in v.flags}
        assert FlagKind.VALIDATOR_INCONSISTENCY in kinds
        flag = next(f for f in v.flags if f.kind == FlagKind.VALIDATOR_INCONSISTENCY)
        assert flag.certificates == ("v",) and flag.proposer == "a" and flag.obligations == ("o",)
        assert x.active_assertion("o", AssertionKind.CLAIM, "ok") is None


class TestRemovalRules:
    """No obligation is removed without settlement or transport evidence."""

    def test_remove_without_evidence(self):
        drop = OperationDecl(
            "drop",
            effects=(EffectTemplate(AssertionKind.STATUS, values=("superseded",)),),
            removes=True,
        )
        x = _tiny_state(_tiny(ops=[drop]))
        v = x.submit(
            Proposal(
                "a",
                "drop",
                target="o",
                effects=(Effect.status("o", "superseded"),),
                justification=("e0",),
            )
        )
        assert ReasonCode.UNSUPPORTED_REMOVAL in v.codes
        assert x.obligations["o"].status == Status.OPEN

    def test_settle_without_settles_flag(self):
        close = OperationDecl(
            "close",
            effects=(EffectTemplate(AssertionKind.STATUS, values=("settled",)),),
            requires=("ok",),
        )
        x = _tiny_state(_tiny([ValidatorSpec("ok", lambda i: True)], [close]))
        p = Proposal(
            "a",
            "close",
            target="o",
            effects=(Effect.status("o", "settled"),),
            justification=("e0",),
            certificates=(CertificateRequest("ok"),),
        )
        v = x.submit(p)
        assert ReasonCode.UNSUPPORTED_REMOVAL in v.codes

    def test_settle_with_evidence_commits(self):
        close = OperationDecl(
            "close",
            effects=(EffectTemplate(AssertionKind.STATUS, values=("settled",)),),
            requires=("ok",),
            settles=True,
        )
        x = _tiny_state(_tiny([ValidatorSpec("ok", lambda i: True)], [close]))
        p = Proposal(
            "a",
            "close",
            target="o",
            effects=(Effect.status("o", "settled"),),
            justification=("e0",),
            certificates=(CertificateRequest("ok"),),
        )
        # a settlement certificate that does not cite "o" settles nothing
        assert ReasonCode.UNSUPPORTED_REMOVAL in x.submit(p).codes
        p = Proposal(
            "a",
            "close",
            target="o",
            effects=(Effect.status("o", "settled"),),
            justification=("e0",),
            certificates=(CertificateRequest("ok", obligations=("o",)),),
        )
        assert x.submit(p).committed
        assert x.obligations["o"].status == Status.SETTLED
        assert x.evaluated() == []


class TestHardFlagKinds:
    """Every FlagKind is produced by the path that should produce it."""

    def test_unsupported_assertion_flag(self, ready):
        v = ready.x.submit(_replace(ready.submit_proposal("o1", "alice"), certificates=()))
        (flag,) = v.flags
        assert flag.kind == FlagKind.UNSUPPORTED_ASSERTION
        assert flag.proposal == v.proposal.id and flag.proposer == "alice"
        assert flag.obligations == ("o1",)
        assert [r.code for r in flag.reasons] == [ReasonCode.MISSING_CERTIFICATE]
        assert flag in ready.x.open_flags()

    def test_revocation_flag(self, ready):
        r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
        ready.heads["spec/x"] = r1.id
        v = ready.submit("o1", "alice", record=r1)
        (flag,) = ready.x.on_head_change("spec/x", "2" * 64)
        assert flag.kind == FlagKind.REVOCATION
        assert set(flag.assertions) == {a.id for a in v.assertions}

    def test_validator_inconsistency_flag(self):
        op = OperationDecl(
            "check", effects=(EffectTemplate(AssertionKind.CLAIM, key="ok"),), requires=("v",)
        )
        x = _tiny_state(_tiny([ValidatorSpec("v", _raising)], [op]))
        v = x.submit(
            Proposal(
                "a",
                "check",
                target="o",
                effects=(Effect.claim("o", "ok"),),
                justification=("e0",),
                certificates=(CertificateRequest("v", events=("e0",)),),
            )
        )
        assert [f.kind for f in v.flags] == [FlagKind.VALIDATOR_INCONSISTENCY]

    def test_raise_and_resolve_flag(self, ready):
        f = ready.x.raise_flag(FlagKind.UNSUPPORTED_ASSERTION, obligations=("o1",), detail="d")
        assert f in ready.x.open_flags()
        ready.x.resolve_flag(f.id, by="lead", note="fixed")
        assert f not in ready.x.open_flags()
        assert ready.x.flag_resolution(f.id).by == "lead"
        with pytest.raises(StateInputError):
            ready.x.resolve_flag(f.id)
        with pytest.raises(StateInputError):
            ready.x.resolve_flag("f999")
