"""Concurrent LangGraph invocations sharing one workspace agent handle (#28, QA qa-fw7 S1).

A web service keeps one module-level ``ws.agent(...)`` and serves each request with its
own graph invocation: without a ``thread_id``, or with the tutorial ``thread_id "1"`` in
graphs that each have their own checkpointer. Run A reads the trip (check-in day 10),
finance moves it to day 11, run B reads day 11, then A books day 10: A's call derives
only from A's read (stale, refused); two invocations on one thread of one checkpointer
at once cannot be told apart and fail closed. Real LangGraph, scripted models, threads.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

from .test_langgraph_workspace import _react

TRIP = "trip/T7"


class _X(TypedDict):
    x: int


def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])


class _TwoRuns:
    """A trip world, one planner handle, and the scripts of runs A and B."""

    def __init__(self, depends_on: Callable[[Mapping[str, Any]], set[str]] | None = None
                 ) -> None:
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

        self.tools = [get_trip, fenced_tool(book_hotel, agent=planner, depends_on=depends_on
                                            or (lambda a: {f"trip/{a['trip_id']}"}))]

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


# --- the checkpoint-line rule (review of #28: the first/last use overlap check failed
# open four ways; each test below booked day 10 before the rule) ---------------------

_T1: Any = {"configurable": {"thread_id": "1"}}


def _last_tool(out: dict[str, Any]) -> str:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)][-1]


def _both(w: _TwoRuns, saver: Any, first: tuple[str, Iterator[AIMessage]],
          second: tuple[str, Iterator[AIMessage]]) -> dict[str, Any]:
    """Two invocations on thread "1" of ``saver`` in two threads: name -> result."""
    out: dict[str, Any] = {}

    def one(name: str, script: Iterator[AIMessage]) -> None:
        try:
            out[name] = _last_tool(_react(w.tools, script, checkpointer=saver).invoke(
                {"messages": [HumanMessage(name)]}, _T1))
        except Exception as exc:
            out[name] = exc

    ts = [threading.Thread(target=one, args=first), threading.Thread(target=one, args=second)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


def test_a_run_that_started_first_is_not_backed_by_a_later_runs_read() -> None:
    """B starts; A (same thread) reads day 11 and ends before B first uses the thread;
    B books day 10 from the turn-0 history its model saw: refused, nothing booked."""
    w = _TwoRuns()
    saver = InMemorySaver()
    _react(w.tools, iter([_call("get_trip", {"trip_id": "T7"}, "t0"), AIMessage("ok")]),
           checkpointer=saver).invoke({"messages": [HumanMessage("trip?")]}, _T1)
    w.ws.put(TRIP, {"check_in": "2026-12-11"}, by="finance")
    b_started, a_done = threading.Event(), threading.Event()

    def script_b() -> Iterator[AIMessage]:
        b_started.set()
        a_done.wait(10)
        yield _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "b1")
        yield AIMessage("B")

    def script_a() -> Iterator[AIMessage]:
        b_started.wait(10)
        yield _call("get_trip", {"trip_id": "T7"}, "a1")
        yield AIMessage("A")
        a_done.set()

    out = _both(w, saver, ("B", script_b()), ("A", script_a()))
    assert out["A"] == '{"check_in": "2026-12-11"}'
    assert isinstance(out["B"], IntegrationError), out["B"]
    assert "thread_id" in str(out["B"]) and w.booked == []


class _OwnSaver(InMemorySaver):
    """A saver icore reads only through ``get_tuple`` (not InMemorySaver itself)."""


@pytest.mark.parametrize("make", [InMemorySaver, _OwnSaver], ids=["memory", "get_tuple"])
def test_a_run_that_reads_nothing_is_not_backed_by_a_concurrent_read(
        make: Callable[[], Any]) -> None:
    """A never reads the trip; B (same thread, running) reads day 11; A books day 10."""
    w = _TwoRuns()
    saver = make()

    def script_a() -> Iterator[AIMessage]:
        w.a_read.set()
        w.b_read.wait(10)
        yield _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "a2")
        yield AIMessage("A")

    out = _both(w, saver, ("A", script_a()), ("B", w.script_b()))
    assert out["B"] == '{"check_in": "2026-12-11"}'
    assert isinstance(out["A"], IntegrationError), out["A"]
    assert w.booked == []


@pytest.mark.parametrize("other_thread", [False, True], ids=["same-thread", "other-threads"])
def test_many_invocations_meanwhile_do_not_evict_the_evidence(
        monkeypatch: pytest.MonkeyPatch, other_thread: bool) -> None:
    """While A thinks, 70 invocations use the thread (or, with the root table bounded
    to 2, other threads): A's stale book is still refused."""
    import icore.integrations.langgraph._thread_scope as ts
    monkeypatch.setattr(ts, "_ROOTS_KEPT", 2)
    w = _TwoRuns()
    saver = InMemorySaver()
    g = StateGraph(_X)
    g.add_node("n", lambda s: (w.tools[0].invoke({"trip_id": "T7"}), {"x": 1})[1])
    g.add_edge(START, "n")
    filler = g.compile(checkpointer=saver)

    def script_b() -> Iterator[AIMessage]:
        yield from itertools.islice(w.script_b(), 1)
        for i in range(70):
            filler.invoke({"x": 0}, {"configurable": {
                "thread_id": f"other-{i}" if other_thread else "1"}})
        w.b_read.set()
        yield AIMessage("B done")

    out = _both(w, saver, ("A", w.script_a()), ("B", script_b()))
    assert isinstance(out["A"], IntegrationError), out["A"]
    assert w.booked == []


