"""Diagnosis F, its frozen matched set W_F, and responsible-agent routing.

icore Sec. 4; design.md 4.4. A diagnosis identifies the affected obligations, missing or
invalid evidence, current assignees, feasible alternatives and the relevant interaction
history, and freezes W_F before any feedback is sent. Routing is D's deterministic
``responsible(X, F)`` rule (the built-in: assignment defects go to the assignment
authority, work/evidence defects to the assignee or the flagged proposer, in the
priority D fixes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icore.audit._triggers import Trigger, TriggerHit
from icore.state import (
    FlagKind,
    HardFlag,
    MatchedSet,
    State,
)

MAX_OBLIGATIONS = 5
"""At most this many obligations are diagnosed at once (the most relevant first)."""
HISTORY = 6
"""At most this many past proposals are quoted as interaction history."""
MAX_CHILDREN = 10
"""At most this many (most recent) children of each affected obligation join W_F."""


@dataclass(frozen=True, slots=True)
class EvidenceGap:
    """Missing or invalid evidence of one affected obligation.

    Attributes:
        obligation: obligation id.
        missing: required certificate kinds its active assertions lack.
        revoked: revoked certificate ids its active assertions cite.
        reasons: Definition 6 rejection reasons of the flagged attempt (``code: detail``).
    """

    obligation: str
    missing: tuple[str, ...] = ()
    revoked: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A diagnosis F (icore Sec. 4; design.md 1 "diagnosis").

    Attributes:
        id: diagnosis id (``d<n>``).
        step: loop iteration at which it was issued.
        triggers: every trigger that fired at that iteration.
        primary: the trigger this diagnosis addresses.
        defect: ``work``, ``evidence`` or ``assignment`` (selects the routing rule).
        obligations: affected obligation ids.
        proposer: proposer of the flagged attempt (hard flags), else None.
        flags: hard flags the recovery must resolve to continue.
        evidence: missing/invalid evidence per affected obligation.
        assignees: (obligation, current assignee) pairs.
        alternatives: (obligation, ((agent, value), ...)) feasible alternatives, best first.
        history: ids of recent proposals about the affected obligations.
        matched: the frozen matched set W_F.
        cq_before: cq(X^-; W_F) when F was issued.
        responsible: the routed agent (None: D names nobody).
    """

    id: str
    step: int
    triggers: tuple[Trigger, ...]
    primary: Trigger
    defect: str
    obligations: tuple[str, ...]
    proposer: str | None
    flags: tuple[str, ...]
    evidence: tuple[EvidenceGap, ...]
    assignees: tuple[tuple[str, str | None], ...]
    alternatives: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]
    history: tuple[str, ...]
    matched: MatchedSet
    cq_before: float
    responsible: str | None = None
    detail: str = field(default="")

    def to_json(self) -> Any:
        """The diagnosis as the JSON payload of its log entry."""
        return {
            "id": self.id,
            "step": self.step,
            "triggers": [str(t) for t in self.triggers],
            "primary": str(self.primary),
            "defect": self.defect,
            "obligations": list(self.obligations),
            "proposer": self.proposer,
            "flags": list(self.flags),
            "evidence": [
                {
                    "obligation": g.obligation,
                    "missing": list(g.missing),
                    "revoked": list(g.revoked),
                    "reasons": list(g.reasons),
                }
                for g in self.evidence
            ],
            "assignees": [[o, a] for o, a in self.assignees],
            "alternatives": [[o, [[a, v] for a, v in alts]] for o, alts in self.alternatives],
            "history": list(self.history),
            "matched": {
                "obligations": list(self.matched.obligations),
                "weights": list(self.matched.weights),
            },
            "cq_before": self.cq_before,
            "responsible": self.responsible,
            "detail": self.detail,
        }


_DEFECT_OF_FLAG = {
    FlagKind.UNSUPPORTED_ASSERTION: "work",
    FlagKind.REVOCATION: "evidence",
    FlagKind.VALIDATOR_INCONSISTENCY: "evidence",
}


