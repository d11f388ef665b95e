"""Tests that kill the hand mutations of issue 30 that survived in state/ (item 4).

Each test names the safety line it guards; through the public API where one exists.
"""

from __future__ import annotations

import pytest

from icore.memory import MemoryStore, OwnershipMap
from icore.records import Record, derive
from icore.state import (
    AssertionKind,
    CertificateRequest,
    CitedRecord,
    Effect,
    EventSpec,
    FlagKind,
    Proposal,
    ReasonCode,
    Revoked,
    Status,
    audit,
    store_head_view,
)
from icore.state._transition import obligation_steps


def _rec(seq: int, **kw) -> Record:
    return Record.create(key="req/trip", owner="traveler", seq=seq, content={"v": seq}, **kw)


def _ready(flow, *oids: str) -> None:
    flow.introduce(*oids)
    for o in oids:
        flow.assign(o, "alice")
        flow.start(o, "alice")


def test_records_cited_by_a_proposal_have_their_lineage_checked(flow) -> None:
    """_legality check_citations: ``Proposal.records`` lineage (not only certificates')."""
    store = MemoryStore(OwnershipMap.from_mapping({"block": "owner", "summary": "writer"}))
    view = store_head_view(store)
    b1 = Record.create(key="block", owner="owner", seq=1, content={"v": 1})
    store.commit(b1, writer="owner")
    s1 = derive(key="summary", owner="writer", seq=1, content={}, inputs=[b1])
    store.commit(s1, writer="writer")
    store.commit(Record.create(key="block", owner="owner", seq=2, content={"v": 2},
                               supersedes=b1.id), writer="owner")
    _ready(flow, "o1")
    p = flow.submit_proposal("o1", "alice")
    from dataclasses import replace

    v = flow.x.submit(replace(p, records=(CitedRecord.of(s1),)), head_view=view)
    assert not v.committed
    assert any(r.code == ReasonCode.STALE_RECORD and r.subject == b1.id for r in v.reasons)


def test_settlement_needs_a_certificate_citing_the_settled_obligation(flow) -> None:
    """_legality check_removals: a passing ``approved`` certificate tied to o2 does not
    settle o1."""
    _ready(flow, "o1", "o2")
    for o in ("o1", "o2"):
        flow.submit(o, "alice")
        flow.ok(flow.approve_proposal(o))
    rv = "rv-settle"
    p = Proposal("lead", "settle", target="o1",
                 events=(EventSpec("review_posted", "bob", {"pr": 1, "verdict": "approve"},
                                   id=rv),),
                 effects=(Effect.status("o1", Status.SETTLED),), justification=(rv,),
                 certificates=(CertificateRequest("approved", events=(rv,),
                                                  obligations=("o2",)),))
    v = flow.x.submit(p, head_view=flow.heads.get)
    assert not v.committed
    assert ReasonCode.UNSUPPORTED_REMOVAL in v.codes
    tied = Proposal("lead", "settle", target="o1", events=(EventSpec(
        "review_posted", "bob", {"pr": 1, "verdict": "approve"}, id="rv-ok"),),
        effects=(Effect.status("o1", Status.SETTLED),), justification=("rv-ok",),
        certificates=(CertificateRequest("approved", events=("rv-ok",),
                                         obligations=("o1",)),))
    assert flow.x.submit(tied, head_view=flow.heads.get).committed


