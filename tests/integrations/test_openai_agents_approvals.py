"""OpenAI Agents SDK approvals and recordings, QA round r4-oa (issue 28 items 5, 6).

A real ``Agent`` / ``Runner`` with the examples' scripted ``Model`` (no network).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import assistant_message, function_call
from agents.tracing import get_trace_provider

from icore.adapters import audit_file
from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace

from .test_openai_agents_issue28 import _model, _outputs


def _replanned(second_dock: str) -> tuple[Any, list[tuple[str, str]], Any]:
    """The dispatcher with a replanner taking the fresh dock; the model dispatches L7 to
    D3 (asked first), then to ``second_dock``."""
    ws, disp, sent, (get_load, dispatch) = _loads()
    safe = fenced_function_tool(dispatch, agent=disp, depends_on=lambda a: {
        f"load/{a['load_id']}"}, replan=lambda st: {**st.args, "dock": st.fresh[
            "load/L7"]["dock"]})
    agent = Agent(name="dispatcher", tools=[get_load, safe], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": second_dock},
                       call_id="c3")],
        [assistant_message("done")]]))
    return ws, sent, agent


def _loads() -> tuple[Any, Any, list[tuple[str, str]], Any]:
    ws = Workspace({"load/*": "planning"})
    ws.put("load/L7", {"dock": "D3", "hazmat": False}, by="planning")
    disp = ws.agent("dispatcher")
    sent: list[tuple[str, str]] = []

    @function_tool
    def get_load(load_id: str) -> str:
        """Read a load."""
        return json.dumps(disp.read(f"load/{load_id}"))

    def dispatch_truck(load_id: str, dock: str) -> str:
        """Send a truck."""
        sent.append((load_id, dock))
        return f"sent to {dock}"

    return ws, disp, sent, (get_load, function_tool(dispatch_truck, needs_approval=True))


async def _drive(agent: Any, change: Any, rec: RunRecorder | None = None
                 ) -> tuple[list[str], Any]:
    """Approve every interruption; ``change()`` runs while the human decides the first."""
    asked: list[str] = []
    rec = rec or RunRecorder("approvals")
    with recording(rec, exclusive=True):
        result = await Runner.run(agent, "dispatch L7")
        while result.interruptions and len(asked) < 4:
            state = result.to_state()
            for item in result.interruptions:
                asked.append(str(item.arguments))
                if len(asked) == 1:
                    change()
                state.approve(item)
            result = await Runner.run(agent, state)
    return asked, result


def test_approval_on_old_facts_never_authorizes_the_same_arguments_on_new_ones() -> None:
    """The human approves dispatch(L7, D3) for a non-hazmat load; the load becomes hazmat
    while they decide and the replanner returns the same arguments: another request
    (same arguments, other versions), refused ``approval_changed``, nothing ran; the
    model's new call is put to the human again."""
    ws, sent, agent = _replanned("D3")
    asked, result = asyncio.run(_drive(agent, lambda: ws.update(
        "load/L7", lambda o: {**o, "hazmat": True})))
    outs = _outputs(result)
    assert "(approval_changed)" in outs["c2"] and "newer versions of load/L7" in outs["c2"]
    assert outs["c3"] == "sent to D3" and len(asked) == 2 and sent == [("L7", "D3")]


def test_approval_changed_is_recorded_like_any_refused_call() -> None:
    """A replan that changes the approved arguments: the trace has the call's gate
    decisions (stale, then the replan's), the replan, and the blocked tool output."""
    ws, sent, agent = _replanned("D5")
    rec = RunRecorder("changed")
    _asked, result = asyncio.run(_drive(agent, lambda: ws.update(
        "load/L7", lambda o: {**o, "dock": "D5"}), rec))
    assert "(approval_changed)" in _outputs(result)["c2"] and sent == [("L7", "D5")]
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    assert gates == ["stale", "valid", "valid"]
    blocked = [e["content"] for e in rec.events if e["kind"] == "tool_output"
               and e["tool"] == "dispatch_truck" and e.get("blocked")]
    assert len(blocked) == 1 and blocked[0].startswith("BLOCKED: approval_changed")
    assert [e for e in rec.events if e["kind"] == "plan" and e.get("replan")]
    audited = rec.audit()  # the gate's one replan: counted, no progress diagnosis
    assert audited.replans == 1 and not audited.diagnoses


