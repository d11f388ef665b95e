"""Policies in fence/ (planfence Sec. 5.1): one strategy per policy, one make_check,
the head sources every safe policy runs the gate against."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from icore.fence import (
    STRATEGIES,
    AllKeyHeads,
    CentralHeads,
    Fence,
    GateContext,
    InstalledHeads,
    Policy,
    PolicyError,
    ProtectedTool,
    QuorumHeads,
    Reads,
    Replan,
    ReplanRequest,
    TeamContext,
    ThreadedOwners,
    bind_action,
    installed_heads,
    make_check,
    replica_service,
    strategy,
)
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnershipMap,
    Store,
)
from icore.records import Record, RecordId, derive

OM = OwnershipMap({"req/a": "alice", "req/b": "bob"}, {"plan/*": "planner"})
KEYS = ("req/a", "req/b")


class Views:
    """Async owner access: the owners' stores, plus ``replica-<agent>`` views that answer
    from that agent's installed heads (what the quorum policies read)."""

    def __init__(self, stores: Mapping[str, Store]) -> None:
        self.stores = dict(stores)
        self.owners = LocalOwners(self.stores)
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        self.asked.append((owner, tuple(keys)))
        if owner.startswith("replica-"):
            store = self.stores[owner.removeprefix("replica-")]
            return HeadReply(owner, installed_heads(store, keys))
        return self.owners.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        return self.owners.fetch(owner, ids, timeout_s=timeout_s)


class Race:
    """A plan cites req/a v1; the owner revises req/a after planning; every replica
    (executor, other) already installed the revision."""

    def __init__(self) -> None:
        self.alice, self.bob = MemoryStore(OM, "alice"), MemoryStore(OM, "bob")
        self.planner, self.ex = MemoryStore(OM, "planner"), MemoryStore(OM, "executor")
        self.other = MemoryStore(OM, "other")
        self.views = Views({"alice": self.alice, "bob": self.bob, "planner": self.planner,
                            "executor": self.ex, "other": self.other})
        self.a1 = self._put(self.alice, "req/a", "A1")
        self.b1 = self._put(self.bob, "req/b", "B1")
        self.plan = self.make_plan(self.a1)
        self.a2 = self._put(self.alice, "req/a", "A2", [self.a1])

    def _put(self, store: MemoryStore, key: str, value: str,
             parents: Sequence[Record] = ()) -> Record:
        assert store.agent is not None
        rec = derive(key=key, owner=store.agent, seq=store.next_seq(), content=value,
                     inputs=list(parents)) if parents else Record.create(
            key=key, owner=store.agent, seq=store.next_seq(), content=value)
        store.commit(rec, writer=store.agent)
        for replica in (self.ex, self.other):
            replica.install(rec)
        return rec

    def make_plan(self, req: Record) -> Record:
        plan = derive(key="plan/1", owner="planner", seq=self.planner.next_seq(),
                      content={"req": req.content, **bind_action("book", {"to": req.content})},
                      inputs=[req, self.b1])
        head = self.planner.head("plan/1")
        self.planner.commit(plan, writer="planner",
                            expected_head=None if head is None else head.record_id)
        self.ex.install(plan)
        return plan

    def context(self, policy: Policy) -> GateContext:
        owners: Any = None
        if strategy(policy).reads is Reads.SYNC:
            owners = self.views.owners
        elif strategy(policy).reads is Reads.ASYNC:
            owners = self.views
        return GateContext(lookup=self.ex.lookup, ownership=OM, owners=owners,
                           policy=policy.value)

    def team(self) -> TeamContext:
        return TeamContext(install=self.ex, keys=KEYS, replicas=(replica_service("other"),))


def test_every_policy_has_one_strategy() -> None:
    """Each of the nine policies has exactly one strategy, found by value or name."""
    assert set(STRATEGIES) == set(Policy)
    for p in Policy:
        assert strategy(p) is strategy(p.value) is STRATEGIES[p]
        assert strategy(p).policy is p
    with pytest.raises(PolicyError) as ei:
        strategy("no_such_policy")
    assert ei.value.fields["policy"] == "no_such_policy"


