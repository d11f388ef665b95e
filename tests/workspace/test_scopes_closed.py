"""Scopes fail closed, and a forgotten read never authorizes (issue 28 follow-ups).

A handle that has seen scoped use serves several conversations: an unscoped protected
call on it would derive from the one unscoped history every caller of unknown scope
shares, so it is a ``WorkspaceError`` naming the fix. ``forget`` drops the reads from
every scope and every turn snapshot.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from icore.workspace import NOT_READ, Workspace, WorkspaceError

from .test_scopes import FARE, _book, _world


def test_unscoped_call_on_a_scoped_handle_is_refused() -> None:
    """Conversation X is scoped; P (a thread that lost the context) reads unscoped; Q
    calls unscoped: P's read must not authorize Q's call. Refused, nothing runs."""
    _ws, desk, ran = _world()
    with desk.scope("X"):
        desk.read(FARE)
    reader = threading.Thread(target=desk.read, args=(FARE,))  # conversation P, unscoped
    reader.start()
    reader.join()
    with pytest.raises(WorkspaceError, match="has no scope") as err:
        desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    assert ran == [] and "thread_id" in err.value.fields["fix"]
    assert "agent.scope(chat_id)" in err.value.fields["fix"]
    with pytest.raises(WorkspaceError, match="has no scope"):
        desk.action_record("book", {"price": 200}, [FARE])
    with desk.scope("X"):  # the scoped conversation goes on
        assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    assert ran == [200]


def test_a_scoped_call_after_unscoped_use_still_needs_its_own_read() -> None:
    """The other direction: unscoped reads (and calls) first, then scope Y: Y's call is
    refused ``not_read`` (the value handed over in Y); the unscoped history never counts
    in Y, and after Y the handle refuses unscoped calls."""
    _ws, desk, ran = _world()
    desk.read(FARE)
    assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    with desk.scope("Y"):
        call = desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
        assert call.reason == NOT_READ and ran == [200]
        assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    with pytest.raises(WorkspaceError, match="has no scope"):
        desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE})
    assert ran == [200, 200]


def test_a_handle_never_scoped_keeps_its_unscoped_history() -> None:
    """A handle used without scopes only: reads and calls as before (one conversation)."""
    _ws, desk, ran = _world()
    desk.read(FARE)
    for _ in range(3):
        assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).executed
    assert ran == [200, 200, 200]


@pytest.mark.parametrize("keys", [[FARE], None])
def test_forgotten_read_does_not_authorize_the_rest_of_its_turn(keys: Any) -> None:
    """A turn's basis is fixed at its first call; ``forget`` drops it there too: a later
    call of the same model message is refused ``not_read``, never run."""
    _ws, desk, ran = _world()
    desk.read(FARE)
    assert desk.execute("book", _book(ran), {"price": 1}, depends_on={FARE}, turn="m1").executed
    desk.forget(keys)
    call = desk.execute("book", _book(ran), {"price": 2}, depends_on={FARE}, turn="m1")
    assert not call.executed and call.reason == NOT_READ and ran == [1]
    assert desk.request_for("book", {"price": 2}, [FARE], turn="m2") is not None  # handed over


def test_forget_in_a_scope_turn_and_other_keys_kept() -> None:
    """Scoped turns are forgotten too; a key not forgotten still counts."""
    ws = Workspace({"fare/*": "airline"})
    ws.put(FARE, {"price": 200}, by="airline")
    ws.put("fare/AF1", {"price": 90}, by="airline")
    desk, ran = ws.agent("desk"), []
    with desk.scope("X"):
        desk.read(FARE)
        desk.read("fare/AF1")
        assert desk.execute("book", _book(ran), {"price": 1}, depends_on={FARE},
                            turn="m1").executed
        desk.forget({FARE})
        assert desk.execute("book", _book(ran), {"price": 2}, depends_on={FARE},
                            turn="m1").reason == NOT_READ
        assert desk.execute("book", _book(ran), {"price": 3}, depends_on={"fare/AF1"},
                            turn="m1").executed
    assert ran == [1, 3]


def test_forget_drops_the_replan_ticket() -> None:
    """A stale call's hand-over makes the next call the one replan; after ``forget`` and
    a new read the next call is a new plan: a change before it is ``stale`` (handed over
    again), not ``second_change``."""
    ws, desk, ran = _world()
    desk.read(FARE)
    ws.put(FARE, {"price": 250}, by="airline")
    assert desk.execute("book", _book(ran), {"price": 200}, depends_on={FARE}).reason == "stale"
    desk.forget([FARE])
    desk.read(FARE)  # 250: the version handed over, read again as a new plan
    ws.put(FARE, {"price": 300}, by="airline")
    call = desk.execute("book", _book(ran), {"price": 250}, depends_on={FARE})
    assert call.reason == "stale" and call.fresh == {FARE: {"price": 300}} and ran == []


@pytest.mark.parametrize("bad", ["fare/LH100", b"fare", 7, [7]])
def test_forget_refuses_what_is_no_collection_of_keys(bad: Any) -> None:
    """A str would be read as its characters (forgetting nothing): a typed error."""
    _ws, desk, _ran = _world()
    desk.read(FARE)
    with pytest.raises(WorkspaceError):
        desk.forget(bad)
    assert FARE in desk.seen()


def test_an_unscoped_approval_request_on_a_scoped_handle_fails_closed() -> None:
    """``request_for`` (what the human is asked) follows the call's rule: on a handle
    that has seen scoped use, no scope is a ``WorkspaceError``, never a request built
    from the shared unscoped reads (review of h28safe)."""
    ws = Workspace({"fare/*": "pricing"})
    ws.put("fare/LH1", {"eur": 100}, by="pricing")
    desk = ws.agent("desk")
    with desk.scope("chat-1"):
        desk.read("fare/LH1")
    desk.read("fare/LH1")
    with pytest.raises(WorkspaceError, match="no scope"):
        desk.request_for("book", {"flight": "LH1"}, ["fare/LH1"])
