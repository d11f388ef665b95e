"""One agent handle, scoped and unscoped runs: fail closed (issue 28 follow-up).

Real LangGraph graphs (a scripted chat model, ``ToolNode``) and a real Agents SDK
``Runner`` with the examples' scripted model: once a handle served a thread (or an SDK
run), a protected call with no scope - a graph run without ``thread_id`` - is refused
with a ``WorkspaceError`` naming the fix; the unscoped history never authorizes it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from icore.workspace import Workspace, WorkspaceError

from .conftest import load_example
from .test_langgraph_scopes import BOOK, _call, _world
from .test_langgraph_workspace import _react

FARE = "fare/LH100"


def _turns() -> Any:
    return iter([_call("get_fare", {"flight": "LH100"}, "c1"), _call("book", BOOK, "c2"),
                 AIMessage("done")])


def test_langgraph_call_outside_any_run_after_threaded_runs_is_refused() -> None:
    """Thread X books; then the tool is called outside any graph run on the same handle:
    a WorkspaceError (nothing booked), not a call authorized from the unscoped history.
    A graph run without ``thread_id`` is its own scope (qa-fw7 S1): its read backs it."""
    _ws, tools, ran = _world()
    threaded = _react(tools, _turns(), checkpointer=InMemorySaver())
    out = threaded.invoke({"messages": [HumanMessage("book")]},
                          {"configurable": {"thread_id": "X"}})
    assert "booked LH100" in str([m for m in out["messages"]
                                  if isinstance(m, ToolMessage)][-1].content)
    tools[0].invoke({"flight": "LH100"})  # an unscoped read
    with pytest.raises(WorkspaceError, match="has no scope") as err:
        tools[1].invoke({"flight": "LH100", "price": 200})
    assert "thread_id" in err.value.fields["fix"] and ran == [("LH100", 200)]
    _react(tools, _turns()).invoke({"messages": [HumanMessage("book")]})
    assert ran == [("LH100", 200)] * 2


def test_langgraph_threaded_run_after_unthreaded_runs_needs_its_own_read() -> None:
    """The other direction: a run without thread reads; thread Y's ``book`` (no read in
    Y) is refused ``not_read`` with the value handed over, never authorized by it."""
    _ws, tools, ran = _world()
    unthreaded = _react(tools, _turns())
    unthreaded.invoke({"messages": [HumanMessage("book")]})
    assert ran == [("LH100", 200)]
    threaded = _react(tools, iter([_call("book", BOOK, "c9"), AIMessage("done")]),
                      checkpointer=InMemorySaver())
    out = threaded.invoke({"messages": [HumanMessage("book")]},
                          {"configurable": {"thread_id": "Y"}})
    said = str([m for m in out["messages"] if isinstance(m, ToolMessage)][-1].content)
    assert "not_read" in said or "not read" in said, said
    assert ran == [("LH100", 200)]


def test_sdk_runs_then_an_unscoped_call_of_the_app_is_refused() -> None:
    """An Agents SDK run (scoped by its trace, tracing disabled) reads the fare; the
    application then calls the tool's function through the handle outside any run:
    refused, the run's read never authorizes it."""
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import assistant_message, function_call

    from icore.integrations.openai_agents import fenced_function_tool

    ws = Workspace({"fare/*": "airline"})
    ws.put(FARE, {"price": 200}, by="airline")
    desk = ws.agent("desk")

    @function_tool
    def get_fare(flight: str) -> str:
        """The fare."""
        return json.dumps(desk.read(f"fare/{flight}"))

    def book(flight: str) -> str:
        """Book."""
        return f"booked {flight}"

    fenced = fenced_function_tool(book, agent=desk, depends_on=lambda a: {f"fare/{a['flight']}"})
    model = load_example("openai_agents_app").ScriptModel(iter([
        [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
        [assistant_message("read")]]))
    asyncio.run(Runner.run(Agent(name="desk", tools=[get_fare, fenced], model=model), "go",
                           run_config=RunConfig(tracing_disabled=True)))
    with pytest.raises(WorkspaceError, match="has no scope"):
        desk.execute("book", book, {"flight": "LH100"}, depends_on={FARE})
