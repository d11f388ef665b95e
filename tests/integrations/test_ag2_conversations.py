"""AG2: each conversation is its own workspace scope; turns stamped per conversation.

#28, QA qa-new10 S1-1 / S1-2. Real ``ag2.Agent`` runs with AG2's scripted
``TestConfig`` (examples/ag2_app.py's ``ScriptedWorld``), no network, no mocks:

* a read made in one AG2 conversation (one stream, one AG2 agent) never backs a call
  of another: a stale plan of conversation 1 is refused even when conversation 2 (the
  same AG2 agent asked again, or another AG2 agent sharing the workspace handle) read
  the new version; a conversation that never read the fact is refused ``not_read``;
* a follow-up (``reply.ask``) continues its conversation: its earlier read counts;
* ``with agent.scope(...)`` shares one scope on purpose (explicit wins);
* the same-turn re-read rule holds whatever other fenced tools the workspace agent has
  (built before or after, registered on this agent, another one or none).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from ag2 import Agent
from ag2.events import ToolErrorEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace

from .ag2_world import call
from .conftest import load_example


def _world(turns: Iterator[Any] | list[Any]) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))


class Rooms:
    """Rooms owned by facilities; one booker handle; a tool log."""

    def __init__(self) -> None:
        self.ws = Workspace({"room/*": "facilities", "meeting/*": "calendar"})
        self.ws.put("room/R1", {"cap": 10}, by="facilities")
        self.ws.put("meeting/M1", {"t": 9}, by="calendar")
        self.booker = self.ws.agent("booker")
        self.log: list[tuple[Any, ...]] = []

    def get_room(self) -> Any:
        def get_room(room_id: str) -> dict[str, Any]:
            """Read a room."""
            return self.booker.read(f"room/{room_id}")  # type: ignore[return-value]

        return get_room

    def aget_room(self) -> Any:
        async def get_room(room_id: str) -> dict[str, Any]:
            """Read a room."""
            return self.booker.read(f"room/{room_id}")  # type: ignore[return-value]

        return get_room

    def book(self) -> Any:
        def book(room_id: str, size: int) -> str:
            """Book a room for size people."""
            self.log.append(("book", room_id, size))
            return "booked"

        return fenced_tool(book, agent=self.booker,
                           depends_on=lambda a: {f"room/{a['room_id']}"})

    def move(self, name: str = "move") -> Any:
        def move(meeting_id: str, t: int) -> str:
            """Move a meeting."""
            self.log.append((name, meeting_id, t))
            return "moved"

        move.__name__ = name
        return fenced_tool(move, agent=self.booker,
                           depends_on=lambda a: {f"meeting/{a['meeting_id']}"})

    def shrink(self) -> None:
        self.ws.put("room/R1", {"cap": 4}, by="facilities")


def test_a_second_conversation_of_the_same_agent_never_backs_the_first() -> None:
    """b9b twoconv: conversation 1 reads R1 (10); facilities shrinks it to 4;
    conversation 2 (a new ``ask`` of the same AG2 agent) reads 4; conversation 1's
    follow-up books for 10: judged by conversation 1's read, stale, nothing booked."""
    r = Rooms()
    turns = [call("get_room", room_id="R1"), "R1 holds 10",
             call("get_room", room_id="R1"), "R1 holds 4",
             call("book", room_id="R1", size=10), "done"]
    booker = Agent("booker", config=_world(turns), tools=[r.get_room(), r.book()])
    rec = RunRecorder("two-conversations")
    record_agents(rec, booker)

    async def go() -> list[Any]:
        first = await booker.ask("how big is R1?")
        r.shrink()
        await booker.ask("how big is R1? (another user)")
        reply = await first.ask("book R1 for 10")
        return [e for e in await reply.history.get_events() if isinstance(e, ToolErrorEvent)]

    errors = asyncio.run(go())
    assert r.log == []
    assert len(errors) == 1 and "(stale)" in str(errors[0].error)
    blocked = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "book"]
    assert [e.get("blocked") for e in blocked] == [True]


def test_two_ag2_agents_sharing_one_workspace_agent_are_two_conversations() -> None:
    """b9: alice reads R1 (10), it shrinks, bob reads 4 through the same handle, alice's
    follow-up books for 10: refused stale; bob's read backs nothing of alice's."""
    r = Rooms()
    read, book = r.get_room(), r.book()
    alice = Agent("alice", config=_world([call("get_room", room_id="R1"), "10",
                                          call("book", room_id="R1", size=10), "a"]),
                  tools=[read, book])
    bob = Agent("bob", config=_world([call("get_room", room_id="R1"), "4"]),
                tools=[read, book])

    async def go() -> None:
        reply = await alice.ask("how big is R1?")
        r.shrink()
        await bob.ask("how big is R1?")
        await reply.ask("book R1 for 10")

    asyncio.run(go())
    assert r.log == []