def _evidence_gap(state: State, oid: str, flags: Sequence[HardFlag]) -> EvidenceGap:
    missing: set[str] = set()
    revoked: set[str] = set()
    for a in state.active_assertions(oid):
        j = state.justifications.get(a.id)
        if j is None:
            missing.add("<justification>")
            continue
        op = state.decl.operations.get(j.operation) if j.operation else None
        have = set()
        for cid in j.certificates:
            c = state.certificates.get(cid)
            if c is not None and state.certificate_active(cid):
                have.add(c.validator)
            else:
                revoked.add(cid)
        if op is not None:
            missing.update(k for k in op.requires if k not in have)
    reasons = tuple(
        f"{r.code}: {r.detail}" for f in flags if oid in f.obligations for r in f.reasons
    )
    return EvidenceGap(oid, tuple(sorted(missing)), tuple(sorted(revoked)), reasons)


def alternatives(state: State, oid: str) -> tuple[tuple[str, float], ...]:
    """Feasible agents for ``oid`` other than its assignee, by declared value (best first)."""
    o = state.obligations[oid]
    iface = state.decl.interfaces
    out = [
        (a.id, float(iface.value(a, o)))
        for a in state.decl.agents.values()
        if a.id != o.assignee and iface.feasible(a, o)
    ]
    out.sort(key=lambda av: (-av[1], av[0]))
    return tuple(out)


def matched_cohort(state: State, obligations: Sequence[str]) -> list[str]:
    """W_F members: the affected obligations plus their most recent children.

    The children are sub-work the recovery may change (at most :data:`MAX_CHILDREN` per
    affected obligation); members come in a deterministic order. The cap keeps a diagnosis
    O(1) in the size of X; a recovery that changes an older child is rejected
    (``outside_matched_set``), which fails closed.
    """
    affected = [o for o in obligations if o in state.obligations]
    aset = set(affected)
    children = sorted(
        {c for o in affected for c in state.children(o)[-MAX_CHILDREN:] if c not in aset}
    )
    return affected + children


def history_of(state: State, obligations: Sequence[str]) -> tuple[str, ...]:
    """Ids of the most recent proposals naming any of ``obligations``.

    Read from the state's per-obligation index: O(|obligations| · HISTORY), independent of
    the log length.
    """
    return state.history(obligations, HISTORY)


def diagnose(
    state: State,
    hits: Sequence[TriggerHit],
    *,
    diagnosis_id: str,
    step: int,
    skip_flags: frozenset[str] = frozenset(),
) -> Diagnosis | None:
    """Build F for the highest-priority fired trigger and freeze W_F (icore Sec. 4).

    Args:
        state: X^-.
        hits: fired triggers (in priority order).
        diagnosis_id: id for F.
        step: loop iteration.
        skip_flags: open flags whose recovery budget is spent (not diagnosed again).

    Returns:
        F, or None when no fired trigger points at an obligation to diagnose.
    """
    fired = tuple(h.trigger for h in hits)
    for hit in hits:
        flags: list[HardFlag] = []
        proposer = None
        if hit.trigger == Trigger.HARD_FLAG:
            open_ = [state.flags[f] for f in hit.flags if f not in skip_flags]
            if not open_:
                continue
            flag = open_[0]
            flags = [flag]
            defect = _DEFECT_OF_FLAG.get(flag.kind, "work")
            proposer = flag.proposer
            oids = [o for o in flag.obligations if o in state.obligations]
            detail = f"{flag.kind} {flag.id}: {flag.detail}"
        elif hit.trigger == Trigger.REASSIGNMENT:
            defect = "assignment"
            oids = list(hit.obligations)
            detail = hit.detail
        elif hit.trigger == Trigger.LOW_QUALITY and not hit.obligations:
            defect = "assignment"
            oids = [
                o
                for o in state.evaluated()
                if not state.is_stable(o) and state.obligations[o].assignee is not None
            ]
            detail = hit.detail
        else:
            defect = "work"
            oids = list(hit.obligations)
            detail = hit.detail
        oids = oids[:MAX_OBLIGATIONS]
        if not oids:
            continue
        cohort = matched_cohort(state, oids)
        matched = state.freeze(cohort)
        cq_before = state.metrics(over=matched).cq
        return Diagnosis(
            id=diagnosis_id,
            step=step,
            triggers=fired,
            primary=hit.trigger,
            defect=defect,
            obligations=tuple(oids),
            proposer=proposer,
            flags=tuple(f.id for f in flags),
            evidence=tuple(_evidence_gap(state, o, flags) for o in oids),
            assignees=tuple((o, state.obligations[o].assignee) for o in oids),
            alternatives=tuple((o, alternatives(state, o)) for o in oids),
            history=history_of(state, oids),
            matched=matched,
            cq_before=cq_before,
            detail=detail,
        )
    return None


