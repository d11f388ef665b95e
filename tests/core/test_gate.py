"""planfence Alg. 1: every branch, every fail-closed case, the protected action (App. A.3)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from icore._clock import ManualClock
from icore.errors import ActionBlocked, DeclarationError, FenceError
from icore.fence import (
    DecisionLog,
    Fence,
    GateContext,
    GateRun,
    HeadQueries,
    Outcome,
    PlanFenceCheck,
    PointCounter,
    ProtectedTool,
    Reason,
    RecordRef,
    Replan,
    ReplanRequest,
    avalidate,
    bind_action,
    protected,
    validate,
)
from icore.memory import (
    HeadEntry,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnershipMap,
    OwnerUnavailable,
)
from icore.records import Record, RecordId, TraversalMode, derive

OM = OwnershipMap({"req/a": "alice", "req/b": "bob"}, {"plan/*": "planner"})


class World:
    """Owners alice (req/a) and bob (req/b), a planner and an executor replica."""

    def __init__(self) -> None:
        self.alice = MemoryStore(OM, "alice")
        self.bob = MemoryStore(OM, "bob")
        self.planner = MemoryStore(OM, "planner")
        self.ex = MemoryStore(OM, "executor")
        self.owners = LocalOwners({"alice": self.alice, "bob": self.bob,
                                   "planner": self.planner})
        self.a1 = self.put(self.alice, "req/a", "A1")
        self.b1 = self.put(self.bob, "req/b", "B1")

    def put(self, store: MemoryStore, key: str, value: Any, parents: Sequence[Record] = ()
            ) -> Record:
        assert store.agent is not None
        r = Record.create(key=key, owner=store.agent, seq=store.next_seq(), content=value,
                          parents=[p.id for p in parents], type="requirement")
        store.commit(r, writer=store.agent)
        self.ex.install(r)
        return r

    def plan(self, *inputs: Record, act: str = "<lambda>",
             args: dict[str, Any] | None = None) -> Record:
        """A plan re-derived from ``inputs`` binding ``act(**args)``; it replaces the
        planner's current plan/1 (explicit expected head, it cites no older plan)."""
        p = derive(key="plan/1", owner="planner", seq=self.planner.next_seq(),
                   content={"from": [r.content for r in inputs],
                            **bind_action(act, args or {})}, inputs=list(inputs))
        head = self.planner.head("plan/1")
        self.planner.commit(p, writer="planner",
                            expected_head=None if head is None else head.record_id)
        self.ex.install(p)
        return p

    def gate(self, roots: Sequence[RecordId], deps: set[str], owners: Any = None,
             replanned: bool = False) -> Any:
        return validate(roots=roots, deps=deps, lookup=self.ex.lookup, ownership=OM,
                        owners=owners or self.owners, replanned=replanned)


@pytest.fixture
def w() -> World:
    return World()


# -- Alg. 1 line 13: authorized -------------------------------------------------------
def test_authorized_when_frontier_equals_heads(w: World) -> None:
    p = w.plan(w.a1, w.b1)
    d = w.gate([p.id], {"req/a", "req/b"})
    assert (d.outcome, d.reason) == (Outcome.AUTHORIZED, Reason.VALID)
    assert d.frontier == d.heads == {"req/a": w.a1.id, "req/b": w.b1.id}
    assert d.owners_contacted == 2 and d.heads_checked == 2


def test_only_declared_keys_are_checked(w: World) -> None:
    """A change to a key outside D(a) does not affect the action (dependency scope)."""
    p = w.plan(w.a1, w.b1)
    w.put(w.bob, "req/b", "B2", [w.b1])
    d = w.gate([p.id], {"req/a"})
    assert d.authorized and d.owners_contacted == 1 and set(d.heads) == {"req/a"}


# -- Alg. 1 line 12: replan-required with fresh verified records ----------------------
def test_replan_required_with_fresh_records(w: World) -> None:
    p = w.plan(w.a1)
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    d = w.gate([p.id], {"req/a"})
    assert (d.outcome, d.reason) == (Outcome.REPLAN_REQUIRED, Reason.STALE)
    assert d.fresh == {"req/a": a2}
    assert d.frontier["req/a"] == w.a1.id and d.heads["req/a"] == a2.id


