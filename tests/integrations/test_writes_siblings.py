"""``writes=``: sibling calls that consume one fact run one after the other (QA qa-new12 S2).

Two calls of one model message run at once and were both validated from the same version
of ``slot/dr-lee``; a read-modify-write tool then booked one slot twice, and the audit
said both were valid. A fenced tool that declares the keys its effect writes holds them
from its gate check to its end; a sibling whose D(a) overlaps waits, then its own gate
check sees the new head and refuses it (``stale``). Real LangGraph and Agents SDK runs,
plus the guard itself with threads and tasks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as as_tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from icore.errors import IntegrationError
from icore.integrations import FenceGuard, RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

SLOT = "slot/dr-lee"

pytestmark = pytest.mark.timeout(60)


def _clinic() -> tuple[Workspace, Any, list[str]]:
    ws = Workspace({"slot/*": "clinic"})
    ws.put(SLOT, {"free": ["09:00", "10:00"]}, by="clinic")
    desk = ws.agent("desk")
    desk.read(SLOT)
    return ws, desk, []


def _take(ws: Workspace, booked: list[str], who: str, time: str) -> str:
    ws.update(SLOT, lambda s: {"free": [t for t in s["free"] if t != time]}, by="clinic")
    booked.append(f"{who} {time}")
    return f"booked {who} {time}"


def test_async_siblings_writing_one_fact_run_one_after_the_other() -> None:
    ws, desk, booked = _clinic()
    guard = FenceGuard(agent=desk, depends_on={SLOT}, writes={SLOT})

    async def book(who: str, time: str) -> str:
        await asyncio.sleep(0.02)  # the sibling is scheduled meanwhile
        return _take(ws, booked, who, time)

    async def main() -> list[Any]:
        return list(await asyncio.gather(
            guard.arun("book", book, {"who": "p1", "time": "09:00"}, turn="m1"),
            guard.arun("book", book, {"who": "p2", "time": "09:00"}, turn="m1")))

    got = asyncio.run(main())
    assert booked == ["p1 09:00"]
    assert [g.executed for g in got] == [True, False]
    assert got[1].reason == "stale" and "10:00" in got[1].message
    assert ws.value(SLOT) == {"free": ["10:00"]}


def test_without_writes_both_siblings_pass_from_one_version() -> None:
    """The defect this option closes, pinned: no ``writes=``, both are authorized."""
    ws, desk, booked = _clinic()
    guard = FenceGuard(agent=desk, depends_on={SLOT})
    both = asyncio.Event()
    entered = 0

    async def book(who: str, time: str) -> str:
        nonlocal entered
        entered += 1
        if entered == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        return _take(ws, booked, who, time)

    async def main() -> None:
        await asyncio.gather(guard.arun("book", book, {"who": "p1", "time": "09:00"}),
                             guard.arun("book", book, {"who": "p2", "time": "09:00"}))

    asyncio.run(main())
    assert sorted(booked) == ["p1 09:00", "p2 09:00"]


def test_threads_wait_for_a_sibling_that_writes() -> None:
    ws, desk, booked = _clinic()
    guard = FenceGuard(agent=desk, depends_on=lambda a: {SLOT},
                       writes=lambda a: {SLOT})
    inside = threading.Event()
    release = threading.Event()
    results: dict[str, Any] = {}

    def book(who: str, time: str) -> str:
        if who == "p1":
            inside.set()
            assert release.wait(10)
        return _take(ws, booked, who, time)

    def run(who: str) -> None:
        results[who] = guard.run("book", book, {"who": who, "time": "09:00"})

    t1 = threading.Thread(target=run, args=("p1",))
    t1.start()
    assert inside.wait(10)
    t2 = threading.Thread(target=run, args=("p2",))
    t2.start()
    t2.join(0.2)
    assert t2.is_alive()  # waiting for p1's claim, not yet validated
    release.set()
    t1.join(10)
    t2.join(10)
    assert booked == ["p1 09:00"]
    assert results["p1"].executed and not results["p2"].executed
    assert results["p2"].reason == "stale"


def test_disjoint_keys_run_at_the_same_time() -> None:
    ws = Workspace({"slot/*": "clinic"})
    for k in ("slot/a", "slot/b"):
        ws.put(k, {"free": ["09:00"]}, by="clinic")
    desk = ws.agent("desk")
    desk.read("slot/a")
    desk.read("slot/b")
    guard = FenceGuard(agent=desk, depends_on=lambda a: {a["key"]},
                       writes=lambda a: {a["key"]})
    both = asyncio.Event()
    entered = 0

    async def hold(key: str) -> str:
        nonlocal entered
        entered += 1
        if entered == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)  # only if both are in flight at once
        return key

    async def main() -> list[Any]:
        return list(await asyncio.gather(guard.arun("hold", hold, {"key": "slot/a"}),
                                         guard.arun("hold", hold, {"key": "slot/b"})))

    assert [g.executed for g in asyncio.run(main())] == [True, True]


def test_a_call_inside_a_claiming_call_never_waits_for_its_own_claim() -> None:
    ws, desk, booked = _clinic()
    inner = FenceGuard(agent=desk, depends_on={SLOT})
    outer = FenceGuard(agent=desk, depends_on={SLOT}, writes={SLOT})

    def note(text: str) -> str:
        return text

    def book(who: str) -> str:
        got = inner.run("note", note, {"text": who})
        assert got.executed
        return _take(ws, booked, who, "09:00")

    assert outer.run("book", book, {"who": "p1"}).executed
    assert booked == ["p1 09:00"]


def test_a_sync_call_on_the_loop_that_holds_the_claim_raises() -> None:
    _ws, desk, _booked = _clinic()
    guard = FenceGuard(agent=desk, depends_on={SLOT}, writes={SLOT})
    sync_guard = FenceGuard(agent=desk, depends_on={SLOT})
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow() -> str:
        started.set()
        await release.wait()
        return "ok"

    async def main() -> None:
        task = asyncio.create_task(guard.arun("slow", slow, {}))
        await started.wait()
        with pytest.raises(IntegrationError, match="cannot wait for it here"):
            sync_guard.run("peek", lambda: "x", {})
        release.set()
        assert (await task).executed

    asyncio.run(main())


def test_a_waiter_cancelled_while_it_waits_claims_nothing() -> None:
    ws, desk, booked = _clinic()
    guard = FenceGuard(agent=desk, depends_on={SLOT}, writes={SLOT})
    release = asyncio.Event()
    started = asyncio.Event()

    async def first(who: str) -> str:
        started.set()
        await release.wait()
        return _take(ws, booked, who, "09:00")

    async def main() -> None:
        one = asyncio.create_task(guard.arun("book", first, {"who": "p1"}))
        await started.wait()
        two = asyncio.create_task(guard.arun("book", first, {"who": "p2"}))
        await asyncio.sleep(0.05)
        two.cancel()
        with pytest.raises(asyncio.CancelledError):
            await two
        release.set()
        assert (await one).executed
        desk.read(SLOT)  # a fresh plan: the next call is not held up by anything
        again = await asyncio.wait_for(guard.arun("book", first, {"who": "p3"}), 5)
        assert again.executed

    asyncio.run(main())
    assert booked == ["p1 09:00", "p3 09:00"]


@pytest.mark.parametrize("bad", ["slot/dr-lee", {"slot/dr-lee": 1}, [1], 3])
def test_writes_must_be_keys_or_a_function(bad: Any) -> None:
    _ws, desk, _booked = _clinic()
    with pytest.raises(IntegrationError, match="writes"):
        FenceGuard(agent=desk, depends_on={SLOT}, writes=bad)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["slot/a", "slot/b", "slot/c"]), min_size=2, max_size=8))
def test_no_sibling_acts_on_a_version_another_already_consumed(keys: list[str]) -> None:
    """Property: any set of concurrent siblings consuming keys - each executed call's
    body starts on exactly the head its gate check authorized (never a stale one)."""
    from icore.workspace import running_call

    ws = Workspace({"slot/*": "clinic"})
    for k in set(keys):
        ws.put(k, {"n": 100}, by="clinic")
    desk = ws.agent("desk")
    for k in set(keys):
        desk.read(k)
    guard = FenceGuard(agent=desk, depends_on=lambda a: {a["key"]},
                       writes=lambda a: {a["key"]})
    stale_bodies: list[str] = []

    async def take(key: str) -> str:
        call = running_call()
        assert call is not None
        if call.basis[key].id != ws.head(key).id:  # type: ignore[union-attr]
            stale_bodies.append(key)
        await asyncio.sleep(0)
        ws.update(key, lambda s: {"n": s["n"] - 1}, by="clinic")
        return "taken"

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(guard.arun("take", take, {"key": k}, turn="m")
                                           for k in keys)))

    got = asyncio.run(main())
    assert not stale_bodies
    assert sum(g.executed for g in got) == len(set(keys))  # one per key, the rest stale


# -- real frameworks ---------------------------------------------------------------------

class S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


class Scripted(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def test_langgraph_ainvoke_two_bookings_in_one_message(tmp_path: Path) -> None:
    ws, desk, booked = _clinic()

    def get_slots() -> dict[str, Any]:
        """The free slots."""
        return desk.read(SLOT)  # type: ignore[return-value]

    async def book(patient: str, time: str) -> str:
        """Book a slot (takes it)."""
        await asyncio.sleep(0.02)
        return _take(ws, booked, patient, time)

    safe = fenced_tool(book, agent=desk, depends_on={SLOT}, writes={SLOT})

    def turns() -> Iterator[AIMessage]:
        yield AIMessage("", tool_calls=[{"name": "get_slots", "args": {}, "id": "r1"}])
        yield AIMessage("", tool_calls=[
            {"name": "book", "args": {"patient": "p1", "time": "09:00"}, "id": "b1"},
            {"name": "book", "args": {"patient": "p2", "time": "09:00"}, "id": "b2"}])
        yield AIMessage("done")

    tools = [as_tool(get_slots), safe]
    llm = Scripted(messages=turns())
    g = StateGraph(S)
    g.add_node("agent", lambda s: {"messages": [llm.invoke(s["messages"])]})
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    rec = RunRecorder("lg-writes", question="book twice")
    out = asyncio.run(g.compile().ainvoke({"messages": [HumanMessage("book")]},
                                          {"callbacks": [RecordingHandler(rec)]}))
    assert booked == ["p1 09:00"]
    msgs = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "book"]
    assert [m.status for m in msgs] == ["success", "error"] and "stale" in str(msgs[1].content)
    rec.finish("desk", "done")
    _audit_says(rec.write(tmp_path / "lg.jsonl"), "2 (1 valid, 1 blocked)")


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_agents_sdk_two_bookings_in_one_turn(tmp_path: Path, kind: str) -> None:
    from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
    from agents.testing import assistant_message, function_call

    from icore.integrations.openai_agents import fenced_function_tool, recording

    class SdkModel(Model):
        def __init__(self, steps: list[list[Any]]) -> None:
            self.steps = iter(steps)

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=next(self.steps), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    ws, desk, booked = _clinic()

    @function_tool
    def get_slots() -> dict[str, Any]:
        """The free slots."""
        return desk.read(SLOT)  # type: ignore[return-value]

    if kind == "async":
        async def book(patient: str, time: str) -> str:
            """Book a slot (takes it)."""
            await asyncio.sleep(0.02)
            return _take(ws, booked, patient, time)
    else:
        def book(patient: str, time: str) -> str:  # type: ignore[misc]
            """Book a slot (takes it)."""
            return _take(ws, booked, patient, time)

    safe = fenced_function_tool(book, agent=desk, depends_on={SLOT}, writes={SLOT})
    steps = [[function_call("get_slots", {}, call_id="r1")],
             [function_call("book", {"patient": "p1", "time": "09:00"}, call_id="b1"),
              function_call("book", {"patient": "p2", "time": "09:00"}, call_id="b2")],
             [assistant_message("done")]]
    rec = RunRecorder(f"sdk-writes-{kind}", question="book twice")

    async def main() -> Any:
        with recording(rec, exclusive=True):
            return await Runner.run(Agent(name="desk", tools=[get_slots, safe],
                                          model=SdkModel(steps)), "book")

    result = asyncio.run(main())
    assert booked == ["p1 09:00"]
    outs = [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]
    assert any("PlanFence blocked book (stale)" in o for o in outs), outs
    rec.finish("desk", str(result.final_output))
    _audit_says(rec.write(tmp_path / f"sdk-{kind}.jsonl"), "2 (1 valid, 1 blocked)")


def _audit_says(trace: Path, expected: str) -> None:
    from typer.testing import CliRunner

    from icore.cli import app

    res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--fail-on",
                                   "invalid,unknown"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert expected in res.output, res.output
