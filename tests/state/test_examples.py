"""The three example declaration packages drive end-to-end scenarios."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icore.state import (
    CertificateRequest,
    Effect,
    EventSpec,
    Proposal,
    ReasonCode,
    SQLiteLog,
    State,
    Status,
    Transition,
    equivalent,
    rebuild,
)


@dataclass(frozen=True)
class Diagnosis:
    """A minimal diagnosis for the ``responsible`` interface."""

    defect: str
    obligations: tuple[str, ...]
    proposer: str | None


def test_code_review_full_cycle(flow):
    flow.introduce("feature")
    flow.assign("feature", "alice")
    flow.start("feature", "alice")
    v = flow.submit("feature", "alice")
    assert v.progress
    flow.ok(flow.approve_proposal("feature"))
    x = flow.x
    assert x.obligations["feature"].status == Status.DISCHARGED
    assert x.terminal()
    rv = flow.approve_proposal("feature").events[0]
    settle = Proposal(
        "lead",
        "settle",
        target="feature",
        events=(EventSpec(rv.type, rv.agent, rv.fields, id="rv-settle"),),
        effects=(Effect.status("feature", "settled"),),
        justification=("rv-settle",),
        certificates=(
            CertificateRequest("approved", events=("rv-settle",), obligations=("feature",)),
        ),
    )
    # the settlement certificate must cite the settled obligation (icore Def. 6)
    untied = replace(
        settle, certificates=(CertificateRequest("approved", events=("rv-settle",)),)
    )
    assert ReasonCode.UNSUPPORTED_REMOVAL in flow.x.submit(untied).codes
    flow.ok(replace(settle, events=(EventSpec(rv.type, rv.agent, rv.fields, id="rv-s2"),),
                    justification=("rv-s2",),
                    certificates=(CertificateRequest("approved", events=("rv-s2",),
                                                     obligations=("feature",)),)))
    assert x.evaluated() == ["feature"]  # settled, but a required root
    assert x.metrics().snd == 1.0
    assert x.local_view("alice")["assigned"][0]["id"] == "feature"
    assert not x.has_productive_work()


def test_code_review_responsible_routing(flow):
    flow.introduce("o1")
    flow.assign("o1", "alice")
    iface = flow.x.decl.interfaces
    assert iface.responsible(flow.x, Diagnosis("work", ("o1",), "bob")) == "alice"
    assert iface.responsible(flow.x, Diagnosis("evidence", ("zz",), "bob")) == "bob"
    assert iface.responsible(flow.x, Diagnosis("assignment", ("o1",), "bob")) == "lead"
    assert iface.assignment_authority(flow.x) == ("lead",)


def test_research_report_with_bound(research, tmp_path):
    log = SQLiteLog(tmp_path / "r.db", declaration=research)
    x = State(research, log=log)

    def ok(p: Proposal) -> None:
        v = x.submit(p)
        assert v.committed, v.reasons

    ok(
        Proposal(
            "user",
            "introduce",
            events=(EventSpec("question_posted", "user", {"question": "q"}, id="q"),),
            effects=(Effect.node("report", "synthesis", required_root=True),),
            justification=("q",),
        )
    )
    ok(
        Proposal(
            "pi",
            "split",
            target="report",
            effects=(
                Effect.node("s1", "section", parent="report"),
                Effect.node("s2", "section", parent="report"),
            ),
            justification=("q",),
        )
    )
    for s, who in (("s1", "r1"), ("s2", "r1")):
        ok(
            Proposal(
                "pi",
                "assign",
                target=s,
                effects=(Effect.assign(s, who), Effect.status(s, "assigned")),
                justification=("q",),
            )
        )
    ok(
        Proposal(
            "r1",
            "draft",
            target="s1",
            events=(
                EventSpec("source_found", "r1", {"url": "u", "quote": "x"}, id="src"),
                EventSpec("draft_written", "r1", {"section": "s1", "text": "t"}, ("src",), "dr"),
            ),
            effects=(
                Effect.status("s1", "submitted"),
                Effect.result("s1", "t"),
                Effect.claim("s1", "coverage", 1.0),
            ),
            justification=("src", "dr"),
            certificates=(CertificateRequest("sourced", events=("src", "dr")),),
        )
    )
    # an unsourced draft is rejected
    v = x.submit(
        Proposal(
            "r1",
            "draft",
            target="s2",
            events=(EventSpec("draft_written", "r1", {"section": "s2", "text": "t"}, id="dr2"),),
            effects=(
                Effect.status("s2", "submitted"),
                Effect.result("s2", "t"),
                Effect.claim("s2", "coverage", 0.2),
            ),
            justification=("dr2",),
            certificates=(CertificateRequest("sourced", events=("dr2",)),),
        )
    )
    assert not v.committed
    # the section is transported into s1 (merged), with evidence
    ok(
        Proposal(
            "pi",
            "drop_section",
            target="s2",
            effects=(
                Effect.status("s2", "superseded"),
                Effect.relation("s2", "transported_to", "s1"),
            ),
            justification=("q",),
            # evidence tying the removed section to the one that carries it
            certificates=(CertificateRequest("sourced", events=("src",),
                                             obligations=("s2", "s1")),),
        )
    )
    m = x.metrics()
    assert m.performance_bound is not None
    assert m.performance_bound == 0.8 * max(0.0, 2 * m.cq - 1)
    responsible = research.interfaces.responsible(x, Diagnosis("work", ("s2",), "r2"))
    assert responsible == "r2"  # D's priority rule: proposer first
    log.close()
    with SQLiteLog(tmp_path / "r.db", declaration=research) as log2:
        assert equivalent(rebuild(log2, research), x)


def test_progress_interface(code_review):
    op = code_review.operations["assign"]
    t = Transition(op, Proposal("lead", "assign"), ())
    assert code_review.interfaces.progress(t) is False
