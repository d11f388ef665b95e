"""Revocation follows derivation across a team's owners (issue 30 item 1).

Each owner's records live in its own store (a store hosts one agent's keys); the
lineage-aware head view reads heads from the owners and records from a replica or by
exact id from their owners (icore.state.owners_head_view).
"""

from __future__ import annotations

from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive
from icore.state import (
    UNKNOWN_KEY,
    CitedRecord,
    FlagKind,
    LineageHeadView,
    ReasonCode,
    Status,
    owners_head_view,
)

OM = OwnershipMap.from_mapping({"block/*": "traveler", "sum/*": "planner"})


def _team():
    """traveler owns block/t1 (v1); planner owns sum/t1 derived from block v1."""
    traveler = MemoryStore(OM, "traveler")
    planner = MemoryStore(OM, "planner")
    b1 = Record.create(key="block/t1", owner="traveler", seq=1, content={"v": 1})
    traveler.commit(b1, writer="traveler")
    s1 = derive(key="sum/t1", owner="planner", seq=1, content={"sum": 1}, inputs=[b1],
                type="summary")
    planner.commit(s1, writer="planner")  # lineage incomplete there: b1 is another owner's
    owners = LocalOwners({"traveler": traveler, "planner": planner})
    return traveler, planner, owners, b1, s1


def _revise(traveler: MemoryStore, b1: Record) -> Record:
    b2 = Record.create(key="block/t1", owner="traveler", seq=2, content={"v": 2},
                       supersedes=b1.id)
    traveler.commit(b2, writer="traveler")
    return b2


def _certified(flow, view, rec: Record):
    flow.introduce("o1")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    v = flow.x.submit(flow.submit_proposal("o1", "alice", record=rec), head_view=view)
    assert v.committed, v.reasons
    return v


def test_revising_another_owners_input_revokes_with_one_flag(flow) -> None:
    """The issue's scenario: revising block/t1 revokes the certificate over sum/t1."""
    traveler, _planner, owners, b1, s1 = _team()
    view = owners_head_view(owners, None, ownership=OM)
    assert view("block/t1") == b1.id and view("sum/t1") == s1.id
    assert view.ancestors(CitedRecord.of(s1)) == (CitedRecord("block/t1", b1.id),)
    v = _certified(flow, view, s1)
    cert = v.certificates[0]
    assert cert.lineage == (CitedRecord("block/t1", b1.id),)
    assert flow.x.revalidate_certificates(view) == []
    _revise(traveler, b1)
    flags = flow.x.revalidate_certificates(view)
    assert len(flags) == 1 and flags[0].kind == FlagKind.REVOCATION
    assert flags[0].certificates == (cert.id,)
    assert not flow.x.certificate_active(cert.id)
    assert flow.x.obligations["o1"].effective_status == Status.REPAIR_PENDING
    assert flow.x.revalidate_certificates(view) == []  # already revoked: no second flag


def test_on_head_change_of_the_input_key_revokes(flow) -> None:
    traveler, _planner, owners, b1, s1 = _team()
    view = owners_head_view(owners, ownership=OM)
    cert = _certified(flow, view, s1).certificates[0]
    b2 = _revise(traveler, b1)
    (flag,) = flow.x.on_head_change("block/t1", b2.id)
    assert flag.certificates == (cert.id,)


def test_a_local_replica_is_read_before_fetching(flow) -> None:
    """Records from a replica; heads still from the owners (and a mapping works)."""
    _traveler, _planner, owners, b1, s1 = _team()
    owners.down.add("traveler")  # the traveler cannot be asked for records or heads
    view = owners_head_view(owners, {b1.id: b1, s1.id: s1}, ownership=OM)
    assert view.ancestors(CitedRecord.of(s1)) == (CitedRecord("block/t1", b1.id),)
    assert view("block/t1") is None  # but its head cannot be read: not current


def test_an_ancestor_no_one_returns_fails_closed(flow) -> None:
    """The input's owner is down and no replica has it: the citation is stale."""
    _traveler, _planner, owners, _b1, s1 = _team()
    owners.down.add("traveler")
    view = owners_head_view(owners, ownership=OM)
    (anc,) = view.ancestors(CitedRecord.of(s1))
    assert anc.key == UNKNOWN_KEY and view(UNKNOWN_KEY) is None
    flow.introduce("o1")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    v = flow.x.submit(flow.submit_proposal("o1", "alice", record=s1), head_view=view)
    assert not v.committed
    assert ReasonCode.STALE_RECORD in v.codes


def test_a_cited_record_no_one_returns_fails_closed() -> None:
    view = LineageHeadView(lambda key: None, lambda rid: None)
    assert view.ancestors(CitedRecord("sum/t1", "a" * 64)) == (
        CitedRecord(UNKNOWN_KEY, "a" * 64),)