def test_a_fork_of_an_old_checkpoint_is_not_backed_by_a_later_turns_read() -> None:
    """Turn 1 reads day 10; turn 2 reads day 11; a run forked from turn 1's end (time
    travel) books day 10: turn 2's read is off its line, refused."""
    w = _TwoRuns()
    saver = _OwnSaver()
    app = _react(w.tools, iter([
        _call("get_trip", {"trip_id": "T7"}, "t1"), AIMessage("ok"),
        _call("get_trip", {"trip_id": "T7"}, "t2"), AIMessage("ok"),
        _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "t3"),
        AIMessage("done")]), checkpointer=saver)
    app.invoke({"messages": [HumanMessage("trip?")]}, _T1)
    turn1 = app.get_state(_T1).config
    w.ws.put(TRIP, {"check_in": "2026-12-11"}, by="finance")
    app.invoke({"messages": [HumanMessage("again?")]}, _T1)
    with pytest.raises(IntegrationError, match="thread_id"):
        app.invoke({"messages": [HumanMessage("book")]}, turn1)
    assert w.booked == []


def test_a_thread_whose_use_history_overflowed_off_one_line_refuses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """More checkpoints used than kept, not all on one line (A and B at once): the
    history is lost and the call refused, never booked on a forgotten history."""
    import icore.integrations.langgraph._thread_scope as ts
    monkeypatch.setattr(ts, "_USES_KEPT", 2)
    w = _TwoRuns()
    out = _both(w, InMemorySaver(), ("A", w.script_a()), ("B", w.script_b()))
    assert isinstance(out["A"], IntegrationError) and "lost" in str(out["A"]), out["A"]
    assert w.booked == []


def test_an_overflow_on_one_line_is_collapsed_and_books(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One invocation reads at more checkpoints than kept: they lie on its line, so
    the history collapses and the call books."""
    import icore.integrations.langgraph._thread_scope as ts
    monkeypatch.setattr(ts, "_USES_KEPT", 2)
    w = _TwoRuns()
    app = _react(w.tools, iter([
        *[_call("get_trip", {"trip_id": "T7"}, f"r{i}") for i in range(5)],
        _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "b"),
        AIMessage("done")]), checkpointer=InMemorySaver())
    assert _last_tool(app.invoke({"messages": [HumanMessage("go")]}, _T1)) == "booked"
    assert w.booked == ["2026-12-10"]


@pytest.mark.parametrize("make", [InMemorySaver, _OwnSaver], ids=["memory", "get_tuple"])
def test_many_sequential_turns_still_book(make: Callable[[], Any]) -> None:
    """Verified calls move the thread's base forward: turn after turn keeps booking."""
    w = _TwoRuns()
    turns: list[AIMessage] = []
    for i in range(5):
        turns += [_call("get_trip", {"trip_id": "T7"}, f"r{i}"),
                  _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, f"b{i}"),
                  AIMessage("done")]
    app = _react(w.tools, iter(turns), checkpointer=make())
    for _ in range(5):
        assert _last_tool(app.invoke({"messages": [HumanMessage("go")]}, _T1)) == "booked"
    assert len(w.booked) == 5


