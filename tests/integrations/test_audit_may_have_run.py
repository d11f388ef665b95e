"""A fenced tool that timed out or was cancelled while it ran is counted outcome unknown.

The gateway's equivalent (an upstream that did not answer in time) may have run the call;
so may an in-process tool whose own remote call timed out or that was cancelled mid-run.
The audit counts neither ``failed after authorization`` (#29, QA qa-new8 S2), nor any
other exception from a body that started (it may have raised after its effect, QA
qa-new12b S2), but ``NoEffect``, the tool's own word that it did nothing. A real
LangGraph run (a scripted model), recorded and audited by the CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from langchain_core.messages import HumanMessage

from icore.adapters import FAILED_AFTER_AUTHORIZATION, OUTCOME_UNKNOWN, counted_as
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_recording_truthful import Brain, Hotel, _audit, _graph


@pytest.mark.parametrize(("exc", "counted"), [
    (TimeoutError("carrier did not answer in 5 s"), OUTCOME_UNKNOWN),
    # any exception from a started body may follow its effect (QA qa-new12b S2)
    (RuntimeError("connection reset after commit"), OUTCOME_UNKNOWN),
    (NoEffect("card declined"), FAILED_AFTER_AUTHORIZATION)],
    ids=["timeout", "error", "no_effect"])
def test_timed_out_tool_is_outcome_unknown(tmp_path: Path, exc: Exception,
                                           counted: str) -> None:
    hotel = Hotel()

    def book_room(room_id: str, price: str) -> str:
        """Book a room at the quoted price."""
        raise exc

    hotel.book_room = book_room  # type: ignore[method-assign]
    rec = RunRecorder("slow")
    app = _graph(hotel, Brain(brain=hotel.brain()))
    if isinstance(exc, NoEffect):  # the model reads it, the run goes on (QA qa-new14 S2)
        app.invoke({"messages": [HumanMessage("Book room R101")]},
                   {"callbacks": [RecordingHandler(rec)]})
    else:
        with pytest.raises(type(exc)):
            app.invoke({"messages": [HumanMessage("Book room R101")]},
                       {"callbacks": [RecordingHandler(rec)]})
    code, out, run = _audit(rec.write(tmp_path / "slow.jsonl"), "--fail-on", "invalid")
    assert code == 0
    assert f"protected actions of slow: 1 (1 {counted})" in out, out
    (lv,) = run["lineage"]
    assert lv["status"] == "valid" and lv["error"].startswith(type(exc).__name__)
    assert (lv.get("outcome") == "unknown") is (counted == OUTCOME_UNKNOWN)


def test_counted_as_may_have_run_errors() -> None:
    """The marks the recorders write; INVALID stays INVALID."""
    assert counted_as("valid", "MAY HAVE RUN: UPSTREAM FAILED: timed out") == OUTCOME_UNKNOWN
    assert counted_as("valid", "CancelledError: the call was cancelled") == OUTCOME_UNKNOWN
    assert counted_as("valid", "ValueError: TimeoutError later") == FAILED_AFTER_AUTHORIZATION
    assert counted_as("INVALID", "TimeoutError: x") == "INVALID"
