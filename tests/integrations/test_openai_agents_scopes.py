"""One workspace agent serving two Agents SDK conversations (issue 28, QA: shared ``desk``).

A module-level ``desk = ws.agent("desk")`` serves several ``Runner.run`` conversations.
A call derives only from the reads of its own run (the SDK run's trace), so another
conversation's fresh read never authorizes this one's stale plan. Real ``Agent`` /
``Runner`` with a scripted ``Model`` (no network).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.testing import assistant_message, function_call

from icore.integrations.openai_agents import fenced_function_tool
from icore.workspace import Agent as TeamAgent
from icore.workspace import Workspace

ARGS = {"flight": "LH100", "price": 200}
Step = list[Any] | Callable[[], Awaitable[list[Any]]]


class _Model(Model):
    """Each model call returns the next step (a list of items, or awaits one)."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = iter(steps)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        step = next(self.steps)
        out = step if isinstance(step, list) else await step()
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _world() -> tuple[Workspace, TeamAgent, list[Any], list[Any]]:
    """The fare world: ``fare/LH100`` at 200, the module-level ``desk``, its two tools."""
    ws = Workspace({"fare/*": "airline"})
    ws.put("fare/LH100", {"price": 200}, by="airline")
    desk = ws.agent("desk")
    ran: list[Any] = []

    @function_tool
    def get_fare(flight: str) -> dict[str, Any]:
        """The fare of a flight."""
        return desk.read(f"fare/{flight}")  # type: ignore[return-value]

    def book(flight: str, price: float) -> str:
        """Book a flight at a price."""
        ran.append((flight, price))
        return f"booked {flight} at {price}"

    safe = fenced_function_tool(book, agent=desk,
                                depends_on=lambda a: {f"fare/{a['flight']}"})
    return ws, desk, ran, [get_fare, safe]


def _outputs(*results: Any) -> dict[str, str]:
    return {i.raw_item["call_id"]: str(i.output) for r in results for i in r.new_items
            if i.type == "tool_call_output_item"}


def _read(cid: str) -> list[Any]:
    return [function_call("get_fare", {"flight": "LH100"}, call_id=cid)]


def _sequential(y_reads: bool, config: Callable[[str], RunConfig | None]) -> tuple[
        dict[str, str], list[Any]]:
    """X reads 200; the fare becomes 999; Y (maybe) reads 999 via the same desk; X books."""
    ws, _desk, ran, tools = _world()
    x = Agent(name="desk", tools=tools, model=_Model([
        _read("x1"), [assistant_message("LH100 costs 200. Book it?")],
        [function_call("book", ARGS, call_id="x2")], [assistant_message("booked")]]))
    y = Agent(name="desk", tools=tools, model=_Model([
        _read("y1"), [assistant_message("999")]]))

    async def main() -> dict[str, str]:
        r1 = await Runner.run(x, "Price of LH100?", run_config=config("X"))
        ws.put("fare/LH100", {"price": 999}, by="airline")
        outs = {}
        if y_reads:
            outs = _outputs(await Runner.run(y, "Price of LH100?", run_config=config("Y")))
        r2 = await Runner.run(x, [*r1.to_input_list(), {"role": "user", "content": "yes"}],
                              run_config=config("X"))
        return {**outs, **_outputs(r1, r2)}

    return asyncio.run(main()), ran


@pytest.mark.parametrize("y_reads", [True, False])
def test_sequential_conversations_another_runs_read_never_authorizes(y_reads: bool) -> None:
    """The QA case: Y's fresh read through the shared desk does not authorize X's book
    at the old price; X's continuing run is refused (nothing ran), with or without Y."""
    outs, ran = _sequential(y_reads, lambda who: None)
    assert ran == [] and "PlanFence blocked book" in outs["x2"]
    assert "not_read" in outs["x2"] and '"price": 999' in outs["x2"]
    if y_reads:
        assert outs["y1"] == "{'price': 999}"


@pytest.mark.parametrize("y_reads", [True, False])
def test_one_conversation_over_runs_by_group_id(y_reads: bool) -> None:
    """Runs given the SDK's conversation id (``RunConfig(group_id=)``) share their reads:
    X's second run derives from X's read, so the changed fare blocks it ``stale``; Y's
    read (its own group) never counts for X."""
    outs, ran = _sequential(y_reads, lambda who: RunConfig(group_id=f"chat-{who}"))
    assert ran == [] and "(stale)" in outs["x2"] and '"price": 999' in outs["x2"]


def test_one_conversation_over_runs_unchanged_fare_books() -> None:
    """The single-conversation flow with ``group_id``: read in run 1, book in run 2."""
    _ws, _desk, ran, tools = _world()
    x = Agent(name="desk", tools=tools, model=_Model([
        _read("x1"), [assistant_message("Book it?")],
        [function_call("book", ARGS, call_id="x2")], [assistant_message("booked")]]))

    async def main() -> dict[str, str]:
        cfg = RunConfig(group_id="chat-1")
        r1 = await Runner.run(x, "Price?", run_config=cfg)
        r2 = await Runner.run(x, [*r1.to_input_list(), {"role": "user", "content": "yes"}],
                              run_config=cfg)
        return _outputs(r2)

    assert asyncio.run(main())["x2"] == "booked LH100 at 200.0" and ran == [("LH100", 200)]