def test_a_cited_certificate_over_records_needs_a_head_view(flow) -> None:
    """_legality _cited_certificate: without a head view its records are not current
    (the fail-open of issue 30: it used to commit)."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2")
    cert = flow.submit("o1", "alice", record=r1).certificates[0]
    p = flow.submit_proposal("o2", "alice")
    from dataclasses import replace

    p = replace(p, cite_certificates=(cert.id,))
    v = flow.x.submit(p, head_view=None)
    assert not v.committed
    assert any(r.code == ReasonCode.STALE_RECORD and r.subject == cert.id for r in v.reasons)
    assert flow.x.submit(p, head_view=flow.heads.get).committed  # with the heads: current


def test_revocation_reaches_work_citing_work_citing_the_evidence(flow) -> None:
    """_revocation citing_closure: transitive, not one level (o3 cites o2 cites o1)."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2", "o3")
    v1 = flow.submit("o1", "alice", record=r1)
    up = next(a.id for a in v1.assertions if a.kind == AssertionKind.RESULT)
    from dataclasses import replace

    v2 = flow.ok(replace(flow.submit_proposal("o2", "alice"), cites=(up,)))
    mid = next(a.id for a in v2.assertions if a.kind == AssertionKind.RESULT)
    v3 = flow.ok(replace(flow.submit_proposal("o3", "alice"), cites=(mid,)))
    (flag,) = flow.x.on_head_change("req/trip", _rec(2, supersedes=r1.id).id)
    for v in (v1, v2, v3):
        assert {a.id for a in v.assertions if a.kind == AssertionKind.RESULT} <= \
            set(flag.assertions)
    assert set(flag.obligations) == {"o1", "o2", "o3"}
    assert flow.x.obligations["o3"].effective_status == Status.REPAIR_PENDING


def test_an_imported_assertion_on_a_revoked_certificate_is_unsound(flow) -> None:
    """_evaluation assertion_sound: a certificate revoked before the import."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2")
    v1 = flow.submit("o1", "alice", record=r1)
    cid = v1.certificates[0].id
    ev = next(iter(flow.x.events))
    flow.x.on_head_change("req/trip", _rec(2, supersedes=r1.id).id)
    assert not flow.x.certificate_active(cid)
    ci = next(e for e in flow.x.events if e.startswith("ci"))
    a = flow.x.import_assertion(Effect.result("o2", {"sha": "x"}), events=(ev, ci),
                                operation="submit", certificates=(cid,), proposer="alice")
    assert not flow.x.assertion_sound(a.id)
    ok = flow.x.import_assertion(Effect.result("o1", {"sha": "y"}), events=(ev, ci),
                                 operation="submit", certificates=(), proposer="alice")
    assert ok.id != a.id


def test_a_revocation_earlier_in_the_same_change_reaches_a_commit(flow) -> None:
    """_transition obligation_steps: body 2 sees the revocation of body 1 (pure)."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2")
    cid = flow.submit("o1", "alice", record=r1).certificates[0].id
    from dataclasses import replace

    p = replace(flow.submit_proposal("o2", "alice"), cite_certificates=(cid,))
    v = audit(p, flow.x, head_view=flow.heads.get)
    assert v.committed, v.reasons
    bodies = [Revoked("req/trip", None, (cid,), (), ()), *v.bodies]
    steps = obligation_steps(flow.x, bodies)
    last = next(s for s in reversed(steps) if s is not None and "o2" in s.obligations)
    assert last.obligations["o2"].repair_pending
    assert {a.id for a in v.assertions if a.obligation == "o2"} <= last.dependents["o2"]
    # without the revocation in front, the same commit is clean
    clean = obligation_steps(flow.x, list(v.bodies))
    o2 = next(s for s in clean if s is not None and "o2" in s.obligations).obligations["o2"]
    assert not o2.repair_pending


