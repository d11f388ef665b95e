"""AG2 human waits (issue 28 item 5): whatever asks the human, the gate validates after it.

Real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig``; the human hook changes a
fact while "the human decides" (the QA reporter's scenario, apps/04b_custom_approval.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ag2 import Agent, Context, Middleware, tool
from ag2.events import ToolErrorEvent, ToolResultEvent
from ag2.exceptions import HumanInputError
from ag2.middleware import BaseMiddleware
from ag2.middleware.builtin import approval_required

from icore.errors import ActionBlocked
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents

from .ag2_world import call, orders, run
from .conftest import load_example

REQ = "req/trip-17"






def _world(turns: Any) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))




def _human(ws: Any, asked: list[str], *, answer: str = "yes", change_first: bool = True
           ) -> Any:
    """A human who, while deciding the first question, sees sales move order 42."""

    def human(request: Any) -> str:
        asked.append(str(getattr(request, "content", request)))
        if change_first and len(asked) == 1:
            ws.put("order/42", {"city": "Munich"}, by="sales")
        return answer

    return human


async def ask_manager(call_next: Any, event: Any, context: Any) -> Any:
    """The user's own approval hook (not AG2's ``approval_required``)."""
    if (await context.input(f"Approve {event.name} {event.arguments}?")).lower() != "yes":
        return ToolResultEvent.fromcall(event, result="denied")
    return await call_next(event, context)


def _ship_tool(shipped: list[tuple[str, str]], **kw: Any) -> Any:
    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return f"shipped {order_id} to {city}"

    return tool(ship, **kw)


def _errors(results: list[ToolResultEvent]) -> list[str]:
    return [str(r.error) for r in results if isinstance(r, ToolErrorEvent)]


@pytest.mark.usefixtures("one_chat")
def test_own_approval_middleware_answers_before_the_gate() -> None:
    """The reporter's scenario: the user's own approval hook asks with ``context.input``;
    sales moves the order while the human decides; the approved Berlin call is stale and
    never runs; the model's Munich call is asked again and runs. The same for a hook
    added with ``with_middleware`` after wrapping."""
    for late in (False, True):
        ws, shipper, shipped = orders()
        asked: list[str] = []
        base = _ship_tool(shipped) if late else _ship_tool(shipped, middleware=[ask_manager])
        w = fenced_tool(base, agent=shipper, depends_on={"order/42"})
        if late:
            w = w.with_middleware(ask_manager)
        shipper.read("order/42")
        agent = Agent("shipper", config=_world([
            call("ship", order_id="42", city="Berlin"),
            call("ship", order_id="42", city="Munich"), "ok"]), tools=[w],
            hitl_hook=_human(ws, asked))
        results = run(agent)
        assert "(stale)" in _errors(results)[0] and "Munich" in _errors(results)[0]
        assert len(asked) == 2 and "Berlin" in asked[0] and "Munich" in asked[1]
        assert shipped == [("42", "Munich")]


@pytest.mark.parametrize("human", ["none", "too slow"])
def test_a_run_stopped_at_an_unanswered_human_is_recorded_as_a_pause(human: str) -> None:
    """QA r4-ag2 D4: ``approval_required()`` with no ``hitl_hook`` (or one slower than
    the timeout) stops ``agent.ask`` with AG2's ``HumanInputError``; nothing ran and the
    trace ends with a pause naming the call put to the human (was: no line at all, the
    audit said "no final answer"): the audit reports the run paused."""
    _ws, shipper, shipped = orders()

    async def slow(request: Any) -> str:
        await asyncio.sleep(5)
        return "yes"

    gate = approval_required(timeout=0.05) if human == "too slow" else approval_required()
    w = fenced_tool(_ship_tool(shipped, middleware=[gate]), agent=shipper,
                    depends_on={"order/42"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([call("ship", order_id="42", city="Berlin"),
                                            "ok"]), tools=[w],
                  **({"hitl_hook": slow} if human == "too slow" else {}))
    rec = RunRecorder("waits")
    record_agents(rec, agent)
    with pytest.raises(HumanInputError):
        run(agent)
    last = rec.events[-1]
    assert shipped == [] and last["kind"] == "thought" and last["pause"] is True
    assert last["agent"] == "shipper" and "waiting for a human" in last["content"]
    assert last["approvals"] == [{"tool": "ship", "args": {"order_id": "42",
                                                            "city": "Berlin"}}]
    audited = rec.audit()
    assert audited.paused and not audited.summary().terminal


@pytest.mark.usefixtures("one_chat")
def test_agent_middleware_asking_the_human_answers_before_the_gate() -> None:
    """An agent-level middleware (``on_tool_execution``) asking the human: outside every
    tool hook, still before the validation; the stale call never runs."""
    ws, shipper, shipped = orders()
    asked: list[str] = []

    class AskFirst(BaseMiddleware):
        async def on_tool_execution(self, call_next: Any, event: Any, context: Any) -> Any:
            if (await context.input(f"run {event.name}?")) != "yes":
                return ToolResultEvent.fromcall(event, result="denied")
            return await call_next(event, context)

    w = fenced_tool(_ship_tool(shipped), agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([call("ship", order_id="42", city="Berlin"),
                                            "ok"]), tools=[w], hitl_hook=_human(ws, asked))
    agent.add_middleware(Middleware(AskFirst))
    results = run(agent)
    assert "(stale)" in _errors(results)[0] and shipped == [] and len(asked) == 1


@pytest.mark.usefixtures("one_chat")
def test_a_question_inside_the_tool_is_followed_by_a_second_validation() -> None:
    """``await context.input(...)`` inside the fenced function: the order moves while the
    human decides; the body stops at the answer (even inside ``except Exception``), the
    model reads the fresh value, and its Munich call (asked again, nothing changed) runs.
    The recorded call has its authorized decision, the refused one, and is blocked."""
    ws, shipper, shipped = orders()
    asked: list[str] = []
    seen_answers: list[str] = []

    async def ship(order_id: str, city: str, context: Context) -> str:
        """Ship an order (asks the human first)."""
        try:
            answer = await context.input(f"ship {order_id} to {city}?")
        except Exception:  # a broad handler must not swallow the stop
            answer = "error"
        seen_answers.append(answer)
        if answer != "yes":
            return "denied"
        shipped.append((order_id, city))
        return f"shipped {order_id} to {city}"

    ship.__annotations__ = {"order_id": str, "city": str, "context": Context, "return": str}
    w = fenced_tool(ship, agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([
        call("ship", order_id="42", city="Berlin"),
        call("ship", order_id="42", city="Munich"), "ok"]), tools=[w],
        hitl_hook=_human(ws, asked))
    rec = RunRecorder("in-tool-human")
    record_agents(rec, agent)
    results = run(agent)
    err = [r for r in results if isinstance(r, ToolErrorEvent)]
    assert len(err) == 1 and isinstance(err[0].error, ActionBlocked)
    assert "changed while the human decided" in str(err[0].error)
    assert "Munich" in str(err[0].error)
    assert shipped == [("42", "Munich")] and seen_answers == ["yes"] and len(asked) == 2
    gates = [(e["gate"]["outcome"], e["gate"]["reason"]) for e in rec.events if e.get("gate")]
    assert gates[:2] == [("authorized", "valid"), ("replan_required", "stale")]
    outs = [(e["args"]["city"], e["exitcode"]) for e in rec.events
            if e["kind"] == "tool_output" and e["tool"] == "ship"]
    assert outs == [("Berlin", 1), ("Munich", 0)]


@pytest.mark.usefixtures("one_chat")
def test_a_replan_never_runs_other_arguments_than_the_human_approved() -> None:
    """With a user replanner, the own hook's human approved Berlin; the fresh Munich call
    is refused ``approval_changed`` (nothing runs). After an "always" answer (AG2's
    ``approval_required``), every call of the tool is approved: the replanned call runs."""
    ws, shipper, shipped = orders()
    asked: list[str] = []
    replan = lambda st: {"order_id": "42", "city": st.fresh["order/42"]["city"]}  # noqa: E731
    w = fenced_tool(_ship_tool(shipped, middleware=[ask_manager]), agent=shipper,
                    depends_on={"order/42"}, replan=replan)
    shipper.read("order/42")
    agent = Agent("shipper", config=_world([call("ship", order_id="42", city="Berlin"),
                                            "ok"]), tools=[w], hitl_hook=_human(ws, asked))
    assert "approval_changed" in _errors(run(agent))[0] and shipped == []

    ws2, shipper2, shipped2 = orders()
    w2 = fenced_tool(_ship_tool(shipped2, middleware=[approval_required()]), agent=shipper2,
                     depends_on={"order/42"}, replan=replan)
    shipper2.read("order/42")
    agent2 = Agent("shipper", config=_world([call("ship", order_id="42", city="Berlin"),
                                             "ok"]), tools=[w2],
                   hitl_hook=_human(ws2, [], answer="always"))
    assert _errors(run(agent2)) == [] and shipped2 == [("42", "Munich")]


def test_low_level_fence_own_hook_and_question_in_the_tool(trip: Any) -> None:
    """Low-level (``fence=``): the own approval hook answers before the gate (the revised
    trip blocks the approved Lisbon call); a question inside the tool is followed by a
    second validation (the trip revised meanwhile stops the body)."""
    booked: list[str] = []

    def human(request: Any) -> str:
        trip.revise("Porto")
        return "yes"

    def book(destination: str) -> str:
        """Book a hotel."""
        booked.append(destination)
        return "booked"

    w = fenced_tool(tool(book, middleware=[ask_manager]), fence=trip.fence, depends_on={REQ})
    agent = Agent("executor", config=_world([call("book", destination="Lisbon"), "ok"]),
                  tools=[w], variables={"plan_roots": [trip.first_plan.id]}, hitl_hook=human)
    assert "(stale)" in _errors(run(agent))[0] and booked == []

    async def book_asking(destination: str, context: Context) -> str:
        """Book a hotel (asks first)."""
        await context.input("book?")
        booked.append(destination)
        return "booked"

    book_asking.__annotations__ = {"destination": str, "context": Context, "return": str}
    trip2 = load_example("_trip").Trip()

    def human2(request: Any) -> str:
        trip2.revise("Porto")
        return "yes"

    w2 = fenced_tool(tool(book_asking, name="book"), fence=trip2.fence, depends_on={REQ})
    agent2 = Agent("executor", config=_world([call("book", destination="Lisbon"),
                                              "ok"]), tools=[w2],
                   variables={"plan_roots": [trip2.first_plan.id]}, hitl_hook=human2)
    errors = _errors(run(agent2))
    assert "stopped at the answer" in errors[0] and booked == []
