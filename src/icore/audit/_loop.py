"""The iCORE-Audit loop (icore Alg. 1; design.md 4.4), passive observation and MAS-only.

One iteration = at most one agent call:

1. the environment moves (owner revisions revoke evidence through ``on_head_change``);
2. terminal check (D's ``terminal``);
3. if a diagnosis is pending, the routed agent's recovery is requested and audited
   (``AuditRecovery_D``); otherwise, if productive work is enabled, the host's ordinary
   proposal is requested (``Schedule_D``), audited (Definition 6) and committed or
   rejected;
4. patience, per obligation: every enabled assigned obligation has its own counter of
   iterations since its last progress (a committed transition that *changed* one of its
   declared progress fields, ``parameters.progress_fields``; a re-assertion of the same
   value is not progress). Activity is not progress: a re-assignment, to another agent or
   back, keeps the obligation's window (a loop between assignees trips it), and so does a
   detour out of enabled work; only finished work drops it. The ``patience`` trigger
   fires when some counter reaches H, naming those obligations, longest first (``h`` in
   the trajectory is the largest counter);
5. snd, astab, cq are recomputed (incrementally) and the five triggers evaluated;
6. on a trigger (``mode="audit"`` only): diagnosis F with frozen W_F, routing, feedback.

Interventions spend the same budget of agent calls as ordinary steps (a recovery call
takes the iteration's slot), so conditions are compared at equal agent calls; the calls
spent on recoveries are reported as *extra agent calls*. Every diagnosis, feedback,
rejection and recovery is a log entry (notes of kinds ``diagnosis``, ``feedback``,
``recovery``, ``failure``; rejections are the state's own entries).

``LoopConfig.view`` restricts what the auditor's decisions may read (``X``, ``G`` or
``Q``; :mod:`icore.audit._views`), for the loop-level representation ablation (icore
Sec. 5, claim 1).

``mode="passive"``: the same state is built and measured, nothing intervenes, and the
host's effects take place regardless of the audit: a rejected proposal's claimed effects
are recorded as *observed* assertions (events added to G, effects imported to Q without
Definition 6) so their soundness is computed honestly. :func:`run_mas_only` runs the host
alone, with no state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from icore._clock import Clock, ManualClock
from icore.audit._diagnosis import Diagnosis, diagnose, responsible_agent
from icore.audit._errors import AuditError
from icore.audit._feedback import Feedback, build_feedback
from icore.audit._host import Environment, HostOutcome, HostPolicy, HostView, NoEnvironment
from icore.audit._loop_types import (
    AuditRunResult,
    Intervention,
    LoopConfig,
    StepRecord,
    observe_unaudited,
)
from icore.audit._recovery import RecoveryVerdict, audit_recovery, commit_recovery
from icore.audit._triggers import Trigger, TriggerHit, WorkIndex, evaluate_triggers
from icore.audit._views import (
    GATE_REASONS,
    RECOVERY_CODES,
    TRIGGERS,
    GStall,
    check_view,
)
from icore.state import (
    Proposal,
    State,
    Status,
    Verdict,
    check_legality,
)

_FINISHED = frozenset({Status.DISCHARGED, Status.SETTLED, Status.SUPERSEDED})
"""Effective statuses that end an obligation's patience window."""

