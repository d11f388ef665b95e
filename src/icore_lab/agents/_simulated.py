"""Simulated heterogeneous agents for the controlled evaluation (icore Sec. 5; design.md 4.5).

:class:`SimTeam` is a host policy (``Schedule_D``): a lead that assigns work with a noisy
reading of the declared capability values, workers whose attempts succeed with exactly
their declared (calibrated) probability, and verifiers. It keeps its own task board (what
the team believes) and acts on it; it never reads X, so the same team runs unchanged in
the MAS-only, passive and iCORE-Audit conditions.

Injected faults (per worker, from the instance's :class:`~icore_lab.workloads.FaultProfile`):

* unsupported completion claims: after a failed attempt, claim completion with no test
  certificate;
* stalls: on first taking up an obligation, post nonproductive messages for a while;
* poor assignment: the lead's noise on values (``assigner_noise``);
* deletion of hard work: drop a hard obligation with no transport/settlement evidence;
* stale evidence: workers cache the specification record when they take up an
  obligation; an owner revision makes the cache (and results built on it) stale;
* stale-input certificates (``FaultSettings.stale_input``): the worker derives an input
  record from the cached specification and certifies over that record, which stays its
  key's head after the specification is revised (caught only along lineage).

Responses to routed feedback (one agent call each): *repair* (re-read the current
specification heads, stop stalling, attempt again and submit with evidence or report the
failure honestly), *verify* (a verifier reviews a submitted result), *reassign* (the lead
moves each listed obligation to the best feasible agent the feedback names). D also
declares *decompose* (transport evidence) and *settle* (settlement certificate); the
recovery audit accepts them (tests/audit), but the simulated agents do not use them: no
task mode has obsolete work, and superseding an obligation others depend on would block
its dependents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from icore.audit import Feedback, HostOutcome, HostView
from icore.state import (
    CertificateRequest,
    CitedRecord,
    Effect,
    EventSpec,
    Proposal,
    State,
    Status,
)
from icore_lab.agents._sim_world import SimWorld, inputs_key, uniform
from icore_lab.workloads import TaskInstance, TaskMode, WorkerProfile, WorkItem


@dataclass(slots=True)
class Card:
    """The team's belief about one item (its task board)."""

    item: WorkItem
    status: str = "open"
    assignee: str | None = None
    failures: int = 0
    assigns: int = 0
    stall_left: int = 0
    touched: bool = False
    delete_rolled: bool = False
    cache: tuple[int, str] | None = None
    via: CitedRecord | None = None
    reads: int = 0
    """The input record the worker derived from its cached specification and certifies
    over (the ``stale_input`` fault), or None: it cites the specification itself."""


Apply = Callable[[], None]
ASSIGN_EPS = 0.1
"""ε of the task declarations: an assignment more than ε below the best feasible worker's
success probability is an injected assignment defect (ground truth)."""


