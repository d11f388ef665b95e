"""Reads and calls per run scope: one agent handle, several conversations (issue 28).

A call derives only from the reads made in its own scope (``agent.scope(id)``, the
agent's ``scope=`` function, or what an integration detects); a read in another scope
never authorizes it. Without any scope the agent behaves as before.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.workspace import NOT_READ, Workspace, WorkspaceError

FARE = "fare/LH100"


def _world() -> tuple[Workspace, Any, list[Any]]:
    ws = Workspace({"fare/*": "airline"})
    ws.put(FARE, {"price": 200}, by="airline")
    ran: list[Any] = []
    return ws, ws.agent("desk"), ran


def _book(ran: list[Any]) -> Any:
    def book(price: int) -> str:
        ran.append(price)
        return f"booked at {price}"

    return book


def test_another_scopes_read_never_authorizes_a_call() -> None:
    """X reads 200; the fare becomes 999; Y reads 999; X's book is stale, not valid."""
    ws, desk, ran = _world()
    with desk.scope("X"):
        desk.read(FARE)
    ws.put(FARE, {"price": 999}, by="airline")
    with desk.scope("Y"):
        assert desk.read(FARE) == {"price": 999}
    with desk.scope("X"):
        call = desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    assert not call.executed and call.reason == "stale" and ran == []
    assert call.fresh == {FARE: {"price": 999}}
    with desk.scope("Y"):  # Y's own read still authorizes Y's call
        assert desk.execute("book", _book(ran), {"price": 999}, depends_on={FARE}).executed
    assert ran == [999]


def test_a_scope_without_a_read_is_refused_not_read_and_handed_the_value() -> None:
    """A read in scope X (or unscoped) is nothing in scope Y: not_read, value handed over
    (now read in Y), so Y's next call runs."""
    _ws, desk, ran = _world()
    desk.read(FARE)  # unscoped
    with desk.scope("X"):
        desk.read(FARE)
    with desk.scope("Y"):
        call = desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
        assert call.reason == NOT_READ and call.fresh == {FARE: {"price": 200}}
        assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    assert ran == [200]


def test_unscoped_use_is_unchanged() -> None:
    """No scope anywhere: read, call, runs; a change makes the next call stale."""
    ws, desk, ran = _world()
    desk.read(FARE)
    assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    ws.put(FARE, {"price": 250}, by="airline")
    call = desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    assert call.reason == "stale" and desk.seen()[FARE].content == {"price": 250}
    assert desk.execute("book", _book(ran), {"price": 250}, depends_on={FARE}).executed
    assert ran == [200, 250]


def test_seen_and_requests_are_the_current_scopes() -> None:
    """``seen()`` and ``request_for`` answer for the scope code runs in."""
    ws, desk, _ran = _world()
    with desk.scope("X"):
        desk.read(FARE)
    ws.put(FARE, {"price": 999}, by="airline")
    with desk.scope("Y"):
        desk.read(FARE)
        assert desk.seen()[FARE].content == {"price": 999}
        y = desk.request_for("book", {"price": 1}, [FARE])
    with desk.scope("X"):
        assert desk.seen()[FARE].content == {"price": 200}
        x = desk.request_for("book", {"price": 1}, [FARE])
    assert desk.seen() == {}
    with pytest.raises(WorkspaceError, match="no scope"):  # unscoped on a scoped handle
        desk.request_for("book", {"price": 1}, [FARE])
    assert x is not None and y is not None and x.id != y.id
    desk.forget([FARE])  # every scope
    with desk.scope("X"):
        assert desk.seen() == {}


def test_scope_source_of_the_application() -> None:
    """``ws.agent(name, scope=f)``: the application's conversation id (a contextvar)."""
    session: contextvars.ContextVar[str | None] = contextvars.ContextVar("s", default=None)
    ws = Workspace({"fare/*": "airline"})
    ws.put(FARE, {"price": 200}, by="airline")
    desk = ws.agent("desk", scope=session.get)
    assert ws.agent("desk") is desk and ws.agent("desk", scope=session.get) is desk
    ran: list[Any] = []
    session.set("X")
    desk.read(FARE)
    ws.put(FARE, {"price": 999}, by="airline")
    session.set("Y")
    desk.read(FARE)
    session.set("X")
    assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).reason \
        == "stale"
    with desk.scope("Y"):  # the explicit scope wins over the source
        assert desk.execute("book", _book(ran), {"price": 999}, depends_on={FARE}).reason \
            == NOT_READ
    assert ran == []


