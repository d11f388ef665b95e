"""FenceGuard in agent mode (the high-level API) and its wrap-time setup checks."""

from __future__ import annotations

from typing import Any

import pytest

from icore.errors import ActionBlocked, IntegrationError
from icore.integrations import FenceGuard
from icore.workspace import ReplanFailed, Workspace, WorkspaceError

ORDER = "order/42"


def _world() -> tuple[Workspace, Any, list[str]]:
    ws = Workspace({ORDER: "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    shipped: list[str] = []
    return ws, ws.agent("shipper"), shipped


def test_agent_mode_builds_the_action_record_and_phrases_blocks() -> None:
    """No roots, no replanner: stale -> fresh values to the model, one replan, then runs."""
    ws, agent, shipped = _world()
    guard = FenceGuard(agent=agent, depends_on={ORDER})
    assert guard.agent == "shipper" and guard.fence is agent.fence
    agent.read(ORDER)
    ws.update(ORDER, lambda o: {"city": "Munich"})
    g = guard.run("ship", lambda city: shipped.append(city), {"city": "Berlin"})
    assert not g.executed and g.reason == "stale" and "Munich" in g.message
    g2 = guard.run("ship", lambda city: shipped.append(city), {"city": "Munich"})
    assert g2.executed and shipped == ["Munich"] and g2.call is not None
    ws.update(ORDER, lambda o: {"city": "Bonn"})
    strict = FenceGuard(agent=agent, depends_on={ORDER}, on_block="raise")
    with pytest.raises(ActionBlocked) as ei:
        strict.run("ship", lambda city: shipped.append(city), {"city": "Munich"})
    assert ei.value.fields["reason"] == "stale"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({}, "needs agent="),
    ({"fence": None}, "needs agent="),
    ({"fence": "not a fence"}, "must be an icore.fence.Fence"),
    ({"depends_on": "order/42"}, "not a str"),
    ({"depends_on": {ORDER: 1}}, "not a mapping"),  # QA r5-crew D9
    ({"depends_on": set()}, "empty"),
    ({"depends_on": {"orders/42"}}, "no owner is declared"),
    ({"depends_on": 42}, "collection of keys"),
])
def test_setup_mistakes_raise_at_wrap_time(kwargs: dict[str, Any], match: str) -> None:
    """Typed errors naming the fix, before the model sees anything."""
    _ws, agent, _ = _world()
    args: dict[str, Any] = {"depends_on": {ORDER}, **kwargs}
    if "fence" not in kwargs and kwargs != {}:
        args["agent"] = agent
    with pytest.raises(IntegrationError, match=match):
        FenceGuard(**args)


def test_dynamic_scope_with_unowned_key_raises_at_the_call() -> None:
    """A D(a) function naming an undeclared fact is an application error, not a message."""
    _ws, agent, _ = _world()
    guard = FenceGuard(agent=agent, depends_on=lambda a: {f"orders/{a['id']}"})
    with pytest.raises(WorkspaceError, match="no owner"):
        guard.run("ship", lambda id: id, {"id": "1"})


def test_a_depends_on_function_failing_for_its_own_reasons_gets_its_own_fix() -> None:
    """QA r5-crew D5: a D(a) function that reads the right parameters and raises its own
    error (ZeroDivisionError) is not told to read the parameters by name; a KeyError
    (a wrong parameter name) is."""
    _ws, agent, _ = _world()
    own = FenceGuard(agent=agent, depends_on=lambda a: {f"order/{1 // (a['n'] - 1)}"})
    with pytest.raises(WorkspaceError) as ei:
        own.run("ship", lambda n: n, {"n": 1})
    assert "ZeroDivisionError" in str(ei.value) and "own error" in ei.value.fields["fix"]
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    typo = FenceGuard(agent=agent, depends_on=lambda a: {f"order/{a.get('n') or a['id']}"})
    with pytest.raises(WorkspaceError) as ei:
        typo.run("ship", lambda n: n, {"n": 0})
    assert "parameter names: n" in ei.value.fields["fix"]


def test_fence_mode_roots_as_str_is_an_error(trip: Any) -> None:
    """A single record id where L(a) (a list) is wanted: refused, not 64 one-char roots."""
    guard = FenceGuard(fence=trip.fence, depends_on={"req/trip-17"})
    with pytest.raises(IntegrationError, match="list of record ids"):
        guard.run("book", trip.book, {"destination": "Lisbon"},
                  trip.first_plan.id)


