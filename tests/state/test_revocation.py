"""Certificates citing PlanFence records: revocation, repair_pending, repair (design.md 4.2)."""

from __future__ import annotations

from icore.memory import MemoryStore, OwnershipMap
from icore.records import Record
from icore.state import (
    CertificateRequest,
    CitedRecord,
    Effect,
    EntryKind,
    EventSpec,
    FlagKind,
    Proposal,
    State,
    Status,
    store_head_view,
)


def _rec(seq: int, parents: tuple[str, ...] = ()) -> Record:
    return Record.create(
        key="req/trip", owner="traveler", seq=seq, content={"v": seq}, parents=parents
    )


class TestOnHeadChange:
    """An owner revision revokes dependent evidence and flags exactly the dependents."""

    def test_revocation_marks_repair_pending_and_drops_snd(self, flow):
        flow.introduce("o1", "o2")
        for o in ("o1", "o2"):
            flow.assign(o, "alice")
            flow.start(o, "alice")
        r1 = _rec(1)
        flow.heads["req/trip"] = r1.id
        v1 = flow.submit("o1", "alice", record=r1)
        flow.submit("o2", "alice")  # no record cited: unaffected
        assert flow.x.metrics().snd == 1.0
        r2 = _rec(2, (r1.id,))
        flow.heads["req/trip"] = r2.id
        flags = flow.x.on_head_change("req/trip", r2.id)
        (flag,) = flags
        assert flag.kind == FlagKind.REVOCATION
        assert set(flag.assertions) == {a.id for a in v1.assertions}
        assert flag.obligations == ("o1",)
        assert flag.certificates == (v1.certificates[0].id,)
        x = flow.x
        assert x.obligations["o1"].effective_status == Status.REPAIR_PENDING
        assert x.obligations["o2"].effective_status == Status.SUBMITTED
        assert not x.certificate_active(v1.certificates[0].id)
        assert not x.is_sound("o1") and x.is_sound("o2")
        assert x.metrics().snd == 0.5
        assert x.metrics() == x.recompute_metrics()
        kinds = [e.kind for e in x.entries[-2:]]
        assert kinds == [EntryKind.REVOCATION, EntryKind.FLAG]

    def test_same_head_or_unrelated_key_revokes_nothing(self, flow):
        flow.introduce("o1")
        flow.assign("o1", "alice")
        flow.start("o1", "alice")
        r1 = _rec(1)
        flow.heads["req/trip"] = r1.id
        flow.submit("o1", "alice", record=r1)
        seq = flow.x.seq
        assert flow.x.on_head_change("req/trip", r1.id) == []
        assert flow.x.on_head_change("other/key", "a" * 64) == []
        assert flow.x.seq == seq

    def test_repair_clears_pending_and_resolves_flag(self, flow):
        flow.introduce("o1")
        flow.assign("o1", "alice")
        flow.start("o1", "alice")
        r1 = _rec(1)
        flow.heads["req/trip"] = r1.id
        flow.submit("o1", "alice", record=r1)
        r2 = _rec(2, (r1.id,))
        flow.heads["req/trip"] = r2.id
        (flag,) = flow.x.on_head_change("req/trip", r2.id)
        assert flow.x.has_productive_work()
        v = flow.submit("o1", "alice", record=r2)  # resubmit against the fresh head
        x = flow.x
        assert x.obligations["o1"].effective_status == Status.SUBMITTED
        assert x.flag_resolution(flag.id) is not None
        assert x.flag_resolution(flag.id).by == "alice"
        assert flag.id in v.bodies[-1].resolved_flags
        assert x.is_sound("o1") and x.metrics().snd == 1.0
        assert x.metrics() == x.recompute_metrics()

    def test_revalidate_against_store_heads(self, flow):
        ownership = OwnershipMap({"req/trip": "traveler"})
        store = MemoryStore(ownership, agent="traveler")
        r1 = _rec(1)
        store.commit(r1, writer="traveler")
        view = store_head_view(store)
        flow.introduce("o1")
        flow.assign("o1", "alice")
        flow.start("o1", "alice")
        v = flow.x.submit(flow.submit_proposal("o1", "alice", record=r1), head_view=view)
        assert v.committed
        assert flow.x.revalidate_certificates(view) == []
        store.commit(_rec(2, (r1.id,)), writer="traveler")
        (flag,) = flow.x.revalidate_certificates(view)
        assert set(flag.assertions) == {a.id for a in v.assertions}
        assert flow.x.revalidate_certificates(view) == []  # already revoked

    def test_missing_head_fails_closed(self, flow):
        flow.introduce("o1")
        flow.assign("o1", "alice")
        flow.start("o1", "alice")
        r1 = _rec(1)
        flow.heads["req/trip"] = r1.id
        flow.submit("o1", "alice", record=r1)
        (flag,) = flow.x.revalidate_certificates(lambda key: None)
        assert flag.kind == FlagKind.REVOCATION

    def test_superseded_dependents_are_not_flagged(self, flow):
        """Only *active* assertions citing the revoked certificate are flagged."""
        flow.introduce("o1")
        flow.assign("o1", "alice")
        flow.start("o1", "alice")
        r1 = _rec(1)
        flow.heads["req/trip"] = r1.id
        v = flow.submit("o1", "alice", record=r1)
        flow.ok(flow.approve_proposal("o1"))  # supersedes the submitted status
        status_aid = next(a.id for a in v.assertions if a.kind == "status")
        result_aid = next(a.id for a in v.assertions if a.kind == "result")
        (flag,) = flow.x.on_head_change("req/trip", "9" * 64)
        assert flag.assertions == (result_aid,)
        assert status_aid not in flag.assertions


def test_reservation_example_revocation(reservation):
    """PlanFence reservation workflow: a revised trip request revokes the itinerary."""
    x = State(reservation)
    heads: dict[str, str] = {}

    def ok(p: Proposal) -> None:
        v = x.submit(p, head_view=heads.get)
        assert v.committed, v.reasons

    ok(
        Proposal(
            "traveler",
            "introduce",
            events=(EventSpec("request_made", "traveler", {"trip": "t17"}, id="req"),),
            effects=(Effect.node("itinerary", "itinerary", required_root=True),),
            justification=("req",),
        )
    )
    ok(
        Proposal(
            "coordinator",
            "assign",
            target="itinerary",
            effects=(Effect.assign("itinerary", "planner"), Effect.status("itinerary", "assigned")),
            justification=("req",),
        )
    )
    trip = Record.create(key="req/trip-17", owner="traveler", seq=1, content={"to": "Oslo"})
    heads[trip.key] = trip.id
    ok(
        Proposal(
            "planner",
            "plan",
            target="itinerary",
            events=(EventSpec("plan_written", "planner", {"plan_record": "p1"}, ("req",), "plan"),),
            effects=(Effect.status("itinerary", "submitted"), Effect.result("itinerary", "p1")),
            justification=("plan",),
            certificates=(CertificateRequest("lineage", records=(CitedRecord.of(trip),)),),
            records=(CitedRecord.of(trip),),
        )
    )
    trip2 = Record.create(
        key="req/trip-17", owner="traveler", seq=2, content={"to": "Bergen"}, parents=[trip.id]
    )
    heads[trip.key] = trip2.id
    (flag,) = x.on_head_change(trip.key, trip2.id)
    assert x.obligations["itinerary"].effective_status == Status.REPAIR_PENDING
    assert flag.obligations == ("itinerary",)
    assert x.metrics().snd == 0.0
