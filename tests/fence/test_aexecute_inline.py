"""``Fence.aexecute`` reads non-blocking in-process owners on the loop (issue 28 item 8).

In-memory stores behind ``LocalOwners`` are read directly (no worker thread); anything
that may block (SQLite files, a store subclass, an access not declared non-blocking) is
still reached through ``asyncio.to_thread``. Either way the decisions are the sync
path's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.fence import Fence, ProtectedTool, action_record, nonblocking
from icore.memory import LocalOwners, MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import Record, derive

OM = OwnershipMap({"req/t": "traveler"}, {"plan/*": "planner", "act/*": "planner"})


class Trip:
    """A traveler owning req/t; the planner's action record binds book(destination)."""

    def __init__(self) -> None:
        self.traveler = MemoryStore(OM, "traveler")
        self.planner = MemoryStore(OM, "planner")
        self.owners = LocalOwners({"traveler": self.traveler, "planner": self.planner})
        self.req = self.revise({"destination": "Porto"})

    def revise(self, content: Any) -> Record:
        head = self.traveler.head("req/t")
        r = Record.create(key="req/t", owner="traveler", seq=self.traveler.next_seq(),
                          content=content, parents=[head.record_id] if head else [])
        self.traveler.commit(r, writer="traveler")
        self.planner.install(r)
        return r

    def act(self, req: Record, args: dict[str, Any]) -> Record:
        plan = derive(key="plan/trip", owner="planner", seq=self.planner.next_seq(),
                      content={"go": req.content}, inputs=[req])
        self.planner.commit(plan, writer="planner")
        rec = action_record(key="act/trip", owner="planner", seq=self.planner.next_seq(),
                            action="book", args=args, inputs=[plan, req])
        self.planner.commit(rec, writer="planner")
        return rec

    def fence(self) -> Fence:
        return Fence.for_store(self.planner, self.owners)


class _SlowStore(MemoryStore):
    """A MemoryStore subclass: it may do anything, so it counts as blocking."""


def test_nonblocking_classification(tmp_path: Path) -> None:
    om = OwnershipMap({"k": "o"})
    mem: Store = MemoryStore(om, "o")
    sql = SQLiteStore(tmp_path / "o.sqlite", om, "o")
    try:
        assert nonblocking(LocalOwners({"o": mem}))
        assert not nonblocking(LocalOwners({"o": mem, "p": sql}))
        assert not nonblocking(LocalOwners({"o": _SlowStore(om, "o")}))

        class Declared:
            nonblocking = True

        assert nonblocking(Declared()) and not nonblocking(object())
    finally:
        sql.close()


def _threads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = asyncio.to_thread

    async def spy(fn: Any, /, *a: Any, **k: Any) -> Any:
        seen.append(fn)
        return await real(fn, *a, **k)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    return seen


def test_in_memory_owners_are_read_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    trip = Trip()
    rec = trip.act(trip.req, {"destination": "Porto"})
    seen = _threads(monkeypatch)
    tool = ProtectedTool(lambda destination: destination, depends_on={"req/t"}, name="book")
    res = asyncio.run(trip.fence().aexecute(tool, roots=[rec.id],
                                            args={"destination": "Porto"}))
    assert res.executed and seen == []


def test_blocking_owners_still_use_worker_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    trip = Trip()
    rec = trip.act(trip.req, {"destination": "Porto"})
    trip.owners.stores["traveler"] = _as_slow(trip.traveler)
    seen = _threads(monkeypatch)
    tool = ProtectedTool(lambda destination: destination, depends_on={"req/t"}, name="book")
    res = asyncio.run(trip.fence().aexecute(tool, roots=[rec.id],
                                            args={"destination": "Porto"}))
    assert res.executed and seen  # the head query went through a worker thread


def _as_slow(store: MemoryStore) -> MemoryStore:
    store.__class__ = _SlowStore
    return store


@settings(max_examples=25, deadline=None)
@given(revisions=st.lists(st.sampled_from(["Porto", "Faro", "Lisbon"]), max_size=3),
       asked=st.sampled_from(["Porto", "Faro"]))
def test_async_decisions_equal_sync(revisions: list[str], asked: str) -> None:
    """Whatever changed since the plan, aexecute decides as execute (same outcome,
    reason, frontier and heads), in-memory owners read on the loop."""
    outs = []
    for mode in ("sync", "async"):
        trip = Trip()
        rec = trip.act(trip.req, {"destination": "Porto"})
        for r in revisions:
            trip.revise({"destination": r})
        tool = ProtectedTool(lambda destination: destination, depends_on={"req/t"},
                             name="book")
        f: Fence = trip.fence()
        if mode == "sync":
            res = f.execute(tool, roots=[rec.id], args={"destination": asked})
        else:
            res = asyncio.run(f.aexecute(tool, roots=[rec.id],
                                         args={"destination": asked}))
        outs.append([(d.outcome, d.reason, dict(d.frontier), dict(d.heads))
                     for d in res.decisions])
    assert outs[0] == outs[1]