def responsible_agent(state: State, diagnosis: Diagnosis) -> str | None:
    """``ResponsibleAgent_D(X, F)``: D's deterministic routing rule (icore Sec. 4).

    Work/evidence defects: the current assignee or the flagged proposer (priority from
    ``parameters.responsible_priority``); assignment defects: the agent D authorizes to
    revise assignments. "Responsible" means repair authority, not blame.

    Raises:
        InterfaceError: D's ``responsible`` (or ``assignment_authority``) raised or
            named something that is not an agent of M_D (checked by
            :meth:`State.responsible <icore.state.State.responsible>`); the loop calls
            this before it writes the diagnosis, so nothing is logged.
    """
    return state.responsible(diagnosis)


def diagnose_hit(
    state: State, hit: TriggerHit, *, diagnosis_id: str, step: int
) -> Diagnosis | None:
    """F for one fired trigger, routed by D's rule (:func:`responsible_agent`).

    The one diagnosis step of every audit path (icore Sec. 4; design.md 4.4): the loop
    diagnoses the triggers it evaluates; live runs and imported traces diagnose each hard
    flag (``hard_flag`` trigger) and each ε-unstable assignment (``reassignment``) as it
    appears, through this. Pure: X is unchanged.

    Returns:
        F with ``responsible`` set, or None when there is nothing to diagnose.

    Raises:
        InterfaceError: as :func:`diagnose` and :func:`responsible_agent`.
    """
    f = diagnose(state, [hit], diagnosis_id=diagnosis_id, step=step)
    if f is None:
        return None
    return replace(f, responsible=responsible_agent(state, f))


def diagnose_flags(
    state: State,
    flags: Iterable[HardFlag],
    *,
    first_id: int = 1,
) -> tuple[Diagnosis, ...]:
    """The one diagnosis step of a run's hard flags, as they are raised (icore Sec. 4).

    Each flag fires the ``hard_flag`` trigger and is diagnosed by :func:`diagnose_hit`
    (F, its frozen W_F, routed by D's rule). Live runs call it as flags appear, reports
    render what it returned; nothing else diagnoses a live run's flags. Pure: X is
    unchanged.

    The step of F (the one rule): a run diagnosed as it happens numbers its steps by the
    proposals X has audited (step k: the k-th proposal was audited; the run's timeline
    and flag table count the same way), and F is issued at the step its flag was raised
    in, ``F.step = state.proposal_count()`` when called. In icore Alg. 1 (Sec. 4;
    design.md 4.4) one iteration audits the proposal, recomputes the diagnostics and,
    when a trigger such as a hard flag fires, builds F: a flag raised by a proposal is
    diagnosed at *that proposal's* step, not the next one (X records the proposal before
    the flags it raises, so the k-th proposal's flag gets step k). A flag no proposal
    raised (a revocation by an owner's revision between proposals k and k+1) gets the
    step in progress, k (0 before the first proposal). This is the step the reports name
    for the flag (the proposals recorded up to its ``FlagRaised`` entry). The audit loop
    numbers its own iterations (:class:`icore.audit.AuditLoop`, from 0) and does not call this.

    Args:
        state: X, right after the flags were raised (before X records another proposal:
            a later call would date them later).
        flags: the hard flags to diagnose, in the order they were raised.
        first_id: number of the first diagnosis id; the i-th flag (from 0) gets
            ``d<first_id + i>``, whether or not an earlier one was diagnosed.

    Returns:
        One F per flag that points at an obligation still in X, in flag order (a flag
        whose obligations all left X yields none). ``F.flags == (flag.id,)``.

    Raises:
        KeyError: a flag is not in ``state.flags``.
        InterfaceError: as :func:`diagnose` and :func:`responsible_agent`.
    """
    step = state.proposal_count()
    out: list[Diagnosis] = []
    for i, f in enumerate(flags):
        hit = TriggerHit(Trigger.HARD_FLAG, f.obligations, (f.id,), f.detail)
        d = diagnose_hit(state, hit, diagnosis_id=f"d{first_id + i}", step=step)
        if d is not None:
            out.append(d)
    return tuple(out)