# ------------------------------------------------------------------ from `make mutation`
def test_repair_pending_stays_until_every_dependent_assertion_is_superseded(flow) -> None:
    """_transition obligation_steps: superseding one of two revoked assertions (the
    status, by a re-assignment) leaves the obligation repair-pending; the result's
    resubmission clears it."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1")
    flow.submit("o1", "alice", record=r1)
    r2 = _rec(2, supersedes=r1.id)
    (flag,) = flow.x.on_head_change("req/trip", r2.id)
    assert len(flag.assertions) == 2  # status and result
    assert flow.x.obligations["o1"].repair_pending
    flow.assign("o1", "alice")  # supersedes the status assertion only
    assert flow.x.obligations["o1"].repair_pending
    assert flow.x.obligations["o1"].effective_status == Status.REPAIR_PENDING
    flow.heads["req/trip"] = r2.id
    flow.submit("o1", "alice", record=r2)  # repair: supersedes the result too
    assert not flow.x.obligations["o1"].repair_pending


def _with_replace_op():
    """code_review.yaml plus ``replace``: remove work and create its replacement in one
    proposal (transport evidence from the same proposal)."""
    from pathlib import Path

    import yaml

    from icore.state import State, declaration_from_dict

    from .conftest import EXAMPLES, Flow

    data = yaml.safe_load(Path(EXAMPLES / "code_review.yaml").read_text(encoding="utf-8"))
    data["operations"].append({
        "name": "replace", "proposers": ["role:assigner"],
        "effects": [{"kind": "node", "target": "new", "many": True},
                    {"kind": "status", "values": ["superseded"]},
                    {"kind": "relation", "key": "transported_to"}],
        "removes": True, "transports": True})
    return Flow(State(declaration_from_dict(data)))


@pytest.mark.parametrize("root", [True, False])
def test_a_replacement_created_by_the_same_proposal_carries_the_removed_work(root) -> None:
    """_legality check_removals: the node effects of the proposal are its replacements;
    a required root's replacement must be a required root."""
    flow = _with_replace_op()
    flow.introduce("o1")
    eid = flow.any_event()
    p = Proposal("lead", "replace", target="o1",
                 effects=(Effect.node("o1b", "code", required_root=root),
                          Effect.status("o1", Status.SUPERSEDED),
                          Effect.relation("o1", "transported_to", "o1b")),
                 justification=(eid,))
    v = flow.x.submit(p, head_view=flow.heads.get)
    assert v.committed is root, v.reasons
    if not root:
        assert ReasonCode.UNSUPPORTED_REMOVAL in v.codes


def test_flags_of_several_keys_in_one_revalidation_get_distinct_ids(flow) -> None:
    """_revocation revocation_bodies: the n-th flag of one change is numbered after the
    ones before it (with flags already raised)."""
    r1 = _rec(1)
    q1 = Record.create(key="req/other", owner="traveler", seq=1, content={"q": 1})
    flow.heads.update({"req/trip": r1.id, "req/other": q1.id})
    _ready(flow, "o1", "o2", "o3")
    flow.submit("o1", "alice", record=r1)
    flow.submit("o2", "alice", record=q1)
    v3 = flow.submit("o3", "alice", record=r1)
    flow.x.raise_flag(FlagKind.REVOCATION, obligations=("o3",), detail="an earlier flag")
    before = set(flow.x.flags)
    heads = {"req/trip": _rec(2, supersedes=r1.id).id, "req/other": "f" * 64}
    flags = flow.x.revalidate_certificates(heads.get)
    assert len(flags) == 2
    ids = [f.id for f in flags]
    assert len(set(ids)) == 2 and not set(ids) & before
    assert set(flow.x.flags) == before | set(ids)
    assert v3.certificates[0].id in flags[0].certificates + flags[1].certificates


def test_the_citing_closure_skips_superseded_work(flow) -> None:
    """_revocation citing_closure: an assertion that cites revoked work but was already
    superseded is not flagged (only active, untainted ones are)."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2")
    v1 = flow.submit("o1", "alice", record=r1)
    up = next(a.id for a in v1.assertions if a.kind == AssertionKind.RESULT)
    from dataclasses import replace

    v2 = flow.ok(replace(flow.submit_proposal("o2", "alice"), cites=(up,)))
    old = {a.id for a in v2.assertions}
    flow.ok(flow.approve_proposal("o2"))  # supersedes o2's submitted status
    status_old = next(a.id for a in v2.assertions if a.kind == AssertionKind.STATUS)
    (flag,) = flow.x.on_head_change("req/trip", _rec(2, supersedes=r1.id).id)
    assert status_old not in flag.assertions
    assert (old - {status_old}) <= set(flag.assertions)


def test_work_already_reached_by_a_revocation_is_not_flagged_again(flow) -> None:
    """_revocation citing_closure: o2 cites o1's and o3's results; revoking o1's evidence
    reaches o2, and revoking o3's later does not list o2 a second time."""
    r1 = _rec(1)
    q1 = Record.create(key="req/other", owner="traveler", seq=1, content={"q": 1})
    flow.heads.update({"req/trip": r1.id, "req/other": q1.id})
    _ready(flow, "o1", "o2", "o3")
    v1 = flow.submit("o1", "alice", record=r1)
    v3 = flow.submit("o3", "alice", record=q1)
    ups = tuple(next(a.id for a in v.assertions if a.kind == AssertionKind.RESULT)
                for v in (v1, v3))
    from dataclasses import replace

    v2 = flow.ok(replace(flow.submit_proposal("o2", "alice"), cites=ups))
    mine = {a.id for a in v2.assertions}
    (first,) = flow.x.on_head_change("req/trip", _rec(2, supersedes=r1.id).id)
    assert mine <= set(first.assertions)
    (second,) = flow.x.on_head_change("req/other", "e" * 64)
    assert not mine & set(second.assertions)
    assert {a.id for a in v3.assertions} <= set(second.assertions)