@pytest.mark.parametrize("policy", list(Policy), ids=str)
def test_make_validator_runs_every_policy(policy: Policy) -> None:
    """Safe policies detect the post-plan revision and replan once; the unsafe baselines
    act on the obsolete plan."""
    w = Race()
    v = make_check(policy, w.context(policy), w.team())
    assert v.name == policy.value
    booked: list[str] = []
    tool = ProtectedTool(lambda to: booked.append(to), depends_on={"req/a", "req/b"},
                         name="book")
    fence = Fence(validator=v, install=w.ex)

    def replan(req: ReplanRequest) -> Replan:
        return Replan(roots=[w.make_plan(req.fresh["req/a"]).id])

    res = asyncio.run(fence.aexecute(tool, roots=[w.plan.id], args={"to": "A1"},
                                     replan=replan))
    assert res.executed
    if policy.safe:
        assert res.replanned and booked == ["A2"]
        assert [d.reason.value for d in res.decisions] == ["stale", "valid"]
    else:
        assert not res.replanned and booked == ["A1"]
    assert all(d.policy == policy.value for d in res.decisions)
    if policy in (Policy.PER_KEY_ALL_KEY, Policy.BATCHED_ALL_KEY):
        assert v.heads_queried == 2 * len(KEYS)  # two validations, every shared key
    else:
        assert v.heads_queried == sum(d.heads_checked for d in res.decisions)


def test_all_key_asks_for_every_shared_key() -> None:
    """All-key validation asks for every shared key, one request per owner (batched) or
    per key, and counts them, though D(a) names one key."""
    om = OwnershipMap({"req/a": "alice", "req/b": "bob", "req/c": "alice"})
    for batched, requests in ((True, 2), (False, 3)):
        w = Race()
        heads = AllKeyHeads(w.views, om, ("req/a", "req/b", "req/c"), batched=batched)
        for _ in range(2):
            heads.begin()
            reply = asyncio.run(heads.query_heads("alice", ["req/a"]))
            assert set(reply.heads) == {"req/a"}
        assert heads.heads_queried == 6
        assert len(w.views.asked) == 2 * requests


def test_quorum_keeps_the_highest_sequence() -> None:
    """A replica view with a newer head wins over the executor's stale installed one."""
    w = Race()
    stale = MemoryStore(OM, "executor")
    stale.install(w.a1)
    heads = QuorumHeads(w.views, stale, [replica_service("other")])
    reply = asyncio.run(heads.query_heads("alice", ["req/a"]))
    assert reply.heads["req/a"].record_id == w.a2.id


def test_central_heads_name_the_owner_asked() -> None:
    """The central service answers for every owner; the reply names the owner asked."""
    w = Race()
    central = CentralHeads(w.views, "alice")
    reply = asyncio.run(central.query_heads("bob", ["req/a"]))
    assert reply.owner == "bob" and reply.heads["req/a"].record_id == w.a2.id
    assert w.views.asked == [("alice", ("req/a",))]


def test_installed_heads_and_threaded_owners() -> None:
    """InstalledHeads answers from the replica; ThreadedOwners makes sync access async."""
    w = Race()
    assert InstalledHeads(w.ex).query_heads("alice", ["req/a"]).heads["req/a"].record_id \
        == w.a2.id
    reply = asyncio.run(ThreadedOwners(w.views.owners).query_heads("alice", ["req/a"]))
    assert reply.heads["req/a"].record_id == w.a2.id


@pytest.mark.parametrize("policy", [Policy.METADATA_SYNC, Policy.ALL_REPLICA])
def test_a_policy_that_reads_the_replica_needs_it(policy: Policy) -> None:
    """Fail at build time, naming the policy, when the executor's replica is missing."""
    w = Race()
    with pytest.raises(PolicyError) as ei:
        make_check(policy, w.context(policy))
    assert ei.value.fields["policy"] == policy.value


def test_a_policy_that_reads_owners_needs_an_access() -> None:
    """A gate policy without an owner access is refused at build time."""
    w = Race()
    ctx = GateContext(lookup=w.ex.lookup, ownership=OM, policy="per_key_all_key")
    with pytest.raises(PolicyError):
        make_check("per_key_all_key", ctx, w.team())


def test_names_before_issue_26_are_aliases() -> None:
    """The gate-check renames keep the old public names as the same objects."""
    import icore.fence as fence

    assert fence.Validator is fence.GateCheck
    assert fence.GateValidator is fence.PlanFenceCheck
    assert fence.AllKeyValidator is fence.AllKeyCheck
    assert fence.PolicyValidator is fence.PolicyCheck
    assert fence.make_validator is fence.make_check
