"""Issue 12 gate fixes, one test per scenario: conflicting owner replies, lineage-incomplete
boundaries and ancestors, over-declared scopes, concurrent owner queries in aexecute."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from icore.errors import AsyncRequired
from icore.fence import (
    Fence,
    Outcome,
    PlanFenceCheck,
    ProtectedTool,
    Reason,
    bind_action,
    validate,
)
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadEntry,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnershipMap,
)
from icore.net import HeadReplyMsg, decode_body, encode_body
from icore.net._stats import to_head_reply
from icore.records import Record, RecordId, derive

OM = OwnershipMap({"req/t": "traveler", "shortA/t": "ra", "shortB/t": "rb"},
                  {"plan/*": "planner"})


def _req(store: MemoryStore, value: str, prev: Record | None = None) -> Record:
    r = Record.create(key="req/t", owner="traveler", seq=store.next_seq(), content=value,
                      parents=[prev.id] if prev else [])
    store.commit(r, writer="traveler")
    return r


def test_duplicate_entries_in_a_head_reply_block() -> None:
    """A reply listing one key twice (different ids, or the same twice) blocks
    conflicting_reply; over the wire the list survives decoding (main: last wins)."""
    t = MemoryStore(OM, "traveler")
    ex = MemoryStore(OM, "ex")
    r1 = _req(t, "Porto")
    r2 = _req(t, "Faro", r1)
    ex.install(r1)
    ex.install(r2)
    plan = derive(key="plan/p", owner="planner", seq=1, content={}, inputs=[r2])
    ex.install(plan)
    good, old = HeadEntry("req/t", r2.id, 2), HeadEntry("req/t", r1.id, 1)
    wire = decode_body(encode_body(HeadReplyMsg(7, "traveler", (old, good))))
    assert isinstance(wire, HeadReplyMsg)
    for reply in (to_head_reply(wire, owner="traveler", keys=["req/t"]),
                  HeadReply.from_entries("traveler", [good, good])):

        class Owners:
            def query_heads(self, owner: str, keys: Sequence[str], *,
                            known: Mapping[str, RecordId] | None = None,
                            timeout_s: float = DEFAULT_TIMEOUT_S,
                            reply: HeadReply = reply) -> HeadReply:
                return reply

            def fetch(self, owner: str, ids: Sequence[RecordId], *,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
                return []

        d = validate(roots=[plan.id], deps={"req/t"}, lookup=ex.lookup, ownership=OM,
                     owners=Owners())
        assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.CONFLICTING_REPLY), d
    one = to_head_reply(decode_body(encode_body(HeadReplyMsg(8, "traveler", (good,)))),
                        owner="traveler", keys=["req/t"])
    d = validate(roots=[plan.id], deps={"req/t"}, lookup=ex.lookup, ownership=OM,
                 owners=LocalOwners({"traveler": t}))
    assert d.authorized and one.heads["req/t"] == good


def test_lineage_incomplete_boundary_never_authorizes() -> None:
    """The boundary itself has an unknown parent: blocked (main authorized, because the
    walk stopped at the boundary); installing the missing parent unblocks it."""
    t = MemoryStore(OM, "traveler")
    ex = MemoryStore(OM, "ex")
    r1 = _req(t, "Porto")
    r2 = _req(t, "Faro", r1)
    ex.install(r2)  # r1 never reached this replica
    plan = derive(key="plan/p", owner="planner", seq=1, content={}, inputs=[r2])
    ex.install(plan)
    owners = LocalOwners({"traveler": t})
    d = validate(roots=[plan.id], deps={"req/t"}, lookup=ex.lookup, ownership=OM,
                 owners=owners)
    assert (d.outcome, d.reason) == (Outcome.BLOCKED, Reason.LINEAGE_INCOMPLETE)
    ex.install(r1)
    assert validate(roots=[plan.id], deps={"req/t"}, lookup=ex.lookup, ownership=OM,
                    owners=owners).authorized


def test_lineage_incomplete_ancestor_never_authorizes() -> None:
    """An ancestor between the root and the boundary cites an unknown record: blocked."""
    t = MemoryStore(OM, "traveler")
    ex = MemoryStore(OM, "ex")
    r1 = _req(t, "Porto")
    ex.install(r1)
    ghost = Record.create(key="shortA/t", owner="ra", seq=1, content="never seen")
    mid = derive(key="plan/mid", owner="planner", seq=1, content={}, inputs=[r1, ghost])
    plan = derive(key="plan/p", owner="planner", seq=2, content={}, inputs=[mid])
    ex.install(mid)
    ex.install(plan)
    d = validate(roots=[plan.id], deps={"req/t"}, lookup=ex.lookup, ownership=OM,
                 owners=LocalOwners({"traveler": t}))
    assert d.reason is Reason.LINEAGE_INCOMPLETE and not d.authorized


class _World:
    def __init__(self) -> None:
        self.t = MemoryStore(OM, "traveler")
        self.ra, self.rb = MemoryStore(OM, "ra"), MemoryStore(OM, "rb")
        self.ex = MemoryStore(OM, "ex")
        self.owners = LocalOwners({"traveler": self.t, "ra": self.ra, "rb": self.rb})
        self.r1 = _req(self.t, "Porto")
        self.ex.install(self.r1)

    def short(self, store: MemoryStore, key: str, req: Record) -> Record:
        assert store.agent is not None
        head = store.head(key)
        s = derive(key=key, owner=store.agent, seq=store.next_seq(), content=req.content,
                   inputs=[req])
        store.commit(s, writer=store.agent,
                     expected_head=None if head is None else head.record_id)
        self.ex.install(s)
        return s


def test_over_declaration_finds_ancestor_keys() -> None:
    """D(a) = {req/t, shortA/t, shortB/t}, both shortlists derived from req/t: the walk
    finds req/t below the shortlists, so declaring more keys only adds checks (main:
    blocked missing_boundary); a shortlist from a stale req/t is a frontier conflict."""
    w = _World()
    sa, sb = w.short(w.ra, "shortA/t", w.r1), w.short(w.rb, "shortB/t", w.r1)
    plan = derive(key="plan/p", owner="planner", seq=1, content={}, inputs=[sa, sb])
    w.ex.install(plan)
    small = validate(roots=[plan.id], deps={"shortA/t", "shortB/t"}, lookup=w.ex.lookup,
                     ownership=OM, owners=w.owners)
    big = validate(roots=[plan.id], deps={"req/t", "shortA/t", "shortB/t"},
                   lookup=w.ex.lookup, ownership=OM, owners=w.owners)
    assert small.authorized and big.authorized
    assert big.frontier["req/t"] == w.r1.id and big.heads_checked == small.heads_checked + 1
    r2 = _req(w.t, "Faro", w.r1)
    w.ex.install(r2)
    sb2 = w.short(w.rb, "shortB/t", r2)
    mixed = derive(key="plan/p", owner="planner", seq=2, content={}, inputs=[sa, sb2])
    w.ex.install(mixed)
    d = validate(roots=[mixed.id], deps={"req/t", "shortA/t", "shortB/t"},
                 lookup=w.ex.lookup, ownership=OM, owners=w.owners)
    assert d.reason is Reason.FRONTIER_CONFLICT


def test_history_below_a_boundary_is_not_a_conflict() -> None:
    """A requirement's own older versions below it are its chain, not a second version."""
    w = _World()
    r2 = _req(w.t, "Faro", w.r1)
    w.ex.install(r2)
    sa = w.short(w.ra, "shortA/t", r2)
    plan = derive(key="plan/p", owner="planner", seq=1, content={}, inputs=[sa, r2])
    w.ex.install(plan)
    d = validate(roots=[plan.id], deps={"req/t", "shortA/t"}, lookup=w.ex.lookup,
                 ownership=OM, owners=w.owners)
    assert d.authorized and d.frontier["req/t"] == r2.id


