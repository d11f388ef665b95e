"""Hypothesis stateful test: no authorized action with a stale frontier (planfence eq. 1).

Random interleavings of owner updates, plan formation, replica installs and protected
actions (with owner revisions racing the one replan, and owner outages) never produce an
authorized action whose frontier differs from the owners' heads at the validation point;
every replan-required becomes authorized or blocked after the one replan.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from icore.fence import Fence, Outcome, ProtectedTool, Replan, ReplanRequest, bind_action
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

KEYS = ["req/0", "req/1", "req/2", "req/3"]
OWNERS = {"req/0": "o0", "req/1": "o0", "req/2": "o1", "req/3": "o2"}
OM = OwnershipMap({**OWNERS}, {"plan/*": "planner"})


class FenceMachine(RuleBasedStateMachine):
    """Owners, a planner with a possibly stale replica, and an executor."""

    @initialize()
    def setup(self) -> None:
        self.owner_stores = {o: MemoryStore(OM, o) for o in set(OWNERS.values())}
        self.planner = MemoryStore(OM, "planner")
        self.ex = MemoryStore(OM, "executor")
        self.access = LocalOwners({**self.owner_stores, "planner": self.planner})
        self.plans: list[tuple[Record, frozenset[str]]] = []
        self.violations: list[str] = []
        self.actions = 0
        for k in KEYS:
            self._update(k)
            self._sync(self.planner, k)

    def _update(self, key: str) -> Record:
        st_ = self.owner_stores[OWNERS[key]]
        head = st_.head(key)
        parents = [head.record_id] if head else []
        r = Record.create(key=key, owner=OWNERS[key], seq=st_.next_seq(),
                          content={"n": st_.next_seq()}, parents=parents)
        st_.commit(r, writer=OWNERS[key])
        return r

    def _sync(self, replica: MemoryStore, key: str) -> None:
        st_ = self.owner_stores[OWNERS[key]]
        h = st_.head(key)
        assert h is not None
        rec = st_.get(h.record_id)
        assert rec is not None
        replica.install(rec)

    def _new_plan(self, content: dict[str, Any], inputs: list[Record]) -> Record:
        """Re-derive plan/x from ``inputs`` binding ``act()``; it replaces the current plan
        (explicit expected head: a fresh plan does not cite its previous version)."""
        plan = derive(key="plan/x", owner="planner", seq=self.planner.next_seq(),
                      content={**content, **bind_action("act", {})}, inputs=inputs)
        head = self.planner.head("plan/x")
        self.planner.commit(plan, writer="planner",
                            expected_head=None if head is None else head.record_id)
        return plan

    def _current_heads(self, keys: frozenset[str]) -> dict[str, str]:
        out = {}
        for k in keys:
            h = self.owner_stores[OWNERS[k]].head(k)
            assert h is not None
            out[k] = h.record_id
        return out

    @rule(key=st.sampled_from(KEYS))
    def owner_updates(self, key: str) -> None:
        self._update(key)

    @rule(key=st.sampled_from(KEYS))
    def planner_syncs(self, key: str) -> None:
        self._sync(self.planner, key)

    @rule(keys=st.sets(st.sampled_from(KEYS), min_size=1, max_size=3))
    def planner_plans(self, keys: set[str]) -> None:
        inputs = []
        for k in sorted(keys):
            inst = self.planner.installed_head(k)
            assert inst is not None
            rec = self.planner.get(inst.record_id)
            assert rec is not None
            inputs.append(rec)
        plan = self._new_plan({"keys": sorted(keys)}, inputs)
        for r in inputs:
            self.ex.install(r)
        self.ex.install(plan)
        self.plans.append((plan, frozenset(keys)))

    @rule(data=st.data(), race_in_replan=st.booleans(), outage=st.booleans())
    def executor_acts(self, data: Any, race_in_replan: bool, outage: bool) -> None:
        if not self.plans:
            return
        plan, keys = data.draw(st.sampled_from(self.plans))
        scope = data.draw(st.sets(st.sampled_from(sorted(keys)), min_size=1))
        down = data.draw(st.sampled_from(sorted(self.owner_stores))) if outage else None
        if down:
            self.access.down.add(down)
        ran: list[dict[str, str]] = []

        def act(**_: Any) -> None:
            ran.append(self._current_heads(frozenset(scope)))

        tool = ProtectedTool(act, depends_on=scope, name="act")

        def replan(req: ReplanRequest) -> Replan:
            inputs = []
            for k in sorted(keys):
                if k in req.fresh:
                    inputs.append(req.fresh[k])
                else:
                    h = self.ex.installed_head(k)
                    assert h is not None
                    rec = self.ex.get(h.record_id)
                    assert rec is not None
                    inputs.append(rec)
            new = self._new_plan({"keys": sorted(keys), "replan": True}, inputs)
            self.ex.install(new)
            if race_in_replan:
                self._update(sorted(scope)[0])
            return Replan([new.id], {})

        fence = Fence.for_store(self.ex, self.access)
        res = fence.execute(tool, roots=[plan.id], args={}, replan=replan)
        self.access.down.discard(down or "")
        self.actions += 1
        for d in res.decisions:
            if d.outcome is Outcome.AUTHORIZED and d.frontier != d.heads:
                self.violations.append(f"authorized with frontier {d.frontier} != {d.heads}")
        if res.executed:
            # the action ran from the plan it was validated with, at the current heads
            assert ran and ran[0] == dict(res.final.frontier), (ran, res.final)
        first = res.decisions[0]
        if first.outcome is Outcome.REPLAN_REQUIRED:
            assert res.final.outcome in (Outcome.AUTHORIZED, Outcome.BLOCKED)
            assert len(res.decisions) <= 2
            if len(res.decisions) == 2:
                assert res.decisions[1].replanned
        if down is not None and any(OWNERS[k] == down for k in scope):
            assert not res.executed

    @invariant()
    def no_stale_authorization(self) -> None:
        assert self.violations == []


TestFenceMachine = FenceMachine.TestCase
TestFenceMachine.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
