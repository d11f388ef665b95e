"""Issue 14 regression tests for icore.state: order-independent effect matching,
revocation along derivation and citations, progress as a change, trials (undo journal)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.memory import MemoryStore, OwnershipMap
from icore.records import Record
from icore.state import (
    AssertionKind,
    CitedRecord,
    Effect,
    EffectTemplate,
    OperationDecl,
    Proposal,
    ReasonCode,
    State,
    Status,
    export_json,
    store_head_view,
)
from icore.state._legality_rules import match_effects

# ------------------------------------------------------------------ effect matching
OP = OperationDecl(
    "note",
    effects=(EffectTemplate(AssertionKind.CLAIM), EffectTemplate(AssertionKind.CLAIM, key="x")),
)


def _claims(*keys: str) -> Proposal:
    return Proposal("a", "note", target="o", effects=tuple(Effect.claim("o", k) for k in keys))


def test_effect_matching_is_order_independent() -> None:
    """Scenario: templates [claim(any key), claim(key x)] and effects {claim x, claim y}.
    First fit accepted one order and rejected the other; a matching accepts both."""
    assert match_effects(OP, _claims("x", "y"), set()) is None
    assert match_effects(OP, _claims("y", "x"), set()) is None
    assert match_effects(OP, _claims("y", "z"), set()) is not None  # nothing fits key x
    assert match_effects(OP, _claims("x"), set()) is not None  # a template left empty
    assert match_effects(OP, _claims("x", "x", "y"), set()) is not None  # one too many


def _brute(templates: tuple[EffectTemplate, ...], p: Proposal) -> bool:
    from icore.state._legality_rules import _fits

    fits = [[i for i, t in enumerate(templates) if _fits(e, t.kind, t, p, set())]
            for e in p.effects]
    for choice in itertools.product(*fits):
        used = [choice.count(i) for i in range(len(templates))]
        if all(u >= 1 and (u == 1 or templates[i].many) for i, u in enumerate(used)):
            return True
    return False


_TEMPLATE = st.builds(
    EffectTemplate,
    st.sampled_from([AssertionKind.CLAIM, AssertionKind.RESULT]),
    key=st.sampled_from([None, "x", "y"]),
    many=st.booleans(),
)
_EFFECT = st.tuples(st.sampled_from([AssertionKind.CLAIM, AssertionKind.RESULT]),
                    st.sampled_from(["", "x", "y"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEMPLATE, min_size=1, max_size=3), st.lists(_EFFECT, min_size=1, max_size=5),
       st.randoms(use_true_random=False))
def test_effect_matching_finds_an_assignment_iff_one_exists(templates, effects, rnd) -> None:
    """Property: the matcher agrees with brute force over every assignment, and its
    answer does not depend on the order of the effects."""
    ts = tuple(templates)
    op = OperationDecl("op", effects=ts)
    effs = [Effect(kind, "o", 1, key) for kind, key in effects]
    p = Proposal("a", "op", target="o", effects=tuple(effs))
    want = _brute(ts, p)
    assert (match_effects(op, p, set()) is None) == want
    rnd.shuffle(effs)
    assert (match_effects(op, Proposal("a", "op", target="o", effects=tuple(effs)), set())
            is None) == want


# ------------------------------------------------------------------ derivation
def _store() -> MemoryStore:
    return MemoryStore(OwnershipMap.from_mapping({"block": "owner", "summary": "writer"}))


def _commit(store: MemoryStore, key: str, owner: str, v: int, parents=()) -> Record:
    rec = Record.create(key=key, owner=owner, seq=store.next_seq(owner), content={"v": v},
                        parents=parents)
    store.commit(rec, writer=owner)
    return rec


def _plan(flow, oid: str, rec: Record):
    return flow.submit_proposal(oid, "alice", record=rec)


def test_revocation_follows_derivation_through_exact_parents(flow) -> None:
    """Scenario: a certificate cites summary S derived from block v1. The block's owner
    commits v2: the certificate is revoked (it used to stay active), its work becomes
    repair-pending, and a new plan certified on S is rejected as stale."""
    store = _store()
    view = store_head_view(store)
    b1 = _commit(store, "block", "owner", 1)
    s1 = _commit(store, "summary", "writer", 1, (b1.id,))
    assert view.ancestors(CitedRecord.of(s1)) == (CitedRecord("block", b1.id),)
    flow.introduce("o1", "o2")
    for o in ("o1", "o2"):
        flow.assign(o, "alice")
        flow.start(o, "alice")
    v = flow.x.submit(_plan(flow, "o1", s1), head_view=view)
    assert v.committed, v.reasons
    cert = v.certificates[0]
    assert cert.lineage == (CitedRecord("block", b1.id),)
    b2 = _commit(store, "block", "owner", 2, (b1.id,))
    (flag,) = flow.x.on_head_change("block", b2.id)
    assert flag.certificates == (cert.id,)
    assert not flow.x.certificate_active(cert.id)
    assert flow.x.obligations["o1"].effective_status == Status.REPAIR_PENDING
    v2 = flow.x.submit(_plan(flow, "o2", s1), head_view=view)
    assert ReasonCode.STALE_RECORD in v2.codes
    assert flow.x.metrics() == flow.x.recompute_metrics()


def test_revalidate_certificates_follows_derivation(flow) -> None:
    """The same through ``revalidate_certificates`` (every cited or ancestor key)."""
    store = _store()
    view = store_head_view(store)
    b1 = _commit(store, "block", "owner", 1)
    s1 = _commit(store, "summary", "writer", 1, (b1.id,))
    flow.introduce("o1")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    assert flow.x.submit(_plan(flow, "o1", s1), head_view=view).committed
    assert flow.x.revalidate_certificates(view) == []
    _commit(store, "block", "owner", 2, (b1.id,))
    (flag,) = flow.x.revalidate_certificates(view)
    assert flag.obligations == ("o1",)


def test_a_same_key_parent_is_a_superseded_version_not_an_ancestor(flow) -> None:
    """docs/state.md: S v2 (parent S v1) derives from nothing; citing it while it is
    the head is current."""
    store = _store()
    view = store_head_view(store)
    s1 = _commit(store, "summary", "writer", 1)
    s2 = _commit(store, "summary", "writer", 2, (s1.id,))
    assert view.ancestors(CitedRecord.of(s2)) == ()
    flow.introduce("o1")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    assert flow.x.submit(_plan(flow, "o1", s2), head_view=view).committed


def test_revoking_a_stage_makes_the_work_that_cited_it_repair_pending(flow) -> None:
    """Scenario: stage o2's commit cites stage o1's result; o1's evidence is revoked.
    o2 becomes repair-pending and unsound too (it used to stay sound)."""
    r1 = Record.create(key="req/trip", owner="traveler", seq=1, content={"v": 1})
    flow.heads["req/trip"] = r1.id
    flow.introduce("o1", "o2")
    for o in ("o1", "o2"):
        flow.assign(o, "alice")
        flow.start(o, "alice")
    v1 = flow.submit("o1", "alice", record=r1)
    upstream = next(a.id for a in v1.assertions if a.kind == AssertionKind.RESULT)
    v2 = flow.ok(_with_cites(flow.submit_proposal("o2", "alice"), (upstream,)))
    assert flow.x.is_sound("o2")
    r2 = Record.create(key="req/trip", owner="traveler", seq=2, content={"v": 2},
                       parents=(r1.id,))
    flow.heads["req/trip"] = r2.id
    (flag,) = flow.x.on_head_change("req/trip", r2.id)
    assert set(flag.obligations) == {"o1", "o2"}
    assert {a.id for a in v2.assertions} <= set(flag.assertions)
    assert flow.x.obligations["o2"].effective_status == Status.REPAIR_PENDING
    assert not flow.x.is_sound("o2")
    assert flow.x.metrics() == flow.x.recompute_metrics()
    # a repair of both stages clears the flag
    flow.heads["req/trip"] = r2.id
    v3 = flow.ok(flow.submit_proposal("o1", "alice", record=r2))
    up2 = next(a.id for a in v3.assertions if a.kind == AssertionKind.RESULT)
    flow.ok(_with_cites(flow.submit_proposal("o2", "alice"), (up2,)))
    assert flow.x.flag_resolution(flag.id) is not None


def _with_cites(p: Proposal, cites: tuple[str, ...]) -> Proposal:
    from dataclasses import replace

    return replace(p, cites=cites)


# ------------------------------------------------------------------ progress, trials
def test_progress_is_a_change_of_a_progress_field(flow) -> None:
    """The built-in ``progress``: re-asserting the value a slot already holds is not
    progress; a change of a declared progress field is."""
    from icore.state import Assertion, Transition
    from icore.state._interfaces import status_change_progress

    op = OperationDecl("work", effects=(EffectTemplate(AssertionKind.STATUS),), productive=True)
    a = Assertion("a9", "o1", AssertionKind.STATUS, "", "active", "alice", "p9")
    p = Proposal("alice", "work", target="o1")
    assert status_change_progress(Transition(op, p, (a,), ("assigned",)))
    assert not status_change_progress(Transition(op, p, (a,), ("active",)))
    assert not status_change_progress(Transition(op, p, (a,), ("assigned",), fields=("result",)))
    # end to end: submitting twice, the second with the same status and result
    flow.introduce("o1")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    v = flow.submit("o1", "alice")
    assert v.progress and v.progressed == ("o1",)


def test_trial_undoes_everything(flow) -> None:
    """A trial applies changes in memory and undoes them exactly (no replay)."""
    flow.introduce("o1", "o2")
    flow.assign("o1", "alice")
    x: State = flow.x
    before = export_json(x)
    seq, n, m = x.seq, len(x.entries), x.metrics()
    with x.trial():
        flow.start("o1", "alice")
        flow.submit("o1", "alice")
        flow.introduce("o3")
        x.record_note("diagnosis", {"k": 1})
        assert x.seq > seq and "o3" in x.obligations
    assert export_json(x) == before
    assert (x.seq, len(x.entries), x.metrics()) == (seq, n, m)
    assert x.metrics() == x.recompute_metrics()
    assert x.history(["o1"], 10) == tuple(
        e.body.proposal.id for e in x.entries if e.kind == "proposal"
        and any(f.obligation == "o1" for f in e.body.proposal.effects)
    )[-10:]
    flow.start("o1", "alice")  # X still works normally
    assert x.obligations["o1"].status == Status.ACTIVE

