"""Mapping a recorded run into X and auditing it (docs/audit-real-runs.md, "Mapping")."""

from __future__ import annotations

from typing import Any

from icore.adapters import (
    ROOT,
    audit_trace,
    captain_agent_declaration,
    declaration_for,
    magentic_one_declaration,
    parse_captain_agent,
    parse_magentic_one,
)
from icore.state import AssertionKind, FlagKind, Note, Status, full_metrics


class TestMagenticOneMapping:
    """Plans, routing, ledger claims, stalls, replans, termination."""

    def test_obligations_and_assignments(self, magentic: dict[str, Any]) -> None:
        """Plans become obligations; routed instructions become assignments."""
        r = audit_trace(parse_magentic_one(magentic))
        x = r.state
        assert x.obligations[ROOT].required_root
        assert x.obligations["plan1"].status == Status.SUPERSEDED
        assert x.obligations["plan2"].status == Status.ACTIVE
        rel = x.active_assertion("plan1", AssertionKind.RELATION, "transported_to")
        assert rel is not None and rel.value == "plan2"
        assert x.obligations["o3"].assignee == "WebSurfer"
        assert x.obligations["o3"].parent == "plan1"
        assert x.obligations["o3"].kind == "web"
        just = x.justifications[x.obligations["o3"].active[("assignee", "")]]
        assert just.operation == "assign" and just.events == ("m2", "m3")  # ledger + route

    def test_claims_need_evidence_in_g(self, magentic: dict[str, Any]) -> None:
        """A progress claim resting on a repeated output is unsound and flagged."""
        r = audit_trace(parse_magentic_one(magentic))
        x = r.state
        ok = x.active_assertion(ROOT, AssertionKind.CLAIM, "is_request_satisfied")
        assert ok is not None and x.assertion_sound(ok.id)
        bad = x.active_assertion(ROOT, AssertionKind.CLAIM, "is_progress_being_made")
        assert bad is not None and not x.assertion_sound(bad.id)
        assert "m7" in x.justifications[bad.id].events
        assert bad.id in r.unsupported
        assert any(bad.id in f.assertions and f.kind == FlagKind.UNSUPPORTED_ASSERTION
                   for f in x.flags.values())

    def test_outputs_submit_with_certificates(self, magentic: dict[str, Any]) -> None:
        """The first output is supported; the repeated one is not (a work diagnosis)."""
        r = audit_trace(parse_magentic_one(magentic))
        x = r.state
        assert x.obligations["o3"].status == Status.SUBMITTED and x.is_sound("o3")
        assert not x.is_sound("o6")
        work = [d for d in r.diagnoses if d.defect == "work"]
        assert [(d.step, d.responsible, d.events) for d in work] == [(7, "WebSurfer", ("m7",))]

    def test_diagnoses_from_icore_audit(self, magentic: dict[str, Any]) -> None:
        """Work/evidence defects are diagnosed and routed by iCORE-Audit; all are logged."""
        r = audit_trace(parse_magentic_one(magentic))
        src = {d.defect: d.source for d in r.diagnoses}
        assert src["work"] == "icore.audit" and src["evidence"] == "icore.audit"
        assert src["progress"] == "adapter"
        notes = [e.body for e in r.notes
                 if isinstance(e.body, Note) and e.body.kind == "diagnosis"]
        assert not r.state.entries  # X keeps no entries: the audit's cost stays linear
        assert len(notes) == len(r.diagnoses)
        work = next(n for n in notes if n.payload["defect"] == "work")
        assert work.payload["audit"]["matched"]["obligations"][0] == "o6"

    def test_stalls_replans_and_terminal(self, magentic: dict[str, Any]) -> None:
        """Stall and replan become progress events; termination the terminal marker."""
        r = audit_trace(parse_magentic_one(magentic))
        x = r.state
        assert r.stalls == 1 and r.replans == 1
        assert x.events["m9"].type == "stall"
        term = x.active_assertion(ROOT, AssertionKind.TERMINAL)
        assert term is not None and term.value == {"final_answer": "41"}
        assert not x.assertion_sound(term.id)  # answer_check fails: 41 != 42
        assert r.terminated and not x.terminal()
        assert any(d.defect == "terminal" for d in r.diagnoses)

    def test_timeline_and_metrics(self, magentic: dict[str, Any]) -> None:
        """One timeline point per message (plus the start); incremental == full metrics."""
        r = audit_trace(parse_magentic_one(magentic))
        assert len(r.timeline) == len(magentic["history"]) + 1
        assert r.final == full_metrics(r.state)
        assert 0.0 <= r.final.cq <= 1.0
        s = r.summary()
        assert (s.stalls, s.replans, s.unsupported, s.terminated) == (1, 1, 4, True)

    def test_capabilities_declared(self, magentic: dict[str, Any]) -> None:
        """The team block becomes M_D with capabilities; the Orchestrator assigns."""
        t = parse_magentic_one(magentic)
        d = declaration_for(t)
        assert d.name == magentic_one_declaration(t.agents).name
        assert d.agents["WebSurfer"].capabilities["web"] == 1.0
        assert "web" not in d.agents["FileSurfer"].capabilities
        assert "assigner" in d.agents["Orchestrator"].roles
        assert d.may_propose("Orchestrator", "assign")
        assert not d.may_propose("WebSurfer", "assign")

    def test_unstable_assignment_diagnosed(self, make_magentic: Any) -> None:
        """Routing web work to an agent without the capability is ε-unstable."""
        d = make_magentic()
        d["history"][3] = {"role": "Orchestrator (-> FileSurfer)",
                           "content": "Search the web for 6*7 on a website."}
        r = audit_trace(parse_magentic_one(d))
        assert not r.state.is_stable("o3")
        diag = [x for x in r.diagnoses if x.defect == "assignment"]
        assert diag and diag[0].responsible == "Orchestrator" and diag[0].step == 3