def test_replan_required_with_inlined_record(w: World) -> None:
    """A head reply carrying the changed record saves the fetch round trip."""
    p = w.plan(w.a1)
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    calls: list[str] = []

    class Counting(LocalOwners):
        def fetch(self, owner: str, ids: Sequence[RecordId], *, timeout_s: float = 2.0
                  ) -> list[Record]:
            calls.append(owner)
            return super().fetch(owner, ids, timeout_s=timeout_s)

    owners = Counting(w.owners.stores, inline_max_bytes=4096)
    d = w.gate([p.id], {"req/a"}, owners=owners)
    assert d.outcome is Outcome.REPLAN_REQUIRED and d.fresh == {"req/a": a2}
    assert calls == []


# -- Alg. 1 line 11: second change after the replan -> blocked ------------------------
def test_second_change_blocks(w: World) -> None:
    p = w.plan(w.a1)
    w.put(w.alice, "req/a", "A2", [w.a1])
    d = w.gate([p.id], {"req/a"}, replanned=True)
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.SECOND_CHANGE)


# -- Alg. 1 lines 1-3: lineage, boundary, owner mapping -------------------------------
def test_missing_parent_blocks(w: World) -> None:
    ghost = Record.create(key="req/a", owner="alice", seq=99, content="never installed")
    p = derive(key="plan/1", owner="planner", seq=1, content={}, inputs=[ghost])
    w.ex.install(p)
    d = w.gate([p.id], {"req/a"})
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.LINEAGE_INCOMPLETE)


def test_missing_root_blocks(w: World) -> None:
    d = w.gate(["f" * 64], {"req/a"})
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.LINEAGE_INCOMPLETE)


def test_missing_boundary_blocks(w: World) -> None:
    p = w.plan(w.a1)
    d = w.gate([p.id], {"req/a", "req/b"})
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.MISSING_BOUNDARY)


def test_missing_owner_mapping_blocks(w: World) -> None:
    odd = Record.create(key="zzz/1", owner="nobody", seq=1, content=1)
    p = derive(key="plan/1", owner="planner", seq=1, content={}, inputs=[odd])
    idx = {odd.id: odd, p.id: p}
    d = validate(roots=[p.id], deps={"zzz/1"}, lookup=idx.get, ownership=OM, owners=w.owners)
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.NO_OWNER)


def test_frontier_conflict_blocks(w: World) -> None:
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    p = w.plan(w.a1, a2)
    d = w.gate([p.id], {"req/a"})
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.FRONTIER_CONFLICT)


def test_empty_scope_blocks(w: World) -> None:
    p = w.plan(w.a1)
    d = w.gate([p.id], set())
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.INCOMPLETE_DECLARATION)


# -- Alg. 1 lines 5-7: owner responses -------------------------------------------------
class FakeOwners:
    """Owner access that returns whatever the test wants for one owner."""

    def __init__(self, base: LocalOwners, reply: Any = None, fetched: Any = None,
                 raise_exc: BaseException | None = None) -> None:
        self.base, self.reply, self.fetched, self.raise_exc = base, reply, fetched, raise_exc

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None, timeout_s: float = 2.0
                    ) -> Any:
        if self.raise_exc is not None:
            raise self.raise_exc
        if self.reply is not None:
            return self.reply(owner, keys) if callable(self.reply) else self.reply
        return self.base.query_heads(owner, keys, known=known)

    def fetch(self, owner: str, ids: Sequence[RecordId], *, timeout_s: float = 2.0) -> Any:
        if self.fetched is not None:
            return self.fetched
        return self.base.fetch(owner, ids)


def test_owner_outage_blocks(w: World) -> None:
    p = w.plan(w.a1)
    w.owners.down.add("alice")
    d = w.gate([p.id], {"req/a"})
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.OWNER_UNAVAILABLE)


def test_owner_timeout_blocks(w: World) -> None:
    p = w.plan(w.a1)
    d = w.gate([p.id], {"req/a"}, owners=FakeOwners(w.owners, raise_exc=TimeoutError()))
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.OWNER_UNAVAILABLE)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (lambda o, k: "not a reply", Reason.MALFORMED_HEAD),
        (lambda o, k: HeadReply(o, {k[0]: "junk"}), Reason.MALFORMED_HEAD),
        (lambda o, k: HeadReply(o, {k[0]: HeadEntry(k[0], "xyz", 1)}), Reason.MALFORMED_HEAD),
        (lambda o, k: HeadReply(o, {k[0]: HeadEntry(k[0], "a" * 64, 0)}),
         Reason.MALFORMED_HEAD),
        (lambda o, k: HeadReply(o, {k[0]: HeadEntry("req/b", "a" * 64, 1)}), Reason.WRONG_KEY),
        (lambda o, k: HeadReply(o, {}), Reason.WRONG_KEY),
        (lambda o, k: HeadReply(o, {k[0]: HeadEntry(k[0], "a" * 64, 1),
                                    "req/zz": HeadEntry("req/zz", "a" * 64, 1)}),
         Reason.WRONG_KEY),
        (lambda o, k: HeadReply("mallory", {k[0]: HeadEntry(k[0], "a" * 64, 1)}),
         Reason.CONFLICTING_OWNER),
    ],
)
def test_bad_owner_replies_block(w: World, reply: Any, reason: Reason) -> None:
    p = w.plan(w.a1)
    d = w.gate([p.id], {"req/a"}, owners=FakeOwners(w.owners, reply=reply))
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, reason)


