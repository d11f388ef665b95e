"""CrewAI recordings: no phantom agent, no missing or emptied calls (#28, QA qa-crew S3/S4).

A real ``Crew`` with the scripted, event-emitting LLM of test_crewai_audit.py, recorded
with :func:`icore.integrations.crewai.recording`; no network. Runs in ``.venv-crewai``
(see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai.utilities.exceptions.context_window_exceeding_exception import (
    LLMContextLengthExceededError,
)

from icore.integrations import RunRecorder
from icore.integrations.crewai import recording

from .test_crewai_audit import Emitting
from .test_crewai_turns import Store, call


def _overflow(_messages: Any) -> Any:
    raise LLMContextLengthExceededError("maximum context length exceeded")


def test_crewai_summarizing_is_no_agents_turn() -> None:
    """The context window overflows once: CrewAI summarizes the conversation with model
    calls that have no agent. They are recorded as ``thought`` steps of the task's agent
    (``clerk``), marked CrewAI-internal; no agent "agent" appears, and the same summary
    three times is no repeated observation (main: turns of "agent", hard flags)."""
    rec = RunRecorder("summarized")
    s = Store({"W1": 10})
    llm = Emitting(model="scripted")
    llm._steps = [[call("get_stock", wh="W1")], _overflow,
                  "<summary>moved nothing yet</summary>",
                  [call("transfer", wh="W1", qty=2)], "Done."]
    with recording(rec):
        s.crew(llm).kickoff()
    assert s.moved == [("W1", 2)]
    assert "agent" not in rec.agents
    internal = [e for e in rec.events if e.get("crewai_internal")]
    assert internal and all((e["agent"], e["kind"]) == ("clerk", "thought") for e in internal)
    assert "moved nothing yet" in internal[0]["content"]
    res = rec.audit()
    assert res.summary().hard_flags == 0, [f.detail for f in res.state.flags]


def test_refused_arguments_leave_a_bounded_tool_output() -> None:
    """Calls the model got wrong: ``qty: "lots"`` (CrewAI's own schema check refuses
    it, and CrewAI retries it; main: no line at all), ``amount: NaN`` and a 4.5 MB
    ``note`` (refused ``invalid_arguments`` / ``args_too_large``; main: ``"args": {}``).
    Each leaves a failed ``tool_output`` with the arguments given, bounded; the lines
    are strict JSON."""
    import json

    from crewai.tools import tool

    from icore.integrations.crewai import fenced_crewai_tool

    from .test_crewai_turns import act

    rec = RunRecorder("bad-args")
    s = Store({"W1": 10})
    paid: list[float] = []

    @tool("pay")
    def pay(wh: str, amount: float, note: str = "") -> str:
        """Pay a warehouse."""
        paid.append(amount)
        return "paid"

    fenced_pay = fenced_crewai_tool(pay, agent=s.clerk, depends_on={"stock/W1"})
    s.tools.append(fenced_pay)
    llm = Emitting(model="scripted")
    llm._react = True
    llm._steps = [act("get_stock", wh="W1"),
                  'Thought: go\nAction: transfer\nAction Input: {"wh": "W1", "qty": "lots"}',
                  'Thought: go\nAction: pay\nAction Input: {"wh": "W1", "amount": NaN}',
                  "Thought: done\nFinal Answer: done"]
    with recording(rec):
        s.crew(llm).kickoff()
        with s.clerk.scope("direct"):  # outside the crew: a conversation of its own
            s.clerk.read("stock/W1")  # the direct call's own read
            fenced_pay.run(wh="W1", amount=1.0, note="n" * 4_500_000)
    assert s.moved == [] and paid == []
    out = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] != "get_stock"]
    transfers = [e for e in out if e["tool"] == "transfer"]
    assert transfers and all((e["exitcode"], e["reason"], e["args"]) == (
        1, "invalid_arguments", {"wh": "W1", "qty": "lots"}) for e in transfers)
    pays = [e for e in out if e["tool"] == "pay"]
    assert [(e["exitcode"], e["reason"]) for e in pays] == [(1, "invalid_arguments"),
                                                            (1, "args_too_large")]
    # QA qa-new13a S4: named as an argument problem, kept as the model's text (not "nan")
    assert "amount: not a finite number" in pays[0]["content"]
    assert pays[0]["args"] == {"raw": '{"wh": "W1", "amount": NaN, "note": ""}'}
    big = pays[1]["args"]["note"]
    assert big.startswith("nnn") and big.endswith("[cut: 4500000 characters]")
    assert len(big) < 2_100
    for e in out:
        json.dumps(e, allow_nan=False)  # strict JSON: no NaN in a trace line
