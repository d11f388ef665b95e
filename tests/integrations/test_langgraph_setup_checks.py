"""Setup mistakes caught before the model sees anything (#28, QA clinic app).

Dynamic ``depends_on`` returning a str, a pattern, an unowned or misspelled key, or
failing on the arguments: a typed WorkspaceError escapes the graph (as the static check
does at wrap time), never a model-facing refusal. Wrap-time: docstring-less functions,
lambdas and a non-bool ``approval``. A fact declared but never written: a clear message.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from icore.errors import IntegrationError
from icore.integrations.langgraph import fenced_tool
from icore.workspace import Workspace, WorkspaceError


class _Fake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> _Fake:
        return self


class _S(TypedDict):
    messages: Annotated[list[Any], add_messages]


@tool
def book(day: date, slot: str) -> str:
    """Book a slot on a day."""
    return f"booked {day} {slot}"


def _run(ws: Workspace, depends_on: Any, *, read: bool = True) -> Any:
    booker = ws.agent("booker")

    @tool
    def get_day(day: str) -> Any:
        """Read a day's open slots."""
        return booker.read(f"day/{day}", default=None)  # a day nobody wrote: null

    first = ([{"name": "get_day", "args": {"day": "2026-12-10"}, "id": "r1"}] if read
             else [])
    turns = [AIMessage("", tool_calls=first)] if first else []
    turns += [AIMessage("", tool_calls=[{"name": "book", "id": "b1", "args": {
        "day": "2026-12-10", "slot": "09:00"}}]), AIMessage("done")]
    llm = _Fake(messages=iter(turns))
    g = StateGraph(_S)
    g.add_node("agent", lambda s: {"messages": [llm.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([get_day, fenced_tool(book, agent=booker,
                                                       depends_on=depends_on)]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile().invoke({"messages": [HumanMessage("book")]})


def _ws() -> Workspace:
    ws = Workspace({"day/*": "calendar"})
    ws.put("day/2026-12-10", {"open": ["09:00"]})
    return ws


@pytest.mark.parametrize(("depends_on", "words", "fix"), [
    (lambda a: f"day/{a['day']}", "returned a str", "{'day/2026-12-10'}"),
    (lambda a: {"day/*"}, "pattern", "day/"),
    (lambda a: {f"dya/{a['day']}"}, "no owner", "did you mean 'day/2026-12-10'"),
    (lambda a: {f"day/{a['dya']}"}, "failed on the call's arguments", "day, slot"),
])
def test_dynamic_depends_on_mistakes_raise_typed(depends_on: Any, words: str,
                                                 fix: str) -> None:
    with pytest.raises(WorkspaceError) as err:
        _run(_ws(), depends_on)
    assert words in str(err.value)
    assert fix in str(err.value)


def test_static_pattern_and_typo_refused_at_wrap() -> None:
    booker = _ws().agent("booker")
    with pytest.raises(WorkspaceError, match="pattern"):
        fenced_tool(book, agent=booker, depends_on={"day/*"})
    with pytest.raises(WorkspaceError, match="did you mean 'day/2026-12-10'"):
        fenced_tool(book, agent=booker, depends_on={"dya/2026-12-10"})
    # a key far from every declared one gets the "declare it" fix
    with pytest.raises(WorkspaceError, match="declare it"):
        fenced_tool(book, agent=booker, depends_on={"room/3"})


def test_fact_never_written_says_no_value_yet() -> None:
    ws = Workspace({"day/*": "calendar"})  # day/2026-12-10 declared, never written
    out = _run(ws, lambda a: {f"day/{a['day']}"})
    (msg,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "book"]
    assert msg.status == "error"
    assert "no value yet for day/2026-12-10" in str(msg.content)


def test_wrap_time_function_checks() -> None:
    booker = _ws().agent("booker")

    def nodoc(day: str) -> str:
        return day

    with pytest.raises(IntegrationError, match="no docstring"):
        fenced_tool(nodoc, agent=booker, depends_on={"day/2026-12-10"})
    with pytest.raises(IntegrationError, match="lambda"):
        fenced_tool(lambda day: day, agent=booker, depends_on={"day/2026-12-10"})
    for bad in ("yes", 1, None):
        with pytest.raises(IntegrationError, match="approval= must be True or False"):
            fenced_tool(book, agent=booker, depends_on={"day/2026-12-10"},
                        approval=bad)  # type: ignore[arg-type]


class _CustomBook(BaseTool):
    """A BaseTool subclass without args_schema: LangChain infers it from ``_run``."""

    name: str = "custom_book"
    description: str = "Book a slot on a day."

    def _run(self, day: str, slot: str) -> str:
        return f"custom booked {day} {slot}"


class _KwBook(BaseTool):
    name: str = "kw_book"
    description: str = "Book anything."

    def _run(self, **kwargs: Any) -> str:
        return f"booked {kwargs}"


def test_basetool_without_args_schema_is_fenced_with_langchains_schema() -> None:
    booker = _ws().agent("booker")
    fenced = fenced_tool(_CustomBook(), agent=booker, depends_on={"day/2026-12-10"})
    assert set(fenced.tool_call_schema.model_json_schema()["properties"]) == {"day", "slot"}
    with pytest.raises(IntegrationError, match=r"\*\*kwargs") as err:
        fenced_tool(_KwBook(), agent=booker, depends_on={"day/2026-12-10"})
    assert "kwargs" in str(err.value)


def test_a_fenced_tool_is_not_fenced_twice() -> None:
    booker = _ws().agent("booker")
    once = fenced_tool(book, agent=booker, depends_on={"day/2026-12-10"})
    with pytest.raises(IntegrationError, match="fenced already"):
        fenced_tool(once, agent=booker, depends_on={"day/2026-12-10"})