def test_a_read_in_another_conversation_is_not_read_in_this_one() -> None:
    """Fail closed: conversation 2 read R1 (the head); conversation 1 never did: its
    book is refused ``not_read`` (value handed over), its next call runs."""
    r = Rooms()
    turns = [call("get_room", room_id="R1"), "10",
             call("book", room_id="R1", size=4), call("book", room_id="R1", size=4), "ok"]
    booker = Agent("booker", config=_world(turns), tools=[r.get_room(), r.book()])

    async def go() -> list[Any]:
        await booker.ask("how big is R1?")
        reply = await booker.ask("book R1 for 4")
        return [e for e in await reply.history.get_events() if isinstance(e, ToolErrorEvent)]

    errors = asyncio.run(go())
    assert len(errors) == 1 and "(not_read)" in str(errors[0].error)
    assert r.log == [("book", "R1", 4)]


def test_a_follow_up_continues_its_conversation() -> None:
    """``reply.ask`` is the same conversation (AG2's stream): the read of the first
    request backs the follow-up's call."""
    r = Rooms()
    turns = [call("get_room", room_id="R1"), "10", call("book", room_id="R1", size=10), "ok"]
    booker = Agent("booker", config=_world(turns), tools=[r.get_room(), r.book()])

    async def go() -> None:
        reply = await booker.ask("how big is R1?")
        await reply.ask("book it for 10")

    asyncio.run(go())
    assert r.log == [("book", "R1", 10)]


def test_concurrent_conversations_keep_their_reads_apart() -> None:
    """Two conversations at once (``asyncio.gather``): each books from its own read; the
    one that read before the change is refused, the other runs."""
    r = Rooms()
    read, book = r.get_room(), r.book()
    gate = asyncio.Event

    async def go() -> None:
        changed = gate()

        def early() -> Iterator[Any]:
            yield call("get_room", room_id="R1")
            r.shrink()
            changed.set()
            yield call("book", room_id="R1", size=10)
            yield "early done"

        def late() -> Iterator[Any]:
            yield call("get_room", room_id="R1")
            yield call("book", room_id="R1", size=4)
            yield "late done"

        a = Agent("a", config=_world(early()), tools=[read, book])
        b = Agent("b", config=_world(late()), tools=[read, book])

        async def b_after() -> None:
            await changed.wait()
            await b.ask("book R1 for 4")

        await asyncio.gather(a.ask("book R1 for 10"), b_after())

    asyncio.run(go())
    assert r.log == [("book", "R1", 4)]


def test_an_explicit_scope_shares_reads_between_agents() -> None:
    """``with booker.scope("desk"):`` around both agents: bob's read backs alice's
    call (the user shared the scope on purpose)."""
    r = Rooms()
    read, book = r.get_room(), r.book()
    alice = Agent("alice", config=_world([call("book", room_id="R1", size=10), "a"]),
                  tools=[read, book])
    bob = Agent("bob", config=_world([call("get_room", room_id="R1"), "10"]),
                tools=[read, book])

    async def go() -> None:
        await bob.ask("how big is R1?")
        await alice.ask("book R1 for 10")

    with r.booker.scope("desk"):
        asyncio.run(go())
    assert r.log == [("book", "R1", 10)]


@pytest.mark.parametrize("others", ["none", "unused", "on_bob", "on_alice", "before"])
def test_a_same_turn_re_read_never_backs_the_call(others: str) -> None:
    """b17/b16: the model read R1 (10); it shrank; one response re-reads R1 and books
    for 10: the re-read is of that turn, so the call is judged by the earlier read
    (stale), and the model's next call runs; the same whatever other fenced tools the
    handle has."""
    r = Rooms()
    extra = r.move() if others == "before" else None
    book = r.book()
    if others != "none" and extra is None:
        extra = r.move()
    if others == "on_bob":
        Agent("bob", config=_world(["hi"]), tools=[extra])
    log = _same_turn(r, book, extra if others == "on_alice" else None, r.aget_room())
    assert log == [("book", "R1", 4)]


@settings(max_examples=25, deadline=None)
@given(n_extra=st.integers(0, 3), book_at=st.integers(0, 3),
       on_alice=st.lists(st.booleans(), min_size=3, max_size=3),
       sync_read=st.booleans())
def test_turn_stamps_hold_for_any_set_of_fenced_tools(n_extra: int, book_at: int,
                                                      on_alice: list[bool],
                                                      sync_read: bool) -> None:
    """Any number of other fenced tools on the handle, built in any order, registered on
    the agent or not; the read tool sync or ``async def``: the stale same-turn call never
    runs and the replan does."""
    r = Rooms()
    names = [f"move{i}" for i in range(n_extra)]
    order = [*names[:book_at], "book", *names[book_at:]]
    built = {n: (r.book() if n == "book" else r.move(n)) for n in order}
    mine = [built[n] for i, n in enumerate(names) if on_alice[i]]
    log = _same_turn(r, built["book"], None, r.get_room() if sync_read else r.aget_room(),
                     more=mine)
    assert log == [("book", "R1", 4)]


def _same_turn(r: Rooms, book: Any, extra: Any, read: Any, more: list[Any] = ()) -> Any:
    def turns() -> Iterator[Any]:
        yield call("get_room", room_id="R1")
        r.shrink()
        yield [call("get_room", room_id="R1"), call("book", room_id="R1", size=10)]
        yield call("book", room_id="R1", size=4)
        yield "done"

    tools = [read, book, *([extra] if extra is not None else []), *more]
    alice = Agent("alice", config=_world(turns()), tools=tools)
    asyncio.run(alice.ask("book R1 for 10"))
    return r.log
