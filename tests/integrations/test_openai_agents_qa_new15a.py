"""QA qa-new15a (Agents SDK 0.24, travel desk): what the user got, approvals of tools
built again, a wrong id from the model, chats over a session.

A real SDK ``Runner`` with the examples' scripted model (no network):

* S2: a tripped output (or input) guardrail makes ``Runner.run`` raise; the trace ended
  with the withheld text as ``final_answer`` (audited sound and correct). Now the run
  ends with no answer: a ``thought`` naming the guardrail, its agent and kind.
* S2: fenced tools built again for each request (pause in one, resume in the next, one
  process) made every approved call fail ``approval_changed`` "asked in another
  process" (false), the model looping. The request is kept per workspace agent.
* S3: a key made from the model's argument that names no fact (``lh100`` for
  ``LH100``) was answered "Do not retry it; report it".
* S3/S4: a chat over one ``SQLiteSession`` lost the earlier turn's reads; the refusal
  sent a doc path to the model. ``RunConfig(group_id=...)`` shares them (documented).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    RunState,
    SQLiteSession,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from agents.testing import assistant_message, function_call

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import APPROVAL_CHANGED, NOT_READ, Workspace

from .test_openai_agents_issue28 import _model, _outputs

pytestmark = pytest.mark.timeout(120)


def _desk() -> tuple[Workspace, Any, Any, list[str]]:
    ws = Workspace({"fare/*": "pricing"})
    ws.put("fare/LH100", {"eur": 210}, by="pricing")
    desk = ws.agent("desk")

    @function_tool
    def get_fare(flight: str) -> str:
        """The fare of a flight."""
        return json.dumps(desk.read(f"fare/{flight}"))

    return ws, desk, get_fare, []


def _book_tool(desk: Any, booked: list[str], **kw: Any) -> Any:
    def book(flight: str) -> str:
        """Book a flight."""
        booked.append(flight)
        return f"booked {flight}"

    return fenced_function_tool(function_tool(book, **kw), agent=desk,
                                depends_on=lambda a: {f"fare/{a['flight']}"})


def _lines(rec: RunRecorder) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in rec.jsonl().splitlines()]


@pytest.mark.parametrize("kind", ["output", "input"])
def test_a_tripped_guardrail_ends_the_run_with_no_answer(kind: str) -> None:
    """S2: the withheld answer is no ``final_answer``; the trip is named; not ended."""
    _ws, desk, get_fare, booked = _desk()

    @output_guardrail
    def no_eur(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="EUR" in str(output))

    @input_guardrail(run_in_parallel=False)
    def no_refunds(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="refund" in str(given))

    turns = [[function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
             [function_call("book", {"flight": "LH100"}, call_id="c2")],
             [assistant_message("Booked LH100 for 210 EUR.")]]
    agent = Agent(name="booker", tools=[get_fare, _book_tool(desk, booked)],
                  model=_model(turns), output_guardrails=[no_eur] if kind == "output" else [],
                  input_guardrails=[no_refunds] if kind == "input" else [])
    rec = RunRecorder("trip", ground_truth="Booked LH100 for 210 EUR.")
    raised = OutputGuardrailTripwireTriggered if kind == "output" else \
        InputGuardrailTripwireTriggered
    with recording(rec, exclusive=True), pytest.raises(raised):
        asyncio.run(Runner.run(agent, "book LH100" if kind == "output" else "refund B1"))
    lines = _lines(rec)
    assert not [x for x in lines if x.get("kind") == "termination"]
    (stop,) = [x for x in lines if str(x.get("content", "")).startswith("the run stopped")]
    name = "no_eur" if kind == "output" else "no_refunds"
    assert stop["guardrail"] == {"name": name, "agent": "booker", "kind": kind,
                                 "triggered": True}
    assert f"the {kind} guardrail {name} of agent booker tripped" in stop["error"]
    assert "the user got no answer" in stop["error"]
    assert rec.audit().summary().terminated is False
    assert booked == (["LH100"] if kind == "output" else [])


def _pause_and_resume(rebuild: bool, fenced_first: bool = True, resumes: int = 1
                      ) -> tuple[list[dict[str, str]], list[str]]:
    """Request 1 runs to the approval pause and saves the state; each later request
    builds the fenced tool (and agent) again, approves and resumes (one process)."""
    _ws, desk, get_fare, booked = _desk()
    turns = [[function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
             [function_call("book", {"flight": "LH100"}, call_id="c2")],
             *[[assistant_message("done")]] * (resumes + 1)]
    model = _model(turns)

    def build(fenced: bool = True) -> Agent[Any]:
        if fenced:
            tool = _book_tool(desk, booked, needs_approval=True)
        else:  # the same app, its tool not fenced yet when the human is asked
            _book_tool(desk, [])  # (a fenced tool of the agent exists: reads are scoped)
            tool = function_tool(lambda flight: "unused", name_override="book",
                                 needs_approval=True)
        return Agent(name="booker", tools=[get_fare, tool], model=model)

    async def go() -> list[dict[str, str]]:
        agent = build(fenced_first)
        paused = await Runner.run(agent, "book LH100")
        assert paused.interruptions
        saved = paused.to_state().to_string()
        outs = []
        for _ in range(resumes):
            again = build() if rebuild else agent
            state = await RunState.from_string(again, saved)
            for item in state.get_interruptions():
                state.approve(item)
            outs.append(_outputs(await Runner.run(again, state)))
        return outs

    return asyncio.run(go()), booked


def test_an_approved_call_runs_when_the_fenced_tool_is_built_again() -> None:
    """S2: the request the human was asked is kept per workspace agent and tool."""
    outs, booked = _pause_and_resume(rebuild=True)
    assert outs[0]["c2"] == "booked LH100" and booked == ["LH100"]
    # a saved state resumed twice, each time with tools built again, runs the call once
    outs, booked = _pause_and_resume(rebuild=True, resumes=2)
    assert booked == ["LH100"] and outs[1]["c2"] == "booked LH100"  # the first answer


def test_a_call_no_fenced_tool_asked_here_says_so_not_another_process() -> None:
    """Asked by a tool that was not fenced then: refused, and said truthfully."""
    outs, booked = _pause_and_resume(rebuild=True, fenced_first=False)
    said = outs[0]["c2"]
    assert booked == [] and said.startswith(f"PlanFence blocked book ({APPROVAL_CHANGED})")
    assert "no fenced book of this workspace agent put this call to a human" in said
    assert "or by a tool that was not fenced then" in said


def test_a_wrong_id_from_the_model_may_be_corrected() -> None:
    """S3: ``lh100`` names no fact; the key is the model's argument: call again."""
    _ws, desk, get_fare, booked = _desk()
    agent = Agent(name="booker", tools=[get_fare, _book_tool(desk, booked)], model=_model([
        [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
        [function_call("book", {"flight": "lh100"}, call_id="c2")],
        [function_call("book", {"flight": "LH100"}, call_id="c3")],
        [assistant_message("done")]]))
    outs = _outputs(asyncio.run(Runner.run(agent, "book LH100")))
    said = outs["c2"]
    assert said.startswith(f"PlanFence blocked book ({NOT_READ}): no value yet for fare/lh100")
    assert "made from your argument flight='lh100'" in said
    assert "call book again with corrected arguments" in said and "Do not retry" not in said
    assert outs["c3"] == "booked LH100" and booked == ["LH100"]
    # a key the application names (not made from an argument): retrying does not help
    static = fenced_function_tool(function_tool(lambda flight: "x", name_override="hold"),
                                  agent=desk, depends_on={"fare/XX1"})
    agent = Agent(name="booker", tools=[static], model=_model([
        [function_call("hold", {"flight": "LH100"}, call_id="c1")],
        [assistant_message("done")]]))
    said = _outputs(asyncio.run(Runner.run(agent, "hold")))["c1"]
    assert "no value yet for fare/XX1" in said and "report it" in said
    assert "your argument" not in said


async def _chat(agent: Agent[Any], session: Any, config: RunConfig | None) -> Any:
    """Two user messages, two runs, one session."""
    await Runner.run(agent, "Fare of LH100?", session=session, run_config=config)
    return await Runner.run(agent, "Yes, book it", session=session, run_config=config)


def test_a_chat_over_a_session_keeps_its_reads_with_one_group_id(tmp_path: Path) -> None:
    """S3: without a group the next message's call is refused (no doc path for the
    model); ``RunConfig(group_id=session id)`` makes the chat one scope."""
    for grouped in (False, True):
        _ws, desk, get_fare, booked = _desk()
        agent = Agent(name="booker", tools=[get_fare, _book_tool(desk, booked)], model=_model([
            [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
            [assistant_message("210 EUR. Book?")],
            [function_call("book", {"flight": "LH100"}, call_id="c2")],
            [assistant_message("Booked.")]]))
        session = SQLiteSession(f"chat-{grouped}", str(tmp_path / f"chat-{grouped}.db"))
        config = RunConfig(group_id=session.session_id) if grouped else None

        said = _outputs(asyncio.run(_chat(agent, session, config)))["c2"]
        if grouped:
            assert said == "booked LH100" and booked == ["LH100"]
        else:
            assert said.startswith(f"PlanFence blocked book ({NOT_READ})") and booked == []
            assert "read in another run or conversation" in said and "docs/" not in said
