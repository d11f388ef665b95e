"""The high-level team API (issue 28 item 1): shared facts, reads, action records, replan.

Framework-free: a Workspace over in-process, SQLite and TCP owners; the agent handle's
reads and protected calls through the real Fence (planfence Alg. 1, App. A.3).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from icore.errors import AsyncRequired, CommitConflict, HeadConflict, IntegrationError
from icore.fence import Reason
from icore.memory import MemoryStore
from icore.records import Record
from icore.workspace import DECLINE, NOT_READ, Call, Stale, Workspace, WorkspaceError

ORDER = "order/42"


def _ws() -> Workspace:
    ws = Workspace({ORDER: "sales", "stock/*": "warehouse"})
    ws.put(ORDER, {"city": "Berlin"})
    return ws


class Shipper:
    """The real side effect: what shipped, in order."""

    def __init__(self) -> None:
        self.shipped: list[str] = []

    def ship(self, city: str) -> str:
        self.shipped.append(city)
        return f"shipped to {city}"


def _set_city(ws: Workspace, city: str) -> Record:
    return ws.update(ORDER, lambda o: {**(o or {}), "city": city}, by="sales")  # type: ignore[dict-item]


def test_facts_are_declared_once_and_written_by_their_owner() -> None:
    """CAS writes at the owner; the errors name the key and the fix."""
    ws = _ws()
    assert ws.value(ORDER) == {"city": "Berlin"}
    with pytest.raises(WorkspaceError, match="no owner is declared") as ei:
        ws.put("orders/42", {"city": "x"})
    assert "did you mean 'order/42'?" in str(ei.value)
    with pytest.raises(WorkspaceError, match="no owner is declared") as ei:
        ws.put("invoice/1", {"city": "x"})
    assert "Workspace(" in str(ei.value)
    with pytest.raises(WorkspaceError, match="only the fact's owner"):
        ws.put(ORDER, {"city": "x"}, by="shipper")
    head = ws.head(ORDER)
    assert head is not None
    with pytest.raises(HeadConflict):
        ws.commit(ORDER, {"city": "x"}, expected=None)  # the fact exists already
    new = ws.commit(ORDER, {"city": "Paris"}, expected=head.id)
    assert ws.head(ORDER) == new and new.parents == ()
    with pytest.raises(WorkspaceError, match="non-empty mapping"):
        Workspace("order/42")  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="not a str"):
        ws.check_keys("order/42", where="depends_on")
    assert isinstance(WorkspaceError("x"), IntegrationError)


def test_update_retries_a_lost_race_and_gives_up_after_retries() -> None:
    """``update`` re-reads and re-applies ``fn`` when another writer wins the race."""
    ws = _ws()
    calls = 0

    def bump(o: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # another writer commits between our read and our commit
            ws.put(ORDER, {"city": "Rome", "n": 1})
        return {**o, "n": o.get("n", 0) + 10}

    rec = ws.update(ORDER, bump, retries=2)
    assert calls == 2 and rec.content == {"city": "Rome", "n": 11}

    races = iter(range(100))

    def always_race(o: Any) -> Any:  # a new value each time (an equal put is a no-op)
        ws.put(ORDER, {"city": "Oslo", "n": next(races)})
        return {"city": "never"}

    with pytest.raises(CommitConflict):
        ws.update(ORDER, always_race, retries=1)
    assert ws.value(ORDER) == {"city": "Oslo", "n": 1}
    with pytest.raises(WorkspaceError):
        ws.update(ORDER, always_race, retries=-1)


def test_stale_call_never_runs_one_replan_then_second_change_blocks() -> None:
    """The order-shipping story through the agent handle, no framework."""
    ws, s = _ws(), Shipper()
    agent = ws.agent("shipper")
    assert ws.agent("shipper") is agent
    first = agent.execute("ship", s.ship, {"city": "Berlin"}, depends_on={ORDER})
    assert first.reason == NOT_READ and first.fresh == {ORDER: {"city": "Berlin"}}
    assert "holds no read of" in first.message and s.shipped == []
    assert agent.read(ORDER) == {"city": "Berlin"}
    _set_city(ws, "Munich")  # another agent changes the order before the tool runs
    stale = agent.execute("ship", s.ship, {"city": "Berlin"}, depends_on={ORDER})
    assert not stale.executed and stale.reason == Reason.STALE.value
    assert stale.fresh == {ORDER: {"city": "Munich"}} and "Munich" in stale.message
    assert agent.seen()[ORDER].content == {"city": "Munich"}  # the model now saw it
    ok = agent.execute("ship", s.ship, {"city": "Munich"}, depends_on={ORDER})
    assert ok.executed and ok.value == "shipped to Munich" and s.shipped == ["Munich"]
    assert ok.record is not None and ok.record.parents == (agent.seen()[ORDER].id,)
    # a new plan: stale again -> hand-over; a change before the replanned call blocks
    _set_city(ws, "Hamburg")
    assert agent.execute("ship", s.ship, {"city": "Munich"},
                         depends_on={ORDER}).reason == "stale"
    _set_city(ws, "Bonn")
    blocked = agent.execute("ship", s.ship, {"city": "Hamburg"}, depends_on={ORDER})
    assert blocked.reason == Reason.SECOND_CHANGE.value and "do not retry" in blocked.message
    again = agent.execute("ship", s.ship, {"city": "Hamburg"}, depends_on={ORDER})
    assert again.reason == Reason.SECOND_CHANGE.value  # fail closed, no new hand-over
    assert s.shipped == ["Munich"]
    agent.read(ORDER)  # reading the facts again starts a new plan
    assert agent.execute("ship", s.ship, {"city": "Bonn"}, depends_on={ORDER}).executed
    assert s.shipped == ["Munich", "Bonn"]


def test_user_replanner_runs_fresh_arguments_and_races_block() -> None:
    """A user replanner returns new arguments from the fresh values; a race blocks."""
    ws, s = _ws(), Shipper()
    agent = ws.agent("shipper")
    agent.read(ORDER)
    _set_city(ws, "Munich")
    seen: list[Stale] = []

    def replan(st_: Stale) -> dict[str, Any]:
        seen.append(st_)
        return {"city": st_.fresh[ORDER]["city"]}  # type: ignore[index, call-overload]

    c = agent.execute("ship", s.ship, {"city": "Berlin"}, depends_on={ORDER}, replan=replan)
    assert c.executed and c.replanned and s.shipped == ["Munich"]
    assert seen[0].args == {"city": "Berlin"} and c.args == {"city": "Munich"}
    _set_city(ws, "Hamburg")

    def racing(st_: Stale) -> dict[str, Any]:
        _set_city(ws, "Bonn")  # changes again while replanning
        return {"city": "Hamburg"}

    c2 = agent.execute("ship", s.ship, {"city": "Munich"}, depends_on={ORDER}, replan=racing)
    assert c2.reason == "second_change" and s.shipped == ["Munich"]
    c3 = agent.execute("ship", s.ship, {"city": "Munich"}, depends_on={ORDER},
                       replan=lambda st_: DECLINE)
    assert c3.reason == "stale" and not c3.executed and s.shipped == ["Munich"]
    assert "replanner declined" in c3.detail and "planner declined" not in c3.message


def test_two_calls_of_one_turn_validate_independently() -> None:
    """Each call is its own root; a sibling's hand-over never authorizes the other."""
    ws, s = _ws(), Shipper()
    ws.put("stock/berlin", {"n": 3}, by="warehouse")
    agent = ws.agent("shipper")
    agent.read(ORDER)
    agent.read("stock/berlin")
    ok = agent.execute("reserve", lambda item: f"reserved {item}", {"item": "a"},
                       depends_on={"stock/berlin"}, turn="m1")
    assert ok.executed
    _set_city(ws, "Munich")
    a = agent.execute("ship", s.ship, {"city": "Berlin"}, depends_on={ORDER}, turn="m1")
    b = agent.execute("ship", s.ship, {"city": "Berlin"}, depends_on={ORDER}, turn="m1")
    assert (a.reason, b.reason) == ("stale", "stale") and s.shipped == []
    assert a.record is not None and b.record is not None and a.record.id != b.record.id
    # the next model turn derives from the handed-over values: it is the one replan
    c = agent.execute("ship", s.ship, {"city": "Munich"}, depends_on={ORDER}, turn="m2")
    assert c.executed and s.shipped == ["Munich"]


