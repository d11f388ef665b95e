"""The trip-booking world shared by the framework examples (``examples/*_app.py``).

A traveler owns the requirement ``req/trip-17``, a planner owns ``plan/trip-17``, and an
executor books hotels through a fenced ``book`` tool whose D(a) is ``{req/trip-17}``.
A :class:`~icore.integrations.Replicator` installs every record where it is needed.

:meth:`Trip.script` drives each framework's scripted model: before the model's first
``book`` call the traveler has already switched Lisbon -> Porto (stale plan: one replan,
then Porto is booked); before the second call the traveler switches to Faro, and while
the planner replans, to Madrid (a second change: blocked, the model sees a tool error).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from icore.fence import Fence, Replan, ReplanRequest, bind_action
from icore.integrations import Replicator
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

REQ, PLAN = "req/trip-17", "plan/trip-17"


class Trip:
    """Owners, replicas, the executor's fence, the planner and the booking tool."""

    def __init__(self) -> None:
        om = OwnershipMap({REQ: "traveler", PLAN: "planner"})
        self.stores = {a: MemoryStore(om, a) for a in ("traveler", "planner", "executor")}
        self.replicator = Replicator(self.stores)
        owners = LocalOwners({"traveler": self.stores["traveler"],
                              "planner": self.stores["planner"]})
        self.fence = Fence.for_store(self.stores["executor"], owners)
        self.booked: list[str] = []
        self.race: list[str] = []  # the traveler's switches while the planner replans
        self.revise("Lisbon")
        self.first_plan = self.make_plan()

    def _head(self, agent: str, key: str) -> Record | None:
        h = self.stores[agent].head(key)
        return self.stores[agent].get(h.record_id) if h is not None else None

    def revise(self, destination: str) -> Record:
        """The traveler commits a new version of the requirement."""
        prev = self._head("traveler", REQ)
        seq = self.stores["traveler"].next_seq()
        rec = (derive(key=REQ, owner="traveler", seq=seq, type="requirement",
                      content={"destination": destination}, inputs=[prev]) if prev else
               Record.create(key=REQ, owner="traveler", seq=seq, type="requirement",
                             content={"destination": destination}))
        self.replicator.commit(rec)
        return rec

    def make_plan(self) -> Record:
        """The planner derives a plan from the requirement's current version; the plan
        binds the call it authorizes (``book`` and its arguments, issue 12)."""
        req = self._head("traveler", REQ)
        assert req is not None
        dest = req.content["destination"]  # type: ignore[index]
        plan = derive(key=PLAN, owner="planner", seq=self.stores["planner"].next_seq(),
                      content={"destination": dest,
                               **bind_action("book", {"destination": dest})},
                      inputs=[req])
        head = self.stores["planner"].head(PLAN)
        # a plan re-derived from fresh inputs replaces the head without citing it
        self.replicator.commit(plan, expected_head=head.record_id if head else None)
        return plan

    def replan(self, rq: ReplanRequest) -> Replan:
        """The one replan: a fresh plan from the fresh requirement (a race may follow).
        The fresh plan's bound arguments are the ones that run."""
        plan = self.make_plan()
        if self.race:
            self.revise(self.race.pop(0))
        return Replan(roots=[plan.id])

    def book(self, destination: str) -> str:
        """The real side effect."""
        self.booked.append(destination)
        return f"booked {destination}"

    def script(self, first: Any, second: Any, final: Any) -> Iterator[Any]:
        """Yield the model's three turns, changing the world between them."""
        self.revise("Porto")  # after planning, before the first call: stale plan
        yield first
        self.revise("Faro")  # before the second call: stale again ...
        self.race.append("Madrid")  # ... and a second change during the replan
        yield second
        yield final
