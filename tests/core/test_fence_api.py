"""Issue 12 API: arguments bound to the plan, async execution, no unprotected entry."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from icore.errors import AsyncRequired, FenceError, MalformedRecord
from icore.fence import (
    ACTION_FIELD,
    MAX_ARG_NESTING,
    Fence,
    Outcome,
    ProtectedTool,
    Reason,
    RecordRef,
    Replan,
    ReplanRequest,
    action_record,
    args_digest,
    bind_action,
    canonical_args,
)
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

OM = OwnershipMap({"req/t": "traveler", "req/x": "other"},
                  {"plan/*": "planner", "act/*": "planner"})


class Trip:
    """A traveler owning req/t, a planner and its plan, an executor replica."""

    def __init__(self) -> None:
        self.traveler = MemoryStore(OM, "traveler")
        self.other = MemoryStore(OM, "other")
        self.planner = MemoryStore(OM, "planner")
        self.owners = LocalOwners({"traveler": self.traveler, "other": self.other,
                                   "planner": self.planner})
        self.req = self.revise({"destination": "Porto"})

    def revise(self, content: Any) -> Record:
        head = self.traveler.head("req/t")
        r = Record.create(key="req/t", owner="traveler", seq=self.traveler.next_seq(),
                          content=content, parents=[head.record_id] if head else [])
        self.traveler.commit(r, writer="traveler")
        self.planner.install(r)
        return r

    def act(self, req: Record, args: dict[str, Any], name: str = "book") -> Record:
        """The model's tool call as a derived action record citing the plan and inputs."""
        plan = derive(key="plan/trip", owner="planner", seq=self.planner.next_seq(),
                      content={"go": req.content}, inputs=[req])
        head = self.planner.head("plan/trip")
        self.planner.commit(plan, writer="planner",
                            expected_head=None if head is None else head.record_id)
        rec = action_record(key="act/trip", owner="planner", seq=self.planner.next_seq(),
                            action=name, args=args, inputs=[plan, req])
        head = self.planner.head("act/trip")
        self.planner.commit(rec, writer="planner",
                            expected_head=None if head is None else head.record_id)
        return rec

    def fence(self) -> Fence:
        return Fence.for_store(self.planner, self.owners)


@pytest.fixture
def trip() -> Trip:
    return Trip()


def _booker(log: list[str]) -> ProtectedTool:
    return ProtectedTool(lambda destination: log.append(destination) or destination,
                         depends_on={"req/t"}, name="book")


def test_canonical_args_and_binding() -> None:
    """RecordRefs and tuples have one canonical form; non-JSON arguments are refused."""
    ref = RecordRef("req/t", "a" * 64)
    c = canonical_args({"r": ref, "t": (1, 2)})
    assert c == {"r": {"$planfence.ref": {"key": "req/t", "id": "a" * 64}}, "t": [1, 2]}
    assert args_digest({"t": (1, 2)}) == args_digest({"t": [1, 2]})
    assert bind_action("book", {"d": 1}) == {ACTION_FIELD: {"name": "book", "args": {"d": 1}}}
    assert "args_sha256" in bind_action("book", {"d": 1}, digest=True)[ACTION_FIELD]
    with pytest.raises(MalformedRecord):
        canonical_args({"x": object()})
    with pytest.raises(MalformedRecord):
        bind_action("", {})


def test_model_arguments_other_than_the_plan_are_blocked(trip: Trip) -> None:
    """The LangGraph case: valid roots, the plan says Porto, the model says Lisbon."""
    booked: list[str] = []
    rec = trip.act(trip.req, {"destination": "Porto"})
    res = trip.fence().execute(_booker(booked), roots=[rec.id],
                               args={"destination": "Lisbon"})
    assert not res.executed and booked == []
    assert res.final.reason is Reason.ARGS_MISMATCH and res.final.deps == ("req/t",)
    ok = trip.fence().execute(_booker(booked), roots=[rec.id], args={"destination": "Porto"})
    assert ok.executed and booked == ["Porto"]


def test_roots_must_bind_exactly_this_action(trip: Trip) -> None:
    """No binding, another action's binding or two bindings: args_mismatch."""
    booked: list[str] = []
    plain = derive(key="plan/p", owner="planner", seq=trip.planner.next_seq(),
                   content={"go": "Porto"}, inputs=[trip.req])
    trip.planner.commit(plan := plain, writer="planner")
    res = trip.fence().execute(_booker(booked), roots=[plan.id],
                               args={"destination": "Porto"})
    assert res.final.reason is Reason.ARGS_MISMATCH and "no root" in res.final.detail
    other = trip.act(trip.req, {"destination": "Porto"}, name="cancel")
    res = trip.fence().execute(_booker(booked), roots=[other.id],
                               args={"destination": "Porto"})
    assert res.final.reason is Reason.ARGS_MISMATCH and "cancel" in res.final.detail
    a = trip.act(trip.req, {"destination": "Porto"})
    b = action_record(key="act/b", owner="planner", seq=trip.planner.next_seq(),
                      action="book", args={"destination": "Porto"}, inputs=[trip.req])
    trip.planner.commit(b, writer="planner")
    res = trip.fence().execute(_booker(booked), roots=[a.id, b.id],
                               args={"destination": "Porto"})
    assert res.final.reason is Reason.ARGS_MISMATCH and booked == []


