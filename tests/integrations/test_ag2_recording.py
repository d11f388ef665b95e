"""AG2 recorded runs tell the truth (QA r8-ag2mcp D1, D4, D6, D8, D9).

Real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig``: a re-read or a second
identical call is no repeat; the ``icore mcp`` gateway's refusals seen through AG2's MCP
client are blocked calls and a stale one's next call the replan; fenced calls refused
for arguments that do not fit are blocked actions, before and after the tool's first
gated call; arguments that are JSON but no object leave the conversation as AG2 makes
it; ``record_agents`` twice records once.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolCallEvent, ToolErrorEvent

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations._refusals import refusal_head
from icore.integrations.ag2 import fenced_tool, record_agents

from .ag2_world import call, orders, run
from .conftest import load_example


def _scripted(turns: list[Any]) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))


def _shop(shipped: list[Any]) -> tuple[Any, Any, Any]:
    """A shipper reading ``order/42`` and its fenced ``ship`` tool."""
    ws, shipper, _ = orders()

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return "shipped"

    safe = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    return ws, get_order, safe


def _protected(rec: RunRecorder) -> list[tuple[str, str]]:
    return [(x["planfence"]["decision"]["outcome"], x["planfence"]["decision"]["reason"])
            for x in rec.planfence if "decision" in x["planfence"]]


def test_a_reread_and_a_second_identical_call_audit_clean() -> None:
    """D1: the same unchanged order read twice, then two identical valid shipments (both
    ran): no unsupported assertion, sound; a repeated text report still is one."""
    shipped: list[Any] = []
    _, get_order, safe = _shop(shipped)
    rec = RunRecorder("reread")
    agent = Agent("shipper", config=_scripted([
        call("get_order", order_id="42"), call("get_order", order_id="42"),
        call("ship", order_id="42", city="Berlin"), call("ship", order_id="42", city="Berlin"),
        "done"]), tools=[get_order, safe])
    record_agents(rec, agent)
    run(agent)
    assert shipped == [("42", "Berlin"), ("42", "Berlin")]
    s = rec.audit().summary()
    assert (s.hard_flags, s.unsupported, s.snd) == (0, 0, 1.0)
    assert _protected(rec) == [("authorized", "valid")] * 2


def _gateway_result(text: str) -> str:
    """What AG2's MCPToolkit makes of an MCP ``isError`` result: its repr (as mcp 2.3
    writes it when the ``mcp`` extra is not installed)."""
    try:
        from mcp.types import CallToolResult
    except ImportError:
        return (f"meta={{'icore/gate': {{'reason': 'stale'}}}} content=[TextContent("
                f"type='text', text={text!r}, annotations=None, meta=None)] "
                "structured_content=None is_error=True result_type='complete'")
    return str(CallToolResult.model_validate({
        "content": [{"type": "text", "text": text}], "isError": True,
        "_meta": {"icore/gate": {"reason": "stale"}}}))


def test_gateway_refusals_through_ag2s_mcp_client_are_blocked_calls() -> None:
    """D4: an MCP tool served through the ``icore mcp`` gateway refuses ``stale``, as AG2's
    ``MCPToolkit`` hands it over (``RuntimeError(str(CallToolResult))``): a blocked call
    (policy ``icore mcp gateway``) and the next call the replan; a plain tool error
    stays a plain failed call."""
    from icore.integrations.ag2._hooks import mcp_text_items

    refusal = (refusal_head("transfer", "stale") + ": the facts this call was planned from "
               "changed.\nCurrent values:\n- stock://lyon/nut = {\"qty\": 20} (it's new)")
    answers = iter([_gateway_result(refusal), None, _gateway_result("disk 'full'")])

    async def as_mcp_toolkit(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        said = next(answers)
        if said is None:
            return await call_next(event, context)
        return ToolErrorEvent.from_call(event, error=RuntimeError(said))

    def transfer(sku: str, qty: int) -> str:
        """Move stock."""
        return f"moved {qty}"

    rec = RunRecorder("mixed")
    agent = Agent("dispatcher", config=_scripted([
        call("transfer", sku="nut", qty=40), call("transfer", sku="nut", qty=15),
        call("transfer", sku="nut", qty=1), "done"]),
        tools=[tool(transfer, middleware=[as_mcp_toolkit])])
    record_agents(rec, agent)
    run(agent)
    outs = [e for e in rec.events if e["kind"] == "tool_output"]
    assert [(e["exitcode"], e.get("blocked", False)) for e in outs] == [
        (1, True), (0, False), (1, False)]
    assert outs[0]["content"] == refusal and outs[0]["refused_by"] == "icore mcp gateway"
    assert _protected(rec) == [("blocked", "stale")]
    assert rec.audit().summary().replans == 1
    assert mcp_text_items(_gateway_result("a 'quoted'\n\"text\"\\")) == \
        "a 'quoted'\n\"text\"\\"


def test_arguments_that_do_not_fit_are_blocked_before_and_after_a_gated_call() -> None:
    """D6: a valid call, one whose arguments miss a field, one that is no JSON object,
    a valid one: each refused call is in the trace once, as a blocked protected action
    (policy ``before the gate``), also after the tool's first gated call."""
    shipped: list[Any] = []
    _, get_order, safe = _shop(shipped)
    rec = RunRecorder("badargs")
    agent = Agent("shipper", config=_scripted([
        call("get_order", order_id="42"), call("ship", order_id="42", city="Berlin"),
        call("ship", order_id="42"), ToolCallEvent("ship", arguments="[42]"),
        call("ship", order_id="42", city="Berlin"), "done"]), tools=[get_order, safe])
    record_agents(rec, agent)
    run(agent)
    assert len(shipped) == 2
    outs = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "ship"]
    assert [(e["exitcode"], e.get("blocked", False)) for e in outs] == [
        (0, False), (1, True), (1, True), (0, False)]
    assert outs[2]["args"] == {"raw": "[42]"}
    assert _protected(rec) == [("authorized", "valid"), ("blocked", "invalid_arguments"),
                               ("blocked", "invalid_arguments"), ("authorized", "valid")]
    decisions = [x["planfence"]["decision"] for x in rec.planfence if "decision" in x["planfence"]]
    assert [d["policy"] for d in decisions if d["outcome"] == "blocked"] == [
        "before the gate"] * 2