class AuditLoop:
    """iCORE-Audit around a host policy (icore Alg. 1; design.md 4.4).

    Args:
        state: X (with D); its log receives every entry. ``mode="audit"`` needs
            ``keep_entries=True`` (recoveries are judged on a copy of X).
        host: the host policy (``Schedule_D``) that also answers feedback.
        config: run configuration.
        env: the task environment (owner revisions, closing evidence).
        clock: injected clock used only to time audits (cost reporting); the default
            :class:`~icore._clock.ManualClock` reports 0 ms.

    Raises:
        AuditError: an unknown mode or view, a negative budget, or ``mode="audit"`` (or a
            view other than ``X``) on a state that does not keep its entries.
    """

    def __init__(
        self,
        state: State,
        host: HostPolicy,
        *,
        config: LoopConfig | None = None,
        env: Environment | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.state = state
        self.host = host
        self.config = config or LoopConfig()
        if self.config.mode not in ("audit", "passive"):
            raise AuditError("mode must be 'audit' or 'passive'", mode=self.config.mode)
        if self.config.max_steps < 0:
            raise AuditError("max_steps must be >= 0", max_steps=self.config.max_steps)
        try:
            self.view = check_view(self.config.view)
        except ValueError:
            raise AuditError("view must be one of X, G, Q", view=self.config.view) from None
        if (self.config.mode == "audit" or self.view != "X") and not state.keep_entries:
            raise AuditError("iCORE-Audit needs State(keep_entries=True) to audit recoveries "
                             "on a candidate copy")
        self.env: Environment = env if env is not None else NoEnvironment()
        self.clock: Clock = clock if clock is not None else ManualClock()
        state.track_touched()
        state.take_touched()  # the index below starts from X as it is now
        self.index = WorkIndex(state)
        self.no_progress_steps = 0
        self._seen = state.seq
        self._since: dict[str, int] = {}  # enabled assigned obligation -> step of last progress
        self._last_diag: dict[tuple[str, tuple[str, ...]], int] = {}
        self._flag_attempts: dict[str, int] = {}
        self._exhausted: set[str] = set()
        self._n_diag = 0
        self._pending: tuple[Diagnosis, Feedback, str] | None = None
        self._g = GStall() if self.view == "G" else None

    # ----------------------------------------------------------------- bookkeeping
    def _sync(self) -> None:
        """Bring the work index up to date with the entries since the last sync."""
        x = self.state
        if x.seq == self._seen:
            return
        if x.keep_entries:
            new = list(x.entries_since(self._seen))
            if self._g is not None:
                self._g.update(new)
            self.index.update(x.take_touched())
        else:
            x.take_touched()
            self.index.rebuild()
        self._seen = x.seq

    def _patience(self, step: int) -> list[str]:
        """Update the per-obligation patience counters at the end of ``step``.

        Sets ``h`` to the largest and returns the obligations whose counter reached H,
        longest first. Cost O(enabled work).
        """
        obs = self.state.obligations
        live: dict[str, int] = {}
        for oid in self.index.enabled:
            if obs[oid].assignee is None:
                continue
            since = self._since.get(oid)
            live[oid] = step if since is None else since
        # activity is not progress: a re-assignment (to anyone, back and forth) or a
        # detour out of enabled work keeps the window; only progress (_progressed) resets
        # it, and finished work drops it
        kept = {o: s for o, s in self._since.items() if o not in live and o in obs
                and obs[o].effective_status not in _FINISHED}
        self._since = kept | live
        stall = {o: step - s for o, s in live.items()}
        self.no_progress_steps = max(stall.values(), default=0)
        hit = [o for o, n in stall.items() if n >= self.state.decl.parameters.patience]
        return sorted(hit, key=lambda o: (-stall[o], o))

    def _progressed(self, oids: Sequence[str], step: int) -> None:
        for oid in oids:
            if oid in self._since:
                self._since[oid] = step

    def _cooling(self, hit: TriggerHit, step: int) -> bool:
        if hit.trigger == Trigger.HARD_FLAG:
            return all(f in self._exhausted for f in hit.flags)
        key = (str(hit.trigger), hit.obligations[:5])
        last = self._last_diag.get(key)
        return last is not None and step - last < self.config.cooldown

    # ----------------------------------------------------------------- the loop
    def run(self) -> AuditRunResult:
        """Run until D's terminal predicate holds or the budget is spent."""
        cfg = self.config
        x = self.state
        res = AuditRunResult(mode=cfg.mode)
        for step in range(cfg.max_steps):
            self.env.tick(step, x)
            self._sync()
            if x.terminal():
                res.terminal = True
                break
            res.steps += 1
            view = HostView(step, x)
            call, decision = "none", "none"
            if self._pending is not None:
                call = "recovery"
                decision = self._recover(view, res)
            elif cfg.mode == "passive" or self.index.enabled:
                call = "ordinary"
                decision = self._ordinary(view, res, step)
            self._sync()
            stalled = self._patience(step)
            if self._g is not None:
                self.no_progress_steps, stalled = self._g.stalled(x.decl.parameters.patience)
            m = x.metrics()
            hits = evaluate_triggers(
                x,
                index=self.index,
                h=self.no_progress_steps,
                metrics=m,
                terminal=x.terminal(),
                stalled=stalled,
            )
            hits = [h for h in hits if h.trigger in TRIGGERS[self.view]]
            for hit in hits:
                res.fired[str(hit.trigger)] = res.fired.get(str(hit.trigger), 0) + 1
            diag_id = None
            if cfg.mode == "audit" and hits and self._pending is None:
                diag_id = self._intervene(hits, step, res)
            res.trajectory.append(
                StepRecord(
                    step, call, decision, self.no_progress_steps, m.snd, m.astab, m.cq,
                    tuple(str(h.trigger) for h in hits), diag_id,
                )
            )
        else:
            res.terminal = x.terminal()
        self.env.close(x)
        self._sync()
        res.final = x.metrics()
        return res

    def _ordinary(self, view: HostView, res: AuditRunResult, step: int) -> str:
        x = self.state
        p = self.host.propose(view)
        res.agent_calls += 1
        if p is None:
            return "idle"
        if not isinstance(p, Proposal):
            raise AuditError("host returned something other than a Proposal", got=type(p).__name__)
        t0 = self.clock.now_ms()
        v = check_legality(p, x, head_view=self.config.head_view)
        x.apply_verdict(v)
        res.audit_ms += self.clock.now_ms() - t0
        res.proposals += 1
        enforced = self.config.mode == "audit"
        if v.committed:
            self._progressed(v.progressed, step)
        else:
            res.rejections += 1
            enforced = enforced and self._enforce(v, res)
            if not enforced:
                observe_unaudited(x, v.proposal)
        self.host.observe(HostOutcome.of(v.proposal, v, enforced=enforced))
        if v.committed:
            return "commit"
        return "reject" if enforced or self.config.mode == "passive" else "unenforced"

    def _enforce(self, v: Verdict, res: AuditRunResult) -> bool:
        """Whether the view sees a reason of the rejection ``v``.

        If it does, the rejection is enforced and what it names counts as detected.
        """
        seen = GATE_REASONS[self.view]
        reasons = [r for r in v.reasons if seen is None or r.code in seen]
        if not reasons:
            return False
        if v.proposal.target is not None:
            res.named.add(v.proposal.target)
        obs = self.state.obligations
        res.named.update(r.subject for r in reasons if r.subject is not None and r.subject in obs)
        return True

    def _route(self, f: Diagnosis) -> str | None:
        """The agent a diagnosis is routed to.

        D's rule, or in the ``G`` view the last author of an event on the diagnosed items
        (the only owner G shows).
        """
        if self._g is None:
            return responsible_agent(self.state, f)
        for oid in f.obligations:
            who = self._g.author.get(oid)
            if who is not None and who in self.state.decl.agents:
                return who
        return None

    def _intervene(self, hits: Sequence[TriggerHit], step: int, res: AuditRunResult) -> str | None:
        x = self.state
        live = [h for h in hits if not self._cooling(h, step)]
        if not live:
            return None
        self._n_diag += 1
        f = diagnose(
            x, live, diagnosis_id=f"d{self._n_diag}", step=step,
            skip_flags=frozenset(self._exhausted),
        )
        if f is None:
            self._n_diag -= 1
            return None
        stall_like = f.primary in (Trigger.PATIENCE, Trigger.NO_PRODUCTIVE_WORK)
        if self.view != "G" and stall_like and all(
            x.obligations[o].assignee is None for o in f.obligations
        ):
            f = _replace_defect(f, "assignment")
        res.named.update(f.obligations)
        agent = self._route(f)
        f = _with_agent(f, agent)
        # the feedback reads D's interfaces (weight, value): build it before anything is
        # written, so a misbehaving interface leaves no diagnosis without its feedback
        fb = (
            None
            if agent is None
            else build_feedback(x, f, feedback_id=f"fb{self._n_diag}", to=agent)
        )
        self._last_diag[(str(f.primary), _sig(live, f.primary))] = step
        x.record_note("diagnosis", f.to_json(), ref=f.id)
        if agent is None or fb is None:
            x.record_note(
                "failure",
                {"diagnosis": f.id, "agent": None, "violations": ["no responsible agent"]},
                ref=f.id,
            )
            res.interventions.append(Intervention(f, None, None, cq_before=f.cq_before))
            return f.id
        x.record_note("feedback", fb.to_json(), ref=f.id)
        res.feedback_tokens += fb.tokens
        self._pending = (f, fb, agent)
        return f.id

    def _recover(self, view: HostView, res: AuditRunResult) -> str:
        assert self._pending is not None
        f, fb, agent = self._pending
        self._pending = None
        x = self.state
        props = tuple(self.host.recover(fb, view))
        res.agent_calls += 1
        res.extra_calls += 1
        for p in props:
            if not isinstance(p, Proposal):
                raise AuditError("recovery must be Proposals", got=type(p).__name__)
        for fid in f.flags:
            self._flag_attempts[fid] = self._flag_attempts.get(fid, 0) + 1
        rv: RecoveryVerdict = audit_recovery(
            x, f, props, agent=agent, head_view=self.config.head_view
        )
        seen = RECOVERY_CODES[self.view]
        if not rv.accepted and seen is not None and not any(
            v.code in seen for v in rv.violations
        ):
            return self._unguarded(f, fb, agent, props, rv, view, res)
        if rv.accepted:
            committed = commit_recovery(
                x, rv, agent=agent, note=f"recovery of {f.id}", head_view=self.config.head_view
            )
            for v in committed:
                self.host.observe(HostOutcome(v.proposal, v, True, True, recovery=True))
            for v in committed:
                self._progressed(v.progressed, view.step)
            pids = tuple(str(v.proposal.id) for v in committed)
            x.record_note(
                "recovery",
                {
                    "diagnosis": f.id,
                    "feedback": fb.id,
                    "agent": agent,
                    "proposals": list(pids),
                    "changed": list(rv.changed),
                    "resolved": list(rv.resolves),
                    "cq_before": rv.before.cq,
                    "cq_after": rv.after.cq if rv.after else None,
                },
                ref=f.id,
            )
            res.interventions.append(
                Intervention(
                    f, agent, fb, pids, True, (), rv.before.cq,
                    rv.after.cq if rv.after else None, rv.changed,
                )
            )
            return "recovered"
        for p in props:
            self.host.observe(HostOutcome(p, None, True, False, recovery=True))
        viol = tuple(f"{v.code}: {v.detail}" for v in rv.violations)
        x.record_note(
            "failure",
            {
                "diagnosis": f.id,
                "feedback": fb.id,
                "agent": agent,
                "violations": list(viol),
                "proposals": [p.labels() for p in props],
                "cq_before": rv.before.cq,
                "cq_after": rv.after.cq if rv.after else None,
            },
            ref=f.id,
        )
        for fid in f.flags:
            if (
                self._flag_attempts.get(fid, 0) >= self.config.max_attempts_per_flag
                and fid not in self._exhausted
            ):
                self._exhausted.add(fid)
                x.record_note(
                    "failure",
                    {"diagnosis": f.id, "flag": fid, "violations": ["recovery budget spent"]},
                    ref=f.id,
                )
        res.interventions.append(
            Intervention(f, agent, fb, (), False, viol, rv.before.cq, None, ())
        )
        return "recovery_rejected"


    def _unguarded(
        self, f: Diagnosis, fb: Feedback, agent: str, props: Sequence[Proposal],
        rv: RecoveryVerdict, view: HostView, res: AuditRunResult,
    ) -> str:
        """Run a recovery whose rejection the view cannot see.

        Each proposal goes through the view's gate (committed, enforced-rejected, or
        observed unaudited).
        """
        x = self.state
        done: list[str] = []
        for p in props:
            v = check_legality(p, x, head_view=self.config.head_view)
            x.apply_verdict(v)
            ok, enforced = v.committed, True
            if ok:
                self._progressed(v.progressed, view.step)
            elif not self._enforce(v, res):
                observe_unaudited(x, v.proposal)
                ok, enforced = True, False
            if ok:
                done.append(str(v.proposal.id))
            self.host.observe(HostOutcome(v.proposal, v, enforced, ok, recovery=True))
        if self._g is not None:
            for oid in f.obligations:
                self._g.reset(oid)
        unseen = tuple(f"{v.code}: {v.detail}" for v in rv.violations)
        x.record_note(
            "recovery",
            {"diagnosis": f.id, "feedback": fb.id, "agent": agent, "proposals": done,
             "unguarded": True, "unseen_violations": list(unseen),
             "cq_before": rv.before.cq},
            ref=f.id,
        )
        res.interventions.append(
            Intervention(f, agent, fb, tuple(done), bool(done), unseen, rv.before.cq, None, ())
        )
        return "recovered_unguarded"


def _sig(hits: Sequence[TriggerHit], primary: Trigger) -> tuple[str, ...]:
    for h in hits:
        if h.trigger == primary:
            return h.obligations[:5]
    return ()


def _replace_defect(f: Diagnosis, defect: str) -> Diagnosis:
    return replace(f, defect=defect)


def _with_agent(f: Diagnosis, agent: str | None) -> Diagnosis:
    return replace(f, responsible=agent)


def run_mas_only(
    host: HostPolicy, *, max_steps: int, env: Environment | None = None
) -> AuditRunResult:
    """The MAS-only condition: the host alone, no iCORE state, nothing audited.

    Every proposal is taken as done (``HostOutcome(verdict=None)``); the run ends when the
    budget is spent or the host has nothing left to do for ``max_steps`` iterations.
    """
    env = env if env is not None else NoEnvironment()
    res = AuditRunResult(mode="mas_only")
    for step in range(max_steps):
        env.tick(step, None)
        done = getattr(host, "done", None)
        if callable(done) and done():
            res.terminal = True
            break
        res.steps += 1
        p = host.propose(HostView(step, None))
        res.agent_calls += 1
        if p is not None:
            res.proposals += 1
            host.observe(HostOutcome.of(p, None, enforced=False))
    env.close(None)
    return res
