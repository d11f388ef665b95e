"""A CrewAI task's human feedback in the recorded run; a stale call's plan before its
refusal (QA qa-new13b S3, S4).

A real ``Crew`` (one task, ``human_input=True``) driven by the scripted, event-emitting
LLM of test_crewai_audit.py, recorded with :func:`icore.integrations.crewai.recording`;
the human answers on stdin (CrewAI's default provider) or through the application's own
provider. No network. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai import Crew, Task
from crewai.agents.agent_executor import AgentExecutor
from crewai.core.providers.human_input import (
    SyncHumanInputProvider,
    get_provider,
    reset_provider,
    set_provider,
)

from icore.integrations import RunRecorder
from icore.integrations.crewai import recording

from .test_crewai_audit import Emitting
from .test_crewai_turns import Store, call, then

pytestmark = pytest.mark.timeout(120)

FEEDBACK = "go ahead and move 4 from W1"


def _saw(text: str, seen: list[bool]) -> Any:
    """A step that notes whether the model's messages hold ``text``, then moves stock."""
    def step(messages: Any) -> Any:
        seen.append(any(text in str(m.get("content", "")) for m in messages
                        if isinstance(m, dict)))
        return [call("transfer", wh="W1", qty=4)]
    return step


def _crew(s: Store, steps: list[Any]) -> Crew:
    llm = Emitting(model="scripted")
    llm._steps = list(steps)
    a = s.agent(llm)
    return Crew(agents=[a], tasks=[Task(description="move stock", expected_output="done",
                                        agent=a, human_input=True)])


def _steps(seen: list[bool]) -> list[Any]:
    """Read, propose (the task's first answer), the human says go, move, done."""
    return [[call("get_stock", wh="W1")], "Plan: move 4 from W1.", _saw(FEEDBACK, seen),
            "Moved 4 from W1."]


def _check(rec: RunRecorder, s: Store, seen: list[bool]) -> None:
    assert s.moved == [("W1", 4)] and seen == [True]  # the feedback reached the model
    kinds = [(e["agent"], e["kind"]) for e in rec.events]
    said = [e for e in rec.events if e["agent"] == "human"]
    assert len(said) == 1, kinds
    line = said[0]
    assert (line["kind"], line["content"], line["to"], line["human_input"],
            line["crewai_task"], line["round"]) == ("instruction", FEEDBACK, "clerk", True,
                                                   "move stock", 1)
    ran = next(i for i, e in enumerate(rec.events)
               if e["kind"] == "tool_output" and e.get("tool") == "transfer")
    proposed = next(i for i, e in enumerate(rec.events)
                    if e["kind"] == "output" and "Plan: move 4" in str(e["content"]))
    assert proposed < rec.events.index(line) < ran  # the action follows what prompted it
    res = rec.audit()
    assert res.summary().hard_flags == 0, [f.detail for f in res.state.flags]
    shown = [ev for ev in res.state.events.values() if ev.agent == "human"]
    # the user's request (the run's task) and the feedback, a message in G (no approval)
    assert sorted(ev.type for ev in shown) == ["instruction", "task"]


def test_stdin_feedback_is_recorded_before_the_action_it_led_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI's default provider reads the human on stdin: "go ahead ..." then Enter.
    The feedback is an ``instruction`` of ``human`` to the task's agent, between the
    answer it replied to and the call it led to (main: nowhere in the trace)."""
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{FEEDBACK}\n\n"))
    rec, s, seen = RunRecorder("human"), Store({"W1": 10}), []
    with recording(rec):
        _crew(s, _steps(seen)).kickoff()
    _check(rec, s, seen)


class _Desk(SyncHumanInputProvider):
    """The application's own provider: answers from a list (a help-desk UI)."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.contexts: list[bool] = []

    def handle_feedback(self, formatted_answer: Any, context: Any) -> Any:
        self.contexts.append(isinstance(context, AgentExecutor))
        return super().handle_feedback(formatted_answer, context)

    def _prompt_input(self, crew: Any) -> str:  # type: ignore[override]
        self.asked += 1
        return self.answers.pop(0)

    async def _prompt_input_async(self, crew: Any) -> str:  # type: ignore[override]
        return self._prompt_input(crew)


def test_the_applications_provider_is_kept_and_put_back() -> None:
    """An application's provider answers (never replaced: it is asked twice); the
    feedback is recorded; after the block the application's provider is in force again,
    and a run outside any block records nothing."""
    desk = _Desk([FEEDBACK, ""])
    token = set_provider(desk)
    try:
        rec, s, seen = RunRecorder("desk"), Store({"W1": 10}), []
        with recording(rec):
            assert get_provider() is not desk  # wrapped for the block
            _crew(s, _steps(seen)).kickoff()
        assert get_provider() is desk and desk.asked == 2 and desk.contexts == [True]
        _check(rec, s, seen)
        n = len(rec.events)
        desk.answers = [FEEDBACK, ""]
        s2, seen2 = Store({"W1": 10}), []
        _crew(s2, _steps(seen2)).kickoff()
        assert seen2 == [True] and len(rec.events) == n
    finally:
        reset_provider(token)


def test_async_kickoff_records_the_feedback() -> None:
    """``akickoff`` asks through ``handle_feedback_async``: recorded the same way."""
    desk = _Desk([FEEDBACK, ""])
    token = set_provider(desk)
    try:
        rec, s, seen = RunRecorder("async"), Store({"W1": 10}), []
        with recording(rec):
            asyncio.run(asyncio.wait_for(_crew(s, _steps(seen)).akickoff(), 60))
        _check(rec, s, seen)
    finally:
        reset_provider(token)


def test_a_stale_calls_plan_comes_before_its_refusal() -> None:
    """A call refused stale, then its replan: the call's own ``plan`` line is written
    where the call was made, before its gate decision (main: after the refusal, with
    the replan), and the replan after the refusal."""
    rec, s = RunRecorder("order"), Store({"W1": 10})
    llm = Emitting(model="scripted")
    llm._steps = [[call("get_stock", wh="W1")],
                  then(s.set("W1", 6), [call("transfer", wh="W1", qty=4)]),
                  [call("transfer", wh="W1", qty=3)], "done"]
    a = s.agent(llm)
    with recording(rec):
        Crew(agents=[a], tasks=[Task(description="move stock", expected_output="done",
                                     agent=a)]).kickoff()
    assert s.moved == [("W1", 3)]
    ev = rec.events
    plan = next(i for i, e in enumerate(ev) if e["kind"] == "plan" and not e.get("replan"))
    replan = next(i for i, e in enumerate(ev) if e["kind"] == "plan" and e.get("replan"))
    stale = next(i for i, e in enumerate(ev)
                 if (e.get("gate") or {}).get("reason") == "stale")
    refused = next(i for i, e in enumerate(ev) if e.get("blocked"))
    assert plan < stale < refused < replan, [(e["agent"], e["kind"]) for e in ev]
    assert ev[plan]["plan_id"] == ev[replan]["plan_id"]
    assert rec.audit().summary().hard_flags == 0