def _concurrent(shared: bool, tracing_disabled: bool) -> tuple[dict[str, str], list[Any]]:
    """Runs A and B at once (``asyncio.gather``): A reads 200; the fare becomes 999 and
    B reads it; then A books at 200."""
    ws, _desk, ran, tools = _world()
    if not shared:
        other = ws.agent("desk-b")

        @function_tool
        def get_fare(flight: str) -> dict[str, Any]:
            """The fare of a flight."""
            return other.read(f"fare/{flight}")  # type: ignore[return-value]

        tools_b = [get_fare, tools[1]]
    else:
        tools_b = tools
    a_read, b_read = asyncio.Event(), asyncio.Event()

    async def a2() -> list[Any]:
        a_read.set()
        await b_read.wait()
        return [function_call("book", ARGS, call_id="a2")]

    async def b1() -> list[Any]:
        await a_read.wait()
        ws.put("fare/LH100", {"price": 999}, by="airline")
        return _read("b1")

    async def b2() -> list[Any]:
        b_read.set()
        return [assistant_message("B done")]

    a = Agent(name="A", tools=tools, model=_Model([_read("a1"), a2,
                                                   [assistant_message("A done")]]))
    b = Agent(name="B", tools=tools_b, model=_Model([b1, b2]))
    cfg = RunConfig(tracing_disabled=tracing_disabled)

    async def both() -> dict[str, str]:
        ra, rb = await asyncio.gather(Runner.run(a, "a", run_config=cfg),
                                      Runner.run(b, "b", run_config=cfg))
        return _outputs(ra, rb)

    return asyncio.run(both()), ran


@pytest.mark.parametrize("tracing_disabled", [False, True])
@pytest.mark.parametrize("shared", [True, False])
def test_concurrent_runs_sharing_one_agent_are_judged_by_their_own_reads(
        shared: bool, tracing_disabled: bool) -> None:
    """``asyncio.gather`` of two runs through one desk: A's book at 200 is refused stale
    (A's own read was 200), exactly as with two separate agents; also without tracing."""
    outs, ran = _concurrent(shared, tracing_disabled)
    assert outs["a1"] == "{'price': 200}" and outs["b1"] == "{'price': 999}"
    assert ran == [] and "(stale)" in outs["a2"] and '"price": 999' in outs["a2"]


def test_single_run_reads_then_books_unchanged() -> None:
    """One conversation in one run: read, book, runs; a change between is stale, then the
    model's call from the fresh value is the one replan and runs."""
    ws, _desk, ran, tools = _world()

    async def changed() -> list[Any]:
        ws.put("fare/LH100", {"price": 250}, by="airline")
        return [function_call("book", ARGS, call_id="c2")]

    agent = Agent(name="desk", tools=tools, model=_Model([
        _read("c1"), [function_call("book", ARGS, call_id="c0")], changed,
        [function_call("book", {"flight": "LH100", "price": 250}, call_id="c3")],
        [assistant_message("done")]]))
    outs = _outputs(asyncio.run(Runner.run(agent, "book")))
    assert outs["c0"] == "booked LH100 at 200.0" and "(stale)" in outs["c2"]
    assert outs["c3"] == "booked LH100 at 250.0" and ran == [("LH100", 200), ("LH100", 250)]


def test_sdk_approval_resume_keeps_the_runs_reads() -> None:
    """``needs_approval``: the read is made in the run, the human approves, the run
    resumes from its state: the approved call derives from that read and runs."""
    _ws, _desk, ran, tools = _world()
    get_fare, _safe = tools
    ws2 = _ws
    desk = ws2.agent("desk")

    def book(flight: str, price: float) -> str:
        """Book a flight at a price."""
        ran.append((flight, price))
        return "booked"

    asked = fenced_function_tool(function_tool(book, needs_approval=True), agent=desk,
                                 depends_on=lambda a: {f"fare/{a['flight']}"})
    agent = Agent(name="desk", tools=[get_fare, asked], model=_Model([
        _read("c1"), [function_call("book", ARGS, call_id="c2")],
        [assistant_message("done")]]))

    async def drive() -> dict[str, str]:
        result = await Runner.run(agent, "book")
        first = _outputs(result)
        while result.interruptions:
            item = result.interruptions[0]
            assert json.loads(item.raw_item.arguments) == ARGS
            state = result.to_state()
            state.approve(item)
            result = await Runner.run(agent, state)
        return {**first, **_outputs(result)}

    outs = asyncio.run(drive())
    assert outs["c2"] == "booked" and ran == [("LH100", 200)]


def test_explicit_scope_wins_over_the_run() -> None:
    """``with desk.scope(id):`` around two runs makes them one conversation: a read in
    the first run authorizes the second run's call; another scope's read never does."""
    ws, desk, ran, tools = _world()

    def agent(steps: list[Step]) -> Agent[Any]:
        return Agent(name="desk", tools=tools, model=_Model(steps))

    async def main() -> dict[str, str]:
        with desk.scope("chat-x"):
            r1 = await Runner.run(agent([_read("x1"), [assistant_message("ok")]]), "p")
        ws.put("fare/LH100", {"price": 999}, by="airline")
        with desk.scope("chat-y"):
            ry = await Runner.run(agent([_read("y1"), [assistant_message("ok")]]), "p")
        with desk.scope("chat-x"):
            r2 = await Runner.run(agent([[function_call("book", ARGS, call_id="x2")],
                                         [assistant_message("done")]]), "yes")
        return _outputs(r1, ry, r2)

    outs = asyncio.run(main())
    assert ran == [] and "(stale)" in outs["x2"]
