"""Faithful recordings of framework runs (issue 28 item 6).

A recorded LangGraph run carries PlanFence record and decision lines (so ``icore audit``
draws each call's lineage picture and ``--fail-on invalid`` can fire), counts a replan as
a replan, names the calling agent, records the end of the run, and records a fenced tool
built without ``recorder=``. Real LangGraph graphs with LangChain's scripted chat model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typer.testing import CliRunner

from icore.adapters import load_jsonl
from icore.cli import app
from icore.fence import DecisionEntry, Fence, GateContext, judge_action, make_check
from icore.integrations import FenceGuard, RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool

from .conftest import load_example

REQ = "req/trip-17"


class _S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan_roots: list[str]


class _Chat(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _call(dest: str, n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "book", "args": {"destination": dest},
                                      "id": f"call-{n}"}])


def _unsafe_fence(trip: Any) -> Fence:
    """The trip's executor behind the unsafe owner-head-freshness baseline (no lineage)."""
    store = trip.stores["executor"]
    ctx = GateContext(lookup=store.lookup, ownership=store.ownership,
                      owners=trip.fence.validator.context.owners)
    return Fence(validator=make_check("owner_head_freshness", ctx), install=store)


def _run(trip: Any, fence: Fence, path: Path, *, recorder_on_tool: bool,
         replan: bool = True) -> tuple[RunRecorder, dict[str, Any]]:
    """One planner -> booking-agent run: the order changes Lisbon -> Porto after planning."""
    rec = RunRecorder("faithful", question="Book a hotel for trip 17")

    @tool
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return trip.book(destination)

    safe = fenced_tool(book, fence=fence, depends_on={REQ},
                       replan=trip.replan if replan else None,
                       recorder=rec if recorder_on_tool else None)
    trip.revise("Porto")  # the plan (Lisbon) is stale before the call
    llm = _Chat(messages=iter([_call("Lisbon", 1), AIMessage("Booked.")]))

    def booker(state: _S) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(_S)
    g.add_node("booker", booker)
    g.add_node("tools", ToolNode([safe]))
    g.add_edge(START, "booker")
    g.add_conditional_edges("booker", tools_condition)
    g.add_edge("tools", "booker")
    g.add_edge("booker", END)
    out = g.compile().invoke({"messages": [HumanMessage("Book a hotel for trip 17")],
                              "plan_roots": [trip.first_plan.id]},
                             {"callbacks": [RecordingHandler(rec)]})
    rec.write(path)
    return rec, out