def test_head_ids_are_checked_unless_they_are_the_runs_own_frontier_id(w: World) -> None:
    """The gate skips the shape check only for the very id object it sent as known (an
    owner's *same* answer, #27): an equal copy passes the check, a misshapen id blocks."""
    p = w.plan(w.a1)
    run = GateRun(action="x", roots=(p.id,), deps=frozenset({"req/a"}), lookup=w.ex.lookup,
                  ownership=OM)
    step = run.start()
    assert isinstance(step, HeadQueries)
    own = step.known["req/a"]
    d = run.on_heads({"alice": HeadReply("alice", {"req/a": HeadEntry("req/a", own, 1)})})
    assert d.outcome is Outcome.AUTHORIZED  # type: ignore[union-attr]
    copy = "".join(list(w.a1.id))
    assert copy == w.a1.id and copy is not own
    for rid, outcome in ((copy, Outcome.AUTHORIZED), (w.a1.id.upper(), Outcome.BLOCKED)):
        run = GateRun(action="x", roots=(p.id,), deps=frozenset({"req/a"}),
                      lookup=w.ex.lookup, ownership=OM)
        run.start()
        d = run.on_heads({"alice": HeadReply("alice", {"req/a": HeadEntry("req/a", rid, 1)})})
        assert d.outcome is outcome  # type: ignore[union-attr]
        if outcome is Outcome.BLOCKED:
            assert d.reason is Reason.MALFORMED_HEAD  # type: ignore[union-attr]


def test_inlined_record_that_does_not_verify_blocks(w: World) -> None:
    p = w.plan(w.a1)
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    forged = replace(a2, content="EVIL")
    reply = HeadReply("alice", {"req/a": HeadEntry("req/a", a2.id, a2.seq, forged)})
    d = w.gate([p.id], {"req/a"}, owners=FakeOwners(w.owners, reply=reply))
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.MALFORMED_HEAD)


# -- Alg. 1 line 8: fetch and verify --------------------------------------------------
@pytest.mark.parametrize("kind", ["missing", "tampered", "wrong_record", "raises"])
def test_fetch_failures_block(w: World, kind: str) -> None:
    p = w.plan(w.a1)
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    fetched: Any = {"missing": [], "tampered": [replace(a2, content="EVIL")],
                    "wrong_record": [w.a1], "raises": None}[kind]
    owners: Any = FakeOwners(w.owners, fetched=fetched)
    if kind == "raises":
        class Boom(FakeOwners):
            def fetch(self, owner: str, ids: Sequence[RecordId], *, timeout_s: float = 2.0
                      ) -> Any:
                raise OwnerUnavailable("gone", owner=owner)
        owners = Boom(w.owners)
    d = w.gate([p.id], {"req/a"}, owners=owners)
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.FETCH_FAILED)


# -- sans-io core ---------------------------------------------------------------------
def test_sans_io_steps(w: World) -> None:
    """GateRun is driven by hand: one batched query per owner, then the decision."""
    p = w.plan(w.a1, w.b1)
    run = GateRun(action="x", roots=(p.id,), deps=frozenset({"req/a", "req/b"}),
                  lookup=w.ex.lookup, ownership=OM)
    step = run.start()
    assert isinstance(step, HeadQueries)
    assert dict(step.per_owner) == {"alice": ("req/a",), "bob": ("req/b",)}
    replies = {o: w.owners.query_heads(o, ks) for o, ks in step.per_owner.items()}
    d = run.on_heads(replies)
    assert getattr(d, "outcome", None) is Outcome.AUTHORIZED


