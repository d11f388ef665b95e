"""Parallel branches of one LangGraph invocation keep their reads apart (#28).

A map-reduce graph: ``Send`` fans out one worker per order, each worker a ReAct agent
(its own scripted model) with ``get_order`` and a fenced ``ship``, all served by one
module-level workspace agent handle. Branch A reads order 42; branch B's model never
read it and ships order 42 anyway: B's call must not be backed by A's read (refused
``not_read``, the value handed to B's model, whose next call is the one that runs).
Reads of a branch still back its own calls, and the parent's reads before the fan-out
back every branch. Real LangGraph, LangChain's fake chat model, real checkpointers
(``InMemorySaver``, icore's ``RecordCheckpointSaver`` over a SQLite file).
"""

from __future__ import annotations

import asyncio
import json
import operator
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordCheckpointSaver, RecordingHandler, fenced_tool
from icore.memory import OwnershipMap, SQLiteStore
from icore.workspace import Workspace

from .conftest import audit_cli
from .test_langgraph_workspace import Scripted

pytestmark = pytest.mark.timeout(60)


class _W(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


class _Top(TypedDict, total=False):
    branches: list[str]
    results: Annotated[list[str], operator.add]
    messages: Annotated[list[AnyMessage], add_messages]


def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])


class _Shop:
    """Orders owned by sales; one shipper handle serves every branch."""

    def __init__(self, approval: bool = False) -> None:
        self.ws = Workspace({"order/*": "sales"})
        self.ws.put("order/42", {"city": "Berlin"})
        self.ws.put("order/7", {"city": "Paris"})
        self.shipper = self.ws.agent("shipper")
        self.shipped: list[tuple[str, int, str]] = []
        self.a_read = threading.Event()
        self.said: dict[str, list[str]] = {}

        @tool
        def get_order(order_id: int) -> dict[str, Any]:
            """Read an order."""
            return self.shipper.read(f"order/{order_id}")  # type: ignore[return-value]

        @tool
        def ship(order_id: int, city: str) -> str:
            """Ship an order to a city."""
            self.shipped.append((self.branch(), order_id, city))
            return f"shipped order {order_id} to {city}"

        self.tools = [get_order, fenced_tool(
            ship, agent=self.shipper, depends_on=lambda a: {f"order/{a['order_id']}"},
            approval=approval)]

    @staticmethod
    def branch() -> str:
        from langgraph.config import get_config
        ns = str(get_config()["configurable"].get("checkpoint_ns", ""))
        return ns.split(":", 1)[0]

    def worker(self, scripts: dict[str, Callable[[], Iterator[AIMessage]]],
               pause: frozenset[str] = frozenset()) -> Any:
        """A ReAct subgraph whose scripted model is picked by the branch's first message;
        a branch in ``pause`` asks a human (``interrupt``) after its first tool result."""
        models: dict[str, Any] = {}
        lock = threading.Lock()

        def agent(state: _W) -> dict[str, Any]:
            who = str(state["messages"][0].content)
            with lock:
                if who not in models:
                    models[who] = Scripted(messages=scripts[who]()).bind_tools(self.tools)
            self.said[who] = [str(m.content) for m in state["messages"]
                              if isinstance(m, ToolMessage)]  # what the model saw
            if who in pause and len(self.said[who]) == 1:
                interrupt(f"{who}: go on?")
            return {"messages": [models[who].invoke(state["messages"])]}

        g = StateGraph(_W)
        g.add_node("agent", agent)
        g.add_node("tools", ToolNode(self.tools))
        g.add_edge(START, "agent")
        g.add_conditional_edges("agent", tools_condition)
        g.add_edge("tools", "agent")
        return g.compile()

    def graph(self, scripts: dict[str, Callable[[], Iterator[AIMessage]]],
              checkpointer: Any = None, before: Any = None,
              pause: frozenset[str] = frozenset()) -> Any:
        """plan (optional parent step) -> Send one worker per branch -> collect."""
        inner = self.worker(scripts, pause)

        def run_worker(state: _W) -> dict[str, Any]:
            out = inner.invoke({"messages": state["messages"]})
            last = out["messages"][-1]
            return {"results": [f"{state['messages'][0].content}: {last.content}"]}

        def plan(state: _Top) -> dict[str, Any]:
            return before(state) if before is not None else {}

        def fan(state: _Top) -> list[Send]:
            return [Send("worker", {"messages": [HumanMessage(b)]})
                    for b in state["branches"]]

        g = StateGraph(_Top)
        g.add_node("plan", plan)
        g.add_node("worker", run_worker)
        g.add_edge(START, "plan")
        g.add_conditional_edges("plan", fan, ["worker"])
        g.add_edge("worker", END)
        return g.compile(checkpointer=checkpointer)

    def a_reads_42(self) -> Iterator[AIMessage]:
        yield _call("get_order", {"order_id": 42}, "a1")
        self.a_read.set()
        yield AIMessage("A done")

    def a_reads_ships_42(self) -> Iterator[AIMessage]:
        yield _call("get_order", {"order_id": 42}, "a1")
        yield _call("ship", {"order_id": 42, "city": "Berlin"}, "a2")
        yield AIMessage("A done")

    @staticmethod
    def b_done() -> Iterator[AIMessage]:
        yield AIMessage("B done")

    def b_ships_42_unread(self) -> Iterator[AIMessage]:
        self.a_read.wait(10)  # A's read of order 42 is in before B's call
        yield _call("ship", {"order_id": 42, "city": "Berlin"}, "b1")
        yield _call("ship", {"order_id": 42, "city": "Berlin"}, "b2")  # after the hand-over
        yield AIMessage("B done")