def _audit(path: Path, out: Path, *fail_on: str) -> tuple[int, dict[str, Any]]:
    """``icore audit PATH --out OUT --json ... --fail-on ...``: (exit code, the run)."""
    js = out.parent / f"{out.name}.json"
    args = ["audit", str(path), "--out", str(out), "--json", str(js)] + [
        a for f in fail_on for a in ("--fail-on", f)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code in (0, 3), res.output
    return res.exit_code, json.loads(js.read_text(encoding="utf-8"))["runs"][0]


@pytest.mark.parametrize("recorder_on_tool", [True, False])
def test_fenced_run_records_lineage_replan_caller_and_end(tmp_path: Path,
                                                         recorder_on_tool: bool) -> None:
    """A replanned, fenced call: PlanFence lines for its two decisions, replans=1, gate
    events by the calling node, a terminal marker; ``--fail-on invalid`` passes. Without
    ``recorder=`` on the tool the handler's recorder is used (nothing vanishes)."""
    trip = load_example("_trip").Trip()
    path = tmp_path / "run.jsonl"
    rec, _ = _run(trip, trip.fence, path, recorder_on_tool=recorder_on_tool)
    assert trip.booked == ["Porto"]
    decisions = [x["planfence"]["decision"] for x in rec.planfence
                 if "decision" in x["planfence"]]
    assert [(d["outcome"], d["reason"]) for d in decisions] == [
        ("replan_required", "stale"), ("authorized", "valid")]
    assert {d["task"] for d in decisions} == {"book-1"}
    first, second = decisions
    assert first["frontier"][REQ] != first["heads"][REQ]  # the stale plan, seen
    assert second["frontier"][REQ] == second["heads"][REQ] and second["point"] > \
        first["point"]
    records = {x["planfence"]["record"]["id"]: x["planfence"]["record"]
               for x in rec.planfence if "record" in x["planfence"]}
    for d in decisions:  # every record a decision cites is in the trace, once
        assert set(d["roots"]) | set(d["frontier"].values()) | set(d["heads"].values()) \
            <= set(records)
    assert len(records) == sum(1 for x in rec.planfence if "record" in x["planfence"])
    assert records[trip.first_plan.id]["parents"] == list(trip.first_plan.parents)
    # the typed path: each line reads back as a DecisionEntry, byte for byte, and keeps
    # the frontier and heads the one verdict needs (stale first, then current)
    typed = [DecisionEntry.from_dict(d) for d in decisions]
    assert [json.dumps(e.to_dict(digest=True)) for e in typed] == [json.dumps(d)
                                                                     for d in decisions]
    assert [judge_action(e.deps, e.frontier, e.heads).stale for e in typed] == [(REQ,), ()]
    gate_agents = {e["agent"] for e in rec.events if e["kind"] in ("thought", "plan",
                                                                    "tool_output")
                   and ("gate" in e or e["kind"] != "thought")}
    assert gate_agents == {"booker"}
    assert rec.events[-1]["kind"] == "termination" and \
        rec.events[-1]["final_answer"] == "Booked."
    code, run = _audit(path, tmp_path / "rep", "invalid")
    assert code == 0
    assert run["summary"]["replans"] == 1 and run["summary"]["terminated"]
    assert [x["status"] for x in run["lineage"]] == ["valid"]
    details = " ".join(str(d.get("detail", "")) for d in run["diagnoses"])
    assert "executor" not in details and "without a terminal marker" not in details
    html = (tmp_path / "rep" / "faithful.html").read_text(encoding="utf-8")
    assert 'id="lin-book-1"' in html


def test_stale_action_from_an_unsafe_policy_fails_on_invalid(tmp_path: Path) -> None:
    """The same app behind the unsafe owner-head-freshness baseline books Lisbon from a
    stale plan: the recorded run's lineage is INVALID and ``--fail-on invalid`` exits 3."""
    trip = load_example("_trip").Trip()
    path = tmp_path / "run.jsonl"
    _run(trip, _unsafe_fence(trip), path, recorder_on_tool=True, replan=False)
    assert trip.booked == ["Lisbon"]  # the stale call ran
    trace = load_jsonl(path)
    pf = trace.extras["planfence"]
    assert [d["reason"] for d in pf["decisions"]] == ["not_validated"]
    code, run = _audit(path, tmp_path / "rep", "invalid")
    assert code == 3
    assert [x["status"] for x in run["lineage"]] == ["INVALID"]
    assert "stale plan" in run["lineage"][0]["reason"]


def test_blocked_call_and_calls_numbered(tmp_path: Path) -> None:
    """Framework-free: two calls of one tool are two pictures (``book-1``, ``book-2``);
    a block without a replanner is recorded with its decision, by the given agent."""
    trip = load_example("_trip").Trip()
    rec = RunRecorder("guard")
    guard = FenceGuard(fence=trip.fence, depends_on={REQ}, recorder=rec, agent="alice")
    ok = guard.run("book", trip.book, {"destination": "Lisbon"}, [trip.first_plan.id])
    assert ok.executed
    trip.revise("Porto")
    no = guard.run("book", trip.book, {"destination": "Lisbon"}, [trip.first_plan.id])
    assert not no.executed
    decisions = [x["planfence"]["decision"] for x in rec.planfence
                 if "decision" in x["planfence"]]
    assert [(d["task"], d["outcome"]) for d in decisions] == [("book-1", "authorized"),
                                                             ("book-2", "blocked")]
    assert {e["agent"] for e in rec.events} == {"alice"}
    rec.finish("alice", "done")
    path = rec.write(tmp_path / "g.jsonl")
    code, run = _audit(path, tmp_path / "rep", "invalid")
    assert code == 0 and [x["status"] for x in run["lineage"]] == ["valid", "blocked"]
    assert run["summary"]["replans"] == 0


def test_high_level_api_run_records_faithfully(tmp_path: Path) -> None:
    """The workspace API (agent mode): a stale call hands the model the fresh value, the
    model's next call is the one replan (summary replans=1), each call's action record
    and the versions it derives from are in the trace, every event is the shipper's,
    and ``--fail-on invalid`` passes."""
    from icore.workspace import Workspace

    ws = Workspace({"order/42": "sales"})
    ws.put("order/42", {"city": "Berlin"})
    shipper = ws.agent("shipper")
    shipper.read("order/42")
    shipped: list[str] = []
    rec = RunRecorder("ws", question="ship order 42")
    rec.task("ship order 42")
    guard = FenceGuard(agent=shipper, depends_on={"order/42"}, recorder=rec)
    ws.put("order/42", {"city": "Munich"})  # another agent changes the order

    def ship(city: str) -> str:
        shipped.append(city)
        return f"shipped to {city}"

    first = guard.run("ship", ship, {"city": "Berlin"})
    assert not first.executed and first.reason == "stale"
    second = guard.run("ship", ship, {"city": "Munich"})
    assert second.executed and shipped == ["Munich"]
    rec.finish("shipper", "shipped to Munich")
    decisions = [x["planfence"]["decision"] for x in rec.planfence
                 if "decision" in x["planfence"]]
    assert [(d["task"], d["outcome"], d["reason"]) for d in decisions][-1] == (
        "ship-2", "authorized", "valid")
    assert decisions[0]["task"] == "ship-1" and decisions[0]["reason"] == "stale"
    records = {x["planfence"]["record"]["id"]: x["planfence"]["record"]
               for x in rec.planfence if "record" in x["planfence"]}
    actions = [r for r in records.values() if r["role"] == "action"]
    assert len(actions) == 2 and all(r["parents"] for r in actions)
    assert all(p in records for r in actions for p in r["parents"])
    assert {e["agent"] for e in rec.events} - {"user"} == {"shipper"}
    path = rec.write(tmp_path / "ws.jsonl")
    code, run = _audit(path, tmp_path / "rep", "invalid")
    assert code == 0 and run["summary"]["replans"] == 1
    assert [x["status"] for x in run["lineage"]] == ["blocked", "valid"]


def test_openai_agents_fenced_tool_without_recorder_is_recorded(tmp_path: Path) -> None:
    """OpenAI Agents SDK: a fenced tool built without ``recorder=`` inside ``recording``
    records its gate decisions into the recording's recorder, once (the tracing
    processor skips it), attributed to the calling agent."""
    import asyncio

    from agents import Agent, Runner, function_tool

    from icore.integrations.openai_agents import fenced_function_tool, recording

    mod = load_example("openai_agents_app")
    trip = load_example("_trip").Trip()

    @function_tool
    def book(destination: str) -> str:
        """Book a hotel."""
        return trip.book(destination)

    safe = fenced_function_tool(book, fence=trip.fence, depends_on={REQ},
                                replan=trip.replan, agent="travel_agent")
    model = mod.ScriptModel(iter([
        [mod.function_call("book", {"destination": "Lisbon"}, call_id="c1")],
        [mod.assistant_message("Booked.")]]))
    agent = Agent(name="travel_agent", instructions="Book.", tools=[safe], model=model)
    trip.revise("Porto")
    rec = RunRecorder("oa")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(agent, "book", context={
            "plan_roots": [trip.first_plan.id]}))
    assert trip.booked == ["Porto"]
    decisions = [x["planfence"]["decision"] for x in rec.planfence
                 if "decision" in x["planfence"]]
    assert [d["reason"] for d in decisions] == ["stale", "valid"]
    tools = [e for e in rec.events if e["kind"] == "tool_output"]
    assert len(tools) == 1 and tools[0]["agent"] == "travel_agent"
    code, run = _audit(rec.write(tmp_path / "oa.jsonl"), tmp_path / "rep", "invalid")
    assert code == 0 and run["summary"]["replans"] == 1


def test_langgraph_example_parallel_calls_count_each_replan_once(tmp_path: Path) -> None:
    """examples/langgraph_app.py (high-level API, two orders shipped by parallel calls,
    both stale, one replan each, the second changes again): replans=2, one lineage
    picture per call, gate events by the shipper, the run ends with its answer."""
    path = tmp_path / "orders.jsonl"
    load_example("langgraph_app").main(str(path))
    code, run = _audit(path, tmp_path / "rep", "invalid")
    assert code == 0 and run["summary"]["replans"] == 2 and run["summary"]["terminated"]
    # parallel calls write their decisions when they finish, in either order under load
    assert sorted(x["status"] for x in run["lineage"]) == ["blocked", "blocked", "blocked",
                                                           "valid"]
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    gates = [x for x in lines if x.get("kind") == "thought" and "gate" in x]
    assert gates and {x["agent"] for x in gates} == {"shipper"}