def _settle_citing(flow, cert_id: str, event: str) -> Proposal:
    return Proposal("lead", "settle", target="o1",
                    effects=(Effect.status("o1", Status.SETTLED),),
                    justification=(event,), cite_certificates=(cert_id,))


def _approve_tied(flow, oid: str):
    """Approve ``oid`` with an ``approved`` certificate citing it; (certificate, event)."""
    from dataclasses import replace

    p = flow.approve_proposal(oid)
    req = replace(p.certificates[0], obligations=(oid,))
    v = flow.ok(replace(p, certificates=(req,)))
    return v.certificates[0], p.events[0].id


def test_a_cited_certificate_ties_its_obligations_for_settlement(flow) -> None:
    """_legality _cited_certificate: an active ``approved`` certificate of an earlier
    change, cited, is settlement evidence for the obligations it cites."""
    _ready(flow, "o1")
    flow.submit("o1", "alice")
    approved, ev = _approve_tied(flow, "o1")
    assert approved.obligations == ("o1",)
    v = flow.x.submit(_settle_citing(flow, approved.id, ev), head_view=flow.heads.get)
    assert v.committed, v.reasons


def test_settlement_evidence_must_be_of_a_required_kind(flow) -> None:
    """_legality check_removals: a ``ci_green`` certificate tied to o1 is not the
    ``approved`` evidence ``settle`` requires."""
    from dataclasses import replace

    _ready(flow, "o1")
    sp = flow.submit_proposal("o1", "alice")
    ci = flow.ok(replace(sp, certificates=(replace(sp.certificates[0], obligations=("o1",)),))
                 ).certificates[0]
    assert ci.validator == "ci_green" and ci.obligations == ("o1",)
    _, ev = _approve_tied(flow, "o1")
    v = flow.x.submit(_settle_citing(flow, ci.id, ev), head_view=flow.heads.get)
    assert not v.committed
    assert ReasonCode.UNSUPPORTED_REMOVAL in v.codes


def test_a_stale_cited_certificate_says_why(flow) -> None:
    """_legality _cited_certificate: the reason names a stale record with a head view,
    and the missing head view without one."""
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    _ready(flow, "o1", "o2")
    cert = flow.submit("o1", "alice", record=r1).certificates[0]
    from dataclasses import replace

    p = replace(flow.submit_proposal("o2", "alice"), cite_certificates=(cert.id,))
    flow.heads["req/trip"] = _rec(2, supersedes=r1.id).id
    stale = [r for r in flow.x.submit(p, head_view=flow.heads.get).reasons
             if r.subject == cert.id]
    blind = [r for r in flow.x.submit(p, head_view=None).reasons if r.subject == cert.id]
    assert [r.code for r in stale] == [ReasonCode.STALE_RECORD]
    assert "stale record" in stale[0].detail and "no head view" not in stale[0].detail
    assert [r.code for r in blind] == [ReasonCode.STALE_RECORD]
    assert "no head view" in blind[0].detail


def test_every_status_effect_is_checked_for_removal(flow) -> None:
    """_legality check_removals: a settlement listed after another effect is still checked
    for its evidence."""
    _ready(flow, "o1")
    flow.submit("o1", "alice")
    _, ev = _approve_tied(flow, "o1")
    p = Proposal("lead", "settle", target="o1", justification=(ev,),
                 effects=(Effect.claim("o1", "reviewed", True),
                          Effect.status("o1", Status.SETTLED)))
    v = flow.x.submit(p, head_view=flow.heads.get)
    assert not v.committed
    assert any(r.code == ReasonCode.UNSUPPORTED_REMOVAL and r.subject == "o1"
               for r in v.reasons)


