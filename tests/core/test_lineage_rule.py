"""One lineage rule for the gate, the stores and iCORE (issue 30 item 2).

A record's inputs are its parents of other keys; the owner's chain (``supersedes``, or a
legacy same-key parent) is never walked. The gate's frontier, the stores' lineage
completeness and iCORE's derivation ancestors all apply :func:`icore.records.is_chain_link`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import FrontierConflict, HeadConflict, MalformedRecord, MissingParent
from icore.fence import Outcome, Reason, validate
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import (
    Record,
    ancestors,
    decode_record,
    derive,
    encode_record,
    frontier,
    is_chain_link,
    lineage_inputs,
    record_from_wire,
    record_to_wire,
)
from icore.state import CitedRecord, LineageHeadView

OM = OwnershipMap.from_mapping({"req/*": "traveler", "plan/*": "executor"})


def _req(seq: int, **kw) -> Record:
    return Record.create(key="req/t", owner="traveler", seq=seq, content={"v": seq},
                         type="requirement", **kw)


# ------------------------------------------------------------------ identity
def test_records_without_supersedes_keep_their_ids() -> None:
    """The link is hashed only when set: ids of existing records do not change."""
    a = _req(1)
    b = _req(2, parents=[a.id])
    assert a.id == "d3d071bd84ded1cbe75acff25990f4c062b2b6c09cab452803222e1a9516000b"
    assert b.id == "b4a0d4ac7bd21633ca6e27803d216fae1cbb31085923aafb45f644efffaac8cc"
    assert "u" not in a.envelope()
    c = _req(2, supersedes=a.id)
    assert c.envelope()["u"] == a.id and c.id != b.id


def test_supersedes_round_trips_and_is_hashed() -> None:
    a = _req(1)
    c = _req(2, supersedes=a.id)
    assert decode_record(encode_record(c)) == c
    assert len(record_to_wire(a)) == 10 and len(record_to_wire(c)) == 11
    assert decode_record(encode_record(c.without_content())).supersedes == a.id
    wire = record_to_wire(c)
    wire[10] = bytes.fromhex(_req(3).id)
    with pytest.raises(Exception, match="does not match"):
        record_from_wire(wire)


@pytest.mark.parametrize("bad", ["nothex", "A" * 64])
def test_supersedes_must_be_a_record_id(bad: str) -> None:
    with pytest.raises(MalformedRecord) as ei:
        _req(2, supersedes=bad)
    assert ei.value.fields["field"] == "supersedes"


def test_the_superseded_version_is_not_also_an_input() -> None:
    a = _req(1)
    with pytest.raises(MalformedRecord, match="not an input"):
        _req(2, parents=[a.id], supersedes=a.id)


def test_a_record_cannot_supersede_itself() -> None:
    a = _req(1)
    forged = Record(a.key, a.owner, a.seq, (), a.type, a.content, a.content_address, a.size,
                    a.schema, a.id, a.id)
    with pytest.raises(MalformedRecord, match="supersede itself"):
        forged.check_envelope()


def test_chain_link_and_inputs() -> None:
    a, b = _req(1), _req(2)
    plan1 = derive(key="plan/t", owner="executor", seq=1, content={}, inputs=[a])
    plan2 = derive(key="plan/t", owner="executor", seq=2, content={}, inputs=[b],
                   supersedes=plan1)
    legacy = Record.create(key="plan/t", owner="executor", seq=3, content={},
                           parents=[plan2.id, b.id])
    assert is_chain_link(plan2, plan1) and not is_chain_link(plan2, b)
    assert is_chain_link(legacy, plan2)
    recs = {r.id: r for r in (a, b, plan1, plan2)}
    assert lineage_inputs(legacy, recs.get) == (b,)
    assert lineage_inputs(plan2, recs.get) == (b,)
    assert lineage_inputs(legacy, {}.get) == (plan2.id, b.id)  # unknown: caller fails closed
    assert set(ancestors(legacy.id, (recs | {legacy.id: legacy}).get)) == {legacy.id, b.id}
    with pytest.raises(MissingParent):
        ancestors(legacy.id, {legacy.id: legacy}.get)


# ------------------------------------------------------------------ the gate
def _world():
    traveler = MemoryStore(OM, "traveler")
    executor = MemoryStore(OM, "executor")
    owners = LocalOwners({"traveler": traveler, "executor": executor})
    return traveler, executor, owners


def _commit(store: MemoryStore, rec: Record, writer: str, **kw) -> Record:
    store.commit(rec, writer=writer, **kw)
    return rec


@pytest.mark.parametrize("how", ["legacy_parent", "supersedes"])
def test_a_replan_citing_the_plan_it_replaces_is_authorized(how: str) -> None:
    """The issue's unexplained block: plan v2 cites plan v1 (the owner's compare-and-set
    base) and req v2. The walk does not go through plan v1 into req v1."""
    traveler, executor, owners = _world()
    r1 = _commit(traveler, _req(1), "traveler")
    executor.install(r1)
    p1 = _commit(executor, derive(key="plan/t", owner="executor", seq=1, content={"n": 1},
                                  inputs=[r1]), "executor")
    r2 = _commit(traveler, _req(2, supersedes=r1.id), "traveler")
    executor.install(r2)
    if how == "supersedes":
        p2 = derive(key="plan/t", owner="executor", seq=2, content={"n": 2}, inputs=[r2],
                    supersedes=p1)
    else:
        p2 = Record.create(key="plan/t", owner="executor", seq=2, content={"n": 2},
                           parents=[p1.id, r2.id], type="plan")
    _commit(executor, p2, "executor")  # FROM_PARENTS: the base is p1 either way
    d = validate(roots=[p2.id], deps=["req/t"], lookup=executor.lookup, ownership=OM,
                 owners=owners)
    assert d.outcome is Outcome.AUTHORIZED, d.detail
    assert d.frontier == {"req/t": r2.id}
    # iCORE agrees: the certificate over p2 depends on r2 only
    view = LineageHeadView(lambda k: None, executor.get)
    assert view.ancestors(CitedRecord.of(p2)) == (CitedRecord("req/t", r2.id),)


def test_citing_two_versions_as_inputs_still_conflicts() -> None:
    traveler, _executor, _owners = _world()
    r1 = _commit(traveler, _req(1), "traveler")
    s = derive(key="plan/s", owner="executor", seq=1, content={}, inputs=[r1])
    r2 = _req(2, supersedes=r1.id)
    p = derive(key="plan/t", owner="executor", seq=2, content={}, inputs=[s, r2])
    recs = {r.id: r for r in (r1, r2, s, p)}
    with pytest.raises(FrontierConflict):
        frontier([p.id], ["req/t"], recs.get)


def test_a_replica_holding_only_the_current_version_can_act() -> None:
    """req v2 names its base with supersedes: installed without v1 it is complete."""
    traveler, executor, owners = _world()
    r1 = _commit(traveler, _req(1), "traveler")
    r2 = _commit(traveler, _req(2, supersedes=r1.id), "traveler")
    executor.install(r2)  # v1 never installed
    assert executor.is_complete(r2.id) and executor.lookup(r2.id) == r2
    p = _commit(executor, derive(key="plan/t", owner="executor", seq=1, content={},
                                 inputs=[r2]), "executor")
    d = validate(roots=[p.id], deps=["req/t"], lookup=executor.lookup, ownership=OM,
                 owners=owners)
    assert d.outcome is Outcome.AUTHORIZED, d.detail


def test_a_legacy_same_key_parent_that_is_not_held_fails_closed() -> None:
    """Without the link, a missing parent cannot be told from an input: incomplete."""
    traveler, executor, owners = _world()
    r1 = _commit(traveler, _req(1), "traveler")
    r2 = _commit(traveler, _req(2, parents=[r1.id]), "traveler")
    executor.install(r2)
    assert not executor.is_complete(r2.id) and executor.lookup(r2.id) is None
    p = _commit(executor, derive(key="plan/t", owner="executor", seq=1, content={},
                                 inputs=[r2]), "executor")
    d = validate(roots=[p.id], deps=["req/t"], lookup=executor.lookup, ownership=OM,
                 owners=owners)
    assert d.outcome is Outcome.BLOCKED and d.reason is Reason.LINEAGE_INCOMPLETE
    executor.install(r1)  # the chain link arrives: complete, and not walked
    assert executor.is_complete(r2.id)


def test_an_incomplete_chain_link_does_not_make_its_successor_incomplete() -> None:
    """A same-key parent need not be complete itself: it is not an input."""
    _t, executor, _o = _world()
    other = Record.create(key="req/u", owner="traveler", seq=1, content={})
    r1 = _req(2, parents=[other.id])
    r2 = _req(3, parents=[r1.id])
    executor.install(r1)
    executor.install(r2)
    assert not executor.is_complete(r1.id)
    assert executor.is_complete(r2.id)


def test_supersedes_is_the_compare_and_set_base() -> None:
    traveler, _e, _o = _world()
    r1 = _commit(traveler, _req(1), "traveler")
    r2 = _commit(traveler, _req(2, supersedes=r1.id), "traveler")
    with pytest.raises(HeadConflict) as ei:
        traveler.commit(_req(3, supersedes=r1.id), writer="traveler")
    assert ei.value.fields["expected"] == r1.id and ei.value.fields["current"] == r2.id
    with pytest.raises(HeadConflict):  # an explicit base cannot contradict the link
        traveler.commit(_req(3, supersedes=r1.id), writer="traveler", expected_head=r2.id)
    with pytest.raises(HeadConflict):  # a creation cannot supersede anything
        MemoryStore(OM, "traveler").commit(_req(1, supersedes=r2.id), writer="traveler")
    r3 = _commit(traveler, _req(3, supersedes=r2.id), "traveler", expected_head=r2.id)
    assert traveler.head("req/t").record_id == r3.id


# ------------------------------------------------------------------ property
@st.composite
def lineages(draw):
    """A random DAG over keys k0..k3: each record has inputs among earlier records of
    other keys, and maybe a chain link to an earlier version of its key (as
    ``supersedes`` or as a legacy same-key parent)."""
    n = draw(st.integers(2, 12))
    recs: list[Record] = []
    seq: dict[str, int] = {}
    for _ in range(n):
        key = f"k{draw(st.integers(0, 3))}"
        others = [r for r in recs if r.key != key]
        inputs = draw(st.lists(st.sampled_from(others), unique_by=lambda r: r.id,
                               max_size=3)) if others else []
        same = [r for r in recs if r.key == key]
        link = draw(st.sampled_from([None, *same])) if same else None
        legacy = link is not None and draw(st.booleans())
        seq[key] = seq.get(key, 0) + 1
        parents = [r.id for r in inputs] + ([link.id] if legacy else [])
        recs.append(Record.create(key=key, owner="o", seq=seq[key], content={"n": len(recs)},
                                  parents=parents,
                                  supersedes=link.id if link is not None and not legacy
                                  else None))
    root = draw(st.sampled_from(recs))
    return {r.id: r for r in recs}, root


@settings(max_examples=150, deadline=None)
@given(lineages())
def test_the_gates_frontier_and_icores_ancestors_agree(lineage) -> None:
    recs, root = lineage
    view = LineageHeadView(lambda k: None, recs.get)
    anc = [CitedRecord.of(root), *view.ancestors(CitedRecord.of(root))]
    assert all(a.key for a in anc)  # everything readable
    assert {a.record_id for a in anc} == set(ancestors(root.id, recs.get))
    versions: dict[str, set[str]] = {}
    for a in anc:
        versions.setdefault(a.key, set()).add(a.record_id)
    deps = sorted(versions)
    conflict: FrontierConflict | None = None
    try:
        fr = frontier([root.id], deps, recs.get)
    except FrontierConflict as exc:
        conflict = exc
    if conflict is not None:
        # the gate sees two versions of a key only where iCORE's set holds two
        assert len(versions[conflict.fields["key"]]) >= 2
        return
    # every boundary is in iCORE's set, and the frontier covers exactly its keys
    assert set(fr.versions) == set(versions)
    for key, rid in fr.versions.items():
        assert rid in versions[key]
    # where iCORE's set holds one version per key, the two are the same set
    if all(len(v) == 1 for v in versions.values()):
        assert {(k, v) for k, v in fr.versions.items()} == {(a.key, a.record_id) for a in anc}
    # revocation agrees with authorization: with every ancestor current (iCORE active),
    # the gate's frontier is the owners' heads
    heads = {a.key: a.record_id for a in anc}
    if all(len(v) == 1 for v in versions.values()):
        assert all(heads[k] == rid for k, rid in fr.versions.items())


def test_the_wire_form_takes_ten_or_eleven_fields() -> None:
    from icore.errors import CodecError

    a = _req(1)
    c = _req(2, supersedes=a.id)
    with pytest.raises(CodecError, match="10-element"):
        record_from_wire([*record_to_wire(c), b"\0" * 32])
    with pytest.raises(CodecError, match="10-element"):
        record_from_wire(record_to_wire(a)[:9])
    with pytest.raises(CodecError) as ei:
        record_from_wire([*record_to_wire(a), None])
    assert ei.value.fields["field"] == "supersedes"


def test_ancestors_take_up_to_max_records() -> None:
    from icore.errors import LineageTooLarge

    prev: list[Record] = []
    recs: dict[str, Record] = {}
    for i in range(4):
        r = derive(key=f"k{i}", owner="o", seq=i + 1, content={"i": i}, inputs=prev)
        recs[r.id] = r
        prev = [r]
    assert len(ancestors(prev[0].id, recs.get, max_records=4)) == 4
    with pytest.raises(LineageTooLarge):
        ancestors(prev[0].id, recs.get, max_records=3)


def test_content_that_is_not_utf8_is_a_codec_error() -> None:
    from icore.errors import CodecError

    wire = record_to_wire(_req(1))
    wire[9] = b"\xff\xfe"
    with pytest.raises(CodecError, match="not JSON"):
        record_from_wire(wire)