def test_always_approve_covers_the_replanned_call() -> None:
    """``approve(always_approve=True)`` approves every call of the tool (the SDK's
    meaning): the model's call from the fresh values runs without asking again."""
    ws, disp, sent, (get_load, dispatch) = _loads()
    safe = fenced_function_tool(dispatch, agent=disp, depends_on={"load/L7"})
    agent = Agent(name="dispatcher", tools=[get_load, safe], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D5"}, call_id="c3")],
        [assistant_message("done")]]))

    async def go() -> Any:
        result = await Runner.run(agent, "dispatch L7")
        ws.update("load/L7", lambda o: {**o, "dock": "D5"})
        state = result.to_state()
        state.approve(result.interruptions[0], always_approve=True)
        return await Runner.run(agent, state)

    result = asyncio.run(go())
    outs = _outputs(result)
    assert "(stale)" in outs["c2"] and outs["c3"] == "sent to D5"
    assert not result.interruptions and sent == [("L7", "D5")]


def test_a_rejected_call_is_recorded_as_refused_and_an_approval_as_a_thought() -> None:
    """The human rejects the fenced call (the run resumed: the SDK opens no span for
    it): the trace has it as the dispatcher's refused call with the SDK's message;
    an approved call is preceded by the human's approval."""
    _ws, disp, sent, (get_load, dispatch) = _loads()
    safe = fenced_function_tool(dispatch, agent=disp, depends_on={"load/L7"})
    agent = Agent(name="dispatcher", tools=[get_load, safe], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c3")],
        [assistant_message("done")]]))
    rec = RunRecorder("reject")

    async def go() -> Any:
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "dispatch L7")
            for decide in ("reject", "approve"):
                state = result.to_state()
                getattr(state, decide)(result.interruptions[0])
                result = await Runner.run(agent, state)
        return result

    asyncio.run(go())
    calls = [(e["agent"], e["content"], e["exitcode"], e.get("blocked"))
             for e in rec.events if e["kind"] == "tool_output"
             and e["tool"] == "dispatch_truck"]
    assert calls == [("dispatcher", "Tool execution was not approved.", 1, True),
                     ("dispatcher", "sent to D3", 0, None)] and sent == [("L7", "D3")]
    approvals = [e["approval"] for e in rec.events if e.get("approval")]
    assert len(approvals) == 1 and approvals[0]["approved"] is True
    assert len(approvals[0]["request"]) == 64


def test_a_run_waiting_for_the_human_is_recorded_as_paused(tmp_path: Any) -> None:
    """A trace written while the run waits for the approval ends with a pause (a
    ``thought`` with ``pause: true``): ``icore audit`` says paused, not "no terminal
    marker"; the resumed run then records its end."""
    _ws, disp, _sent, (get_load, dispatch) = _loads()
    safe = fenced_function_tool(dispatch, agent=disp, depends_on={"load/L7"})
    agent = Agent(name="dispatcher", tools=[get_load, safe], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
        [assistant_message("done")]]))
    rec = RunRecorder("paused")

    async def go() -> Any:
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "dispatch L7")
            rec.write(tmp_path / "paused.jsonl")
            state = result.to_state()
            state.approve(result.interruptions[0])
            return await Runner.run(agent, state)

    asyncio.run(go())
    audited = audit_file(tmp_path / "paused.jsonl")[0]
    assert audited.paused and not audited.summary().terminal
    pauses = [e for e in rec.events if e.get("pause")]
    assert len(pauses) == 1 and pauses[0]["agent"] == "dispatcher"
    assert rec.events[-1]["kind"] == "termination"


def test_a_chat_of_two_runs_records_one_end_and_each_runs_task() -> None:
    """Two ``Runner.run`` calls into one recorder (the second with the first's history
    and a new user message): the first answer is one output line (no duplicate), the
    second run's task is its newest user message, one end."""
    *_, (get_load, _dispatch) = _loads()
    agent = Agent(name="dispatcher", tools=[get_load], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [assistant_message("L7 is at D3")],
        [assistant_message("L8 is unknown")]]))
    rec = RunRecorder("chat")

    async def go() -> None:
        with recording(rec, exclusive=True):
            first = await Runner.run(agent, "where is L7")
            await Runner.run(agent, [*first.to_input_list(),
                                     {"role": "user", "content": "and L8?"}])

    asyncio.run(go())
    lines = [(e["kind"], e["content"]) for e in rec.events
             if e["kind"] in ("task", "output", "termination") and "calls" not in e["content"]]
    assert lines == [("task", "where is L7"), ("output", "L7 is at D3"),
                     ("task", "and L8?"), ("output", "L8 is unknown"),
                     ("termination", "L8 is unknown")]


