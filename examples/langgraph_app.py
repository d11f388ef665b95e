"""A LangGraph app protected by PlanFence, with iCORE events, without restructuring it.

The graph is an ordinary LangGraph ``StateGraph``: plan -> revise -> execute. The
``book`` tool is an ordinary LangChain ``@tool``. Two wrappers add the protection:

* ``fenced_tool(book, ...)`` routes every call through the PlanFence gate: the plan must
  descend from the owner's current requirement (D(a) = {req/trip-17}) and bind the call
  (``bind_action``: the tool and its arguments are part of the plan, so a call with other
  arguments is blocked ``args_mismatch``); after the post-plan revision the gate asks for
  one replan and books the destination the fresh plan binds;
* ``recorded_node(...)`` turns each node call into an iCORE event.

Run: ``python examples/langgraph_app.py``
"""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from icore.agents._langgraph import (
    GraphRecorder,
    fenced_tool,
    langgraph_declaration,
    last_result,
    recorded_node,
)
from icore.fence import Fence, Replan, ReplanRequest, bind_action
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive
from icore.state import State

REQ, PLAN = "req/trip-17", "plan/trip-17"


class TripState(TypedDict, total=False):
    """The graph state."""

    destination: str
    booked: str


def build() -> tuple[Any, dict[str, Any]]:
    """Build the app; return the compiled graph and its context (stores, recorder)."""
    ownership = OwnershipMap({REQ: "traveler", PLAN: "planner"})
    traveler = MemoryStore(ownership, "traveler")
    planner = MemoryStore(ownership, "planner")
    executor = MemoryStore(ownership, "executor")
    owners = LocalOwners({"traveler": traveler, "planner": planner})
    r3 = Record.create(key=REQ, owner="traveler", seq=1, type="requirement",
                       content={"destination": "Lisbon"})
    traveler.commit(r3, writer="traveler")
    for s in (planner, executor):
        s.install(r3)
    x = State(langgraph_declaration(["planner", "traveler", "executor"]))
    recorder = GraphRecorder(x, agent="executor")
    current: dict[str, Any] = {}
    booked: list[str] = []

    def make_plan(req: Record) -> Record:
        dest = req.content["destination"]
        plan = derive(key=PLAN, owner="planner", seq=planner.next_seq(), type="plan",
                      content={"destination": dest,
                               **bind_action("book", {"destination": dest})}, inputs=[req])
        # a re-derived plan names the head it replaces instead of citing it as a parent
        head = planner.head(PLAN)
        planner.commit(plan, writer="planner",
                       expected_head=None if head is None else head.record_id)
        executor.install(plan)
        current["roots"] = [plan.id]
        return plan

    @tool
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        booked.append(destination)
        return f"booked {destination}"

    def replan(rq: ReplanRequest) -> Replan:
        # the fresh plan's bound arguments are the ones executed
        return Replan(roots=[make_plan(rq.fresh[REQ]).id])

    fence = Fence.for_store(executor, owners)
    safe_book = fenced_tool(book, fence=fence, depends_on={REQ},
                            roots=lambda: current["roots"], replan=replan,
                            recorder=recorder)

    def plan_node(state: TripState) -> TripState:
        req = planner.get(planner.installed_head(REQ).record_id)  # type: ignore[union-attr]
        assert req is not None
        return {"destination": make_plan(req).content["destination"]}

    def revise_node(state: TripState) -> TripState:
        prev = traveler.get(traveler.head(REQ).record_id)  # type: ignore[union-attr]
        assert prev is not None
        r4 = derive(key=REQ, owner="traveler", seq=traveler.next_seq(), type="requirement",
                    content={"destination": "Porto"}, inputs=[prev])
        traveler.commit(r4, writer="traveler")
        executor.install(r4)  # the executor already holds the fresh fact
        return {}

    def execute_node(state: TripState) -> TripState:
        return {"booked": str(safe_book.invoke({"destination": state["destination"]}))}

    g = StateGraph(TripState)
    g.add_node("plan", recorded_node(plan_node, recorder=recorder, name="plan",
                                     agent="planner"))
    g.add_node("revise", recorded_node(revise_node, recorder=recorder, name="revise",
                                       agent="traveler"))
    g.add_node("execute", recorded_node(execute_node, recorder=recorder, name="execute"))
    g.add_edge(START, "plan")
    g.add_edge("plan", "revise")
    g.add_edge("revise", "execute")
    g.add_edge("execute", END)
    ctx = {"recorder": recorder, "state": x, "booked": booked, "tool": safe_book,
           "fence": fence}
    return g.compile(), ctx


def main() -> dict[str, Any]:
    """Run the app once; print and return what happened."""
    app, ctx = build()
    out = app.invoke({})
    res = last_result(ctx["tool"])
    summary = {"booked": out.get("booked"), "tool_calls": ctx["booked"],
               "replanned": bool(res and res.replanned),
               "gate": [f"{d.outcome.value}/{d.reason.value}" for d in res.decisions]
               if res else [],
               "events": [e["type"] for e in ctx["recorder"].events],
               "icore_events": len(ctx["state"].events)}
    print(summary)
    return summary


if __name__ == "__main__":
    main()