def test_durability_exit_saves_no_line_so_a_later_turns_call_is_refused() -> None:
    """durability="exit" keeps no step checkpoint: turn 2's call cannot place turn 1's
    read, refused (fail closed; the documented limit)."""
    w = _TwoRuns()
    app = _react(w.tools, iter([
        _call("get_trip", {"trip_id": "T7"}, "t1"), AIMessage("Book it?"),
        _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "t2"),
        AIMessage("done")]), checkpointer=InMemorySaver())
    app.invoke({"messages": [HumanMessage("trip?")]}, _T1, durability="exit")
    with pytest.raises(IntegrationError, match="durability"):
        app.invoke({"messages": [HumanMessage("yes")]}, _T1, durability="exit")
    assert w.booked == []


def test_a_read_between_the_check_and_the_effect_is_caught() -> None:
    """A's call passes the line check; while its gate decides (its ``depends_on``), B
    (same thread) reads day 11: the check before the effect refuses, nothing booked."""
    saver = InMemorySaver()
    done: list[Any] = []

    def run_b() -> None:
        w.ws.put(TRIP, {"check_in": "2026-12-11"}, by="finance")
        done.append(_last_tool(_react(w.tools, iter([
            _call("get_trip", {"trip_id": "T7"}, "b1"), AIMessage("B")]),
            checkpointer=saver).invoke({"messages": [HumanMessage("B")]}, _T1)))

    def depends_on(a: Mapping[str, Any]) -> set[str]:
        if not done:  # B runs to its end in its own thread (its own context)
            t = threading.Thread(target=run_b)
            t.start()
            t.join(30)
        return {f"trip/{a['trip_id']}"}

    w = _TwoRuns(depends_on)
    app = _react(w.tools, iter([
        _call("get_trip", {"trip_id": "T7"}, "a1"),
        _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "a2"),
        AIMessage("A")]), checkpointer=saver)
    with pytest.raises(IntegrationError, match="thread_id"):
        app.invoke({"messages": [HumanMessage("A")]}, _T1)
    assert done == ['{"check_in": "2026-12-11"}'] and w.booked == []


@pytest.mark.parametrize("make", [InMemorySaver, _OwnSaver], ids=["memory", "get_tuple"])
def test_a_run_that_forked_from_a_running_step_is_not_backed_by_its_read(
        make: Callable[[], Any]) -> None:
    """A's tool reads day 11 and, still running, B starts on the thread: B's input
    checkpoint is a child of A's step, so A's read is B's ancestor but its result
    never reached B's model; B books day 10: refused (the child is ``input``)."""
    w = _TwoRuns()
    saver = make()
    done: list[Any] = []
    read = w.tools[0]

    def run_b() -> None:
        try:
            done.append(_last_tool(_react(tools, iter([
                _call("book_hotel", {"trip_id": "T7", "check_in": "2026-12-10"}, "b1"),
                AIMessage("B")]), checkpointer=saver).invoke(
                    {"messages": [HumanMessage("B")]}, _T1)))
        except IntegrationError as exc:
            done.append(exc)

    @tool
    def get_trip(trip_id: str) -> Any:
        """Read a trip."""
        out = read.invoke({"trip_id": trip_id})
        if w.a_read.is_set() and not done:  # turn 1: B runs while this step runs
            t = threading.Thread(target=run_b)
            t.start()
            t.join(30)
        return out

    tools = [get_trip, w.tools[1]]
    _react(tools, iter([_call("get_trip", {"trip_id": "T7"}, "t0"), AIMessage("ok")]),
           checkpointer=saver).invoke({"messages": [HumanMessage("0")]}, _T1)
    w.ws.put(TRIP, {"check_in": "2026-12-11"}, by="finance")
    w.a_read.set()
    _react(tools, iter([_call("get_trip", {"trip_id": "T7"}, "a1"), AIMessage("A")]),
           checkpointer=saver).invoke({"messages": [HumanMessage("A")]}, _T1,
                                      durability="sync")  # A's step saved before B
    assert len(done) == 1 and isinstance(done[0], IntegrationError), done
    assert "forked from" in str(done[0]) and w.booked == []
