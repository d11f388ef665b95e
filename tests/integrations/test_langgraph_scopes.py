"""One workspace agent serving two LangGraph threads (issue 28, QA: a shared agent handle).

A module-level ``desk = ws.agent("desk")`` serves the conversations of one compiled
graph, each its own ``thread_id``. A call derives only from the reads of its own thread,
so another thread's fresh read never authorizes this one's stale plan. Real LangGraph
graphs (a scripted chat model, ``ToolNode``, ``InMemorySaver``), no network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from icore.integrations.langgraph import fenced_tool
from icore.workspace import Workspace

from .test_langgraph_workspace import S, _react

FARE = "fare/LH100"


def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])


def _world() -> tuple[Workspace, list[Any], list[Any]]:
    ws = Workspace({"fare/*": "airline"})
    ws.put(FARE, {"price": 200}, by="airline")
    desk = ws.agent("desk")  # one handle for every thread
    ran: list[Any] = []

    @tool
    def get_fare(flight: str) -> dict[str, Any]:
        """The fare of a flight."""
        return desk.read(f"fare/{flight}")  # type: ignore[return-value]

    @tool
    def book(flight: str, price: float) -> str:
        """Book a flight at a price."""
        ran.append((flight, price))
        return f"booked {flight} at {price}"

    return ws, [get_fare, fenced_tool(book, agent=desk,
                                      depends_on=lambda a: {f"fare/{a['flight']}"})], ran


def _graph(tools: list[Any], agent: Callable[[S], Any]) -> Any:
    g = StateGraph(S)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def _scripted(tools: list[Any], turns: Iterator[AIMessage]) -> Any:
    return _react(tools, turns, checkpointer=InMemorySaver())


def _last_tool(out: dict[str, Any]) -> str:
    return str([m for m in out["messages"] if isinstance(m, ToolMessage)][-1].content)


BOOK = {"flight": "LH100", "price": 200}


def _sequential(y_reads: bool, x_thread: str, y_thread: str) -> tuple[str, list[Any]]:
    """X reads 200; the fare becomes 999; Y (maybe) reads 999; X's user says yes."""
    ws, tools, ran = _world()
    read = {"flight": "LH100"}
    app = _scripted(tools, iter([
        _call("get_fare", read, "x1"), AIMessage("200. Book it?"),
        *([_call("get_fare", read, "y1"), AIMessage("999")] if y_reads else []),
        _call("book", BOOK, "x2"), AIMessage("done")]))
    x = {"configurable": {"thread_id": x_thread}}
    app.invoke({"messages": [HumanMessage("Price of LH100?")]}, x)
    ws.put(FARE, {"price": 999}, by="airline")
    if y_reads:
        out = app.invoke({"messages": [HumanMessage("Price of LH100?")]},
                         {"configurable": {"thread_id": y_thread}})
        assert _last_tool(out) == '{"price": 999}'
    out = app.invoke({"messages": [HumanMessage("yes")]}, x)
    return _last_tool(out), ran


def test_another_threads_read_never_authorizes_the_stale_plan() -> None:
    """The QA case in LangGraph: Y's read of 999 through the shared agent does not let
    X's book at 200 run; X's call is judged by X's read (stale), as without Y."""
    for y_reads in (True, False):
        out, ran = _sequential(y_reads, "X", "Y")
        assert ran == [] and "(stale)" in out and '"price": 999' in out


def test_single_thread_over_invocations_unchanged() -> None:
    """One thread: read in one invocation, book in the next, the fare unchanged: runs."""
    _ws, tools, ran = _world()
    app = _scripted(tools, iter([_call("get_fare", {"flight": "LH100"}, "x1"),
                                 AIMessage("Book it?"), _call("book", BOOK, "x2"),
                                 AIMessage("done")]))
    x = {"configurable": {"thread_id": "X"}}
    app.invoke({"messages": [HumanMessage("Price?")]}, x)
    out = app.invoke({"messages": [HumanMessage("yes")]}, x)
    assert _last_tool(out) == "booked LH100 at 200.0" and ran == [("LH100", 200)]


Step = AIMessage | Callable[[], Awaitable[AIMessage]]


def _stepper(steps: dict[str, Iterator[Step]]) -> Callable[..., Any]:
    """An async agent node: the next step of the thread's script (awaited if a function)."""
    async def agent(state: S, config: RunnableConfig) -> dict[str, Any]:
        step = next(steps[config["configurable"]["thread_id"]])  # type: ignore[index]
        msg = step if isinstance(step, AIMessage) else await step()
        return {"messages": [msg]}

    return agent