def test_after_an_agent_used_as_a_tool_its_caller_speaks_again() -> None:
    """``inner.as_tool``: once the nested run ends, the tool's output, the caller's answer
    and the end are recorded under the calling agent, not the nested one."""
    inner = Agent(name="inner", model=_model([[assistant_message("SUB")]]))
    outer = Agent(name="outer", tools=[inner.as_tool(tool_name="ask_inner",
                                                     tool_description="Ask inner.")],
                  model=_model([[function_call("ask_inner", {"input": "go"}, call_id="o1")],
                                [assistant_message("TOP")]]))
    rec = RunRecorder("nested")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(outer, "start"))
    said = [(e["agent"], e["kind"], e["content"]) for e in rec.events
            if e["kind"] in ("output", "tool_output", "termination")]
    assert said[-4:] == [("inner", "output", "SUB"), ("outer", "tool_output", "SUB"),
                         ("outer", "output", "TOP"), ("outer", "termination", "TOP")]


def _plain_run() -> tuple[Any, list[tuple[str, str]]]:
    """A dispatcher reading L7 and dispatching it (no approval)."""
    _ws, disp, sent, (get_load, _dispatch) = _loads()

    def dispatch_truck(load_id: str, dock: str) -> str:
        """Send a truck."""
        sent.append((load_id, dock))
        return f"sent to {dock}"

    safe = fenced_function_tool(dispatch_truck, agent=disp, depends_on={"load/L7"})
    return Agent(name="dispatcher", tools=[get_load, safe], model=_model([
        [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
        [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
        [assistant_message("done")]])), sent


def test_sdk_tracing_switched_off_is_recorded_anyway_or_refused_loudly() -> None:
    """``set_tracing_disabled(True)``: ``recording(rec)`` refuses (typed, the fix named);
    ``exclusive=True`` records the whole run (only the recorder gets the traces) and
    switches tracing off again. ``RunConfig(tracing_disabled=True)`` in a recording
    block: the first fenced call raises out of ``Runner.run``, nothing ran."""
    set_tracing_disabled(True)
    try:
        with pytest.raises(IntegrationError, match="tracing is disabled") as exc:
            with recording(RunRecorder("off")):
                pass
        assert "exclusive=True" in exc.value.fields["fix"]
        agent, sent = _plain_run()
        rec = RunRecorder("off")
        with recording(rec, exclusive=True):
            asyncio.run(Runner.run(agent, "dispatch L7"))
        assert rec.kinds()[0] == "task" and rec.kinds()[-1] == "termination"
        assert sent == [("L7", "D3")]
        assert getattr(get_trace_provider(), "_disabled", None) is True
    finally:
        set_tracing_disabled(False)
    agent, sent = _plain_run()
    with recording(RunRecorder("per-run"), exclusive=True), pytest.raises(
            IntegrationError, match="not traced"):
        asyncio.run(Runner.run(agent, "dispatch L7",
                               run_config=RunConfig(tracing_disabled=True)))
    assert sent == []


@pytest.mark.parametrize("agent", [None, "dispatcher", 42, "sdk"])
def test_a_wrong_agent_gets_one_message_with_a_hint_for_an_sdk_agent(agent: Any) -> None:
    """``agent=`` not a workspace agent (None, an agent id without ``fence=``, the SDK's
    own ``Agent``): one message saying what it must be; the SDK ``Agent`` gets a hint
    naming ``ws.agent('dispatcher')``."""
    _ws, _disp, _sent, (_get_load, dispatch) = _loads()
    given = Agent(name="dispatcher") if agent == "sdk" else agent
    with pytest.raises(IntegrationError, match=r"needs agent= \(a workspace agent") as exc:
        fenced_function_tool(dispatch, agent=given, depends_on={"load/L7"})
    assert "agent id str" in str(exc.value)
    assert ("this is an Agents SDK Agent" in str(exc.value)) is (agent == "sdk")
    assert "ws.agent('dispatcher')" in exc.value.fields["fix"]


def test_a_fenced_tool_or_a_recorder_path_is_refused_when_wrapped() -> None:
    """As in every integration (QA r4-ag2 D5/D6): wrapping a fenced tool again is refused
    "fenced already" (one call would be recorded twice); ``recorder="trace.jsonl"`` is
    an ``IntegrationError`` naming ``rec.write(path)`` (was a raw AttributeError)."""
    _ws, disp, _sent, (_get_load, dispatch) = _loads()
    once = fenced_function_tool(dispatch, agent=disp, depends_on={"load/L7"})
    with pytest.raises(IntegrationError, match="fenced already"):
        fenced_function_tool(once, agent=disp, depends_on={"load/L7"})
    with pytest.raises(IntegrationError, match="recorder= must be a RunRecorder") as exc:
        fenced_function_tool(dispatch, agent=disp, depends_on={"load/L7"},
                             recorder="trace.jsonl")  # type: ignore[arg-type]
    assert "rec.write('trace.jsonl')" in exc.value.fields["fix"]


def test_low_level_a_replan_after_the_approval_is_another_request(trip: Any) -> None:
    """``fence=``: the human approves Lisbon; the trip is revised to Lisbon again (a new
    version) while they decide and the replanner binds the same arguments from it: the
    call is refused ``approval_changed`` (recorded with its decisions and the replan);
    the model's next call is asked again and runs."""
    from dataclasses import dataclass, field

    @dataclass
    class Ctx:
        plan_roots: list[str] = field(default_factory=list)

    tool = function_tool(trip.book, needs_approval=True)
    w = fenced_function_tool(tool, fence=trip.fence, depends_on={"req/trip-17"},
                             replan=trip.replan)
    agent = Agent(name="a", tools=[w], model=_model([
        [function_call("book", {"destination": "Lisbon"}, call_id="c1")],
        [function_call("book", {"destination": "Lisbon"}, call_id="c2")],
        [assistant_message("done")]]))
    ctx = Ctx([trip.first_plan.id])
    rec = RunRecorder("low")

    async def go() -> tuple[int, Any]:
        asked = 0
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "book", context=ctx)
            while result.interruptions:
                asked += 1
                if asked == 1:
                    trip.revise("Lisbon")  # same destination, another version
                state = result.to_state()
                state.approve(result.interruptions[0])
                result = await Runner.run(agent, state, context=ctx)
        return asked, result

    asked, result = asyncio.run(go())
    outs = _outputs(result)
    assert "(approval_changed)" in outs["c1"] and "same arguments" in outs["c1"]
    assert outs["c2"] == "booked Lisbon" and asked == 2 and trip.booked == ["Lisbon"]
    gates = [e["gate"]["reason"] for e in rec.events if e.get("gate")]
    assert gates[:2] == ["stale", "valid"]
    assert any(e.get("blocked") and str(e["content"]).startswith("BLOCKED: approval_changed")
               for e in rec.events)


def _approval_run(decide: str, *, extra: Any = None) -> tuple[RunRecorder, list[str]]:
    """A plain (not fenced) ``needs_approval`` tool: the run pauses, the human decides."""
    done: list[str] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        done.append(order_id)
        return f"refunded {order_id}"

    first = [function_call("refund", {"order_id": "o1"}, call_id="c1")]
    if extra is not None:
        first.insert(0, function_call("note", {"text": "x"}, call_id="c0"))
    agent = Agent(name="clerk", tools=[refund, *([extra] if extra else [])],
                  model=_model([first, [assistant_message("done")]]))
    rec = RunRecorder("plain-approval")

    async def go() -> None:
        with recording(rec, exclusive=True):
            result = await Runner.run(agent, "refund o1")
            assert result.interruptions and done == []
            state = result.to_state()
            getattr(state, decide)(result.interruptions[0])
            await Runner.run(agent, state)

    asyncio.run(go())
    return rec, done


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_a_plain_tools_approval_is_recorded_as_a_pause_and_the_humans_decision(
        decide: str) -> None:
    """A tool the app did not fence, with the SDK's ``needs_approval``: the trace has
    the pause naming the call, the human's decision, then the call's run (approve) or
    its refusal (reject) - no line says it ran before the human decided."""
    rec, done = _approval_run(decide)
    assert done == (["o1"] if decide == "approve" else [])
    mine = [e for e in rec.events if e.get("tool") == "refund" or e.get("pause")]
    assert [e["kind"] for e in mine] == ["thought", "thought", "tool_output"]
    pause, said, call = mine
    assert pause["pause"] is True and pause["approvals"] == [
        {"tool": "refund", "args": {"order_id": "o1"}}]
    assert (said["answered_by"], said["decision"], said["agent"]) == ("human", decide, "clerk")
    if decide == "approve":
        assert call["content"] == "refunded o1" and call["exitcode"] == 0
    else:
        assert call["exitcode"] == 1 and call["blocked"] and call["decision"] == "reject"
    summary = rec.audit().summary()
    assert summary.terminated and not summary.paused


def test_a_plain_tool_returning_none_is_recorded_as_run_not_waiting() -> None:
    """A plain tool that returns None ends its span without output, like a call put to
    the human; without a pause it is recorded as run, with the text the model read."""
    @function_tool
    def note(text: str) -> None:
        """Take a note."""

    agent = Agent(name="clerk", tools=[note], model=_model([
        [function_call("note", {"text": "x"}, call_id="c0")], [assistant_message("done")]]))
    rec = RunRecorder("none")

    async def go() -> None:
        with recording(rec, exclusive=True):
            await Runner.run(agent, "note x")

    asyncio.run(go())
    calls = [e for e in rec.events if e.get("tool") == "note"]
    assert [(e["kind"], e["exitcode"]) for e in calls] == [("tool_output", 0)]
    assert not [e for e in rec.events if e.get("pause") or e.get("answered_by")]


def test_a_none_result_beside_a_rejected_call_is_recorded_as_run() -> None:
    """A plain tool returning None in the model turn of a call the human rejects: the
    rejection is the human's, the None result a run (exit code 0)."""
    @function_tool
    def note(text: str) -> None:
        """Take a note."""

    rec, _ = _approval_run("reject", extra=note)
    by_tool = {e["tool"]: e for e in rec.events if e["kind"] == "tool_output"}
    assert by_tool["note"]["exitcode"] == 0 and by_tool["refund"]["exitcode"] == 1
    decided = [e for e in rec.events if e.get("answered_by") == "human"]
    assert [(e["tool"], e["decision"]) for e in decided] == [("refund", "reject")]


@pytest.mark.parametrize("resumed", [False, True])
def test_a_handoff_is_recorded_as_a_handoff_not_a_refused_call(resumed: bool) -> None:
    """A handoff's call has no function span; its output (the SDK's transfer message)
    in the next model input is the handoff's, not a call the SDK answered without
    running its tool - in a run resumed from a ``RunState`` too (QA r6-oa D5)."""
    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    upgrader = Agent(name="upgrader", model=_model([[assistant_message("done")]]))
    first = [[function_call("refund", {"order_id": "o1"}, call_id="c1")]] if resumed else []
    triage = Agent(name="triage", tools=[refund], handoffs=[upgrader], model=_model([
        *first, [function_call("transfer_to_upgrader", {}, call_id="h1")]]))
    rec = RunRecorder("handoff")

    async def go() -> None:
        with recording(rec, exclusive=True):
            result = await Runner.run(triage, "refund o1, then hand over")
            if resumed:
                state = result.to_state()
                state.approve(result.interruptions[0])
                await Runner.run(triage, state)

    asyncio.run(go())
    moves = [e for e in rec.events if e.get("tool") == "transfer_to_upgrader"
             or e["kind"] == "instruction"]
    assert [(e["kind"], e.get("exitcode"), e.get("blocked")) for e in moves] == [
        ("instruction", None, None), ("tool_output", 0, None)]
    assert not [e for e in rec.events if e.get("answered_by") == "sdk"]
    assert [e["agent"] for e in rec.events if e["kind"] == "termination"] == ["upgrader"]


def test_calls_left_waiting_for_the_human_are_forgotten_beyond_the_bound() -> None:
    """A long-lived processor whose runs pause and are never resumed keeps at most
    ``MAX_TRACES`` of each kind of call it remembers (held, paused, pending), oldest
    forgotten first; the newest paused run is still told apart when resumed."""
    calls = 0

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    rec = RunRecorder("many-pauses")

    async def go() -> None:
        nonlocal calls
        with recording(rec, exclusive=True) as proc:
            proc.MAX_TRACES = 2
            result = None
            for n in range(5):
                calls += 1
                agent = Agent(name="clerk", tools=[refund], model=_model([
                    [function_call("refund", {"order_id": f"o{n}"}, call_id=f"c{n}")],
                    [assistant_message("done")]]))
                result = await Runner.run(agent, f"refund o{n}")
                assert result.interruptions
            held = (proc._held, proc._paused, proc._pending)
            assert [len(m) for m in held] == [2, 2, 2] and not proc._asking
            assert "c4" in proc._paused and "c0" not in proc._paused
            assert result is not None
            state = result.to_state()
            state.approve(result.interruptions[0])
            await Runner.run(agent, state)

    asyncio.run(go())
    said = [e for e in rec.events if e.get("answered_by") == "human"]
    assert [(e["decision"], e["args"]) for e in said] == [("approve", {"order_id": "o4"})]