def test_a_forged_fetch_is_not_an_ancestor() -> None:
    """A fetched record that does not hash to the id asked for is never used."""
    b1 = Record.create(key="block/t1", owner="traveler", seq=1, content={"v": 1})
    s1 = derive(key="sum/t1", owner="planner", seq=1, content={}, inputs=[b1])
    forged = Record(b1.key, b1.owner, b1.seq, b1.parents, b1.type, {"v": 666},
                    b1.content_address, b1.size, b1.schema, b1.id)
    view = LineageHeadView(lambda key: None, {s1.id: s1}.get,
                           fetch=lambda rid: forged if rid == b1.id else None)
    assert view.ancestors(CitedRecord.of(s1)) == (CitedRecord(UNKNOWN_KEY, b1.id),)


def test_an_owner_that_raises_or_answers_for_another_key_gives_no_head() -> None:
    class Odd:
        def query_heads(self, owner, keys, *, known=None, timeout_s=0.0):
            raise RuntimeError("down")

        def fetch(self, owner, ids, *, timeout_s=0.0):
            raise RuntimeError("down")

    view = owners_head_view(Odd(), ownership=OM)
    assert view("block/t1") is None
    assert view("unowned/key") is None


def test_the_lineage_walk_is_bounded() -> None:
    """More ancestors than ``max_records``: an unknown ancestor (never current)."""
    recs: dict[str, Record] = {}
    prev: list[Record] = []
    for i in range(5):
        r = derive(key=f"k{i}", owner="o", seq=i + 1, content={"i": i}, inputs=prev)
        recs[r.id] = r
        prev = [r]
    view = LineageHeadView(lambda key: None, recs.get, max_records=2)
    assert any(a.key == UNKNOWN_KEY for a in view.ancestors(CitedRecord.of(prev[0])))


class _Liar:
    """An OwnerAccess whose replies are wrong in one way (fail-closed cases)."""

    def __init__(self, owners: LocalOwners, *, owner_name: str | None = None,
                 key: str | None = None, fetch_owner: str | None = None) -> None:
        self.owners, self.owner_name, self.key, self.fetch_owner = (owners, owner_name, key,
                                                                     fetch_owner)

    def query_heads(self, owner, keys, *, known=None, timeout_s=0.0):
        from icore.memory import HeadEntry, HeadReply

        reply = self.owners.query_heads(owner, keys)
        heads = dict(reply.heads)
        if self.key is not None:
            heads = {k: HeadEntry(self.key, e.record_id, e.seq) for k, e in heads.items()}
        return HeadReply(self.owner_name or reply.owner, heads)

    def fetch(self, owner, ids, *, timeout_s=0.0):
        got = self.owners.fetch(owner, ids)
        if self.fetch_owner is not None:
            got = [Record.create(key=r.key, owner=self.fetch_owner, seq=r.seq,
                                 content=r.content, parents=r.parents) for r in got]
        return got


def test_a_reply_naming_another_owner_or_key_gives_no_head() -> None:
    _traveler, _planner, owners, b1, _s1 = _team()
    assert owners_head_view(owners, ownership=OM)("block/t1") == b1.id
    assert owners_head_view(_Liar(owners, owner_name="planner"),
                            ownership=OM)("block/t1") is None
    assert owners_head_view(_Liar(owners, key="block/t2"), ownership=OM)("block/t1") is None


def test_a_fetched_record_that_is_not_the_one_asked_is_not_used() -> None:
    """An owner returning a record under another owner (another id) is refused."""
    _traveler, _planner, owners, b1, s1 = _team()
    view = owners_head_view(_Liar(owners, fetch_owner="planner"), ownership=OM)
    anc = view.ancestors(CitedRecord.of(s1))
    assert anc and all(a.key == UNKNOWN_KEY for a in anc)
    good = owners_head_view(owners, ownership=OM)
    assert good.record(b1.id) == b1 and good.record(b1.id) is good.record(b1.id)


def test_a_replica_lookup_that_raises_falls_back_to_fetching() -> None:
    _traveler, _planner, owners, b1, s1 = _team()

    def broken(rid):
        raise RuntimeError("replica closed")

    view = owners_head_view(owners, broken, ownership=OM)
    assert view.ancestors(CitedRecord.of(s1)) == (CitedRecord("block/t1", b1.id),)


def test_a_head_that_is_not_a_record_id_is_no_head() -> None:
    view = LineageHeadView(lambda key: "not-an-id", lambda rid: None)
    assert view("k") is None
    view2 = LineageHeadView(lambda key: 7, lambda rid: None)  # type: ignore[arg-type,return-value]
    assert view2("k") is None


def test_the_lineage_walk_stops_at_the_bound() -> None:
    """Reaching ``max_records`` ends the walk at once: one unknown ancestor, nothing
    read past it."""
    ins = [Record.create(key=f"in{i}", owner="o", seq=i + 1, content={}) for i in range(3)]
    root = derive(key="plan", owner="o", seq=9, content={}, inputs=ins)
    recs = {r.id: r for r in (*ins, root)}
    view = LineageHeadView(lambda key: None, recs.get, max_records=2)
    assert view.ancestors(CitedRecord.of(root)) == (
        CitedRecord(UNKNOWN_KEY, ins[1].id), CitedRecord("in0", ins[0].id))
