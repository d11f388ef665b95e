"""A broken ``replan=`` in each framework: refused when wrapped, fail closed and loud at
the call (#28 QA: LangGraph D4, AG2 7, OpenAI Agents 8; CrewAI: test_crewai_replan.py).

The one rule (docs/integrations.md, "A broken replanner"): a ``replan=`` that is not
callable is an ``IntegrationError`` when the tool is wrapped; a replanner that raises or
returns no usable arguments never lets the call run, hands the model nothing, logs at
ERROR on ``icore.integrations`` and raises :class:`~icore.workspace.ReplanFailed`
(chained to the cause) from the fenced tool. How that reaches the app is each
framework's own exception path: LangGraph's ``invoke`` raises it; the Agents SDK's
``Runner.run`` raises it (an ``AgentsException`` copy of it, not the SDK's ``UserError``);
AG2 hands every tool exception to the model as a tool error event, which carries it;
CrewAI's ``kickoff()`` raises ``CrewSetupError`` chained to it.
"""

import asyncio
import json
import logging
from typing import Annotated, Any, TypedDict

import pytest

from icore.errors import IntegrationError
from icore.workspace import ReplanFailed, Workspace

from .conftest import load_example


class _Shop:
    """Order 42 (Berlin, owned by sales), the shipper's handle, what shipped."""

    def __init__(self) -> None:
        self.ws = Workspace({"order/*": "sales"})
        self.ws.put("order/42", {"city": "Berlin"}, by="sales")
        self.shipper = self.ws.agent("shipper")
        self.shipped: list[str] = []

    def ship(self) -> Any:
        """A plain tool function that records what shipped."""
        shipped = self.shipped

        def ship(order_id: str, city: str) -> str:
            """Ship an order."""
            shipped.append(city)
            return "shipped"

        return ship

    def wrap(self, fence_it: Any, replan: Any, bad: Any) -> Any:
        """``fence_it(ship, ...)``: refused with ``bad`` as replan, else fenced; the
        shipper read Berlin, then sales changed the order to Munich."""
        with pytest.raises(IntegrationError, match="replan= must be a function"):
            fence_it(self.ship(), agent=self.shipper, depends_on={"order/42"}, replan=bad)
        safe = fence_it(self.ship(), agent=self.shipper, depends_on={"order/42"},
                        replan=replan)
        self.shipper.read("order/42")
        self.ws.put("order/42", {"city": "Munich"}, by="sales")
        return safe


def _boom(stale: Any) -> Any:
    raise ValueError("replanner bug")


BROKEN = [(_boom, "raised"), (lambda st: None, "no arguments"),
          (lambda st: {"cty": "Munich"}, "do not fit")]


