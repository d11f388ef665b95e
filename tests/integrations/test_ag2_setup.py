"""AG2 setup mistakes, model mistakes and recorded ends (issue 28, QA report ag2 D2/D3/D5/D6).

Real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig``.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolErrorEvent
from pydantic import ValidationError

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import WorkspaceError

from .ag2_world import call, orders, run
from .conftest import load_example


class _Model:
    """AG2's scripted model that also keeps what it was shown."""

    def __init__(self, turns: list[Any]) -> None:
        self.turns = iter(turns)
        self.calls = 0

    def config(self) -> Any:
        def counted() -> Any:
            for t in self.turns:
                self.calls += 1
                yield t

        return load_example("ag2_app").ScriptedWorld(counted())




def _ship(shipped: list[Any]) -> Any:
    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return "shipped"

    return ship


@pytest.mark.parametrize(("depends_on", "match"), [
    (lambda a: {f"orders/{a['order_id']}"}, "did you mean 'order/42'"),
    (lambda a: {f"order/{a['orderid']}"}, "failed on the call's arguments"),
    (lambda a: f"order/{a['order_id']}", "returned a str"),
])
def test_dynamic_depends_on_mistake_leaves_ask_before_any_tool_runs(
        depends_on: Any, match: str) -> None:
    """A dynamic ``depends_on`` that names an undeclared key, fails on the (valid)
    arguments or returns a str: a typed ``WorkspaceError`` (an ``IntegrationError``)
    leaves ``agent.ask`` when the model response naming the call arrives; nothing ran
    and the model is not called again (no traceback handed to it)."""
    _ws, shipper, shipped = orders()
    w = fenced_tool(_ship(shipped), agent=shipper, depends_on=depends_on)
    model = _Model([call("ship", order_id="42", city="Berlin"), "the model carries on"])
    agent = Agent("shipper", config=model.config(), tools=[w])
    with pytest.raises(WorkspaceError, match=match) as exc:
        run(agent)
    assert isinstance(exc.value, IntegrationError)
    assert shipped == [] and model.calls == 1


@pytest.mark.usefixtures("one_chat")
def test_invalid_arguments_name_the_field_and_why() -> None:
    """The model's arguments do not fit the schema: the model reads each field and why
    (no traceback, no IntegrationError); the error carried is pydantic's, as for a plain
    AG2 tool; the corrected call runs."""
    _ws, shipper, shipped = orders()

    def ship(order_id: str, city: str, when: datetime.date) -> str:
        """Ship an order on a day."""
        shipped.append((order_id, city))
        return "shipped"

    w = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_Model([
        call("ship", order_id="42", when="tomorrow"),
        call("ship", order_id="42", city="Berlin", when="2026-12-03"), "ok"]).config(),
        tools=[w])
    results = run(agent)
    err = results[0]
    assert isinstance(err, ToolErrorEvent) and isinstance(err.error, ValidationError)
    text = str(err.result.parts[0].content)
    assert "city: Field required" in text and 'when: Input should be a valid date' in text
    assert '(got "tomorrow")' in text and "Traceback" not in text
    assert not isinstance(results[1], ToolErrorEvent) and shipped == [("42", "Berlin")]


@pytest.mark.usefixtures("one_chat")
def test_callable_object_refused_and_its_method_works() -> None:
    """``fenced_tool(callable_instance)``: a typed ``IntegrationError`` naming the fix
    (not a raw AttributeError); the fix, ``tool(obj.__call__, name=...)``, runs."""
    _ws, shipper, shipped = orders()

    class Shipper:
        def __call__(self, order_id: str, city: str) -> str:
            """Ship an order."""
            shipped.append((order_id, city))
            return "shipped"

    with pytest.raises(IntegrationError, match="callable object") as exc:
        fenced_tool(Shipper(), agent=shipper, depends_on={"order/42"})
    assert "name=" in str(exc.value)
    w = fenced_tool(tool(Shipper().__call__, name="ship"), agent=shipper,
                    depends_on={"order/42"})
    shipper.read("order/42")
    agent = Agent("shipper", config=_Model([call("ship", order_id="42", city="Berlin"),
                                            "ok"]).config(), tools=[w])
    assert not any(isinstance(r, ToolErrorEvent) for r in run(agent))
    assert shipped == [("42", "Berlin")]


@pytest.mark.parametrize(("given", "fix"), [
    (None, "ws.agent('dispatcher')"), ("shipper", "ws.agent('dispatcher')"),
    ("ag2", "ws.agent('shipper')")])
def test_a_wrong_agent_gets_one_message_with_a_hint_for_an_ag2_agent(
        given: Any, fix: str) -> None:
    """QA r4-ag2 D9: ``agent=`` left out, an agent id without ``fence=`` or AG2's own
    ``Agent``: one message (a workspace agent, or ``fence=`` with an agent id: as the
    OpenAI Agents integration says it); AG2's ``Agent`` gets a hint naming its
    ``ws.agent(...)``."""
    _ws, _shipper, shipped = orders()
    agent = Agent("shipper") if given == "ag2" else given
    with pytest.raises(IntegrationError, match=r"needs agent= \(a workspace agent") as exc:
        fenced_tool(_ship(shipped), agent=agent, depends_on={"order/42"})
    assert "agent id str" in str(exc.value) and fix in exc.value.fields["fix"]
    assert ("this is an AG2 Agent" in str(exc.value)) is (given == "ag2")