@pytest.mark.parametrize("raw", ["[1, 2]", '"x"', "7"])
@pytest.mark.parametrize("fenced", [True, False])
def test_non_object_arguments_answered_as_without_icore(raw: str, fenced: bool) -> None:
    """D8: arguments that are JSON but no object (array, string, number): recording
    changes nothing the model sees (AG2's own error answers the call) and the call is
    recorded with its arguments as given."""
    def seen(recorded: bool) -> tuple[list[str], RunRecorder]:
        shipped: list[Any] = []
        _, get_order, safe = _shop(shipped)
        rec = RunRecorder("raw")
        agent = Agent("shipper", config=_scripted([ToolCallEvent(
            "ship" if fenced else "get_order", arguments=raw), "done"]),
            tools=[get_order, safe])
        if recorded:
            record_agents(rec, agent)
        return [type(e).__name__ for e in run(agent)], rec

    plain, _ = seen(False)
    got, rec = seen(True)
    assert got == plain == ["ToolErrorEvent"]
    outs = [e for e in rec.events if e["kind"] == "tool_output"]
    assert [(e["args"], e["exitcode"]) for e in outs] == [({"raw": raw}, 1)]


def test_record_agents_twice_records_once_and_another_recorder_is_refused() -> None:
    """D9: ``record_agents`` again with the same recorder (alone, or with a new agent)
    adds nothing to the agents it records already: one task, one end, a sound audit;
    the same agent given to another recorder is an IntegrationError naming the fix."""
    shipped: list[Any] = []
    _, get_order, safe = _shop(shipped)
    rec = RunRecorder("twice")
    agent = Agent("shipper", config=_scripted([
        call("get_order", order_id="42"), call("ship", order_id="42", city="Berlin"),
        "done"]), tools=[get_order, safe])
    helper = Agent("helper", config=_scripted(["hi"]))
    chat = record_agents(rec, agent)
    assert record_agents(rec, agent) is chat and record_agents(rec, helper, agent) is chat
    assert len(agent.middleware) == 1 and len(helper.middleware) == 1
    with pytest.raises(IntegrationError, match="another RunRecorder") as err:
        record_agents(RunRecorder("other"), helper)
    assert "record each agent once" in str(err.value) and len(helper.middleware) == 1
    run(agent)
    assert rec.kinds() == ["task", "output", "tool_output", "output", "thought",
                           "tool_output", "termination"]
    s = rec.audit().summary()
    assert (s.hard_flags, s.snd) == (0, 1.0)


def test_agents_recorded_in_separate_calls_share_one_chat() -> None:
    """QA qa-new18c #1: sub-agents recorded first and their manager in a later
    ``record_agents`` call were two chats: the manager's requests became user tasks and
    each answer an end. Every agent of one recorder joins its one chat."""
    import asyncio

    from ag2.testing import TestConfig

    rec = RunRecorder("team")
    alice = Agent("alice", config=TestConfig("alice done"))
    bob = Agent("bob", config=TestConfig("bob done"))
    first, second = record_agents(rec, alice), record_agents(rec, bob)
    assert first is second and record_agents(RunRecorder("other"), Agent("c")) is not first

    async def both() -> None:
        await alice.ask("task for alice")
        await bob.ask("task for bob")

    asyncio.run(both())
    assert rec.kinds().count("termination") == 1, rec.kinds()
