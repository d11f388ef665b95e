"""The trace import itself: a recorded run's steps into X = (G, Q, Π), step by step.

:class:`_XWriter` writes X (events, obligations, submissions with their certificates,
diagnoses, snapshots); :class:`_StepReader` reads the run, one handler per step kind.
The mapping is described in :mod:`icore.adapters._trace_audit` (split for size, issue 26).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from icore.adapters._decl import HUMAN
from icore.adapters._evidence import answer_checkable, classify, output_facts, tool_facts
from icore.adapters._results import Finding, StepEvents, Timeline, audit_diagnosis, why_output
from icore.adapters._routing import RoutingTurns
from icore.adapters._trace import Step, StepKind, Trace, end_detail
from icore.adapters._trace_places import DigestSet, NoteLog, OutputsSince
from icore.adapters._whowhen import CAPTAIN_AGENT, MAGENTIC_ONE
from icore.state import (
    AssertionKind,
    DeclarationPackage,
    Effect,
    EventSpec,
    FlagKind,
    State,
    Status,
    ValidatorInput,
    run_validator,
)

ROOT = "task"
"""Id of the required root obligation of every imported run."""


_CLAIMS = ("is_request_satisfied", "is_progress_being_made", "is_in_loop")


class _XWriter:
    """The X side of a trace import: events, obligations, submissions, diagnoses.

    Holds the state X being built and the bookkeeping the step handlers share; every
    write into X goes through it (iCORE Def. 2-6).
    """

    def __init__(self, trace: Trace, decl: DeclarationPackage) -> None:
        self.trace = trace
        self.diagnoses: list[Finding] = []
        self._diagnosis_by_id: dict[str, Finding] = {}
        self.log = NoteLog(self._diagnosis_by_id)
        self.state = State(decl, log=self.log, keep_entries=False)
        self.step_events, self.timeline = StepEvents(), Timeline()  # 8 B, ~28 B a step
        self.unsupported: list[str] = []
        self.stalls = self.replans = 0
        self.plan: str | None = None
        self.plan_count = 0
        self.plans_by_id: dict[str, str] = {}
        self.gate_replanned: set[str] = set()  # plan ids the gate replanned once
        self.open_by_agent: dict[str, str] = {}
        self.pending_ledger: str | None = None
        self.next_speaker: str | None = None
        self.since_ledger = OutputsSince()  # (event, passed, repeat) rows
        self.plans_since_ledger = 0
        self.ever_passed = self.evidence = 0
        self.seen_digests: dict[str, DigestSet] = {}
        self.call_digest: dict[str, str] = {}  # agent -> digest of its last tool-call turn
        self.answers: dict[tuple[str, str], int] = {}  # (agent, call digest) -> its answer
        self.routing = RoutingTurns(trace.orchestrator)  # an orchestrator's hand-offs
        self.seen_pages: dict[str, set[str]] = {}
        self.instructed: dict[str, set[int]] = {}  # agent -> hashes of its instructions
        self.pending_code: tuple[Step, str, str] | None = None  # (step, event, obligation)
        self.last_event: str | None = None
        self.terminated = False
        self.answer_checked: bool | None = None
        """Whether the final answer was checked (None: no terminal marker yet)."""
        self.paused = False
        """The run has no terminal marker and its last step is a pause: it is waiting for
        a human (set at the end of :meth:`_StepReader.run`)."""
        self.root_held = False  # the root has an assignee (_StepReader.take_root)
        self.poser: str | None = None  # who posed the task (never takes it itself)
        # frozen values many items share, one object each (memory of long runs, issue 29)
        self._cause: tuple[str, ...] = ()  # the last one-event causes tuple
        self._ev1: tuple[str] = ("",)  # the last one-event events tuple (:meth:`one`)
        self._node_values: dict[tuple[str, str | None], Any] = {}

    # -- helpers -----------------------------------------------------------------------
    batched: ClassVar[bool] = True
    """Import each step's assertions as one change (``State.import_batch``); False: one
    call per assertion (the same X, slower; kept for the equivalence tests)."""

    def batch(self) -> AbstractContextManager[Any]:
        """A batch of imports (or, unbatched, the state itself: the same calls one by one)."""
        return self.state.import_batch() if self.batched else nullcontext(self.state)

    def one(self, ev: str) -> tuple[str]:
        """``(ev,)``; the same tuple as the last call's for the same event (memory)."""
        if self._ev1[0] != ev:
            self._ev1 = (ev,)
        return self._ev1

    def agent(self, name: str) -> str:
        """``name`` if it is a declared agent of D, else the human (:data:`HUMAN`)."""
        return name if name in self.state.decl.agents else HUMAN

    def event(self, step: Step | None, type_: str, agent: str, **fields: Any) -> str:
        """Add one event of G for a recorded step (``None``: the task itself).

        The event id is ``m<index>`` (``m<index>.<type>`` for a second event of the same
        step, ``task`` for no step); its cause is the step's recorded parent if known,
        else the previous event. ``fields`` plus the step index are its fields.

        Returns:
            The new event's id.
        """
        idx = -1 if step is None else step.index
        eid = "task" if step is None else f"m{idx}"
        if step is not None and eid in self.state.events:
            eid = f"m{idx}.{type_}"
        cause = self.last_event
        if step is not None and step.parent is not None:
            cause = self.step_events.get(step.parent, cause)  # the recorded parent (a span's)
        causes: tuple[str, ...] = ()
        if cause is not None:
            if self._cause and self._cause[0] == cause:
                causes = self._cause  # siblings share their parent's tuple
            else:
                causes = self._cause = (cause,)
        ev = self.state.add_event(EventSpec(type_, self.agent(agent), {"step": idx, **fields},
                                        causes, eid))
        if step is not None:  # its first event
            self.step_events.add(step.index, ev.id)
        self.last_event = ev.id
        return ev.id

    def diagnose(self, defect: str, step: int | None, *, obligations: Sequence[str] = (),
                 assertions: Sequence[str] = (), events: Sequence[str] = (),
                 proposer: str | None = None, detail: str = "",
                 flag: str | None = None) -> Finding:
        """Record a diagnosis as a :class:`Finding` and a ``diagnosis`` note in X's log.

        Work/evidence/assignment defects are diagnosed and routed by iCORE-Audit
        (:func:`icore.audit.diagnose`, ``responsible_agent``).
        """
        x = self.state
        did = f"d{len(self.diagnoses) + 1}"
        payload: dict[str, Any] = {}
        responsible: str | None = proposer
        source = "adapter"
        if defect in ("work", "evidence", "assignment") and obligations:
            f = audit_diagnosis(x, did, step, defect, tuple(obligations), flag, detail)
            if f is not None:
                routed, payload = f
                responsible = routed if routed is not None else proposer
                source = "icore.audit"
        d = Finding(did, defect, step, tuple(obligations), tuple(assertions), tuple(events),
                      proposer, responsible, detail, source, payload or None)
        self.diagnoses.append(d)
        self._diagnosis_by_id[d.id] = d
        x.record_note("diagnosis", d.note_payload(), ref=d.id)
        return d

    def flag_unsupported(self, aids: Sequence[str], oid: str, proposer: str | None,
                         detail: str) -> str:
        """Raise an ``unsupported_assertion`` hard flag on ``oid`` for assertions ``aids``.

        Returns:
            The flag's id.
        """
        self.unsupported.extend(aids)
        return self.state.raise_flag(FlagKind.UNSUPPORTED_ASSERTION, obligations=(oid,),
                                 assertions=aids, proposer=proposer, detail=detail).id

    def snapshot(self, step: int) -> None:
        """Append X's metrics (snd, astab, cq), flag and stall counts at ``step`` to the timeline.

        One :class:`MetricPoint` of the run's cq timeline.
        """
        m = self.state.metrics()
        self.timeline.append(step, m.snd, m.astab, m.cq, len(self.state.flags), self.stalls)

    def node(self, oid: str, kind: str, parent: str | None) -> Effect:
        """``Effect.node(oid, kind, parent=parent)``; equal values share one (frozen) dict."""
        value = self._node_values.get((kind, parent))
        if value is None:
            e = Effect.node(oid, kind, parent=parent)
            if len(self._node_values) < 4096:
                self._node_values[(kind, parent)] = e.value
            return e
        return Effect(AssertionKind.NODE, oid, value)

    def new_obligation(self, oid: str, kind: str, *, parent: str | None, assignee: str,
                       events: Sequence[str], operation: str, proposer: str,
                       status: Status = Status.ASSIGNED, step: int | None = None) -> None:
        """Import obligation ``oid`` (node, assignee, status) into Q with its justification.

        An assignment whose gain exceeds ε (icore Def. 9) is diagnosed as an
        ``assignment`` defect at ``step``.
        """
        x = self.state
        with self.batch() as b:  # one change: the obligation is evaluated once
            b.import_assertion(self.node(oid, kind, parent), events=events,
                               operation=operation, proposer=proposer)
            a = b.import_assertion(Effect.assign(oid, assignee), events=events,
                                   operation=operation, proposer=proposer)
            b.import_assertion(Effect.status(oid, status), events=events,
                               operation=operation, proposer=proposer)
        ev = x.evaluation(oid)  # evaluated as the batch left it: its gain is x.gain(oid)
        gain = ev.gain if ev is not None else x.gain(oid)
        if gain > x.decl.parameters.epsilon:
            decl = x.decl.agents.get(assignee)
            have = decl.capabilities.get(kind) if decl is not None else None
            self.diagnose(
                "assignment", step, obligations=(oid,), assertions=(a.id,), events=events,
                proposer=proposer,
                detail=(f"{kind!r} work assigned to {assignee} (declared capability "
                        f"{have if have is not None else 'none'}); gain {gain:.2f} > ε"),
            )

    def submit(self, s: Step, ev: str, oid: str, tools: tuple[str, ...]) -> None:
        """Import a submission (status and result of ``oid``) with its evidence certificate.

        The certificate is issued by the ``output_evidence`` validator of V.

        The validator sees whether this output repeats what the agent already reported
        (a routing turn made again after progress does not: :mod:`icore.adapters._routing`);
        an output it rejects raises a hard flag and a ``work`` diagnosis.
        """
        x = self.state
        who = self.agent(s.agent)
        fields = x.events[ev].fields
        # does *this* output repeat the agent's earlier report? the payload carries only
        # the matching one (O(1) per output: the audit stays linear in the trace)
        digest, page = str(fields.get("digest")), fields.get("page")
        again = self.routing.repeats(s.index, digest, self.plan_count)  # once per output
        seen_d = [digest] if again and digest in self.seen_digests.get(who, ()) else []
        seen_p = [str(page)] if page and str(page) in self.seen_pages.get(who, ()) else []
        payload = {"seen_digests": seen_d, "seen_pages": seen_p,
                   "evidence_before": self.evidence}
        events = (ev, *tools) if tools else self.one(ev)
        verdict = self.validate("output_evidence", events, payload)
        repeat = fields.get("digest") in seen_d or bool(
            fields.get("interaction") and fields.get("page") in seen_p)
        with self.batch() as b:  # one change: the obligation is evaluated once
            c = b.import_certificate("output_evidence", verdict=verdict, events=events,
                                     payload=payload)
            a1 = b.import_assertion(Effect.status(oid, Status.SUBMITTED), events=events,
                                    operation="submit", certificates=(c.id,), proposer=who)
            a2 = b.import_assertion(
                Effect.result(oid, {"step": s.index, "digest": fields.get("digest")}),
                events=events, operation="submit", certificates=(c.id,), proposer=who)
        self.seen_digests.setdefault(who, DigestSet()).add(digest)
        if s.calls:  # a turn asking for tool calls: retrying them after a refusal is new
            self.call_digest[who] = digest
        if page:
            self.seen_pages.setdefault(who, set()).add(str(page))
        self.since_ledger.append(ev, verdict, repeat)
        self.routing.submitted(s.index, who, verdict)
        if verdict:
            self.ever_passed += 1
            if fields.get("page"):
                self.evidence += 1  # an observation of the environment (a page, a file)
        else:
            why = why_output(fields, repeat, tools, x)
            detail = f"{who}'s output at step {s.index} is not supported by G: {why}"
            fid = self.flag_unsupported((a1.id, a2.id), oid, who, detail)
            self.diagnose("work", s.index, obligations=(oid,), assertions=(a1.id, a2.id),
                          events=events, proposer=who, detail=detail, flag=fid)

    def terminal(self, s: Step, ev: str | None) -> None:
        """Import the final answer as the root's terminal, checked by ``answer_check``.

        A failed check is diagnosed as a ``terminal`` defect. With neither a ground truth
        nor a recorded outcome the answer is *not checked* (:attr:`answer_checked`
        False): the certificate only says that a final answer exists
        (:func:`~icore.adapters.check_answer`). Nothing happens when ``ev`` is None.
        """
        x = self.state
        if ev is None:
            return
        self.terminated = True
        who = self.agent(s.agent)
        t = self.trace
        payload: dict[str, Any] = {"final_answer": s.final_answer,
                                   "ground_truth": t.ground_truth,
                                   "recorded_outcome": t.succeeded}
        checkable = answer_checkable(t.ground_truth, t.succeeded)
        self.answer_checked = checkable
        if not checkable:  # the certificate claims only that there is an answer
            payload["checked"] = False
        verdict = self.validate("answer_check", (ev,), payload)
        c = x.import_certificate("answer_check", verdict=verdict, events=(ev,), payload=payload)
        a = x.import_assertion(Effect.terminal(ROOT, {"final_answer": s.final_answer}),
                               events=(ev,), operation="terminate", certificates=(c.id,),
                               proposer=who)
        x.import_assertion(Effect.status(ROOT, Status.SUBMITTED), events=(ev,),
                           operation="terminate", certificates=(c.id,), proposer=who)
        if not verdict:
            self.diagnose("terminal", s.index, obligations=(ROOT,), assertions=(a.id,),
                          events=(ev,), proposer=who,
                          detail=f"final answer {s.final_answer!r} fails answer_check"
                          if checkable else "the run ended with an empty final answer")

    def validate(self, name: str, events: Sequence[str], payload: Any) -> bool:
        """The verdict of validator ``name`` of V on the recorded events.

        Run through the same runner as Definition 6 (:func:`icore.state.run_validator`);
        an inconsistent validator (raising, non-boolean, two answers) fails (fail closed).
        """
        spec = self.state.decl.validators[name]
        g = self.state.events
        inp = ValidatorInput(tuple([g[e] for e in events]), (), payload, spec.params)
        verdict, _ = run_validator(spec.fn, inp)
        return verdict is True