def test_a_recorder_path_or_a_second_wrap_is_refused_when_wrapped() -> None:
    """QA r4-ag2 D5/D6: ``recorder="trace.jsonl"`` is an ``IntegrationError`` naming
    ``recorder=`` and ``rec.write(path)`` (was a raw AttributeError); wrapping a fenced
    tool again (or its ``with_middleware`` copy) is refused "fenced already" (one call
    was recorded twice)."""
    _ws, shipper, shipped = orders()
    with pytest.raises(IntegrationError, match="recorder= must be a RunRecorder") as exc:
        fenced_tool(_ship(shipped), agent=shipper, depends_on={"order/42"},
                    recorder="trace.jsonl")  # type: ignore[arg-type]
    assert "rec.write('trace.jsonl')" in exc.value.fields["fix"]
    once = fenced_tool(_ship(shipped), agent=shipper, depends_on={"order/42"})
    for again in (once, once.with_middleware(lambda call_next, e, c: call_next(e, c))):
        with pytest.raises(IntegrationError, match="fenced already"):
            fenced_tool(again, agent=shipper, depends_on={"order/42"})


def test_record_agents_without_agents_or_recorder_is_refused() -> None:
    """QA r4-ag2 D10: ``record_agents(rec)`` (nothing would be recorded),
    ``record_agents(None, agent)`` and an agent's name instead of the agent: typed
    errors naming the fix."""
    with pytest.raises(IntegrationError, match="no agent") as exc:
        record_agents(RunRecorder("r"))
    assert "record_agents(rec, agent)" in exc.value.fields["fix"]
    with pytest.raises(IntegrationError, match="needs a RunRecorder") as exc:
        record_agents(None, Agent("shipper"))  # type: ignore[arg-type]
    assert "RunRecorder(" in exc.value.fields["fix"]
    with pytest.raises(IntegrationError, match=r"needs ag2\.Agent objects") as exc:
        record_agents(RunRecorder("r"), "alice")
    assert "not their names" in exc.value.fields["fix"]


def _ends(rec: RunRecorder) -> list[tuple[str, str]]:
    return [(e["agent"], e["content"]) for e in rec.events if e["kind"] == "termination"]


@pytest.mark.usefixtures("one_chat")
def test_one_end_per_run_with_a_delegated_sub_agent() -> None:
    """``desk`` delegates to ``booker`` (``Agent.as_tool``): the sub-agent's answer is an
    output of ``booker``, the run's one end is ``desk``'s answer."""
    _ws, shipper, shipped = orders()
    booker = Agent("booker", config=_Model([call("ship", order_id="42", city="Berlin"),
                                            "booked 42"]).config(),
                   tools=[fenced_tool(_ship(shipped), agent=shipper,
                                      depends_on={"order/42"})])
    shipper.read("order/42")
    desk = Agent("desk", config=_Model([call("booker", objective="ship 42"),
                                        "desk: done"]).config(),
                 tools=[booker.as_tool(description="ships orders", name="booker")])
    rec = RunRecorder("delegation")
    record_agents(rec, desk, booker)
    run(desk, "ship 42")
    assert shipped == [("42", "Berlin")]
    assert _ends(rec) == [("desk", "desk: done")]
    assert ("booker", "booked 42") in [(e["agent"], e["content"]) for e in rec.events
                                       if e["kind"] == "output"]
    assert rec.events[-1]["kind"] == "termination"


@pytest.mark.usefixtures("one_chat")
def test_one_end_per_run_with_two_agents_and_gate_events_name_the_caller() -> None:
    """``alice.ask``, her follow-up ``reply.ask``, then ``bob.ask`` sharing one fenced
    tool (one workspace agent): each request is a task in order (QA r4-ag2 D7: the
    follow-up and bob's request were lost), one end (bob's answer; alice's answers stay
    outputs), and each gate event names the AG2 agent whose turn called the tool, not
    the workspace agent."""
    _ws, shipper, shipped = orders()
    shared = fenced_tool(_ship(shipped), agent=shipper, depends_on={"order/42"})
    shipper.read("order/42")
    alice = Agent("alice", config=_Model([call("ship", order_id="42", city="Berlin"),
                                          "alice shipped", "alice again"]).config(),
                  tools=[shared])
    bob = Agent("bob", config=_Model([call("ship", order_id="42", city="Berlin"),
                                      "bob shipped"]).config(), tools=[shared])
    rec = RunRecorder("two-agents")
    record_agents(rec, alice, bob)

    async def both() -> None:
        reply = await alice.ask("ship 42")
        await reply.ask("any news?")
        await bob.ask("ship 42 again")

    asyncio.run(both())
    assert [(e["agent"], e["content"]) for e in rec.events if e["kind"] == "task"] == [
        ("user", "ship 42"), ("user", "any news?"), ("user", "ship 42 again")]
    assert _ends(rec) == [("bob", "bob shipped")]
    assert [e["agent"] for e in rec.events if e.get("gate")] == ["alice", "bob"]
    assert ("alice", "alice shipped") in [(e["agent"], e["content"]) for e in rec.events
                                          if e["kind"] == "output"]