def test_a_transferring_removal_needs_its_transport(flow) -> None:
    """_legality check_removals: an operation that transports supersedes only what it
    transports (no ``transported_to`` effect: unsupported)."""
    _ready(flow, "o1")
    p = Proposal("lead", "transfer", target="o1", justification=("mv",),
                 events=(EventSpec("task_posted", "lead", {"description": "move"}, id="mv"),),
                 effects=(Effect.status("o1", Status.SUPERSEDED),))
    v = flow.x.submit(p, head_view=flow.heads.get)
    assert not v.committed
    assert any(r.code == ReasonCode.UNSUPPORTED_REMOVAL and r.subject == "o1"
               for r in v.reasons)


def test_an_owner_fetch_that_raises_is_a_missing_record() -> None:
    """_heads LineageHeadView.record: a fetch that fails (owner down) gives None (fail
    closed: the record, and a certificate over it, is not current), never an exception."""
    from icore.state import LineageHeadView

    r1 = _rec(1)

    def down(rid: str) -> Record | None:
        raise ConnectionError("owner unreachable")

    view = LineageHeadView(lambda key: r1.id, lambda rid: None, fetch=down)
    assert view.record(r1.id) is None
    assert LineageHeadView(lambda key: r1.id, lambda rid: None,
                           fetch={r1.id: r1}.get).record(r1.id) == r1


def test_a_fetch_keeps_looking_past_an_owner_that_sends_other_records() -> None:
    """_heads owners_head_view fetch: an owner's reply is searched for the exact id asked
    for; other records in it are skipped and the next owner is asked."""
    from icore.memory import LocalOwners
    from icore.state import owners_head_view

    om = OwnershipMap.from_mapping({"block/*": "traveler", "sum/*": "planner"})
    traveler, planner = MemoryStore(om, "traveler"), MemoryStore(om, "planner")
    b1 = Record.create(key="block/t1", owner="traveler", seq=1, content={"v": 1})
    traveler.commit(b1, writer="traveler")
    s1 = Record.create(key="sum/t1", owner="planner", seq=1, content={})
    planner.commit(s1, writer="planner")
    inner = LocalOwners({"traveler": traveler, "planner": planner})

    class Chatty:
        """Owners whose planner answers every fetch with its own record first."""

        def query_heads(self, owner, keys, *, timeout_s=None):
            return inner.query_heads(owner, keys, timeout_s=timeout_s)

        def fetch(self, owner, ids, *, timeout_s=None):
            got = list(inner.fetch(owner, ids, timeout_s=timeout_s))
            return [s1, *got] if owner == "planner" else got

    view = owners_head_view(Chatty(), None, ownership=om)
    assert view.record(b1.id) == b1
    assert view.record(s1.id) == s1


def test_a_fetch_asks_the_next_owner_when_one_fails() -> None:
    """_heads owners_head_view fetch: an owner whose fetch raises is skipped; the record
    is fetched from the next owner (and still verified against its id)."""
    from icore.memory import LocalOwners
    from icore.state import owners_head_view

    om = OwnershipMap.from_mapping({"block/*": "traveler", "sum/*": "planner"})
    traveler = MemoryStore(om, "traveler")
    b1 = Record.create(key="block/t1", owner="traveler", seq=1, content={"v": 1})
    traveler.commit(b1, writer="traveler")
    inner = LocalOwners({"traveler": traveler, "planner": MemoryStore(om, "planner")})

    class Flaky:
        """Owners whose planner (asked first) fails every fetch."""

        def query_heads(self, owner, keys, *, timeout_s=None):
            return inner.query_heads(owner, keys, timeout_s=timeout_s)

        def fetch(self, owner, ids, *, timeout_s=None):
            if owner == "planner":
                raise ConnectionError("planner unreachable")
            return inner.fetch(owner, ids, timeout_s=timeout_s)

    assert owners_head_view(Flaky(), None, ownership=om).record(b1.id) == b1