class _StepReader(_XWriter):
    """Reads a recorded run step by step: one ``on_<kind>`` handler per :class:`StepKind`."""

    # -- the run -----------------------------------------------------------------------
    def start(self) -> None:
        """Pose the task: the task event and the open required root obligation."""
        t = self.trace
        first = t.steps[0] if t.steps and t.steps[0].kind == StepKind.TASK else None
        self.poser = first.agent if first is not None else None
        text = first.content if first is not None else t.question
        ev = self.event(first, "task", HUMAN, text=text[:20000])
        self.state.import_assertion(Effect.node(ROOT, "task", required_root=True), events=(ev,),
                                operation="pose_task", proposer=HUMAN)
        self.state.import_assertion(Effect.status(ROOT, Status.OPEN), events=(ev,),
                                operation="pose_task", proposer=HUMAN)
        self.snapshot(first.index if first is not None else 0)

    def run(self) -> None:
        """Import every recorded step in order through its ``on_<kind>`` handler.

        A snapshot is taken after each step; a run without a terminal marker is diagnosed
        as a ``terminal`` defect, unless its last step is a pause (:attr:`paused`: the
        trace was written while the run waited for a human; it has not ended yet).
        """
        self.start()
        handlers = {k: getattr(self, f"on_{k.value}") for k in StepKind}
        for s in self.routing.steps(self.trace.steps):
            if s.kind != StepKind.TOOL_OUTPUT and self.pending_code is not None:
                self.finish_code(())
            handlers[s.kind](s)
            if not self.root_held and (s.kind in _WORK or s.kind == StepKind.INSTRUCTION):
                self.take_root(s)
            if s.terminates and not self.terminated and s.kind != StepKind.TERMINATION:
                self.terminal(s, self.step_events.get(s.index))
            self.snapshot(s.index)
        if self.pending_code is not None:
            self.finish_code(())
        last = self.trace.steps[-1] if self.trace.steps else None
        if not self.terminated and last is not None and last.pause and not self.trace.unclosed:
            self.paused = True
        elif not self.terminated:
            self.diagnose("terminal", last.index if last else None, obligations=(ROOT,),
                          events=(self.last_event,) if self.last_event else (),
                          detail=end_detail(self.trace, last))

    def take_root(self, s: Step) -> None:
        """The first agent seen working on the task takes it when no plan assigned it.

        Without (QA qa-new9 S4) a run with no plan step left the task unassigned, open
        work nobody holds (unstable, icore Def. 9): astab 0, cq 0.5 however clean. The
        agent of the first output, tool output or termination (not the task's poser)
        self-assigns the root; it goes active unless the step moved it (submitted).
        """
        x = self.state
        root = x.obligations.get(ROOT)
        self.root_held = root is None or root.assignee is not None
        who, ev = self.agent(s.agent), self.step_events.get(s.index)
        if self.root_held or root is None or who == HUMAN or s.agent == self.poser \
                or ev is None or (s.kind not in _WORK and s.agent != self.trace.orchestrator):
            return
        x.import_assertion(Effect.assign(ROOT, who), events=(ev,), operation="self_assign",
                           proposer=who)
        if root.status == Status.OPEN:
            x.import_assertion(Effect.status(ROOT, Status.ACTIVE), events=(ev,),
                               operation="self_assign", proposer=who)
        self.root_held = True

    def on_task(self, s: Step) -> None:
        """A task step: new work, no output repeats one made before it.

        The first is imported by :meth:`start`; a later one (the user's next request, a
        Flow's next kickoff) re-opens an ended run: it ends when that request ends
        (QA qa-new10b S2; as :func:`icore.adapters._trace.run_ended`).
        """
        self.seen_digests.clear()
        self.answers.clear()
        if self.terminated:
            self.terminated, self.answer_checked = False, None

    def on_thought(self, s: Step) -> None:
        """Record a thought as an event (no obligation changes)."""
        self.event(s, "thought", s.agent, **({"to": s.to} if s.to else {}))

    def on_plan(self, s: Step) -> None:
        """Import a plan as a new active ``planning`` obligation under the root.

        A replan supersedes the previous plan (a ``transported_to`` relation to the new one)
        and is a ``progress`` defect, except the PlanFence gate's one replan of a protected
        call (``gate_replan``: counted, not a defect; a second replan of the same call is
        one, named so). A step with a ``plan_id`` supersedes the plan of that id only (a new
        id is a new plan, not a replan). In CaptainAgent traces the first speaker relays
        the manager's plan and starts on it: the plan is its output on the new plan.
        """
        x = self.state
        ev = self.event(s, "plan", s.agent, text=s.content[:20000])
        self.plan_count += 1
        new = f"plan{self.plan_count}"
        # a recorded plan id names the plan a replan rewrites (one protected call's plan
        # in a framework run); without one, every later plan supersedes the previous
        old = self.plan if s.plan_id is None else self.plans_by_id.get(s.plan_id)
        if s.plan_id is not None:
            self.plans_by_id[s.plan_id] = new
        if old is None:
            self.new_obligation(new, "planning", parent=ROOT, assignee=self.agent(s.agent),
                                events=(ev,), operation="plan", proposer=self.agent(s.agent),
                                status=Status.ACTIVE, step=s.index)
            if x.obligations[ROOT].assignee is None:
                x.import_assertion(Effect.assign(ROOT, self.agent(s.agent)), events=(ev,),
                                   operation="plan", proposer=self.agent(s.agent))
                x.import_assertion(Effect.status(ROOT, Status.ACTIVE), events=(ev,),
                                   operation="plan", proposer=self.agent(s.agent))
        else:
            self.replans += 1
            self.new_obligation(new, "planning", parent=ROOT, assignee=self.agent(s.agent),
                                events=(ev,), operation="replan", proposer=self.agent(s.agent),
                                status=Status.ACTIVE, step=s.index)
            x.import_assertion(Effect.relation(old, "transported_to", new), events=(ev,),
                               operation="replan", proposer=self.agent(s.agent))
            x.import_assertion(Effect.status(old, Status.SUPERSEDED), events=(ev,),
                               operation="replan", proposer=self.agent(s.agent))
            if s.gate_replan and s.plan_id not in self.gate_replanned:
                self.gate_replanned.add(str(s.plan_id))  # the gate's one: no defect
            else:  # a gate's replan again (the call retried after its one replan): named
                again = f"a second replan of the protected call {s.plan_id}: " * s.gate_replan
                self.diagnose("progress", s.index, obligations=(old, new), events=(ev,),
                              proposer=self.agent(s.agent), detail=f"{again}replan: {old} -> {new}")
        self.plan = new
        self.plans_since_ledger += 1
        if self.trace.family == CAPTAIN_AGENT:
            # the first speaker relays the manager's plan and starts on it
            self.open_by_agent[self.agent(s.agent)] = new
            self.on_output(s, event=ev, obligation=new)

    def on_ledger(self, s: Step) -> None:
        """Import an orchestrator ledger's claims on the root, each with a certificate.

        Each claim is checked by the ``ledger_evidence`` validator against the outputs
        since the previous ledger; an unsupported claim raises a hard flag and an
        ``evidence`` diagnosis. A ledger admitting no progress or a loop counts as a stall
        (a ``progress`` diagnosis).
        """
        x = self.state
        led = s.ledger
        assert led is not None
        fields: dict[str, Any] = {c: getattr(led, c) for c in _CLAIMS}
        fields["next_speaker"] = led.next_speaker
        ev = self.event(s, "ledger", s.agent, **fields)
        cited = list(self.since_ledger.events)
        outs = [{"event": e, "passed": p, "repeat": r} for e, p, r in self.since_ledger.rows()]
        proposer = self.agent(s.agent)
        for claim in _CLAIMS:
            value = getattr(led, claim)
            if value is None:
                continue
            payload = {"claim": claim, "value": value, "outputs": outs,
                       "plans": self.plans_since_ledger, "ever_passed": self.ever_passed}
            events = (ev, *cited)
            verdict = self.validate("ledger_evidence", events, payload)
            c = x.import_certificate("ledger_evidence", verdict=verdict, events=events,
                                     payload=payload)
            a = x.import_assertion(Effect.claim(ROOT, claim, value), events=events,
                                   operation="ledger_update", certificates=(c.id,),
                                   proposer=proposer)
            if not verdict:
                detail = (f"ledger claims {claim}={str(value).lower()} but the outputs since the "
                          f"previous ledger do not show it")
                fid = self.flag_unsupported((a.id,), ROOT, proposer, detail)
                self.diagnose("evidence", s.index, obligations=(ROOT,), assertions=(a.id,),
                              events=events, proposer=proposer, detail=detail, flag=fid)
        if led.is_progress_being_made is False or led.is_in_loop is True:
            self.stalls += 1
            why = "in a loop" if led.is_in_loop else "no progress"
            sev = self.event(s, "stall", s.agent, reason=why)
            self.diagnose("progress", s.index, obligations=(ROOT,), events=(sev, *cited),
                          proposer=proposer, detail=f"ledger admits {why}")
        self.next_speaker = led.next_speaker
        self.pending_ledger = ev
        self.since_ledger = OutputsSince()
        self.plans_since_ledger = 0

    def on_instruction(self, s: Step) -> None:
        """Import an instruction as a new obligation assigned to its addressee.

        Its events include the pending ledger when the ledger named the addressee as next
        speaker. An instruction the addressee never got before is new work: its outputs
        are no repeat of what it reported for other instructions (two tasks both
        answered "Done."); the same instruction again (a loop) keeps what it reported, but
        a routing turn's hand-off after others' progress (:mod:`icore.adapters._routing`).
        """
        to = self.agent(s.to or "")
        said, got = hash(s.content), self.instructed.setdefault(to, set())
        if self.routing.new_work(s.index, to, s.content, self.plan_count) or said not in got:
            got.add(said)
            self.seen_digests.pop(to, None)
        ev = self.event(s, "instruction", s.agent, to=to, text=s.content[:20000])
        events: tuple[str, ...] = (ev,)
        if self.pending_ledger is not None and self.next_speaker == to:
            events = (self.pending_ledger, ev)
        oid = f"o{s.index}"
        self.new_obligation(oid, classify(s.content, self.state.decl.agents), step=s.index,
                            parent=self.plan or ROOT, assignee=to, events=events,
                            operation="assign", proposer=self.agent(s.agent))
        self.open_by_agent[to] = oid

    def on_output(self, s: Step, *, event: str | None = None,
                  obligation: str | None = None) -> None:
        """Import an agent's output as a submission on its open obligation.

        An agent with no open obligation self-assigns a new one. An output with code waits
        for the tool output that follows (:meth:`finish_code`).

        Args:
            s: the recorded step.
            event: an event already recorded for the step (a relayed plan); the output's
                facts then go on a sibling event.
            obligation: the obligation it works on (default: the agent's open one).
        """
        who = self.agent(s.agent)
        facts = output_facts(s.content, s.calls)
        ev = event or self.event(s, "output", who, **facts)
        if event is not None:
            # a relayed plan is also an output: record its facts on a sibling event
            ev = self.event(s, "output", who, **facts)
        oid = obligation or self.open_by_agent.get(who)
        if oid is None or self.state.obligations[oid].status not in (Status.ASSIGNED,
                                                                   Status.ACTIVE):
            oid = f"o{s.index}"
            self.new_obligation(oid, classify(s.content, self.state.decl.agents), step=s.index,
                                parent=self.plan or ROOT, assignee=who, events=self.one(ev),
                                operation="self_assign", proposer=who, status=Status.ACTIVE)
            self.open_by_agent[who] = oid
        if facts["code"]:
            self.pending_code = (s, ev, oid)
            return
        self.submit(s, ev, oid, ())

    def on_tool_output(self, s: Step) -> None:
        """Record a tool output as an event and submit the pending code output with it.

        An answer to an agent's last turn of recorded tool calls (``calls``) that is news
        (a first result, another one, an error, a refusal) makes asking the same again no
        repeat (a re-read, a retry); the same answer again, or none, leaves it one (a loop).
        """
        facts = tool_facts(s.content, s.exitcode,  # "Code output:" is Who&When's rule
                           plain=self.trace.family not in (MAGENTIC_ONE, CAPTAIN_AGENT))
        ev = self.event(s, "tool_output", s.agent, **facts)
        if not facts["error"] and not facts["empty"]:
            self.evidence += 1
        asked = self.call_digest.pop(who := self.agent(s.agent), None)
        said = hash(str(s.content))
        if asked is not None and (facts["error"] or self.answers.get((who, asked)) != said):
            self.answers[who, asked] = said  # QA r8-ag2mcp D1; a third same ask repeats
            self.seen_digests.get(who, DigestSet()).discard(asked)
        if self.pending_code is not None:
            self.finish_code((ev,))

    def finish_code(self, tools: tuple[str, ...]) -> None:
        """Submit the pending code output with the tool-output events ``tools``."""
        assert self.pending_code is not None
        s, ev, oid = self.pending_code
        self.pending_code = None
        self.submit(s, ev, oid, tools)

    def on_stall(self, s: Step) -> None:
        """Record an orchestrator's stall as an event and a ``progress`` diagnosis."""
        self.stalls += 1
        ev = self.event(s, "stall", s.agent, reason=_first_line(s.content))
        self.diagnose("progress", s.index, obligations=(ROOT,), events=(ev,),
                      proposer=self.agent(s.agent), detail="orchestrator declared a stall")

    def on_termination(self, s: Step) -> None:
        """Record the termination event and import the run's terminal (:meth:`terminal`)."""
        ev = self.event(s, "termination", s.agent, final_answer=s.final_answer,
                        reason=_first_line(s.content))
        self.terminal(s, ev)


_WORK = frozenset({StepKind.OUTPUT, StepKind.TOOL_OUTPUT, StepKind.TERMINATION})
"""The steps that show an agent working on the task (:meth:`_StepReader.take_root`)."""


def _first_line(text: str, limit: int = 200) -> str:
    lines = text.strip().splitlines()
    return lines[0][:limit] if lines else ""