def _replan_failed(exc: BaseException | None) -> ReplanFailed | None:
    """The ReplanFailed in ``exc``'s chain (the exception itself when the seam lets it
    out as it is)."""
    while exc is not None:
        if isinstance(exc, ReplanFailed):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _cause(exc: BaseException) -> BaseException:
    """The innermost ``__cause__`` of ``exc``."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


# --- LangGraph ---------------------------------------------------------------------------

@pytest.mark.parametrize(("replan", "words"), BROKEN)
def test_langgraph_broken_replanner_escapes_invoke(replan: Any, words: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode, tools_condition

    from icore.integrations.langgraph import fenced_tool

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kw: Any) -> "Fake":
            return self

    class S(TypedDict):
        messages: Annotated[list[Any], add_messages]

    shop = _Shop()
    safe = shop.wrap(lambda fn, **kw: fenced_tool(tool(fn), **kw), replan, "x")

    @tool
    def get_order(order_id: str) -> Any:
        """Look an order up."""
        return shop.shipper.read(f"order/{order_id}")

    def turns() -> Any:
        yield AIMessage("", tool_calls=[{"name": "get_order", "args": {"order_id": "42"},
                                         "id": "r1"}])  # reads Munich: then stale below
        shop.ws.put("order/42", {"city": "Hamburg"}, by="sales")
        yield AIMessage("", tool_calls=[{"name": "ship", "id": "s1",
                                         "args": {"order_id": "42", "city": "Berlin"}}])
        yield AIMessage("done")

    llm = Fake(messages=turns())
    g = StateGraph(S)
    g.add_node("agent", lambda s: {"messages": [llm.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([get_order, safe]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    with caplog.at_level(logging.ERROR, logger="icore.integrations"), \
            pytest.raises(ReplanFailed, match=words) as ei:
        g.compile().invoke({"messages": [HumanMessage("ship 42")]})
    assert shop.shipped == [] and ei.value.fields["action"] == "ship"
    assert (replan is not _boom) or isinstance(ei.value.__cause__, ValueError)
    assert any("ship" in r.getMessage() for r in caplog.records)


# --- OpenAI Agents SDK -------------------------------------------------------------------

@pytest.mark.parametrize(("replan", "words"), BROKEN)
def test_openai_agents_broken_replanner_leaves_runner_run(replan: Any, words: str) -> None:
    pytest.importorskip("agents")
    from agents import Agent, Runner
    from agents.testing import function_call

    from icore.integrations.openai_agents import fenced_function_tool

    shop = _Shop()
    model = load_example("openai_agents_app").ScriptModel(iter([
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c1")],
        [function_call("ship", {"order_id": "42", "city": "Berlin"}, call_id="c2")]]))
    with shop.shipper.scope("conv"):  # the read in wrap() counts in the run's scope
        safe = shop.wrap(fenced_function_tool, replan, "yes")
        agent = Agent(name="shipper", tools=[safe], model=model)
        with pytest.raises(ReplanFailed, match=words) as ei:  # not the SDK's UserError
            asyncio.run(Runner.run(agent, "ship 42"))
    assert shop.shipped == [] and ei.value.call is not None
    if replan is _boom:  # chained, through the SDK's copy, to the replanner's exception
        assert isinstance(_cause(ei.value), ValueError)


# --- AG2 ----------------------------------------------------------------------------------

@pytest.mark.usefixtures("one_chat")
@pytest.mark.parametrize(("replan", "words"), BROKEN)
def test_ag2_broken_replanner_is_a_tool_error_carrying_it(
        replan: Any, words: str, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("ag2")
    from ag2 import Agent
    from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResultsEvent

    from icore.integrations.ag2 import fenced_tool

    shop = _Shop()
    safe = shop.wrap(fenced_tool, replan, 1)
    call = ToolCallEvent("ship", arguments=json.dumps({"order_id": "42", "city": "Berlin"}))
    world = load_example("ag2_app").ScriptedWorld(iter([call, "ok"]))

    async def go() -> list[Any]:
        reply = await Agent("shipper", config=world, tools=[safe]).ask("ship 42")
        return [r for e in await reply.history.get_events()
                if isinstance(e, ToolResultsEvent) for r in e.results
                if isinstance(r, ToolErrorEvent)]

    with caplog.at_level(logging.ERROR, logger="icore.integrations"):
        errors = asyncio.run(go())
    assert shop.shipped == [] and len(errors) == 1
    err = _replan_failed(errors[0].error)
    assert err is not None and words in str(err)
    assert any("ship" in r.getMessage() for r in caplog.records)


def test_fence_mode_replan_checked_when_wrapped_in_every_framework(trip: Any) -> None:
    """The low-level API (``fence=``): ``replan=`` that is not callable is refused when
    the tool is wrapped too, in each installed framework."""
    def book(destination: str) -> str:
        """Book."""
        return destination

    wrappers: list[Any] = []
    for mod, name in (("icore.integrations.langgraph", "fenced_tool"),
                      ("icore.integrations.openai_agents", "fenced_function_tool"),
                      ("icore.integrations.ag2", "fenced_tool")):
        try:
            wrappers.append(getattr(__import__(mod, fromlist=[name]), name))
        except ImportError:
            continue
    assert wrappers
    for wrap in wrappers:
        with pytest.raises(IntegrationError, match="replan= must be a function"):
            wrap(book, fence=trip.fence, depends_on={"req/trip-17"}, replan="yes")
