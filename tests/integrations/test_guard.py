"""FenceGuard in agent mode (the high-level API) and its wrap-time setup checks."""

from __future__ import annotations

from typing import Any

import pytest

from icore.errors import ActionBlocked, IntegrationError
from icore.integrations import FenceGuard
from icore.workspace import Workspace, WorkspaceError

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