def test_detected_scope_and_a_failing_source() -> None:
    """An integration's detector names the scope; the application's scope function
    that raises or names something unhashable fails the read and the call (closed):
    taking it as "no scope" would pool every conversation's reads (QA qa-lg F1)."""
    ws, desk, ran = _world()
    run: list[Any] = ["r1"]
    desk.detect_scope(lambda: ("fw", run[0]))
    desk.detect_scope(lambda: ("fw", run[0]))  # another function: asked second

    def broken() -> Any:
        raise KeyError("session_id")

    other = ws.agent("other", scope=broken)
    with pytest.raises(WorkspaceError, match="scope function failed") as err:
        other.read(FARE)
    assert "KeyError" in str(err.value) and "scope unknown" in repr(other)
    with other.scope("X"):  # an explicit scope is asked first
        assert other.seen() == {}
    with pytest.raises(WorkspaceError, match="scope function failed"):
        other.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    odd = ws.agent("odd", scope=lambda: {"sid": 1})
    with pytest.raises(WorkspaceError, match="scope function failed"):
        odd.read(FARE)
    desk.read(FARE)
    assert desk.current_scope() == ("fw", "r1")
    run[0] = "r2"
    call = desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    assert call.reason == NOT_READ and ran == []


@pytest.mark.parametrize("bad", [None, ["unhashable"]])
def test_bad_scope_ids_are_refused(bad: Any) -> None:
    _ws, desk, _ran = _world()
    with pytest.raises(WorkspaceError, match="scope id"):
        with desk.scope(bad):
            pass


def test_bad_scope_functions_are_refused() -> None:
    ws, _desk, _ran = _world()
    with pytest.raises(WorkspaceError, match="scope= is a function"):
        ws.agent("a", scope="chat-1")  # type: ignore[arg-type]
    ws.agent("b", scope=lambda: 1)
    with pytest.raises(WorkspaceError, match="another scope function"):
        ws.agent("b", scope=lambda: 2)


def test_threads_of_two_scopes_at_once() -> None:
    """Two threads through one agent, interleaved: X reads, the fare changes, Y reads,
    X calls: stale (X's own read), never authorized by Y's."""
    ws, desk, ran = _world()
    x_read, y_read = threading.Event(), threading.Event()
    out: dict[str, str] = {}

    def x() -> None:
        with desk.scope("X"):
            desk.read(FARE)
            x_read.set()
            assert y_read.wait(10)
            out["X"] = desk.execute("book", _book(ran), {"price": 200},
                                    depends_on={FARE}).reason

    def y() -> None:
        with desk.scope("Y"):
            assert x_read.wait(10)
            ws.put(FARE, {"price": 999}, by="airline")
            desk.read(FARE)
            y_read.set()

    ts = [threading.Thread(target=x), threading.Thread(target=y)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert out == {"X": "stale"} and ran == []


_OPS = st.lists(st.tuples(st.sampled_from(["read", "call", "change"]),
                          st.sampled_from(["A", "B", "C", None])), max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_a_call_runs_iff_its_own_scopes_last_read_is_the_head(ops: list[Any]) -> None:
    """Any interleaving of reads, calls and changes over scopes A, B, C and none: a call
    runs iff its own scope read the fact and its last read (or hand-over) is the head;
    a refusal hands the head over in that scope only (the one replan: a change before
    it blocks ``second_change``, nothing handed). An unscoped call once the handle has
    seen a scope is a ``WorkspaceError`` (fail closed), and changes nothing."""
    ws, desk, ran = _world()
    head, last, ticket = 0, {}, {}  # version numbers: the model of the gate
    runs, scoped = 0, False
    for op, scope in ops:
        if op == "change":
            head += 1
            ws.put(FARE, {"price": 200 + head}, by="airline")
            continue
        scoped = scoped or scope is not None
        ctx = desk.scope(scope) if scope is not None else _Null()
        with ctx:
            if op == "read":
                desk.read(FARE)
                last[scope] = head
                continue
            if scope is None and scoped:
                with pytest.raises(WorkspaceError, match="has no scope"):
                    desk.execute("book", _book(ran), {"price": 1}, depends_on={FARE})
                continue
            call = desk.execute("book", _book(ran), {"price": 1}, depends_on={FARE})
        if scope not in last:
            assert call.reason == NOT_READ
            last[scope] = head
        elif last[scope] == head:
            assert call.executed, call.reason
            ticket.pop(scope, None)
            runs += 1
        elif ticket.get(scope) == last[scope]:
            assert call.reason == "second_change"
        else:
            assert call.reason == "stale"
            last[scope] = ticket[scope] = head
    assert len(ran) == runs


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