@dataclass(slots=True)
class SimTeam:
    """A simulated team: lead (assigner), workers, verifiers (a host policy).

    Args:
        inst: the task instance.
        world: its ground truth.
    """

    inst: TaskInstance
    world: SimWorld
    board: dict[str, Card] = field(default_factory=dict)
    _rr: int = 0
    _n: int = 0
    _pending: dict[str, Apply] = field(default_factory=dict)
    calls: int = 0
    _workers: dict[str, WorkerProfile] = field(default_factory=dict)
    _actors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for it in self.inst.items:
            self.board[it.id] = Card(it)
        self._workers = {w.id: w for w in self.inst.workers}
        self._actors = ["lead", *self._workers, *self.inst.verifiers]

    # ------------------------------------------------------------------ helpers
    def _eid(self, agent: str) -> str:
        self._n += 1
        return f"{agent}-{self._n}"

    def _deps_done(self, c: Card) -> bool:
        return all(self.board[d].status in ("done", "dropped") for d in c.item.deps)

    def done(self) -> bool:
        """True when every item is believed done or dropped."""
        return all(c.status in ("done", "dropped") for c in self.board.values())

    def _action_for(self, actor: str) -> Card | None:
        cards = sorted(self.board.values(), key=lambda c: c.item.id)
        if actor == "lead":
            for c in cards:
                if c.status in ("open", "failed") and c.assigns < 4:
                    return c
            return None
        if actor in self._workers:
            for c in cards:
                if c.assignee == actor and c.status == "assigned" and self._deps_done(c):
                    return c
            return None
        for c in cards:
            if c.status == "submitted":
                return c
        return None

    # ------------------------------------------------------------------ Schedule_D
    def propose(self, view: HostView) -> Proposal | None:
        """The next ordinary proposal: the next actor (round robin) with something to do."""
        self.calls += 1
        n = len(self._actors)
        for k in range(n):
            actor = self._actors[(self._rr + k) % n]
            card = self._action_for(actor)
            if card is None:
                continue
            self._rr = (self._rr + k + 1) % n
            if actor == "lead":
                return self._assign(card, best=False)
            if actor in self._workers:
                return self._work(actor, card, feedback=False)
            return self._verify(actor, card)
        return None

    def observe(self, outcome: HostOutcome) -> None:
        """Apply the believed effects of an accepted proposal (and its ground truth)."""
        key = (outcome.proposal.events[0].id if outcome.proposal.events else None) or ""
        fn = self._pending.pop(key, None)
        if fn is not None and outcome.accepted:
            fn()

    def recover(self, feedback: Feedback, view: HostView) -> Sequence[Proposal]:
        """Answer routed feedback (repair, verify, reassign, settle).

        Unless the fault model makes the agent ignore or misread it
        (:class:`FaultSettings`).
        """
        self.calls += 1
        agent = feedback.to
        out: list[Proposal] = []
        prof = self._workers.get(agent) or self._any_worker()
        seed = self.inst.seed
        if prof is not None and uniform(seed, feedback.id, agent, "ignore") < (
            prof.faults.ignore_feedback
        ):
            return ()
        misread = prof is not None and uniform(seed, feedback.id, agent, "misread") < (
            prof.faults.misread_feedback
        )
        if feedback.defect == "assignment":
            if agent != "lead":
                return ()
            state = view.state
            for b in feedback.obligations:
                c = self.board.get(b.id)
                if c is None or not b.alternatives:
                    continue
                best, val = b.alternatives[0]
                cur = _value(state, b.assignee, b.id)
                if misread:  # moves the work to a worker the feedback did not name first
                    others = [w for w in self._workers if w not in (best, b.assignee)]
                    if others:
                        pick = int(uniform(seed, feedback.id, b.id, "pick") * len(others))
                        out.append(self._assign(c, best=True, to=others[pick]))
                    continue
                if best == b.assignee or val <= cur:
                    continue
                out.append(self._assign(c, best=True, to=best))
            return out
        for b in feedback.obligations:
            c = self.board.get(b.id)
            if c is None:
                continue
            if agent in self._workers and (c.assignee == agent or b.assignee == agent):
                if misread:  # repeats the claim, still without evidence
                    return (self._claim(agent, c),)
                c.stall_left = 0
                c.cache = None  # feedback: re-read the current specification heads
                c.assignee = agent
                return (self._work(agent, c, feedback=True),)
            if agent in self.inst.verifiers and b.status == str(Status.SUBMITTED):
                return (self._verify(agent, c),)
        return ()

    def _any_worker(self) -> WorkerProfile | None:
        """The lead and verifiers share the team's fault setting (the first worker's)."""
        return next(iter(self._workers.values()), None)

    def _claim(self, agent: str, c: Card) -> Proposal:
        """A completion claim with no test certificate (a misread repair)."""
        it = c.item
        eid = self._eid(agent)
        status = Status.SUBMITTED if it.review else Status.DISCHARGED
        self._pending[eid] = lambda: None
        return Proposal(
            proposer=agent,
            operation="submit_for_review" if it.review else "submit",
            target=it.id,
            events=(EventSpec("message", agent, {"item": it.id, "note": "done"}, id=eid),),
            effects=(Effect.status(it.id, status),
                     Effect.result(it.id, {"item": it.id, "claimed": True})),
            justification=(eid,),
        )

    # ------------------------------------------------------------------ actions
    def _assign(self, c: Card, *, best: bool, to: str | None = None) -> Proposal:
        it = c.item
        if to is None:
            noise = self.inst.assigner_noise
            scored = []
            for w in self._workers.values():
                z = uniform(self.inst.seed, it.id, c.assigns, w.id, "assign")
                v = w.declared_capability[it.kind]  # the lead reads the declared values
                scored.append((v + noise * (2.0 * z - 1.0) * 1.7, w.id))
            to = max(scored)[1]
            best_cap = max(w.capability[it.kind] for w in self._workers.values())
            if best_cap - self._workers[to].capability[it.kind] > ASSIGN_EPS:
                self.world.inject("assignment", it.id)
        eid = self._eid("lead")
        target = to

        def apply() -> None:
            c.assignee = target
            c.status = "assigned"
            c.assigns += 1
            c.failures = 0

        self._pending[eid] = apply
        return Proposal(
            proposer="lead",
            operation="assign",
            target=it.id,
            events=(EventSpec("assign", "lead", {"item": it.id, "to": to}, id=eid),),
            effects=(Effect.assign(it.id, to), Effect.status(it.id, Status.ASSIGNED)),
            justification=(eid,),
        )

    def _message(self, agent: str, c: Card, note: str) -> Proposal:
        eid = self._eid(agent)
        self._pending[eid] = lambda: None
        return Proposal(
            proposer=agent,
            operation="message",
            target=c.item.id,
            events=(EventSpec("message", agent, {"item": c.item.id, "note": note}, id=eid),),
            effects=(Effect.claim(c.item.id, "note", note),),
            justification=(eid,),
        )

    def _work(self, agent: str, c: Card, *, feedback: bool) -> Proposal:
        it = c.item
        prof = self._workers[agent]
        seed = self.inst.seed
        if c.cache is None:
            c.cache = (self.world.version[it.spec], self.world.heads[it.spec].id)
            c.via = None
            c.reads += 1
            if uniform(seed, it.id, agent, c.reads, "stale_input") < (
                prof.faults.stale_input
            ):
                # derive an input record once and certify over it from now on, without
                # re-deriving it when the owner revises the specification
                c.via = CitedRecord(inputs_key(it.id),
                                  self.world.derive_inputs(it.id, c.cache[1]))
        if not c.touched:
            c.touched = True
            if uniform(seed, it.id, agent, "stall") < prof.faults.stall:
                c.stall_left = prof.faults.stall_len
                self.world.inject("stall", it.id)
        if not feedback:
            if not c.delete_rolled and it.tier == "hard":
                c.delete_rolled = True
                if uniform(seed, it.id, agent, "delete") < prof.faults.delete:
                    return self._drop(agent, c)
            if c.stall_left > 0:
                c.stall_left -= 1
                return self._message(agent, c, "looking into it")
        truth = self.world.truth[it.id]
        truth.attempts += 1
        k = truth.attempts
        p = prof.capability[it.kind]
        success = uniform(seed, it.id, k, "work") < p
        passed = success or uniform(seed, it.id, k, "test") < 1.0 - self.inst.coverage
        fabricated = False
        if not passed and uniform(seed, it.id, k, agent, "gaming") < prof.faults.gaming:
            passed = True  # a plausible wrong result passes a weak test
            self.world.inject("plausible_wrong", it.id)
        elif not passed and uniform(seed, it.id, k, agent, "fabricate") < prof.faults.fabricate:
            passed = fabricated = True  # a passing test "run" by someone else
            self.world.inject("fabricated_evidence", it.id)
        version, rid = c.cache
        cited = c.via if c.via is not None else CitedRecord(it.spec, rid)
        if version != self.world.version[it.spec]:
            self.world.inject("evidence_revocation", it.id)
            if c.via is not None:
                self.world.inject("stale_input", it.id)  # certified over stale inputs
        wid, tid = self._eid(agent), self._eid(agent)
        tester = agent
        if fabricated:
            others = [w for w in self._workers if w != agent] or ["lead"]
            tester = others[int(uniform(seed, it.id, k, "author") * len(others))]
        events = (
            EventSpec("work", agent, {"item": it.id, "spec": version}, id=wid),
            EventSpec("test", tester, {"item": it.id, "passed": passed}, causes=(wid,), id=tid),
        )
        op = "submit_for_review" if it.review else "submit"
        status = Status.SUBMITTED if it.review else Status.DISCHARGED
        new_status = "submitted" if it.review else "done"
        result = {"item": it.id, "spec": version, "attempt": k}
        if passed:

            def ok() -> None:
                c.status = new_status
                truth.result_correct = success
                truth.spec_version = version
                truth.verified = False

            self._pending[wid] = ok
            return Proposal(
                proposer=agent,
                operation=op,
                target=it.id,
                events=events,
                effects=(Effect.status(it.id, status), Effect.result(it.id, result)),
                justification=(wid, tid),
                certificates=(
                    CertificateRequest(
                        "tests_pass", events=(wid, tid), records=(cited,),
                        obligations=(it.id,),
                    ),
                ),
            )
        c.failures += 1
        if uniform(seed, it.id, k, agent, "claim") < prof.faults.claim:

            self.world.inject("unsupported_work", it.id)

            def claimed() -> None:
                c.status = new_status
                truth.result_correct = False
                truth.spec_version = version

            self._pending[wid] = claimed
            return Proposal(
                proposer=agent,
                operation=op,
                target=it.id,
                events=events,
                effects=(Effect.status(it.id, status), Effect.result(it.id, result)),
                justification=(wid,),
            )
        if c.failures > self.inst.retries or feedback:

            def failed() -> None:
                c.status = "failed"

            self._pending[wid] = failed
            return Proposal(
                proposer=agent,
                operation="report_failure",
                target=it.id,
                events=events,
                effects=(Effect.status(it.id, Status.FAILED),),
                justification=(wid, tid),
            )
        self._pending[wid] = lambda: None
        return Proposal(
            proposer=agent,
            operation="message",
            target=it.id,
            events=events,
            effects=(Effect.claim(it.id, "note", f"attempt {k} failed tests; retrying"),),
            justification=(wid, tid),
        )

    def _drop(self, agent: str, c: Card) -> Proposal:
        it = c.item
        eid = self._eid(agent)
        self.world.inject("deletion", it.id)

        def dropped() -> None:
            c.status = "dropped"
            self.world.truth[it.id].dropped = True

        self._pending[eid] = dropped
        return Proposal(
            proposer=agent,
            operation="drop",
            target=it.id,
            events=(EventSpec("message", agent, {"item": it.id, "note": "not needed"}, id=eid),),
            effects=(Effect.status(it.id, Status.SUPERSEDED),),
            justification=(eid,),
        )

    def _verify(self, agent: str, c: Card) -> Proposal:
        it = c.item
        truth = self.world.truth[it.id]
        k = truth.attempts
        right = uniform(self.inst.seed, it.id, k, agent, "review") < self.inst.review_accuracy
        approved = bool(truth.result_correct) if right else not truth.result_correct
        eid = self._eid(agent)
        ev = (EventSpec("review", agent, {"item": it.id, "approved": approved}, id=eid),)
        if approved:

            def ok() -> None:
                c.status = "done"
                truth.verified = True

            self._pending[eid] = ok
            return Proposal(
                proposer=agent,
                operation="verify",
                target=it.id,
                events=ev,
                effects=(Effect.status(it.id, Status.DISCHARGED),),
                justification=(eid,),
                certificates=(CertificateRequest("review_pass", events=(eid,)),),
            )

        def bad() -> None:
            c.status = "failed"

        self._pending[eid] = bad
        return Proposal(
            proposer=agent,
            operation="reject_review",
            target=it.id,
            events=ev,
            effects=(Effect.status(it.id, Status.FAILED),),
            justification=(eid,),
        )


