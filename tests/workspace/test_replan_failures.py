"""A broken user replanner fails closed and loudly (#28 QA: LangGraph D4, AG2 7, OpenAI
Agents 8).

The rule: a replanner that raises, or returns anything but the tool's arguments (a
mapping that fits the schema) or ``DECLINE``, is an application error. The call does not
run, the agent is handed nothing (its reads stay as they were, so a blind retry is stale
again), and :class:`~icore.workspace.ReplanFailed` is raised chained to the cause; the
guard records the blocked call and logs it. ``replan=`` that is not callable is refused
when the tool is wrapped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from icore.errors import IntegrationError
from icore.integrations import ArgNormalizer, FenceGuard, RunRecorder
from icore.workspace import DECLINE, ReplanFailed, Stale, Workspace

ORDER = "order/42"


def ship(city: str, express: bool = False) -> str:
    """The real side effect."""
    SHIPPED.append(city)
    return f"shipped to {city}"


SHIPPED: list[str] = []


def _stale() -> tuple[Workspace, Any]:
    SHIPPED.clear()
    ws = Workspace({"order/*": "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    agent.read(ORDER)
    ws.put(ORDER, {"city": "Munich"})  # another agent changes it before the call
    return ws, agent


def _boom(stale: Stale) -> Any:
    raise ValueError("boom")


BROKEN: list[tuple[str, Any, str]] = [
    ("raises", _boom, "the replanner raised"),
    ("None", lambda st: None, "returned no arguments"),
    ("str", lambda st: "Munich", "something other than the tool's arguments"),
    ("wrong key", lambda st: {"cty": "Munich"}, "do not fit the tool's schema"),
    ("bad type", lambda st: {"city": ["Munich"]}, "do not fit the tool's schema"),
    ("not JSON", lambda st: {"city": object()}, "not JSON"),
]


@pytest.mark.parametrize(("what", "replan", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_replanner_raises_typed_and_nothing_runs(what: str, replan: Any,
                                                       words: str) -> None:
    _, agent = _stale()
    norm = ArgNormalizer.for_function(ship, name="ship", framework="test") \
        if what != "not JSON" else None
    with pytest.raises(ReplanFailed, match=words) as ei:
        agent.execute("ship", ship, {"city": "Berlin", "express": False},
                      depends_on={ORDER}, replan=replan, normalize=norm)
    err = ei.value
    assert SHIPPED == [] and err.fields["action"] == "ship" and err.fields.get("fix")
    assert err.call is not None and not err.call.executed and err.call.reason == "stale"
    assert "planner declined" not in err.call.detail
    if what == "raises":
        assert isinstance(err.__cause__, ValueError)
    # the agent was handed nothing: the same call again is stale again, never authorized
    assert agent.seen()[ORDER].content == {"city": "Berlin"}
    again = agent.execute("ship", ship, {"city": "Berlin", "express": False},
                          depends_on={ORDER})
    assert not again.executed and again.reason == "stale" and SHIPPED == []


def test_async_replanner_failures_and_decline() -> None:
    _, agent = _stale()

    async def aboom(stale: Stale) -> Any:
        await asyncio.sleep(0)
        raise KeyError("city")

    with pytest.raises(ReplanFailed, match="raised") as ei:
        asyncio.run(agent.aexecute("ship", ship, {"city": "Berlin"}, depends_on={ORDER},
                                   replan=aboom))
    assert isinstance(ei.value.__cause__, KeyError) and SHIPPED == []
    declined = asyncio.run(agent.aexecute("ship", ship, {"city": "Berlin"},
                                          depends_on={ORDER}, replan=lambda st: DECLINE))
    assert declined.reason == "stale" and declined.fresh == {ORDER: {"city": "Munich"}}
    assert "replanner declined" in declined.detail and "Munich" in declined.message
    ok = agent.execute("ship", ship, {"city": "Munich"}, depends_on={ORDER})
    assert ok.executed and SHIPPED == ["Munich"]  # the model's one replan


def test_a_replanner_targeting_an_unread_fact_is_blocked_with_keys_named() -> None:
    """LangGraph D10: no 64-hex record id in what the model reads."""
    ws, agent = _stale()
    ws.put("order/43", {"city": "Oslo"})
    call = agent.execute("ship", lambda order: order, {"order": "42"},
                         depends_on=lambda a: {f"order/{a['order']}"},
                         replan=lambda st: {"order": "43"})
    assert not call.executed and call.reason == "missing_boundary"
    assert "order/43" in call.detail and "order/43" in call.message
    assert not any(len(w) == 64 for w in call.message.replace("'", " ").split())


def test_guard_refuses_a_non_callable_replan_when_wrapped() -> None:
    _, agent = _stale()
    for bad in ("yes", 1, {"city": "x"}):
        with pytest.raises(IntegrationError, match="replan= must be a function"):
            FenceGuard(agent=agent, depends_on={ORDER}, replan=bad)  # type: ignore[arg-type]


def test_guard_records_the_block_logs_and_raises(caplog: pytest.LogCaptureFixture) -> None:
    """Agent mode through the guard (what every integration calls)."""
    _, agent = _stale()
    rec = RunRecorder("r")
    guard = FenceGuard(agent=agent, depends_on={ORDER}, replan=_boom, recorder=rec)
    with caplog.at_level(logging.ERROR, logger="icore.integrations"), \
            pytest.raises(ReplanFailed) as ei:
        guard.run("ship", ship, {"city": "Berlin", "express": False})
    assert isinstance(ei.value.__cause__, ValueError) and SHIPPED == []
    assert any("replanner raised" in r.getMessage() for r in caplog.records)
    blocked = [e for e in rec.events if e.get("blocked")]
    assert blocked and "replan failed" in str(blocked[-1].get("content"))
    with pytest.raises(ReplanFailed):  # async too
        asyncio.run(guard.arun("ship", ship, {"city": "Berlin", "express": False}))