def _savers(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    return {"none": lambda: None, "memory": InMemorySaver,
            "sqlite": lambda: RecordCheckpointSaver(SQLiteStore(  # get_tuple walks
                tmp_path / "ck.db", OwnershipMap(patterns={"lg/*": "graph"}), "graph"))}


_CONF: Any = {"configurable": {"thread_id": "orders-1"}}


@pytest.mark.parametrize("saver", ["none", "memory", "sqlite"])
def test_a_sibling_branchs_read_never_backs_a_call(saver: str, tmp_path: Path) -> None:
    """B's ship(42) is refused not_read though A read order 42 at the same step; the
    handed value makes B's next call run: one shipment, by B, after the refusal."""
    shop = _Shop()
    app = shop.graph({"A": shop.a_reads_42, "B": shop.b_ships_42_unread},
                     checkpointer=_savers(tmp_path)[saver]())
    app.invoke({"branches": ["A", "B"]}, _CONF if saver != "none" else {})
    b_saw = shop.said["B"]
    assert b_saw[0].startswith("PlanFence blocked ship (not_read)"), b_saw
    assert '"order/42": {"city": "Berlin"}' in b_saw[0]
    assert shop.shipped == [("worker", 42, "Berlin")] and b_saw[1].startswith("shipped")


def test_reads_of_a_branch_back_its_own_calls_and_the_parents_back_all() -> None:
    """A reads 42 then ships it (runs); the parent read order 7 before the fan-out, so
    B ships 7 without reading it (runs); nothing is refused."""
    shop = _Shop()

    def b() -> Iterator[AIMessage]:
        yield _call("ship", {"order_id": 7, "city": "Paris"}, "b1")
        yield AIMessage("B done")

    def before(state: _Top) -> dict[str, Any]:
        shop.shipper.read("order/7")  # the parent's read, before the fan-out
        return {}

    app = shop.graph({"A": shop.a_reads_ships_42, "B": b}, checkpointer=InMemorySaver(),
                     before=before)
    out = app.invoke({"branches": ["A", "B"]}, _CONF)
    assert sorted(out["results"]) == ["A: A done", "B: B done"]
    assert sorted(c for _, _, c in shop.shipped) == ["Berlin", "Paris"]
    assert not any("PlanFence" in s for said in shop.said.values() for s in said)


def test_the_recorder_attributes_each_branchs_refusal_and_replan(tmp_path: Path) -> None:
    """The trace has B's refused call and B's next call under the worker (the agent whose
    model asked for them), and ``icore audit`` counts one valid and one blocked call."""
    shop = _Shop()
    rec = RunRecorder("fanout")
    app = shop.graph({"A": shop.a_reads_42, "B": shop.b_ships_42_unread},
                     checkpointer=InMemorySaver())
    app.invoke({"branches": ["A", "B"]},
               {**_CONF, "callbacks": [RecordingHandler(rec)]})
    lines = [json.loads(x) for x in rec.jsonl().splitlines()]
    ships = [x for x in lines if x.get("kind") == "tool_output" and x.get("tool") == "ship"]
    assert [bool(x.get("blocked")) for x in ships] == [True, False], ships
    assert [x["agent"] for x in ships] == ["worker", "worker"]
    assert len(shop.shipped) == 1
    rec.write(tmp_path / "fanout.jsonl")
    said = audit_cli(tmp_path / "fanout.jsonl", tmp_path / "report")
    assert "protected actions of fanout: 2 (1 valid, 1 blocked)" in said, said


def test_a_branchs_refusal_is_replanned_by_its_own_branch_in_the_trace() -> None:
    """A's ship is stale (order moved to Munich after A read it); B read Munich and
    ships it before A's replan: B's call is B's plan, A's next call is A's replan."""
    shop = _Shop()
    b_read, a_refused, b_shipped = threading.Event(), threading.Event(), threading.Event()

    def a() -> Iterator[AIMessage]:
        yield _call("get_order", {"order_id": 42}, "a1")
        shop.a_read.set()
        b_read.wait(10)
        yield _call("ship", {"order_id": 42, "city": "Berlin"}, "a2")  # stale
        a_refused.set()
        b_shipped.wait(10)
        yield _call("ship", {"order_id": 42, "city": "Munich"}, "a3")  # A's replan
        yield AIMessage("A done")

    def b() -> Iterator[AIMessage]:
        shop.a_read.wait(10)
        shop.ws.update("order/42", lambda o: {**o, "city": "Munich"})  # type: ignore[dict-item]
        yield _call("get_order", {"order_id": 42}, "b1")
        b_read.set()
        a_refused.wait(10)
        yield _call("ship", {"order_id": 42, "city": "Munich"}, "b2")
        b_shipped.set()
        yield AIMessage("B done")

    rec = RunRecorder("fanout-stale")
    app = shop.graph({"A": a, "B": b}, checkpointer=InMemorySaver())
    app.invoke({"branches": ["A", "B"]}, {**_CONF, "callbacks": [RecordingHandler(rec)]})
    assert shop.said["A"][1].startswith("PlanFence blocked ship (stale)")
    assert [c for _, _, c in shop.shipped] == ["Munich", "Munich"]
    lines = [json.loads(x) for x in rec.jsonl().splitlines()]
    ships = [(x.get("blocked", False), x.get("replanned", False)) for x in lines
             if x.get("kind") == "tool_output" and x.get("tool") == "ship"]
    assert ships == [(True, False), (False, False), (False, True)], ships
    replans = [x for x in lines if x.get("kind") == "plan" and x.get("replan")]
    assert len(replans) == 1 and replans[0]["agent"] == "worker"


def test_a_batch_of_graphs_inside_one_node_keeps_each_runs_reads() -> None:
    """One node runs the worker graph for A and B with ``batch``: the two runs are
    parallel branches of one task (namespaces ``node:<id>`` and ``node:<id>|1``)."""
    shop = _Shop()
    inner = shop.worker({"A": shop.a_reads_42, "B": shop.b_ships_42_unread})

    def both(state: _Top) -> dict[str, Any]:
        outs = inner.batch([{"messages": [HumanMessage(b)]} for b in state["branches"]])
        return {"results": [str(o["messages"][-1].content) for o in outs]}

    g = StateGraph(_Top)
    g.add_node("both", both)
    g.add_edge(START, "both")
    g.add_edge("both", END)
    out = g.compile(checkpointer=InMemorySaver()).invoke({"branches": ["A", "B"]}, _CONF)
    assert out["results"] == ["A done", "B done"]
    assert shop.said["B"][0].startswith("PlanFence blocked ship (not_read)")
    assert len(shop.shipped) == 1


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_a_branchs_read_backs_its_call_after_an_approval_resume(saver: str,
                                                                tmp_path: Path) -> None:
    """A reads 42 and ships it with approval=True: the run pauses inside A's worker
    graph; the resume (another invocation) re-runs the step, and A's read, saved in
    A's graph before the pause, still backs the call: one question, one shipment."""
    shop = _Shop(approval=True)

    app = shop.graph({"A": shop.a_reads_ships_42, "B": shop.b_done},
                     checkpointer=_savers(tmp_path)[saver]())
    first = app.invoke({"branches": ["A", "B"]}, _CONF)
    asked = first["__interrupt__"]
    assert len(asked) == 1 and "planfence.approval" in asked[0].value
    out = app.invoke(Command(resume=True), _CONF)
    assert sorted(out["results"]) == ["A: A done", "B: B done"]
    assert shop.shipped == [("worker", 42, "Berlin")]
    assert not any("PlanFence" in s for s in shop.said["A"])


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_a_branchs_read_backs_a_call_first_made_after_a_resume(saver: str,
                                                               tmp_path: Path) -> None:
    """A reads 42, then its graph pauses (a human is asked) before its model plans the
    shipment; the resumed invocation makes the call: A's read, in A's graph line before
    the pause, backs it (another invocation's read, placed on A's saved line)."""
    shop = _Shop()

    app = shop.graph({"A": shop.a_reads_ships_42, "B": shop.b_done},
                     checkpointer=_savers(tmp_path)[saver](), pause=frozenset({"A"}))
    assert "__interrupt__" in app.invoke({"branches": ["A", "B"]}, _CONF)
    out = app.invoke(Command(resume="yes"), _CONF)
    assert sorted(out["results"]) == ["A: A done", "B: B done"]
    assert shop.shipped == [("worker", 42, "Berlin")], shop.said


class _Review(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    who: str


def _paused(shop: _Shop, review: Callable[[_Review], dict[str, Any]],
            scripts: dict[str, Iterator[AIMessage]], said: list[str] | None = None,
            checkpointer: Any = None, config: Any = None) -> Any:
    """review (asks a human) -> agent (scripted by the answer) <-> tools; run to the
    question on thread orders-1 (``checkpointer``: default ``InMemorySaver``; ``config``:
    more of the first invocation's config)."""
    def agent(state: _Review) -> dict[str, Any]:
        if said is not None:
            said.extend(str(m.content) for m in state["messages"][-1:]
                        if isinstance(m, ToolMessage))
        return {"messages": [next(scripts[state["who"]])]}

    g = StateGraph(_Review)
    g.add_node("review", review)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(shop.tools))
    g.add_edge(START, "review")
    g.add_edge("review", "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    app = g.compile(checkpointer=checkpointer if checkpointer is not None
                    else InMemorySaver())
    assert "__interrupt__" in app.invoke({"messages": [HumanMessage("go")]},
                                         {**_CONF, **(config or {})})
    return app


def _resume_both(app: Any, r3_done: threading.Event,
                 config: Callable[[], dict[str, Any]] = dict) -> dict[str, Any]:
    """R2 (answer "read") and R3 (answer "skip") resume the paused thread at once, each
    in a thread (``config()``: more of each one's config); ``r3_done`` is set when R3
    returns. Each one's output, or what it raised."""
    got: dict[str, Any] = {}

    def resume(name: str, answer: str) -> None:
        try:
            got[name] = app.invoke(Command(resume=answer), {**_CONF, **config()})
        except Exception as exc:
            got[name] = exc
        finally:
            if name == "R3":
                r3_done.set()

    ts = [threading.Thread(target=resume, args=("R2", "read")),
          threading.Thread(target=resume, args=("R3", "skip"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return got


def test_two_concurrent_resumes_of_one_checkpoint_are_not_shared() -> None:
    """Two ``Command(resume=...)`` of one paused thread at once: R2 (answer "read")
    reads order 42 in the resumed step; R3 (answer "skip") does not, and its model ships
    order 42. R2's read must not back R3's call: refused with IntegrationError naming
    the thread, nothing shipped."""
    shop = _Shop()
    r3_in, r2_done = threading.Event(), threading.Event()
    scripts = {"read": iter([AIMessage("R2 done")]),
               "skip": iter([_call("ship", {"order_id": 42, "city": "Berlin"}, "r3"),
                             AIMessage("R3 done")])}

    def review(state: _Review) -> dict[str, Any]:
        ans = str(interrupt("ship order 42?"))
        if ans == "read":
            shop.shipper.read("order/42")
        else:
            r3_in.set()
            r2_done.wait(10)  # R3 loaded the paused checkpoint before R2 moved on
        return {"who": ans}

    app = _paused(shop, review, scripts)
    got: dict[str, Any] = {}

    def r3() -> None:
        try:
            got["R3"] = app.invoke(Command(resume="skip"), _CONF)
        except Exception as exc:
            got["R3"] = exc

    t = threading.Thread(target=r3)
    t.start()
    assert r3_in.wait(10)
    got["R2"] = app.invoke(Command(resume="read"), _CONF)
    r2_done.set()
    t.join(30)
    assert got["R2"]["messages"][-1].content == "R2 done"
    assert isinstance(got["R3"], IntegrationError), got["R3"]
    assert "orders-1" in str(got["R3"]) and "resume" in str(got["R3"])
    assert shop.shipped == []


def _race(shop: _Shop, r3_reads: str | None, checkpointer: Any = None,
          config: Callable[[], dict[str, Any]] = dict) -> list[str]:
    """R2 and R3 resume one paused thread at once: R2 reads order 42 and stays in the
    resumed step until R3 is done; R3 reads ``r3_reads`` there (None: nothing) and its
    model ships order 42 twice. What R3's model was told, in order."""
    r2_read, r3_done = threading.Event(), threading.Event()
    said: list[str] = []
    scripts = {"read": iter([AIMessage("R2 done")]),
               "skip": iter([_call("ship", {"order_id": 42, "city": "Berlin"}, "r3a"),
                             _call("ship", {"order_id": 42, "city": "Berlin"}, "r3b"),
                             AIMessage("R3 done")])}

    def review(state: _Review) -> dict[str, Any]:
        ans = str(interrupt("ship order 42?"))
        if ans == "read":
            shop.shipper.read("order/42")
            r2_read.set()
            r3_done.wait(10)  # R2 stays in the resumed step while R3 goes on
        else:
            if r3_reads is not None:
                shop.shipper.read(r3_reads)
            r2_read.wait(10)
        return {"who": ans}

    app = _paused(shop, review, scripts, said, checkpointer, config())
    got = _resume_both(app, r3_done, config)
    assert not isinstance(got["R3"], Exception), got["R3"]
    return said


def test_a_resume_that_ran_the_step_is_not_backed_by_anothers_read_in_it() -> None:
    """R2 and R3 resume one paused thread at once; both use it in the resumed step (R2
    reads order 42 and is still in that step, R3 reads order 7). R3's model ships order
    42: R2's read does not back it (refused not_read, the value handed to R3), and R3's
    next call runs on its own read."""
    shop = _Shop()
    said = _race(shop, "order/7")
    assert said[0].startswith("PlanFence blocked ship (not_read)"), said
    assert said[1].startswith("shipped") and len(shop.shipped) == 1


def test_branches_under_ainvoke_keep_their_reads_apart() -> None:
    """The same fan-out under ``ainvoke`` (each branch a task of the event loop)."""
    shop = _Shop()
    app = shop.graph({"A": shop.a_reads_42, "B": shop.b_ships_42_unread},
                     checkpointer=InMemorySaver())
    asyncio.run(app.ainvoke({"branches": ["A", "B"]}, _CONF))
    assert shop.said["B"][0].startswith("PlanFence blocked ship (not_read)")
    assert len(shop.shipped) == 1 and shop.said["B"][1].startswith("shipped")