def test_parallel_threads_each_call_its_own_root() -> None:
    """Eight concurrent calls of one turn: all valid, all distinct action records."""
    ws = _ws()
    agent = ws.agent("shipper")
    agent.read(ORDER)
    out: list[Call] = []
    lock = threading.Lock()

    def go(i: int) -> None:
        c = agent.execute("label", lambda n: n, {"n": i}, depends_on={ORDER}, turn="t")
        with lock:
            out.append(c)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(c.executed for c in out) and sorted(c.value for c in out) == list(range(8))
    assert len({c.record.id for c in out if c.record is not None}) == 8


def test_async_execute_with_async_tool_and_replanner() -> None:
    """``aexecute`` awaits async tools and replanners; ``execute`` refuses them."""
    ws = _ws()
    agent = ws.agent("shipper")
    agent.read(ORDER)
    _set_city(ws, "Munich")

    async def ship(city: str) -> str:
        await asyncio.sleep(0)
        return city

    async def replan(st_: Stale) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"city": "Munich"}

    with pytest.raises(AsyncRequired):
        agent.execute("ship", ship, {"city": "Berlin"}, depends_on={ORDER})
    c = asyncio.run(agent.aexecute("ship", ship, {"city": "Berlin"}, depends_on={ORDER},
                                   replan=replan))
    assert c.executed and c.value == "Munich"