class TestCaptainAgentMapping:
    """Self-assigned turns, code evidence from the terminal, TERMINATE."""

    def test_code_evidence(self, captain: dict[str, Any]) -> None:
        """Code whose execution failed is unsupported work of its author."""
        r = audit_trace(parse_captain_agent(captain))
        x = r.state
        assert x.obligations["o1"].assignee == "Python_Expert"
        assert not x.is_sound("o1")
        just = x.justifications[x.obligations["o1"].active[("status", "")]]
        assert just.events == ("m1", "m2")  # the output and the terminal's result
        assert next(d.responsible for d in r.diagnoses if d.defect == "work") == "Python_Expert"

    def test_terminate_is_terminal(self, captain: dict[str, Any]) -> None:
        """``TERMINATE`` ends the run with a terminal marker."""
        r = audit_trace(parse_captain_agent(captain))
        assert r.terminated
        assert r.state.active_assertion(ROOT, AssertionKind.TERMINAL) is not None

    def test_declaration(self, captain: dict[str, Any]) -> None:
        """System prompts become declared capabilities; the terminal is a tool."""
        t = parse_captain_agent(captain)
        d = captain_agent_declaration(t.agents)
        assert d.agents["Python_Expert"].capabilities["code"] == 1.0
        assert d.agents["Computer_terminal"].roles == ("tool",)
        assert d.may_propose("Math_Expert", "self_assign")


def test_succeeded_run_not_diagnosed_as_terminal(make_magentic: Any) -> None:
    """A recorded success makes the terminal marker sound."""
    r = audit_trace(parse_magentic_one(make_magentic(is_corrected=True)))
    term = r.state.active_assertion(ROOT, AssertionKind.TERMINAL)
    assert term is not None and r.state.assertion_sound(term.id)
    assert r.state.terminal()


def test_live_runs_diagnose_hard_flags_through_icore_audit() -> None:
    """A live run's revocation flag is diagnosed by the same step as the loop's
    (``icore.audit.diagnose_hit`` on the hard_flag trigger), routed by D's rule."""
    from icore._clock import ManualClock
    from icore.audit import Diagnosis, Trigger
    from icore.live import LiveAudit, default_manifest

    m = default_manifest("reservation")
    audit = LiveAudit(m, None, ManualClock())
    task = "t0"
    planner = audit.role_agent["planner"]
    audit.introduce(task)
    # record ids are 64-hex content addresses; the head view refuses anything else
    r1, r2, p1 = "1" * 64, "2" * 64, "3" * 64
    req = {"id": r1, "key": f"req/{task}", "owner": "reviser-1", "seq": 1}
    audit.committed(task, "requirement_committed", "reviser-1", req)
    plan = {"id": p1, "key": f"plan/{task}", "content": {"args": {"option": "A"}}}
    assert audit.planned(task, planner, plan, req["key"], req["id"], replan=False).committed
    assert audit.diagnoses == {}
    fids = audit.revised(task, "reviser-1", {**req, "id": r2, "seq": 2})
    assert fids and set(audit.diagnoses) == set(fids)
    f = audit.diagnoses[fids[0]]
    assert isinstance(f, Diagnosis) and f.primary == Trigger.HARD_FLAG
    assert f.defect == "evidence" and f.flags == (fids[0],)
    assert f.responsible in audit.decl.agents and f"{task}/plan" in f.matched.obligations


def test_timeline_by_column_reads_as_points() -> None:
    """The columnar cq timeline reads back exactly the points appended."""
    from icore.adapters import MetricPoint
    from icore.adapters._results import Timeline

    pts = [MetricPoint(i, 1 / (i + 1), 0.5, (1 / (i + 1) + 0.5) / 2, i % 3, i // 2)
           for i in range(7)]
    t = Timeline(pts)
    assert len(t) == 7 and list(t) == pts and t == tuple(pts)
    assert t[-1] == pts[-1] and t[2:5] == tuple(pts[2:5]) and t.cqs() == [p.cq for p in pts]
