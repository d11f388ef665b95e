"""The staged race of planfence Fig. 1 in one process.

A planner derives plan p(r3) from requirement r3; the requirement's owner commits r4; the
executor, already holding r4, attempts the protected action from p(r3). Under owner-head
freshness the action runs from the obsolete plan (stale-plan execution); under PlanFence
the gate detects F(x) = id3 != H(x) = id4, the planner replans once from r4, and the action
runs lineage-valid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icore.fence import (
    ActionResult,
    DecisionLog,
    Fence,
    GateContext,
    Policy,
    ProtectedTool,
    Replan,
    ReplanRequest,
    TeamContext,
    bind_action,
    make_validator,
)
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

REQ_KEY = "req/trip-17"
PLAN_KEY = "plan/trip-17"


@dataclass(frozen=True)
class RaceOutcome:
    """What happened in one staged race.

    Attributes:
        policy: the policy the executor used.
        executed: whether the booking tool ran.
        booked: the destination the tool booked (None if it did not run).
        current: the destination of the current requirement head.
        invalid: True when the tool ran from a plan whose frontier is not the head.
        replanned: whether the one replan happened.
        decisions: the logged decisions (as dicts).
    """

    policy: str
    executed: bool
    booked: str | None
    current: str
    invalid: bool
    replanned: bool
    decisions: list[dict[str, Any]] = field(default_factory=list)


def staged_race(policy: Policy | str = Policy.PLANFENCE) -> RaceOutcome:
    """Run the Fig. 1 race once under ``policy`` and report what the executor did.

    ``policy`` is PlanFence, owner-head freshness or local replica.

    Raises:
        ValueError: an unsupported policy name.
    """
    pol = Policy(policy)
    ownership = OwnershipMap({REQ_KEY: "reviser", PLAN_KEY: "planner"})
    reviser = MemoryStore(ownership, "reviser")
    planner = MemoryStore(ownership, "planner")
    executor = MemoryStore(ownership, "executor")
    owners = LocalOwners({"reviser": reviser, "planner": planner})

    r3 = Record.create(key=REQ_KEY, owner="reviser", seq=3, type="requirement",
                       content={"destination": "Lisbon", "nights": 2})
    reviser.commit(r3, writer="reviser")
    for s in (planner, executor):
        s.install(r3)

    def make_plan(req: Record) -> Record:
        dest = req.content["destination"]
        plan = derive(key=PLAN_KEY, owner="planner", seq=planner.next_seq(), type="plan",
                      content={"action": "book", "destination": dest,
                               **bind_action("book", {"destination": dest})},
                      inputs=[req])
        head = planner.head(PLAN_KEY)  # a re-derived plan names the head it replaces
        planner.commit(plan, writer="planner",
                       expected_head=None if head is None else head.record_id)
        executor.install(plan)
        return plan

    p3 = make_plan(r3)
    # the owner revises the requirement after planning, before the action
    r4 = derive(key=REQ_KEY, owner="reviser", seq=4, type="requirement",
                content={"destination": "Porto", "nights": 2}, inputs=[r3])
    reviser.commit(r4, writer="reviser")
    executor.install(r4)  # the executor already holds the fresh fact

    booked: list[str] = []

    def book(destination: str) -> str:
        booked.append(destination)
        return f"booked {destination}"

    tool = ProtectedTool(book, depends_on={REQ_KEY}, name="book")
    log = DecisionLog()
    if pol not in (Policy.PLANFENCE, Policy.OWNER_HEAD_FRESHNESS, Policy.LOCAL_REPLICA):
        raise ValueError(f"staged_race supports planfence, owner_head_freshness and "
                         f"local_replica, not {pol.value}")
    validator = make_validator(pol, GateContext(lookup=executor.lookup, ownership=ownership,
                                                owners=owners, policy=pol.value),
                               TeamContext(install=executor))
    fence = Fence(validator=validator, install=executor, log=log)

    def replan(req: ReplanRequest) -> Replan:
        fresh = req.fresh[REQ_KEY]
        return Replan(roots=[make_plan(fresh).id])  # runs the fresh plan's arguments

    res: ActionResult = fence.execute(tool, roots=[p3.id],
                                      args={"destination": p3.content["destination"]},
                                      replan=replan)
    head = reviser.head(REQ_KEY)
    assert head is not None
    current = reviser.get(head.record_id)
    assert current is not None
    plan_rec = executor.get(res.roots[0])
    invalid = res.executed and (plan_rec is None or head.record_id not in plan_rec.parents)
    return RaceOutcome(policy=pol.value, executed=res.executed,
                       booked=booked[0] if booked else None,
                       current=current.content["destination"], invalid=invalid,
                       replanned=res.replanned,
                       decisions=[d.to_dict() for d in log])