def test_async_driver_times_out_fail_closed(w: World) -> None:
    """avalidate queries owners concurrently and blocks on a slow owner."""
    p = w.plan(w.a1, w.b1)

    class Async:
        async def query_heads(self, owner: str, keys: Sequence[str], *,
                              known: Any = None, timeout_s: float = 2.0) -> HeadReply:
            if owner == "bob":
                await asyncio.sleep(5)
            return w.owners.query_heads(owner, keys)

        async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                        timeout_s: float = 2.0) -> list[Record]:
            return w.owners.fetch(owner, ids)

    d = asyncio.run(avalidate(roots=[p.id], deps={"req/a", "req/b"}, lookup=w.ex.lookup,
                              ownership=OM, owners=Async(), timeout_s=0.05))
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.OWNER_UNAVAILABLE)
    d2 = asyncio.run(avalidate(roots=[p.id], deps={"req/a"}, lookup=w.ex.lookup,
                               ownership=OM, owners=Async(), timeout_s=0.05))
    assert d2.authorized


def test_every_decision_field_is_the_one_named(w: World) -> None:
    """The decision is built positionally (hot path): each value lands in its own field,
    and avalidate (no GateContext per call) decides exactly what validate decides."""
    p = w.plan(w.a1, w.b1)
    w.put(w.alice, "req/a", "A2", parents=[w.a1])
    points, clock = PointCounter(), ManualClock(start_ms=12.5)

    class Async:
        async def query_heads(self, owner: str, keys: Sequence[str], *,
                              known: Any = None, timeout_s: float = 2.0) -> HeadReply:
            return w.owners.query_heads(owner, keys, known=known)

        async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                        timeout_s: float = 2.0) -> list[Record]:
            return w.owners.fetch(owner, ids)

    kw: dict[str, Any] = {"roots": [p.id], "deps": {"req/b", "req/a"}, "lookup": w.ex.lookup,
                          "ownership": OM, "action": "book", "clock": clock,
                          "points": points, "policy": "pf"}
    d = validate(owners=w.owners, **kw)
    d2 = asyncio.run(avalidate(owners=Async(), **kw))
    fresh = w.owners.query_heads("alice", ["req/a"]).heads["req/a"].record_id
    assert (d.outcome, d.reason, d.action, d.roots, d.deps) == (
        Outcome.REPLAN_REQUIRED, Reason.STALE, "book", (p.id,), ("req/a", "req/b"))
    assert d.frontier == {"req/a": w.a1.id, "req/b": w.b1.id}
    assert d.heads == {"req/a": fresh, "req/b": w.b1.id}
    assert set(d.fresh) == {"req/a"} and d.fresh["req/a"].id == fresh
    assert (d.replanned, d.point, d.at_ms, d.policy) == (False, 1, 12.5, "pf")
    assert (d.detail, d.owners_contacted, d.heads_checked) == ("changed: req/a", 2, 2)
    assert replace(d2, point=1) == d


def test_inline_owners_are_awaited_in_turn_and_still_fail_closed(w: World) -> None:
    """``answers_inline`` (stores of this process): no task per owner, the same decision
    as the synchronous gate, and an owner that raises still blocks."""
    p = w.plan(w.a1, w.b1)
    w.put(w.bob, "req/b", "B2", parents=[w.b1])
    tasks: list[int] = []

    class Inline:
        bounds_timeouts = True
        answers_inline = True

        async def query_heads(self, owner: str, keys: Sequence[str], *,
                              known: Any = None, timeout_s: float = 2.0) -> HeadReply:
            tasks.append(id(asyncio.current_task()))
            if owner in w.owners.down:
                raise OwnerUnavailable(owner)
            return w.owners.query_heads(owner, keys, known=known)

        async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                        timeout_s: float = 2.0) -> list[Record]:
            return w.owners.fetch(owner, ids)

    kw: dict[str, Any] = {"roots": [p.id], "deps": {"req/a", "req/b"},
                          "lookup": w.ex.lookup, "ownership": OM}
    d = validate(owners=w.owners, **kw)
    d2 = asyncio.run(avalidate(owners=Inline(), **kw))
    assert (d2.outcome, d2.reason, d2.heads) == (d.outcome, d.reason, d.heads)
    assert (d2.outcome, d2.reason) == (Outcome.REPLAN_REQUIRED, Reason.STALE)
    assert len(tasks) == 2 and len(set(tasks)) == 1  # both owners in the caller's task
    w.owners.down.add("alice")
    d3 = asyncio.run(avalidate(owners=Inline(), **kw))
    assert (d3.outcome, d3.reason) == (Outcome.BLOCKED, Reason.OWNER_UNAVAILABLE)


