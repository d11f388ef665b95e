"""Quick start: a plan bound to exact record versions, an owner revision, one replan.

Run: ``.venv/bin/python examples/quickstart.py``
"""

from __future__ import annotations

from icore.fence import Fence, Replan, ReplanRequest, bind_action, protected
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

ownership = OwnershipMap({"req/trip-17": "reviser"}, {"plan/*": "planner"})
reviser = MemoryStore(ownership, "reviser")
executor = MemoryStore(ownership, "executor")

# the owner commits r3; the planner derives a plan citing r3's exact id. The plan binds
# the call it authorizes (the tool and its arguments): other arguments are blocked.
r3 = Record.create(key="req/trip-17", owner="reviser", seq=1, content={"dest": "Lisbon"})
reviser.commit(r3, writer="reviser")
executor.install(r3)
plan = derive(key="plan/trip-17", owner="planner", seq=1,
              content=bind_action("book", {"dest": "Lisbon"}), inputs=[r3])
executor.install(plan)

# the owner revises the requirement after planning, before the action; r4 cites r3, the
# head it replaces (compare-and-set: a writer citing an older version is refused)
r4 = derive(key="req/trip-17", owner="reviser", seq=2, content={"dest": "Porto"},
            inputs=[r3], type="record")
reviser.commit(r4, writer="reviser")


@protected(depends_on={"req/trip-17"})  # D(a): the keys that can affect this action
def book(dest: str) -> str:
    return f"booked {dest}"


def replan(req: ReplanRequest) -> Replan:
    """Called at most once, with the verified fresh records only (isolated history)."""
    fresh = req.fresh["req/trip-17"]
    new_plan = derive(key="plan/trip-17", owner="planner", seq=2,
                      content=bind_action("book", {"dest": fresh.content["dest"]}),
                      inputs=[fresh])
    executor.install(new_plan)
    return Replan(roots=[new_plan.id])  # the fresh plan's arguments are executed


fence = Fence.for_store(executor, LocalOwners({"reviser": reviser}))
result = fence.execute(book, roots=[plan.id], args={"dest": "Lisbon"}, replan=replan)
for d in result.decisions:
    print(f"{d.outcome.value:16} {d.reason.value:8} frontier={d.frontier['req/trip-17'][:8]} "
          f"head={d.heads['req/trip-17'][:8]}")
print(result.value)  # booked Porto
assert result.executed and result.value == "booked Porto"
