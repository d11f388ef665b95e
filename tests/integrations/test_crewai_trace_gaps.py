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