def test_dynamic_scope_and_bad_declarations() -> None:
    """D(a) from the arguments; an empty scope is refused without running."""
    ws = Workspace({"order/*": "sales"})
    ws.put("order/1", {"city": "Oslo"})
    agent = ws.agent("shipper")
    agent.read("order/1")
    c = agent.execute("ship", lambda order: order, {"order": "1"},
                      depends_on=lambda a: {f"order/{a['order']}"})
    assert c.executed
    bad = agent.execute("ship", lambda order: order, {"order": "1"},
                        depends_on=lambda a: set())
    assert bad.reason == "incomplete_declaration" and not bad.executed
    with pytest.raises(WorkspaceError, match="has not read"):
        agent.action_record("ship", {"order": "2"}, ["order/2"])


def test_sqlite_backend(tmp_path: Path) -> None:
    """Owners on SQLite files: the same story, facts durable across workspaces."""
    with Workspace.sqlite({ORDER: "sales"}, tmp_path) as ws:
        ws.put(ORDER, {"city": "Berlin"})
        agent = ws.agent("shipper")
        agent.read(ORDER)
        _set_city(ws, "Munich")
        assert agent.execute("ship", lambda city: city, {"city": "Berlin"},
                             depends_on={ORDER}).reason == "stale"
    with Workspace.sqlite({ORDER: "sales"}, tmp_path) as ws2:
        assert ws2.value(ORDER) == {"city": "Munich"}


def test_remote_owner_over_tcp(tmp_path: Path) -> None:
    """The sales agent's store served over TCP with mutual TLS; the shipper reads and is
    gated through the real owner client."""
    from icore.net import ServerThread, init_team_certs, server_context

    certs = init_team_certs(tmp_path / "certs", ["sales", "shipper"], team="t")
    sales = Workspace({ORDER: "sales"})  # the sales process: hosts its own store
    sales.put(ORDER, {"city": "Berlin"})
    with ServerThread(sales.stores["sales"], agent="sales",
                      ssl_context=server_context(certs, "sales")) as srv, \
            Workspace.over_tcp({ORDER: "sales"}, identity="shipper", certs_dir=certs,
                               addresses={"sales": ("127.0.0.1", srv.port)}) as ws:
        agent = ws.agent("shipper")
        assert agent.read(ORDER) == {"city": "Berlin"}
        with pytest.raises(WorkspaceError, match="another process"):
            ws.put(ORDER, {"city": "x"})
        _set_city(sales, "Munich")
        c = agent.execute("ship", lambda city: city, {"city": "Berlin"}, depends_on={ORDER})
        assert c.reason == "stale" and c.fresh == {ORDER: {"city": "Munich"}}
        assert agent.execute("ship", lambda city: city, {"city": "Munich"},
                             depends_on={ORDER}).executed