def test_an_unreadable_input_does_not_hide_the_other_inputs() -> None:
    """_heads LineageHeadView.ancestors: an input no one returns is an UNKNOWN_KEY
    ancestor, and the record's other inputs (and theirs) are still walked."""
    from icore.state import UNKNOWN_KEY, CitedRecord, LineageHeadView

    lost = Record.create(key="block/lost", owner="traveler", seq=1, content={})
    roots = [Record.create(key=f"block/{i}", owner="traveler", seq=i + 2, content={"i": i})
             for i in range(6)]
    mids = [derive(key=f"mid/{i}", owner="traveler", seq=20 + i, content={}, inputs=[r])
            for i, r in enumerate(roots)]
    s = derive(key="sum/t1", owner="planner", seq=1, content={}, inputs=[lost, *mids])
    held = {r.id: r for r in (*roots, *mids, s)}
    view = LineageHeadView(lambda key: None, held.get)
    got = view.ancestors(CitedRecord.of(s))
    assert CitedRecord(UNKNOWN_KEY, lost.id) in got
    assert {CitedRecord.of(r) for r in (*roots, *mids)} <= set(got)
    assert len(got) == 13


def test_an_unknown_assertion_is_not_sound(flow) -> None:
    """_evaluation assertion_sound: an id naming no assertion of Pi is unsound (fail
    closed), while a committed assertion is sound."""
    _ready(flow, "o1")
    assert not flow.x.assertion_sound("a-no-such-assertion")
    committed = [a for a in flow.x.assertions if flow.x.assertion_sound(a)]
    assert committed


# ---------------------------------------------------------------------------------------
# _legality_check check_removals: which effects are replacements and which are transports.
# No shipped declaration lets a removing operation write a dict-valued effect other than a
# node, a relation of another key, or a ``transported_to`` key on another kind, so this
# small declaration is written for it. Every removing operation below removes its target
# and transports (``removes`` and ``transports``).

_DICT_KINDS = ("claim", "result", "terminal")


def _removal_decl():
    from icore.state import declaration_from_dict

    def op(name: str, *effects: dict) -> dict:
        return {"name": name, "proposers": ["role:assigner"], "effects": list(effects),
                "removes": True, "transports": True}

    node = {"kind": "node", "target": "new", "many": True}
    gone = {"kind": "status", "values": ["superseded"]}
    moved = {"kind": "relation", "key": "transported_to"}
    ops = [{"name": "introduce", "proposers": ["role:assigner"],
            "preconditions": {"target_required": False}, "effects": [node]}]
    for k in _DICT_KINDS:
        # remove the target to an existing obligation, writing a k effect on that one
        ops.append(op(f"retire_{k}", gone, moved, {"kind": k, "target": "any"}))
        # remove the target to a new obligation, writing a k effect on the new one too
        ops.append(op(f"replace_{k}", node, gone, moved, {"kind": k, "target": "any"}))
    # remove the target, creating work, with relations of any key from the target
    ops.append(op("rework", node, gone, {"kind": "relation", "many": True}))
    # remove the target, creating work, with claims of any key about the target
    ops.append(op("rework_claimed", node, gone, {"kind": "claim", "many": True}))
    return declaration_from_dict({
        "name": "removals",
        "observables": [{"name": "note"}],
        "agents": [{"id": "lead", "roles": ["assigner"], "capabilities": {"code": 0.5}}],
        "operations": ops,
    }, file="removals")


class _Removals:
    """A state over :func:`_removal_decl` (each proposal justified by a new note)."""

    def __init__(self) -> None:
        from icore.state import State

        self.x = State(_removal_decl())
        self.n = 0

    def submit(self, op: str, target: str | None, *effects: Effect):
        self.n += 1
        eid = f"note{self.n}"
        return self.x.submit(Proposal("lead", op, target=target, effects=effects,
                                      events=(EventSpec("note", "lead", {}, id=eid),),
                                      justification=(eid,)), head_view=None)

    def introduce(self, *oids: str, root: bool) -> None:
        v = self.submit("introduce", None,
                        *(Effect.node(o, "code", required_root=root) for o in oids))
        assert v.committed, v.reasons


