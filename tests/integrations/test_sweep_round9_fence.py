"""The high-level fencing API under bad input (#29, sweep round 9).

- ``writes=`` keys that name no fact (a pattern, an empty key, a lone surrogate, a key
  no owner is declared for) were taken and compared as text: no sibling's ``depends_on``
  key (always one fact) ever met them, so the claim silently guarded nothing and two
  siblings booked one slot twice. Now refused when the tool is wrapped (a function's
  such key when the call is made, unless an argument's value spoiled it: the gate's
  D(a) check refuses that call with the argument named).
- A tool exception whose ``__str__`` raises replaced the tool's own exception inside
  icore's recording (a ``NoEffect`` was then recorded as an outcome unknown, and the
  ``__str__``'s error reached the framework); a 1 MB message was recorded whole.
- A ``depends_on`` function returning a str was iterated letter by letter (a refusal
  naming the fact ``'/'``).

Real LangGraph runs and a real recording; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool as as_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from icore.errors import IntegrationError
from icore.integrations import FenceGuard, NoEffect, RunRecorder
from icore.integrations import _writes as writes_mod
from icore.integrations._tool_failed import MAX_ERROR_CHARS, describe
from icore.integrations.langgraph import fenced_tool
from icore.workspace import Workspace, WorkspaceError

pytestmark = pytest.mark.timeout(60)

SLOT = "slot/dr-lee"


def _clinic() -> tuple[Workspace, Any]:
    ws = Workspace({"slot/*": "clinic"})
    ws.put(SLOT, {"free": ["09:00", "10:00"]}, by="clinic")
    desk = ws.agent("desk")
    desk.read(SLOT)
    return ws, desk


@pytest.mark.parametrize(("keys", "why"), [
    ({"slot/*"}, "a pattern"), ({""}, "an empty str"), ({"slot/\ud800"}, "lone surrogate"),
    ({"slot/\x00"}, "NUL"), ({"slot/[ab]"}, "a pattern")])
def test_a_writes_key_naming_no_fact_is_refused_when_wrapped(keys: set[str], why: str
                                                             ) -> None:
    _, desk = _clinic()
    with pytest.raises(IntegrationError, match=why):
        FenceGuard(agent=desk, depends_on={SLOT}, writes=keys)

    @as_tool
    def book(time: str) -> str:
        """Book."""
        return time

    with pytest.raises(IntegrationError, match=why):
        fenced_tool(book, agent=desk, depends_on={SLOT}, writes=keys)


def test_a_writes_key_no_owner_is_declared_for_is_refused_when_wrapped() -> None:
    _, desk = _clinic()
    with pytest.raises(WorkspaceError, match="writes names facts no owner") as e:
        FenceGuard(agent=desk, depends_on={SLOT}, writes={"slots/dr-lee"})  # a typo
    assert "slots/dr-lee" in str(e.value)


def test_a_pattern_claim_no_longer_lets_two_siblings_book_one_slot() -> None:
    """The fail-open itself: ``writes={'slot/*'}`` guarded nothing; now a refusal."""
    ws, desk = _clinic()
    with pytest.raises(IntegrationError):
        FenceGuard(agent=desk, depends_on={SLOT}, writes={"slot/*"})
    guard = FenceGuard(agent=desk, depends_on={SLOT}, writes={SLOT})  # the fix it names
    booked: list[str] = []

    async def book(who: str, time: str) -> str:
        await asyncio.sleep(0.02)
        ws.update(SLOT, lambda s: {"free": [t for t in s["free"] if t != time]},
                  by="clinic")
        booked.append(who)
        return who

    async def main() -> list[Any]:
        return list(await asyncio.gather(
            guard.arun("book", book, {"who": "p1", "time": "09:00"}, turn="m1"),
            guard.arun("book", book, {"who": "p2", "time": "09:00"}, turn="m1")))

    got = asyncio.run(main())
    assert booked == ["p1"] and [g.executed for g in got] == [True, False]


def test_a_writes_function_key_naming_no_fact() -> None:
    """The function's own pattern raises; a key an argument spoiled is not claimed."""
    with pytest.raises(IntegrationError, match="returned a pattern") as e:
        writes_mod.keys_for(lambda a: {"slot/*"}, {"day": "mon"}, what="writes", tool="book")
    assert "book" in str(e.value)
    got = writes_mod.keys_for(lambda a: {f"slot/{a['day']}", SLOT}, {"day": "*"},
                              what="writes", tool="book")
    assert got == frozenset({SLOT})


def test_a_depends_on_function_returning_a_str_is_named() -> None:
    ws = Workspace({"*": "o"})
    ws.put("k/1", 1)
    ag = ws.agent("a")
    ag.read("k/1")
    call = ag.execute("t", lambda: 1, {}, depends_on=lambda a: "k/1")
    assert not call.executed
    assert "returned a str, not a collection of keys" in (call.detail or "")


class _BadStr(NoEffect):
    def __str__(self) -> str:
        raise RuntimeError("str boom")


def test_describe_never_raises_and_cuts_a_huge_message() -> None:
    assert describe(_BadStr("z")) == "_BadStr: <its str() raised>"
    text = describe(NoEffect("x" * (1 << 20)))
    assert len(text) < MAX_ERROR_CHARS + 100
    assert text.endswith(f"... ({1 << 20} characters)")


class _S(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]


def _run(tool_fn: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """One LangGraph ToolNode call of the fenced ``tool_fn``, recorded; the decisions."""
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)
    ag = ws.agent("a")
    rec = RunRecorder("r9", question="q")
    rec.task("q")
    with rec.active():
        w = fenced_tool(as_tool(tool_fn), agent=ag, depends_on={"k/1"})
        with ag.scope("c1"):
            ag.read("k/1")
        g = StateGraph(_S)
        g.add_node("tools", ToolNode([w]))
        g.add_edge(START, "tools")
        g.add_edge("tools", END)
        app = g.compile()
        with ag.scope("c1"):  # ToolNode hands a NoEffect to the model (QA qa-new14 S2)
            out = app.invoke({"messages": [AIMessage("", tool_calls=[
                {"name": w.name, "args": {"x": 1}, "id": "c1"}])]},
                {"configurable": {"thread_id": "c1"}})
        [told] = [m for m in out["messages"] if m.type == "tool"]
        assert told.status == "error" and len(str(told.content)) <= 2100
    p = tmp_path / "run.jsonl"
    rec.write(p)
    lines = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return [x["planfence"]["decision"] for x in lines
            if "decision" in x.get("planfence", {})]


def test_a_no_effect_whose_str_raises_is_recorded_as_no_effect(tmp_path: Path) -> None:
    def ship(x: int) -> str:
        """Ship."""
        raise _BadStr("z")

    (d,) = _run(ship, tmp_path)
    assert d["outcome"] == "authorized"
    assert d["error"] == "_BadStr: <its str() raised>"
    assert d.get("may_have_run") is not True  # NoEffect: failed, no effect


def test_a_huge_no_effect_message_is_recorded_cut(tmp_path: Path) -> None:
    def ship(x: int) -> str:
        """Ship."""
        raise NoEffect("x" * (1 << 20))

    (d,) = _run(ship, tmp_path)
    assert len(d["error"]) < MAX_ERROR_CHARS + 100
