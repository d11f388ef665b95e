"""``icore.audit.diagnose_flags``: the one diagnosis step of a run's hard flags.

Library-level (no lab workload): X is the code-review example D driven by the state
tests' :class:`Flow`; a PlanFence revision revokes evidence and raises the hard flags.
"""

from __future__ import annotations

from icore.audit import Trigger, TriggerHit, diagnose_flags, diagnose_hit
from icore.records import Record
from icore.state import ProposalRecorded, State


def _rec(seq: int, parents: tuple[str, ...] = ()) -> Record:
    return Record.create(
        key="req/trip", owner="traveler", seq=seq, content={"v": seq}, parents=parents
    )


def _two_flags(flow):
    """Two revocation flags (o1 then o2), each raised by its own revision."""
    flow.introduce("o1", "o2")
    for o in ("o1", "o2"):
        flow.assign(o, "alice")
        flow.start(o, "alice")
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    flow.submit("o1", "alice", record=r1)
    (f1,) = flow.x.on_head_change("req/trip", _rec(2, (r1.id,)).id)
    r3 = _rec(3, (r1.id,))
    flow.heads["req/trip"] = r3.id
    flow.submit("o2", "alice", record=r3)
    (f2,) = flow.x.on_head_change("req/trip", _rec(4, (r3.id,)).id)
    return f1, f2


def test_one_diagnosis_per_flag_in_order_routed(flow):
    """Each flag gets F (hard_flag trigger, its obligations, routed), ids by flag order."""
    f1, f2 = _two_flags(flow)
    x = flow.x
    before = (len(x.entries), x.metrics())
    ds = diagnose_flags(x, [f1, f2])
    assert [d.id for d in ds] == ["d1", "d2"]
    assert [d.flags for d in ds] == [(f1.id,), (f2.id,)]
    assert [d.obligations for d in ds] == [("o1",), ("o2",)]
    assert [d.step for d in ds] == [x.proposal_count()] * 2  # the step in progress
    for d, f in zip(ds, (f1, f2), strict=True):
        assert d.primary == Trigger.HARD_FLAG and d.defect == "evidence"
        assert d.responsible == "alice"
        assert d.detail == f"{f.kind} {f.id}: {f.detail}"
        # the same F as diagnose_hit on the flag's trigger (the one step, not a copy)
        hit = TriggerHit(Trigger.HARD_FLAG, f.obligations, (f.id,), f.detail)
        assert diagnose_hit(x, hit, diagnosis_id=d.id, step=d.step) == d
    assert (len(x.entries), x.metrics()) == before  # pure: X unchanged


def test_first_id_numbers_by_flag_position(flow):
    """``first_id`` offsets the ids; one flag at a time continues a live run's numbering."""
    _f1, f2 = _two_flags(flow)
    (d,) = diagnose_flags(flow.x, [f2], first_id=5)
    assert d.id == "d5" and d.flags == (f2.id,)
    assert diagnose_flags(flow.x, []) == ()


def _ordinal(x: State, proposal_id: str) -> int:
    """The proposal number (from 1) of ``proposal_id`` in X's log."""
    ids = [e.body.proposal.id for e in x.entries if isinstance(e.body, ProposalRecorded)]
    return ids.index(proposal_id) + 1


def test_a_proposals_flag_is_diagnosed_at_that_proposals_step(flow):
    """The step rule (icore Sec. 4, Alg. 1): a flag raised by the k-th proposal is
    diagnosed at step k, the proposal's own (not k - 1, the proposals before it, nor
    the step after); a revocation between proposals k and k + 1 gets step k (#26)."""
    x = flow.x
    flow.introduce("o1", "o2")
    for o in ("o1", "o2"):
        flow.assign(o, "alice")
        flow.start(o, "alice")
    assert x.proposal_count() == 5
    # the 6th proposal claims a green CI run that is red: rejected with a hard flag
    v = x.submit(flow.submit_proposal("o1", "alice", status="red"), head_view=flow.heads.get)
    assert not v.committed and v.flags
    assert {f.proposal for f in v.flags} == {v.proposal.id}
    assert _ordinal(x, v.proposal.id) == 6
    ds = diagnose_flags(x, v.flags)
    assert ds and [d.step for d in ds] == [6] * len(ds)
    # the 7th proposal cites a record; the owner's revision then revokes its evidence
    r1 = _rec(1)
    flow.heads["req/trip"] = r1.id
    flow.submit("o2", "alice", record=r1)
    (f,) = x.on_head_change("req/trip", _rec(2, (r1.id,)).id)
    assert f.proposal is None
    (d,) = diagnose_flags(x, [f], first_id=len(ds) + 1)
    assert d.step == 7 == x.proposal_count()
