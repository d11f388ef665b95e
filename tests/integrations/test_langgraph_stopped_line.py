"""A LangGraph run that stops (Ctrl-C, a node's exception) says so in its trace.

QA qa-new16 #6: the trace of a run stopped by Ctrl-C had no line saying why it has no
end (AG2 wrote "the run stopped: ..."). A real graph, the real ``RecordingHandler``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="icore[langgraph]")

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from icore.adapters import parse_jsonl
from icore.adapters._trace import run_ended
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler


class _S(TypedDict, total=False):
    n: int


def _graph(node: Any) -> Any:
    g = StateGraph(_S)
    g.add_node("worker", node)
    g.add_edge(START, "worker")
    g.add_edge("worker", END)
    return g.compile()


def _stopped(rec: RunRecorder) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in rec.jsonl().splitlines()]
    return [x for x in lines if str(x.get("content", "")).startswith("the run stopped")]


@pytest.mark.parametrize(("exc", "cancelled"), [
    (KeyboardInterrupt(), True), (RuntimeError("disk on fire"), None)])
def test_a_stopped_graph_writes_why_it_has_no_end(exc: BaseException,
                                                  cancelled: bool | None) -> None:
    def worker(state: _S) -> _S:
        raise exc

    rec = RunRecorder("stops")
    with pytest.raises(type(exc)):
        _graph(worker).invoke({"n": 1}, {"callbacks": [RecordingHandler(rec)]})
    (line,) = _stopped(rec)
    assert line["error"].startswith(type(exc).__name__)
    assert line.get("cancelled") is cancelled
    assert not run_ended(parse_jsonl(rec.jsonl()).steps)  # still "did not end"


def test_an_interrupt_is_a_pause_not_a_stop(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def worker(state: _S) -> _S:
        interrupt({"ask": "ok?"})
        return state

    g = StateGraph(_S)
    g.add_node("worker", worker)
    g.add_edge(START, "worker")
    g.add_edge("worker", END)
    app = g.compile(checkpointer=InMemorySaver())
    rec = RunRecorder("pauses")
    app.invoke({"n": 1}, {"callbacks": [RecordingHandler(rec)],
                          "configurable": {"thread_id": "t"}})
    assert _stopped(rec) == []
