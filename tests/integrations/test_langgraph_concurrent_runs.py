"""Concurrent LangGraph invocations sharing one workspace agent handle (#28, QA qa-fw7 S1).

A web service keeps one module-level ``ws.agent(...)`` and serves each request with its
own graph invocation: without a ``thread_id``, or with the tutorial ``thread_id "1"`` in
graphs that each have their own checkpointer. Run A reads the trip (check-in day 10),
finance moves it to day 11, run B reads day 11, then A books day 10: A's call derives
only from A's read (stale, refused); two invocations on one thread of one checkpointer
at once cannot be told apart and fail closed. Real LangGraph, scripted models, threads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

from .test_langgraph_workspace import _react

TRIP = "trip/T7"


def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])


class _TwoRuns:
    """A trip world, one planner handle, and the scripts of runs A and B."""

    def __init__(self) -> None:
        self.ws = Workspace({"trip/*": "finance"})
        self.ws.put(TRIP, {"check_in": "2026-12-10"}, by="finance")
        planner = self.ws.agent("planner")  # one handle for every request
        self.booked: list[str] = []
        self.a_read, self.b_read = threading.Event(), threading.Event()

        @tool
        def get_trip(trip_id: str) -> dict[str, Any]:
            """Read a trip."""
            return planner.read(f"trip/{trip_id}")  # type: ignore[return-value]

        @tool
        def book_hotel(trip_id: str, check_in: str) -> str:
            """Book the hotel of a trip."""
            self.booked.append(check_in)
            return "booked"

        self.tools = [get_trip, fenced_tool(book_hotel, agent=planner,
                                            depends_on=lambda a: {f"trip/{a['trip_id']}"})]

    def script_a(self) -> Iterator[AIMessage]:
        yield _call("get_trip", {"trip_id": "T7"}, "a1")
        self.a_read.set()
        self.b_read.wait(10)
        yield _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "a2")
        yield AIMessage("A done")

    def script_b(self) -> Iterator[AIMessage]:
        self.a_read.wait(10)
        self.ws.put(TRIP, {"check_in": "2026-12-11"}, by="finance")
        yield _call("get_trip", {"trip_id": "T7"}, "b1")
        self.b_read.set()
        yield AIMessage("B done")

    def run(self, saver: Callable[[], Any], config: Callable[[str], dict[str, Any]]
            ) -> dict[str, Any]:
        """A and B in two threads, each its own graph (``saver()`` its checkpointer)."""
        out: dict[str, Any] = {}

        def one(name: str, script: Iterator[AIMessage]) -> None:
            try:
                r = _react(self.tools, script, checkpointer=saver()).invoke(
                    {"messages": [HumanMessage("go")]}, config(name))
                out[name] = {m.tool_call_id: str(m.content) for m in r["messages"]
                             if isinstance(m, ToolMessage)}
            except Exception as exc:
                out[name] = exc

        ts = [threading.Thread(target=one, args=("A", self.script_a())),
              threading.Thread(target=one, args=("B", self.script_b()))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        return out


@pytest.mark.parametrize(("saver", "config"), [
    (lambda: None, lambda name: {}),  # no thread_id, no checkpointer
    (InMemorySaver, lambda name: {"configurable": {"thread_id": "1"}}),  # tutorial id
    (lambda: None, lambda name: {"configurable": {"thread_id": "1"}}),  # id, no saver
], ids=["no-thread", "own-savers-thread-1", "thread-1-no-saver"])
def test_a_concurrent_runs_read_never_authorizes_the_stale_plan(
        saver: Callable[[], Any], config: Callable[[str], dict[str, Any]]) -> None:
    """Each invocation is its own conversation: A's book at day 10 is refused stale."""
    w = _TwoRuns()
    out = w.run(saver, config)
    assert out["B"] == {"b1": '{"check_in": "2026-12-11"}'}
    assert out["A"]["a1"] == '{"check_in": "2026-12-10"}'
    assert "(stale)" in out["A"]["a2"] and w.booked == []


def test_two_runs_on_one_thread_of_one_checkpointer_fail_closed() -> None:
    """Two graphs over one checkpointer, both on thread "1", at once: not separable, so
    A's protected call raises IntegrationError naming the thread; nothing is booked."""
    w = _TwoRuns()
    shared = InMemorySaver()
    out = w.run(lambda: shared, lambda name: {"configurable": {"thread_id": "1"}})
    assert isinstance(out["A"], IntegrationError), out["A"]
    assert "thread_id" in str(out["A"]) and w.booked == []


def test_turns_of_one_thread_still_share_their_reads() -> None:
    """Turn 1 reads, turn 2 (the next invocation on the thread) books: runs."""
    w = _TwoRuns()
    app = _react(w.tools, iter([
        _call("get_trip", {"trip_id": "T7"}, "t1"), AIMessage("Book it?"),
        _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "t2"),
        AIMessage("done")]), checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "1"}}
    app.invoke({"messages": [HumanMessage("trip?")]}, cfg)
    out = app.invoke({"messages": [HumanMessage("yes")]}, cfg)
    assert [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)][-1] \
        == "booked" and w.booked == ["2026-12-10"]


def test_the_recording_of_a_cites_the_version_a_read() -> None:
    """The recorded gate decision of A's call cites v1 (A's read), refused stale."""
    w = _TwoRuns()
    rec = RunRecorder("two-A")
    head = w.ws.head(TRIP)
    assert head is not None
    v1 = head.id
    out = w.run(InMemorySaver, lambda name: {
        "configurable": {"thread_id": "1"},
        "callbacks": [RecordingHandler(rec)] if name == "A" else []})
    assert "(stale)" in out["A"]["a2"]
    lines = [json.loads(x) for x in rec.jsonl().splitlines()]
    decisions = [x["planfence"]["decision"] for x in lines
                 if "decision" in x.get("planfence", {})]
    assert [d["frontier"] for d in decisions] == [{TRIP: v1}]
    outs = [x for x in lines if x.get("kind") == "tool_output" and x["tool"] == "book_hotel"]
    assert len(outs) == 1 and outs[0]["blocked"] is True