class _SlowOwners:
    """Sync owner access taking ``delay_s`` per head query; records peak concurrency."""

    def __init__(self, inner: LocalOwners, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay_s)
        with self.lock:
            self.now -= 1
        return self.inner.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        return self.inner.fetch(owner, ids, timeout_s=timeout_s)


class _AsyncOwners:
    """Async owner access (each query awaits ``delay_s``); records peak concurrency."""

    def __init__(self, inner: LocalOwners, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s
        self.now = self.peak = 0

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(self.delay_s)
        self.now -= 1
        return self.inner.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        return self.inner.fetch(owner, ids, timeout_s=timeout_s)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_aexecute_queries_the_owners_of_d_concurrently(kind: str) -> None:
    """Three owners of D(a): aexecute has all three head queries in flight at once, over
    a sync access (worker threads) and an async one; the sync path over async owners is
    a typed error."""
    w = _World()
    sa, sb = w.short(w.ra, "shortA/t", w.r1), w.short(w.rb, "shortB/t", w.r1)
    plan = derive(key="plan/p", owner="planner", seq=1,
                  content=bind_action("act", {}), inputs=[sa, sb])
    w.ex.install(plan)
    owners: Any = (_SlowOwners(w.owners, 0.2) if kind == "sync"
                   else _AsyncOwners(w.owners, 0.2))
    fence = Fence.for_store(w.ex, owners)
    ran: list[int] = []
    tool = ProtectedTool(lambda: ran.append(1), depends_on={"req/t", "shortA/t", "shortB/t"},
                         name="act")
    res = asyncio.run(fence.aexecute(tool, roots=[plan.id], args={}))
    assert res.executed and ran == [1] and owners.peak == 3
    if kind == "async":
        with pytest.raises(AsyncRequired):
            fence.execute(tool, roots=[plan.id], args={})
        assert isinstance(fence.validator, PlanFenceCheck)