# -- the protected action (App. A.3) --------------------------------------------------
def _fence(w: World, **kw: Any) -> Fence:
    return Fence.for_store(w.ex, w.owners, **kw)


def test_protected_action_replans_once_and_executes(w: World) -> None:
    ran: list[str] = []
    tool = ProtectedTool(lambda dest: ran.append(dest) or dest, depends_on={"req/a"},
                         name="book")
    p = w.plan(w.a1, act="book", args={"dest": "A1"})
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])
    seen: list[ReplanRequest] = []

    def replan(req: ReplanRequest) -> Replan:
        seen.append(req)
        fresh = req.fresh["req/a"]
        assert w.ex.get(fresh.id) == fresh  # installed before the replan
        return Replan([w.plan(fresh, act="book", args={"dest": fresh.content}).id])

    f = _fence(w)
    res = f.execute(tool, roots=[p.id], args={"dest": p.content["from"][0]}, replan=replan)
    assert res.executed and res.replanned and ran == ["A2"]
    assert [d.outcome for d in res.decisions] == [Outcome.REPLAN_REQUIRED, Outcome.AUTHORIZED]
    assert res.decisions[1].replanned and len(seen) == 1
    assert seen[0].old_args == {"dest": "A1"} and seen[0].fresh["req/a"] == a2
    assert isinstance(f.log, DecisionLog) and len(f.log) == 2


def test_protected_action_second_change_blocks(w: World) -> None:
    ran: list[str] = []
    tool = ProtectedTool(lambda dest: ran.append(dest), depends_on={"req/a"})
    p = w.plan(w.a1, args={"dest": "A1"})
    a2 = w.put(w.alice, "req/a", "A2", [w.a1])

    def replan(req: ReplanRequest) -> Replan:
        plan = w.plan(req.fresh["req/a"], args={"dest": "A2"})
        w.put(w.alice, "req/a", "A3", [a2])  # the owner changes it again
        return Replan([plan.id], {"dest": "A2"})

    res = _fence(w).execute(tool, roots=[p.id], args={"dest": "A1"}, replan=replan)
    assert not res.executed and ran == []
    assert res.final.reason is Reason.SECOND_CHANGE
    with pytest.raises(ActionBlocked):
        _fence(w).execute(tool, roots=[p.id], args={"dest": "A1"}, replan=replan,
                          raise_on_block=True)


def test_validation_without_replanner_blocks(w: World) -> None:
    tool = ProtectedTool(lambda: None, depends_on={"req/a"})
    p = w.plan(w.a1)
    w.put(w.alice, "req/a", "A2", [w.a1])
    res = _fence(w).execute(tool, roots=[p.id], args={})
    assert not res.executed and res.final.outcome is Outcome.BLOCKED


def test_planner_declining_or_failing_blocks(w: World) -> None:
    tool = ProtectedTool(lambda: None, depends_on={"req/a"})
    p = w.plan(w.a1)
    w.put(w.alice, "req/a", "A2", [w.a1])
    assert not _fence(w).execute(tool, roots=[p.id], args={}, replan=lambda r: None).executed

    def broken(r: ReplanRequest) -> Replan:
        raise RuntimeError("model down")

    res = _fence(w).execute(tool, roots=[p.id], args={}, replan=broken)
    assert not res.executed and "model down" in res.detail


def test_planner_returning_junk_blocks(w: World) -> None:
    """A replanner returning something else than a Replan fails closed, not AttributeError."""
    ran: list[int] = []
    tool = ProtectedTool(lambda: ran.append(1), depends_on={"req/a"})
    p = w.plan(w.a1)
    w.put(w.alice, "req/a", "A2", [w.a1])
    res = _fence(w).execute(tool, roots=[p.id], args={},
                            replan=lambda r: "junk")  # type: ignore[arg-type,return-value]
    assert not res.executed and ran == [] and res.outcome is Outcome.BLOCKED
    assert "not a Replan" in res.detail


def test_incomplete_declarations_block(w: World) -> None:
    p = w.plan(w.a1, w.b1, args={"ref": RecordRef("req/b", w.b1.id)})
    reads_b = ProtectedTool(lambda ref: None, depends_on={"req/a"})
    res = _fence(w).execute(reads_b, roots=[p.id], args={"ref": RecordRef("req/b", w.b1.id)})
    assert res.final.reason is Reason.INCOMPLETE_DECLARATION and not res.executed
    dyn = ProtectedTool(lambda: None, depends_on=lambda args: [])
    assert _fence(w).execute(dyn, roots=[p.id], args={}).final.reason is \
        Reason.INCOMPLETE_DECLARATION
    boom = ProtectedTool(lambda: None, depends_on=lambda args: 1 / 0)  # type: ignore[arg-type,return-value]
    assert _fence(w).execute(boom, roots=[p.id], args={}).final.reason is \
        Reason.INCOMPLETE_DECLARATION


