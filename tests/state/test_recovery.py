"""The candidate-recovery pattern iCORE-Audit uses: audit, evaluate on a copy, commit."""

from __future__ import annotations

from icore.records import Record
from icore.state import audit, equivalent


def test_candidate_recovery_on_matched_set(flow):
    flow.introduce("o1", "o2")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
    flow.heads["spec/x"] = r1.id
    flow.submit("o1", "alice", record=r1)
    r2 = Record.create(key="spec/x", owner="lead", seq=2, content={"v": 2}, parents=[r1.id])
    flow.heads["spec/x"] = r2.id
    (flag,) = flow.x.on_head_change("spec/x", r2.id)
    x = flow.x
    w_f = x.freeze(flag.obligations)
    before = x.metrics(over=w_f)
    assert before.snd == 0.0

    v = audit(flow.submit_proposal("o1", "alice", record=r2), x, head_view=flow.heads.get)
    assert v.committed
    xf = x.copy()
    assert equivalent(xf, x) and xf.seq == x.seq
    xf.apply_verdict(v)
    after = xf.metrics(over=w_f)
    assert after.cq >= before.cq and after.snd == 1.0
    assert x.metrics(over=w_f) == before  # the live state is untouched
    x.apply_verdict(v)
    assert equivalent(x, xf)
    assert x.flag_resolution(flag.id) is not None
    x.record_note("recovery", {"flag": flag.id, "accepted": True}, ref=v.proposal.id)
    assert x.entries[-1].body.kind == "recovery"