def test_after_replan_the_fresh_roots_arguments_run(trip: Trip) -> None:
    """The replanner returns only roots; the fresh root's arguments are executed, and
    arguments given with the replan must equal them."""
    booked: list[str] = []
    rec = trip.act(trip.req, {"destination": "Porto"})
    new_req = trip.revise({"destination": "Faro"})

    def replan(req: ReplanRequest) -> Replan:
        fresh = req.fresh["req/t"]
        return Replan([trip.act(fresh, {"destination": fresh.content["destination"]}).id])

    res = trip.fence().execute(_booker(booked), roots=[rec.id],
                               args={"destination": "Porto"}, replan=replan)
    assert res.executed and res.replanned and booked == ["Faro"]
    assert res.args == {"destination": "Faro"} and new_req.id in res.final.frontier.values()

    trip.revise({"destination": "Braga"})

    def lying(req: ReplanRequest) -> Replan:
        fresh = req.fresh["req/t"]
        return Replan([trip.act(fresh, {"destination": "Braga"}).id],
                      {"destination": "Lisbon"})

    res = trip.fence().execute(_booker(booked), roots=[res.roots[0]],
                               args={"destination": "Faro"}, replan=lying)
    assert not res.executed and res.final.reason is Reason.ARGS_MISMATCH
    assert booked == ["Faro"]


def test_async_tool_and_replanner(trip: Trip) -> None:
    """aexecute awaits async tools and replanners; the decisions match execute's."""
    booked: list[str] = []

    async def book(destination: str) -> str:
        await asyncio.sleep(0)
        booked.append(destination)
        return destination

    tool = ProtectedTool(book, depends_on={"req/t"}, name="book")
    assert tool.is_async
    rec = trip.act(trip.req, {"destination": "Porto"})
    trip.revise({"destination": "Faro"})

    async def replan(req: ReplanRequest) -> Replan:
        await asyncio.sleep(0)
        fresh = req.fresh["req/t"]
        return Replan([trip.act(fresh, {"destination": "Faro"}).id])

    res = asyncio.run(trip.fence().aexecute(tool, roots=[rec.id],
                                            args={"destination": "Porto"}, replan=replan))
    assert res.executed and res.value == "Faro" and booked == ["Faro"]
    assert [d.outcome for d in res.decisions] == [Outcome.REPLAN_REQUIRED, Outcome.AUTHORIZED]


def test_sync_path_refuses_coroutines(trip: Trip) -> None:
    """An async tool, an async replanner or an awaitable result on the sync path is a
    typed error, never a silent 'executed'."""
    rec = trip.act(trip.req, {"destination": "Porto"})

    async def book(destination: str) -> str:
        return destination

    with pytest.raises(AsyncRequired):
        trip.fence().execute(ProtectedTool(book, depends_on={"req/t"}, name="book"),
                             roots=[rec.id], args={"destination": "Porto"})

    async def areplan(req: ReplanRequest) -> Replan | None:
        return None

    with pytest.raises(AsyncRequired):
        trip.fence().execute(_booker([]), roots=[rec.id], args={"destination": "Porto"},
                             replan=areplan)  # type: ignore[arg-type]
    sneaky = ProtectedTool(lambda destination: book(destination), depends_on={"req/t"},
                           name="book")
    with pytest.raises(AsyncRequired, match="awaitable"):
        trip.fence().execute(sneaky, roots=[rec.id], args={"destination": "Porto"})


def test_no_unprotected_public_entry() -> None:
    """Calling the tool raises; no public attribute or unwrap() reaches the function."""

    def book(destination: str) -> str:
        return destination

    tool = ProtectedTool(book, depends_on={"req/t"})
    with pytest.raises(FenceError):
        tool(destination="Porto")
    assert not hasattr(tool, "fn") and not hasattr(tool, "run")
    assert not hasattr(tool, "__wrapped__") and inspect.unwrap(tool) is tool
    assert list(inspect.signature(tool).parameters) == ["destination"]
    public = [n for n in dir(tool) if not n.startswith("_")]
    assert all(not callable(getattr(tool, n)) or n == "scope" for n in public), public


def test_reference_nesting_over_the_limit_blocks(trip: Trip) -> None:
    """A RecordRef nested deeper than the limit blocks instead of escaping D(a)."""
    deep: Any = RecordRef("req/x", "b" * 64)
    for _ in range(MAX_ARG_NESTING + 1):
        deep = [deep]
    rec = trip.act(trip.req, {"destination": deep})
    res = trip.fence().execute(_booker([]), roots=[rec.id], args={"destination": deep})
    assert res.final.reason is Reason.INCOMPLETE_DECLARATION and not res.executed