def test_fence_mode_block_names_the_real_cause(trip: Any) -> None:
    """Two roots binding actions: the message says so, not 'arguments differ'."""
    from icore.fence import bind_action
    from icore.records import derive

    st = trip.stores["planner"]
    req = trip.stores["traveler"].get(trip.stores["traveler"].head("req/trip-17").record_id)
    other = derive(key="plan/trip-17", owner="planner", seq=st.next_seq(),
                   content=bind_action("book", {"destination": "Faro"}), inputs=[req])
    trip.replicator.commit(other, expected_head=st.head("plan/trip-17").record_id)
    guard = FenceGuard(fence=trip.fence, depends_on={"req/trip-17"})
    g = guard.run("book", trip.book, {"destination": "Lisbon"},
                  [trip.first_plan.id, other.id])
    assert g.reason == "args_mismatch" and "per-call roots" in g.message
    assert "arguments differ" not in g.message


def test_guard_fence_mode_raising_or_non_replan_is_loud(trip: Any) -> None:
    """Fence mode (low-level): a replanner that raises or returns no ``Replan`` raises
    ReplanFailed; returning None still declines (the low-level API is unchanged)."""
    trip.revise("Porto")

    def book(destination: str) -> str:
        return trip.book(destination)

    def raising(rq: Any) -> Any:
        raise RuntimeError("planner down")

    for replan, words in ((raising, "raised"), (lambda rq: "x", "not a Replan")):
        guard = FenceGuard(fence=trip.fence, depends_on={"req/trip-17"}, replan=replan)
        with pytest.raises(ReplanFailed, match=words):
            guard.run("book", book, {"destination": "Lisbon"}, [trip.first_plan.id])
    declined = FenceGuard(fence=trip.fence, depends_on={"req/trip-17"},
                          replan=lambda rq: None).run(
        "book", book, {"destination": "Lisbon"}, [trip.first_plan.id])
    assert not declined.executed and trip.booked == []


def test_agent_mode_blocks_say_what_happened_no_planner_no_ids() -> None:
    """LangGraph D10, AG2 9, OpenAI 6: no "planner declined" without a planner, no 64-hex
    id; ``ActionBlocked`` has ``.action``, ``.reason``, ``.detail`` (and ``.fields``)."""
    from icore.integrations import RunRecorder

    ws, agent, shipped = _world()
    rec = RunRecorder("r")
    strict = FenceGuard(agent=agent, depends_on={ORDER}, on_block="raise", recorder=rec)
    agent.read(ORDER)
    ws.update(ORDER, lambda o: {"city": "Munich"})
    with pytest.raises(ActionBlocked) as ei:
        strict.run("ship", lambda city: shipped.append(city), {"city": "Berlin"})
    e = ei.value
    assert (e.action, e.reason) == ("ship", "stale") and e.fields["action"] == "ship"
    assert "handed to the agent" in e.detail and "planner" not in e.detail
    assert "planner" not in str(rec.events) and shipped == []
    ws.update(ORDER, lambda o: {"city": "Bonn"})  # a second change before the replan
    with pytest.raises(ActionBlocked) as ei:
        strict.run("ship", lambda city: shipped.append(city), {"city": "Munich"})
    assert ei.value.reason == "second_change"
    text = str(ei.value) + ei.value.detail
    assert not any(len(w.strip("'(),.:;")) == 64 for w in text.split())


def test_static_depends_on_never_written_typo_is_refused_at_wrap() -> None:
    """LangGraph D5: ``room/R10l`` matches ``room/*`` but nobody wrote it, and
    ``room/R101`` exists: a typo, refused with did-you-mean. A key far from every written
    one passes (its owner may write it later); its calls are refused without blaming the
    owner."""
    ws = Workspace({"room/*": "facilities"})
    ws.put("room/R101", {"price": 100})
    booker = ws.agent("booker")
    with pytest.raises(WorkspaceError, match="never been written") as ei:
        FenceGuard(agent=booker, depends_on={"room/R10l"})
    assert "did you mean 'room/R101'?" in str(ei.value)
    later = FenceGuard(agent=booker, depends_on={"room/Z9"})
    g = later.run("book", lambda room: room, {"room": "Z9"})
    assert not g.executed and g.reason == "not_read" and "no value yet for room/Z9" in g.message
    assert "owner" not in g.message and g.call is not None and g.call.unwritten == ("room/Z9",)
    ws.put("room/Z9", None)  # written, as None: a value, readable, can authorize
    assert later.run("book", lambda room: room, {"room": "Z9"}).reason == "not_read"
    assert later.run("book", lambda room: room, {"room": "Z9"}).executed