def _dict_effect(kind: str, oid: str, value: dict) -> Effect:
    if kind == "claim":
        return Effect.claim(oid, "note", value)
    if kind == "result":
        return Effect.result(oid, value)
    return Effect.terminal(oid, value)


def _unsupported(v, oid: str) -> bool:
    return any(r.code == ReasonCode.UNSUPPORTED_REMOVAL and r.subject == oid
               for r in v.reasons)


@pytest.mark.parametrize("kind", _DICT_KINDS)
def test_a_dict_valued_effect_is_not_a_created_replacement(kind) -> None:
    """_legality_check check_removals: only a NODE effect creates a replacement. An
    existing obligation that a dict-valued claim/result/terminal effect names is neither
    created by the proposal nor tied to the removed one, so it carries nothing."""
    r = _Removals()
    r.introduce("o1", "o2", root=False)
    v = r.submit(f"retire_{kind}", "o1", Effect.status("o1", Status.SUPERSEDED),
                 Effect.relation("o1", "transported_to", "o2"),
                 _dict_effect(kind, "o2", {"kind": "code", "required_root": False}))
    assert not v.committed
    assert _unsupported(v, "o1"), v.reasons
    assert any("neither created by the proposal nor tied" in r.detail for r in v.reasons)
    assert r.x.obligations["o1"].status == Status.OPEN


@pytest.mark.parametrize("kind", _DICT_KINDS)
def test_a_dict_valued_effect_does_not_replace_the_node_it_names(kind) -> None:
    """_legality_check check_removals: a dict-valued effect of another kind on a new
    replacement, listed after its node, is not taken as the node: the replacement of a
    required root stays a required root."""
    r = _Removals()
    r.introduce("o1", root=True)
    v = r.submit(f"replace_{kind}", "o1", Effect.node("o1b", "code", required_root=True),
                 Effect.status("o1", Status.SUPERSEDED),
                 Effect.relation("o1", "transported_to", "o1b"),
                 _dict_effect(kind, "o1b", {"moved": "o1"}))
    assert v.committed, v.reasons
    assert r.x.obligations["o1"].status == Status.SUPERSEDED
    assert r.x.obligations["o1b"].required_root


def test_a_relation_of_another_key_is_not_a_transport() -> None:
    """_legality_check check_removals: only a relation keyed ``transported_to`` is transport
    evidence; a ``follows`` relation to a new required root does not carry the work."""
    r = _Removals()
    r.introduce("o1", root=True)
    v = r.submit("rework", "o1", Effect.node("o1b", "code", required_root=True),
                 Effect.status("o1", Status.SUPERSEDED),
                 Effect.relation("o1", "follows", "o1b"))
    assert not v.committed
    assert _unsupported(v, "o1"), v.reasons
    assert r.x.obligations["o1"].status == Status.OPEN


def test_a_relation_of_another_key_is_not_checked_as_a_transport() -> None:
    """_legality_check check_removals: beside a valid ``transported_to``, a relation of
    another key to an obligation that could not carry the work is no failed transport."""
    r = _Removals()
    r.introduce("o1", "o2", root=True)
    v = r.submit("rework", "o1", Effect.node("o1b", "code", required_root=True),
                 Effect.status("o1", Status.SUPERSEDED),
                 Effect.relation("o1", "transported_to", "o1b"),
                 Effect.relation("o1", "follows", "o2"))
    assert v.committed, v.reasons
    assert r.x.obligations["o1"].status == Status.SUPERSEDED


def test_a_transported_to_claim_is_not_a_transport() -> None:
    """_legality_check check_removals: a claim keyed ``transported_to`` (not a relation)
    is no transport evidence, even naming a new required root."""
    r = _Removals()
    r.introduce("o1", root=True)
    v = r.submit("rework_claimed", "o1", Effect.node("o1b", "code", required_root=True),
                 Effect.status("o1", Status.SUPERSEDED),
                 Effect.claim("o1", "transported_to", "o1b"))
    assert not v.committed
    assert _unsupported(v, "o1"), v.reasons
    assert r.x.obligations["o1"].status == Status.OPEN