def test_dynamic_scope(w: World) -> None:
    tool = ProtectedTool(lambda req: req, depends_on=lambda args: {f"req/{args['req']}"})
    p = w.plan(w.b1, args={"req": "b"})
    assert _fence(w).execute(tool, roots=[p.id], args={"req": "b"}).executed


def test_declaration_errors() -> None:
    with pytest.raises(DeclarationError):
        ProtectedTool(lambda: None, depends_on="req/a")
    with pytest.raises(DeclarationError):
        ProtectedTool(lambda: None, depends_on={""})
    with pytest.raises(DeclarationError, match="NoneType"):
        ProtectedTool(lambda: None, depends_on=None)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="int"):
        ProtectedTool(lambda: None, depends_on=5)  # type: ignore[arg-type]

    @protected(depends_on={"req/a"})
    def tool() -> None: ...

    with pytest.raises(FenceError, match="only through"):
        tool()


@pytest.mark.parametrize("case", ["outage", "missing_lineage", "malformed_head",
                                  "second_change"])
def test_fail_closed_vs_fail_open_ablation(w: World, case: str) -> None:
    """planfence App. C: fail-closed blocks all four cases; fail-open issues all four."""
    p = w.plan(w.a1)
    roots = [p.id]
    owners: Any = w.owners
    if case == "outage":
        w.owners.down.add("alice")
    elif case == "missing_lineage":
        roots = ["e" * 64]
    elif case == "malformed_head":
        owners = FakeOwners(w.owners, reply=lambda o, k: HeadReply(o, {k[0]: "junk"}))
    for fail_open in (False, True):
        ran: list[int] = []
        tool = ProtectedTool(lambda ran=ran: ran.append(1), depends_on={"req/a"})
        v = PlanFenceCheck(GateContext(lookup=w.ex.lookup, ownership=OM, owners=owners))
        fence = Fence(validator=v, install=w.ex, unsafe_fail_open_ablation=fail_open)

        def replan(req: ReplanRequest) -> Replan:
            w.put(w.alice, "req/a", f"again-{len(w.alice.head_keys())}",
                  [req.fresh["req/a"]])
            return Replan([w.plan(req.fresh["req/a"]).id], {})

        if case == "second_change":
            w.put(w.alice, "req/a", f"changed-{fail_open}",
                  [w.alice.get(w.alice.head("req/a").record_id)])  # type: ignore[union-attr,list-item]
        res = fence.execute(tool, roots=roots, args={}, replan=replan)
        assert res.executed is fail_open and bool(ran) is fail_open
        if fail_open:
            assert res.final.reason is Reason.FAIL_OPEN


def test_direct_parent_mode_ablation(w: World) -> None:
    """The direct-parent ablation cannot prove a depth-2 chain; full traversal can."""
    mid = derive(key="plan/mid", owner="planner", seq=w.planner.next_seq(), content=0,
                 inputs=[w.a1])
    w.planner.commit(mid, writer="planner")
    w.ex.install(mid)
    p = w.plan(mid)
    full = PlanFenceCheck(GateContext(lookup=w.ex.lookup, ownership=OM, owners=w.owners))
    direct = PlanFenceCheck(GateContext(lookup=w.ex.lookup, ownership=OM, owners=w.owners,
                                       mode=TraversalMode.DIRECT))
    assert full.validate(action="a", roots=[p.id], deps={"req/a"}, replanned=False).authorized
    d = direct.validate(action="a", roots=[p.id], deps={"req/a"}, replanned=False)
    assert d.reason is Reason.MISSING_BOUNDARY


def test_decision_log_records_inputs(w: World) -> None:
    log = DecisionLog()
    p = w.plan(w.a1)
    f = Fence.for_store(w.ex, w.owners, log=log)
    f.execute(ProtectedTool(lambda: 1, depends_on={"req/a"}), roots=[p.id], args={})
    (entry,) = list(log)
    d = entry.to_dict()
    assert d["roots"] == [p.id] and d["deps"] == ["req/a"] and d["point"] == 1
    assert d["frontier"] == d["heads"] == {"req/a": w.a1.id}
    assert log.counts() == {"authorized/valid": 1}
