"""A LangGraph run recorded to a file as it goes (``RunRecorder(path=...)``, #25).

A real LangGraph graph (a scripted model, a fenced tool in agent mode, the
``RecordingHandler``): while the run goes on the file already holds the booking's
decision, and what it holds audits as the same actions as the final trace; after the
``with`` block the file is byte for byte ``write()``'s text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from langchain_core.messages import HumanMessage

from icore.adapters import parse_jsonl, trace_lineages
from icore.adapters._trace import run_ended
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_recording_truthful import Brain, Hotel, _audit, _graph


def _actions(text: str) -> list[tuple[str, str, bool]]:
    t = parse_jsonl(text)
    assert t.planfence is not None and t.planfence.chain_broken is None
    return [(a.action, str(a.status), a.outcome_unknown)
            for a in trace_lineages(t.planfence, t.steps)]


def test_a_langgraph_run_is_on_disk_as_it_goes(tmp_path: Path) -> None:
    hotel = Hotel()
    p = tmp_path / "trip.jsonl"
    with RunRecorder("trip", path=p, ground_truth="booked") as rec:
        app = _graph(hotel, Brain(brain=hotel.brain()))
        app.invoke({"messages": [HumanMessage("Book room R101")]},
                   {"callbacks": [RecordingHandler(rec)]})
        streamed = p.read_text(encoding="utf-8")
        assert not run_ended(parse_jsonl(streamed).steps)  # the end waits for the close
    assert hotel.booked and p.read_text(encoding="utf-8") == rec.jsonl()
    assert _actions(streamed) == _actions(rec.jsonl()) == [("book_room-1", "valid", False)]
    code, out, _run = _audit(p, "--fail-on", "invalid,not-ended,unknown")
    assert code == 0, out