def _value(state: State | None, agent: str | None, oid: str) -> float:
    if state is None or agent is None or agent not in state.decl.agents:
        return 0.0
    o = state.obligations.get(oid)
    if o is None:
        return 0.0
    return float(state.decl.interfaces.value(state.decl.agents[agent], o))


@dataclass(slots=True)
class SimEnvironment:
    """The task environment: owner revisions of specifications; closing evidence."""

    world: SimWorld
    step_of: dict[int, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.world.inst.revisions:
            self.step_of.setdefault(r.step, []).append(r.key)

    def tick(self, step: int, state: State | None) -> None:
        """Revise the specifications scheduled for ``step`` (revoking dependent evidence)."""
        for key in self.step_of.get(step, ()):
            head = self.world.revise(key)
            if state is not None:
                state.on_head_change(key, head)

    def close(self, state: State | None) -> None:
        """Record terminal evidence.

        Every unfinished obligation gets a terminal marker whose completion certificate
        fails (it is then unsound; icore Prop. 4 setting).
        """
        if state is None:
            return
        done = (Status.DISCHARGED, Status.SETTLED, Status.SUPERSEDED)
        todo = [o for o in state.obligations.values() if o.effective_status not in done]
        for o in sorted(todo, key=lambda o: o.id):
            ev = state.add_event(EventSpec("deadline", "env", {"item": o.id}))
            cert = state.import_certificate("completed", verdict=False, events=(ev.id,),
                                            payload=False)
            state.import_assertion(
                Effect.terminal(o.id, False), events=(ev.id,), operation="close",
                certificates=(cert.id,), proposer="env",
            )


def introduce(state: State, inst: TaskInstance) -> None:
    """The task agent introduces the instance's obligations (one legal proposal).

    Each is a required root, so an unsupported drop cannot take task work out of W(X).
    """
    eid = "task-0"
    effects = tuple(
        Effect.node(it.id, it.kind, weight=it.weight, parent=it.parent, deps=it.deps,
                    required_root=True)
        for it in _topo(inst.items)
    )
    v = state.submit(
        Proposal(
            proposer="env",
            operation="introduce",
            events=(EventSpec("task", "env", {"item": "*"}, id=eid),),
            effects=effects,
            justification=(eid,),
        )
    )
    if not v.committed:  # pragma: no cover - the declaration guarantees it
        raise RuntimeError(f"task introduction rejected: {v.reasons}")


def _topo(items: Sequence[WorkItem]) -> list[WorkItem]:
    out: list[WorkItem] = []
    seen: set[str] = set()
    pending = list(items)
    while pending:
        rest = []
        for it in pending:
            if all(d in seen for d in it.deps) and (it.parent is None or it.parent in seen
                                                    or it.parent not in {i.id for i in items}):
                out.append(it)
                seen.add(it.id)
            else:
                rest.append(it)
        if len(rest) == len(pending):
            out.extend(rest)
            break
        pending = rest
    return out


def is_decomposition(inst: TaskInstance) -> bool:
    """True for the decomposition/synthesis mode."""
    return inst.mode == TaskMode.DECOMPOSITION
