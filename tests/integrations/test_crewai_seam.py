"""CrewAI seam leftovers of issue 28: D(a) asked once per call, a hierarchical crew's
delegation recorded as a handoff, and the fence's hooks across kickoffs and crews.

A real ``Crew`` with the scripted LLM of test_crewai_turns.py (no network). Runs in
``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from .test_crewai_setup import Desk
from .test_crewai_turns import call, scripted


def _counting() -> tuple[list[dict[str, Any]], Any]:
    seen: list[dict[str, Any]] = []

    def scope(a: dict[str, Any]) -> set[str]:
        seen.append(dict(a))
        return {f"case/{a['case']}"}

    return seen, scope


@pytest.mark.parametrize("approve", [False, True], ids=["plain", "human"])
def test_a_depends_on_function_is_called_once_per_call(approve: bool) -> None:
    """The guard's check, the action record and the gate (and, with ``approve=``, the
    validation after the human's answer) share one answer: one call per call."""
    seen, scope = _counting()
    d = Desk(depends_on=scope, **({"approve": lambda req: True} if approve else {}))
    seen.clear()  # the wrap-time probe (placeholder arguments) is not a call
    d.crew(scripted([[call("get_case", case="C1")],
                     [call("refund", case="C1", amount=40)], "done"])).kickoff()
    assert d.paid == [("C1", 40)]
    assert seen == [{"case": "C1", "amount": 40}]


def test_a_depends_on_function_is_asked_again_for_a_replans_other_arguments() -> None:
    """A user replanner's arguments are another call's: D(a) is asked for them too
    (once each), never answered from the first arguments."""
    seen, scope = _counting()
    d = Desk(depends_on=scope, replan=lambda st: {**st.args, "amount": 400})

    def changed(_m: Any) -> Any:
        d.raise_to(400)
        return [call("refund", case="C1", amount=40)]

    seen.clear()
    d.crew(scripted([[call("get_case", case="C1")], changed, "done"])).kickoff()
    assert d.paid == [("C1", 400)]
    assert seen == [{"case": "C1", "amount": 40}, {"case": "C1", "amount": 400}]


def _hierarchical(coworker: str) -> tuple[Desk, Any]:
    """A hierarchical crew: the manager delegates the refund to the ``refunds`` agent."""
    from crewai import Agent, Crew, Process, Task

    d = Desk()
    refunds = Agent(role="refunds", goal="refund cases", backstory="support", tools=d.tools,
                    llm=scripted([[call("get_case", case="C1")],
                                  [call("refund", case="C1", amount=40)], "refunded 40"]),
                    max_iter=8, allow_delegation=False)
    manager = Agent(role="manager", goal="run the desk", backstory="lead",
                    allow_delegation=True, llm=scripted([[call(
                        "Delegate work to coworker", task="refund C1", context="case C1",
                        coworker=coworker)], "all done"]))
    return d, Crew(agents=[refunds], tasks=[Task(description="refund C1",
                                                 expected_output="done")],
                   process=Process.hierarchical, manager_agent=manager)


@pytest.mark.parametrize("coworker", ["refunds", '"Refunds"'])
def test_a_managers_delegation_is_a_handoff_to_the_coworker(coworker: str) -> None:
    """The manager's ``Delegate work to coworker`` call is recorded as a handoff from
    the manager to the coworker (named with the crew's spelling of its role) before the
    coworker's work; the coworker's reads, gate decision and refund are its own."""
    from icore.integrations import RunRecorder
    from icore.integrations.crewai import recording

    d, crew = _hierarchical(coworker)
    rec = RunRecorder("hierarchical")
    with recording(rec):
        crew.kickoff()
    assert d.paid == [("C1", 40)]
    hand = [e for e in rec.events if e["kind"] == "instruction" and e["agent"] == "manager"]
    assert [(e["to"], e["content"]) for e in hand] == [
        ("refunds", "manager delegates to refunds: refund C1")]
    i = rec.events.index(hand[0])
    after = [e for e in rec.events[i + 1:] if e.get("tool") in ("get_case", "refund")
             or e.get("gate")]
    assert after and {e["agent"] for e in after} == {"refunds"}
    assert rec.audit().summary().terminated


def test_hooks_cleared_by_the_app_are_put_back_for_later_kickoffs_and_crews() -> None:
    """The app clears CrewAI's global hooks after icore installed them (a fixture that
    resets hooks). The first kickoff's fenced call cannot tell its model message: it
    does not run and ``CrewSetupError`` leaves ``kickoff()`` (not only a log line); that
    call put icore's hooks back, so a second kickoff of the same crew and another crew
    of the process work, and their calls name the calling agent."""
    from crewai.hooks import clear_all_global_hooks

    from icore.integrations import RunRecorder
    from icore.integrations.crewai import CrewSetupError, install_hooks, recording

    d = Desk()
    try:
        clear_all_global_hooks()
        crew = d.crew(scripted([[call("get_case", case="C1")],
                                [call("refund", case="C1", amount=40)], "done"]))
        with pytest.raises(CrewSetupError):
            crew.kickoff()
        assert d.paid == []
        again = d.crew(scripted([[call("get_case", case="C1")],
                                 [call("refund", case="C1", amount=40)], "done"]))
        again.kickoff()  # a second kickoff: hooks back, turns numbered
        assert d.paid == [("C1", 40)]
        other = Desk()
        rec = RunRecorder("other")
        with recording(rec):
            other.crew(scripted([[call("get_case", case="C1")],
                                 [call("refund", case="C1", amount=40)], "done"])).kickoff()
        assert other.paid == [("C1", 40)]
        assert {e["agent"] for e in rec.events if e.get("gate")} == {"refunds"}
    finally:
        install_hooks()


def test_raise_on_block_leaves_kickoff_even_with_the_tool_hooks_cleared() -> None:
    """Only the tool hooks cleared (the model-call hook kept): ``on_block="raise"``
    still raises ``CrewActionBlocked`` out of ``kickoff()`` for a stale call, instead
    of ``kickoff()`` returning normally."""
    from crewai.hooks import clear_all_tool_call_hooks

    from icore.integrations.crewai import CrewActionBlocked, install_hooks

    d = Desk(on_block="raise")

    def changed(_m: Any) -> Any:
        d.raise_to(400)
        return [call("refund", case="C1", amount=40)]

    try:
        crew = d.crew(scripted([[call("get_case", case="C1")], changed, "done"]))
        clear_all_tool_call_hooks()
        with pytest.raises(CrewActionBlocked):
            crew.kickoff()
        assert d.paid == []
    finally:
        install_hooks()