def test_owner_down_blocks_fail_closed() -> None:
    """An unreachable owner blocks the call (owner_unavailable); nothing runs."""
    ws = _ws()
    agent = ws.agent("shipper")
    agent.read(ORDER)
    ws.owners.local.down.add("sales")
    c = agent.execute("ship", lambda city: city, {"city": "Berlin"}, depends_on={ORDER})
    assert c.reason == "owner_unavailable" and not c.executed
    assert "did not answer" in c.message


def test_reads_install_the_facts_ancestry() -> None:
    """A fact derived from another one: its ancestors reach the agent's replica."""
    ws = Workspace({ORDER: "sales", "quote/42": "pricing"})
    order = ws.put(ORDER, {"city": "Berlin"})
    ws.put("quote/42", {"eur": 12}, inputs=[order])
    agent = ws.agent("shipper")
    agent.read("quote/42")
    assert isinstance(agent.replica, MemoryStore) and agent.replica.lookup(order.id)
    assert agent.execute("ship", lambda city: city, {"city": "Berlin"},
                         depends_on={"quote/42"}).executed


# -- the invariant (hypothesis) ------------------------------------------------------------

_OPS = st.lists(st.one_of(
    st.just(("turn",)),
    st.tuples(st.just("read"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("write"), st.sampled_from(["a", "b"]), st.integers(0, 5)),
    st.tuples(st.just("call"), st.sampled_from([("a",), ("b",), ("a", "b")]))),
    max_size=40)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.booleans())
@example([("read", "a"), ("turn",), ("write", "a", 1), ("read", "a"), ("call", ("a",))],
         True)  # a read by a sibling of the call, in the same turn, after the change
@example([("read", "a"), ("write", "a", 1), ("call", ("a",)), ("call", ("a",))], True)
def test_no_call_runs_from_a_stale_read(ops: list[tuple[Any, ...]], stamped: bool) -> None:
    """Whatever the interleaving of model turns, reads, writes (another agent) and calls: a
    call runs only if every value the model decided it from is still the owner's head when
    it is validated. The model decides at the start of its turn from what it had read
    until then (reads and hand-overs of the same turn come back with its answer); the tool
    checks its arguments against the heads as it runs (in one thread: right after the
    validation)."""
    ws = Workspace({"f/a": "o1", "f/b": "o2"})
    ws.put("f/a", 0)
    ws.put("f/b", 0)
    agent = ws.agent("x")
    turn = [0]
    if stamped:  # reads know their turn (as in LangGraph); else calls carry no turn
        agent.turn_source = lambda: turn[0]
    known = {k: r.content for k, r in agent.seen().items()}  # what the model knows

    def act(**decided: Any) -> None:
        for key, v in decided.items():
            assert ws.value(f"f/{key}") == v, (key, v)

    for op in ops:
        if op[0] == "turn":
            turn[0] += 1
            known = {k: r.content for k, r in agent.seen().items()}
        elif op[0] == "read":
            agent.read(f"f/{op[1]}")
            if not stamped:  # without turns the model sees a read at once
                known = {k: r.content for k, r in agent.seen().items()}
        elif op[0] == "write":
            ws.put(f"f/{op[1]}", op[2])
        else:
            args = {k: known.get(f"f/{k}") for k in op[1]}
            agent.execute("act", act, args, depends_on={f"f/{k}" for k in op[1]},
                          turn=turn[0] if stamped else None)
            if not stamped:
                known = {k: r.content for k, r in agent.seen().items()}