def test_concurrent_threads_are_judged_by_their_own_reads() -> None:
    """``asyncio.gather`` of two threads' ``ainvoke`` through one agent: A reads 200; the
    fare becomes 999 and B reads it; A's book at 200 is refused stale, nothing runs."""
    ws, tools, ran = _world()
    a_read, b_read = asyncio.Event(), asyncio.Event()

    async def a2() -> AIMessage:
        a_read.set()
        await b_read.wait()
        return _call("book", BOOK, "a2")

    async def b1() -> AIMessage:
        await a_read.wait()
        ws.put(FARE, {"price": 999}, by="airline")
        return _call("get_fare", {"flight": "LH100"}, "b1")

    async def b2() -> AIMessage:
        b_read.set()
        return AIMessage("B done")

    app = _graph(tools, _stepper({
        "A": iter([_call("get_fare", {"flight": "LH100"}, "a1"), a2, AIMessage("A done")]),
        "B": iter([b1, b2])}))

    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(
            app.ainvoke({"messages": [HumanMessage("go")]},
                        {"configurable": {"thread_id": t}}) for t in "AB")))

    ra, rb = asyncio.run(both())
    outs = {m.tool_call_id: str(m.content) for r in (ra, rb) for m in r["messages"]
            if isinstance(m, ToolMessage)}
    assert outs["a1"] == '{"price": 200}' and outs["b1"] == '{"price": 999}'
    assert ran == [] and "(stale)" in outs["a2"]


@settings(max_examples=12, deadline=None)
@given(order=st.permutations(["X", "Y", "Z"]), change_after=st.integers(0, 3))
def test_a_call_derives_only_from_its_own_threads_read(order: list[str],
                                                       change_after: int) -> None:
    """Threads read in any order with the fare changing between any two reads; then each
    books at the price it read: it runs iff its own read is the current version."""
    ws, tools, ran = _world()
    read_price: dict[str, float] = {}
    scripts: dict[str, Iterator[Step]] = {}
    for t in order:
        def booked(t: str = t) -> AIMessage:
            return _call("book", {"flight": "LH100", "price": read_price[t]}, f"{t}2")
        scripts[t] = iter([_call("get_fare", {"flight": "LH100"}, f"{t}1"),
                           AIMessage("ok"), _sync(booked), AIMessage("done")])
    app = _graph(tools, _stepper(scripts))
    for i, t in enumerate(order):
        if i == change_after:
            ws.put(FARE, {"price": 999}, by="airline")
        cfg = {"configurable": {"thread_id": t}}
        asyncio.run(app.ainvoke({"messages": [HumanMessage("price?")]}, cfg))
        read_price[t] = 999 if i >= change_after else 200
    if change_after == 3:
        ws.put(FARE, {"price": 999}, by="airline")
    for t in order:
        out = asyncio.run(app.ainvoke({"messages": [HumanMessage("yes")]},
                                      {"configurable": {"thread_id": t}}))
        current = read_price[t] == 999
        assert ("booked" in _last_tool(out)) is current, (t, _last_tool(out))
    assert sorted(ran) == sorted(("LH100", 999) for t in order if read_price[t] == 999)


def _sync(fn: Callable[[], AIMessage]) -> Callable[[], Awaitable[AIMessage]]:
    async def step() -> AIMessage:
        return fn()

    return step


def test_no_thread_id_scopes_the_invocation() -> None:
    """A graph run without a thread is its own scope (qa-fw7 S1): a read then a call in
    one invocation runs."""
    _ws, tools, ran = _world()
    app = _react(tools, iter([_call("get_fare", {"flight": "LH100"}, "c1"),
                              _call("book", BOOK, "c2"), AIMessage("done")]))
    out = app.invoke({"messages": [HumanMessage("book")]})
    assert _last_tool(out) == "booked LH100 at 200.0" and ran == [("LH100", 200)]


@pytest.mark.parametrize("thread", ["X", 7])
def test_thread_scope_is_read_from_the_config(thread: Any) -> None:
    """The detected scope is the run config's ``thread_id`` (str or int) of its
    checkpointer (numbered: another checkpointer's thread of the same id is another)."""
    from icore.integrations.langgraph._thread_scope import graph_scope

    seen: list[Any] = []
    g = StateGraph(S)
    g.add_node("agent", lambda state: seen.append(graph_scope()) or {"messages": []})
    g.add_edge(START, "agent")
    for _ in range(2):
        g.compile(checkpointer=InMemorySaver()).invoke(
            {"messages": [HumanMessage("x")]}, {"configurable": {"thread_id": thread}})
    assert [s[2] for s in seen] == [thread, thread] and seen[0] != seen[1]
    assert graph_scope() is None
