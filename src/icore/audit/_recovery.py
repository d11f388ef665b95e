"""AuditRecovery_D: the recovery audit and commit (icore Sec. 4; design.md 4.4).

A recovery (the routed agent's proposals) is applied to a candidate copy X_f of X^- and
accepted only if

1. it is non-empty and every proposal comes from the routed agent;
2. every proposal is legal (icore Def. 6) on the candidate, in order;
2a. it changes nothing outside the frozen W_F (icore Sec. 4: W_F holds every component
   the recovery may change): an existing obligation outside W_F that a committed
   assertion names is an ``outside_matched_set`` violation; an obligation the recovery
   creates is allowed only as sub-work (child) or transport replacement of a member;
3. it is work-sound: every assertion it commits is sound, and (for work and evidence
   defects) every affected obligation is sound in X_f;
4. it resolves every hard flag of F: a revocation flag the state resolved (every flagged
   assertion superseded), or flagged obligations that are now sound, not repair-pending,
   and on which the recovery either made a productive transition or rewrote a slot the
   flagged attempt tried to write (a supported claim, or the truthful status, replaces
   the unsupported one; a nonproductive note does not);
5. ``cq(X_f; W_F) >= cq(X^-; W_F)`` on the frozen matched set, where a member removed
   (settled, superseded or gone) without valid transport or settlement evidence stays in
   W_F and counts as unsound (and is also a violation of its own). Transport counts only
   to a replacement the recovery creates or that a passing certificate ties to the
   removed member (citing both), with the same required coverage
   (:func:`icore.state.transport_problem`); settlement only with a certificate citing
   the settled member.

The candidate X_f is a :meth:`State.trial <icore.state.State.trial>` of X (copy-on-write
with an undo journal), so judging a recovery costs O(the recovery), not O(|log|).

Otherwise only a failure-and-feedback record is written (by the loop); X is unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from icore.audit._diagnosis import Diagnosis
from icore.audit._errors import AuditError
from icore.state import (
    CLOSED_STATUSES,
    TRANSPORTED_TO,
    AssertionKind,
    DeclarationPackage,
    HeadView,
    MatchedSet,
    Proposal,
    State,
    Status,
    Verdict,
    check_legality,
    fixed,
)


class RecoveryCode(enum.StrEnum):
    """Why a recovery is rejected."""

    NO_RECOVERY = "no_recovery"
    WRONG_AGENT = "wrong_agent"
    ILLEGAL = "illegal"
    UNSOUND_WORK = "unsound_work"
    UNRESOLVED_FLAG = "unresolved_flag"
    QUALITY_DECREASED = "quality_decreased"
    UNSUPPORTED_REMOVAL = "unsupported_removal"
    OUTSIDE_MATCHED_SET = "outside_matched_set"


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason a recovery is rejected."""

    code: RecoveryCode
    detail: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class MatchedQuality:
    """snd, astab and cq on a frozen matched set, with removal-without-evidence as unsound."""

    snd: float
    astab: float
    cq: float


@dataclass(frozen=True, slots=True)
class RecoveryVerdict:
    """Outcome of :func:`audit_recovery`.

    Attributes:
        accepted: True when the recovery may be committed.
        violations: why not (empty when accepted).
        verdicts: Definition 6 verdicts on the candidate X_f, in order.
        before: quality on W_F at X^-.
        after: quality on W_F at X_f (None when no candidate was built).
        resolves: flags the commit must mark resolved (those the state does not resolve
            by itself).
        changed: obligations the recovery's committed assertions name.
        declaration: the D the verdicts were taken under.
    """

    accepted: bool
    violations: tuple[Violation, ...]
    verdicts: tuple[Verdict, ...]
    before: MatchedQuality
    after: MatchedQuality | None
    resolves: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    declaration: DeclarationPackage | None = field(default=None, compare=False, repr=False)


def removal_supported(state: State, oid: str) -> bool:
    """A closed obligation carries valid transport or settlement evidence (design.md 4.3).

    Checked by :meth:`State.removal_supported <icore.state.State.removal_supported>` (a replacement
    created by the same proposal, or one a certificate ties to ``oid`` by citing both,
    with the same required coverage; or a settlement certificate citing ``oid``).
    """
    return state.removal_supported(oid)


def _attempted_slots(state: State, proposal_id: str | None) -> dict[str, set[tuple[str, str, str]]]:
    """Slots per obligation that the flagged (rejected) attempt tried to write."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    p = None if proposal_id is None else state.proposal(proposal_id)
    if p is not None:
        for eff in p.effects:
            out.setdefault(eff.obligation, set()).add(eff.slot)
    return out


def _closed(state: State, oid: str) -> bool:
    o = state.obligations.get(oid)
    return o is None or o.status in CLOSED_STATUSES


def matched_quality(
    state: State, matched: MatchedSet, *, unsupported: frozenset[str] = frozenset()
) -> MatchedQuality:
    """cq(X; W_F) with the members in ``unsupported`` counted unsound.

    Exact sums in the state's fixed point (:func:`icore.state.fixed`): integers, so the
    ratios are the exact rationals, rounded once (as :meth:`State.metrics`).
    """
    w = s = st = 0
    for oid, wf in zip(matched.obligations, matched.weights, strict=True):
        fw = fixed(wf)
        w += fw
        ev = state.evaluation(oid)
        if ev is None:
            continue
        if ev.sound and oid not in unsupported:
            s += fw
        if ev.stable:
            st += fw
    if w == 0:
        return MatchedQuality(1.0, 1.0, 1.0)
    return MatchedQuality(s / w, st / w, (s + st) / (2 * w))


def audit_recovery(
    state: State,
    diagnosis: Diagnosis,
    proposals: Sequence[Proposal],
    *,
    agent: str,
    head_view: HeadView | None = None,
) -> RecoveryVerdict:
    """``AuditRecovery_D`` (icore Sec. 4): judge a recovery on a candidate X_f.

    X_f is a trial of X (:meth:`State.trial <icore.state.State.trial>`): the recovery
    is applied in memory with an undo journal and undone before this returns, so the
    cost is O(the recovery), independent of the log length.

    Args:
        state: X^- (unchanged when this returns; no trial may be open on it).
        diagnosis: F with its frozen W_F.
        proposals: the recovery, from the routed agent.
        agent: the routed agent.
        head_view: owners' current heads for cited records.
    """
    matched = diagnosis.matched
    before = matched_quality(state, matched)
    violations: list[Violation] = []
    if not proposals:
        return RecoveryVerdict(
            False, (Violation(RecoveryCode.NO_RECOVERY, "the agent proposed nothing"),),
            (), before, None,
        )
    for p in proposals:
        if p.proposer != agent:
            violations.append(
                Violation(
                    RecoveryCode.WRONG_AGENT,
                    f"proposal by {p.proposer!r}; feedback was routed to {agent!r}",
                    p.proposer,
                )
            )
    if violations:
        return RecoveryVerdict(False, tuple(violations), (), before, None)
    with state.trial() as cand:
        return _judge(state, cand, diagnosis, proposals, before, head_view)


def _judge(
    state: State,
    cand: State,
    diagnosis: Diagnosis,
    proposals: Sequence[Proposal],
    before: MatchedQuality,
    head_view: HeadView | None,
) -> RecoveryVerdict:
    """The recovery audit on the candidate ``cand``.

    ``cand`` is a trial of ``state``, so the same object: facts of X^- are read before the
    first proposal is applied.
    """
    matched = diagnosis.matched
    violations: list[Violation] = []
    # facts of X^-, read before the trial changes anything
    existed = {o for p in proposals for e in p.effects if (o := e.obligation) in cand.obligations}
    before_open = {o for o in matched.obligations if not _closed(cand, o)}
    verdicts: list[Verdict] = []
    for p in proposals:
        v = check_legality(p, cand, head_view=head_view)
        verdicts.append(v)
        if not v.committed:
            violations.append(
                Violation(
                    RecoveryCode.ILLEGAL,
                    "; ".join(f"{r.code}: {r.detail}" for r in v.reasons),
                    v.proposal.id,
                )
            )
            return RecoveryVerdict(False, tuple(violations), tuple(verdicts), before, None)
        cand.apply_verdict(v)
    new_aids = [a.id for v in verdicts for a in v.assertions]
    changed = tuple(sorted({a.obligation for v in verdicts for a in v.assertions}))
    members = set(matched.obligations)
    created = frozenset(o for o in changed if o not in existed)
    carried = {
        rel.value
        for m in members
        if (rel := cand.active_assertion(m, AssertionKind.RELATION, TRANSPORTED_TO)) is not None
    }
    for oid in changed:
        if oid in members:
            continue
        if oid in created:
            new = cand.obligations.get(oid)
            if new is not None and (new.parent in members or oid in carried):
                continue
            detail = "the recovery creates work that is neither sub-work nor a replacement of W_F"
        else:
            detail = "the recovery changes an obligation outside the frozen matched set W_F"
        violations.append(Violation(RecoveryCode.OUTSIDE_MATCHED_SET, detail, oid))
    for aid in new_aids:
        if cand.is_active(aid) and not cand.assertion_sound(aid):
            violations.append(
                Violation(
                    RecoveryCode.UNSOUND_WORK, "the recovery commits an unsound assertion", aid
                )
            )
    unsupported: set[str] = set()
    for oid in matched.obligations:
        if (
            _closed(cand, oid)
            and oid in before_open
            and not removal_supported(cand, oid)
        ):
            unsupported.add(oid)
            violations.append(
                Violation(
                    RecoveryCode.UNSUPPORTED_REMOVAL,
                    "removed without valid transport or settlement evidence; stays in W_F "
                    "as unsound",
                    oid,
                )
            )
    if diagnosis.defect != "assignment":
        for oid in diagnosis.obligations:
            if oid in unsupported:
                continue
            if cand.obligations.get(oid) is None or not (
                cand.metrics(over=MatchedSet((oid,), (1.0,))).snd >= 1.0
            ):
                violations.append(
                    Violation(RecoveryCode.UNSOUND_WORK, "affected obligation is not sound", oid)
                )
    resolves: list[str] = []
    written = {a.slot for v in verdicts for a in v.assertions}
    productive = {
        a.obligation
        for v in verdicts
        for a in v.assertions
        if (op := state.decl.operations.get(v.proposal.operation)) is not None and op.productive
    }
    for fid in diagnosis.flags:
        if cand.flag_resolution(fid) is not None:
            continue
        flag = cand.flags[fid]
        attempted = _attempted_slots(state, flag.proposal)
        oids = [o for o in flag.obligations if o in cand.obligations]
        ok = bool(oids) and all(
            cand.is_sound(o)
            and cand.obligations[o].effective_status != Status.REPAIR_PENDING
            and (
                o in productive
                or any(sl in written for sl in attempted.get(o, ()))
                or (o not in attempted and o in changed)
            )
            for o in oids
        )
        if ok:
            resolves.append(fid)
        else:
            violations.append(
                Violation(RecoveryCode.UNRESOLVED_FLAG, f"hard flag {fid} is not resolved", fid)
            )
    after = matched_quality(cand, matched, unsupported=frozenset(unsupported))
    if after.cq < before.cq:
        violations.append(
            Violation(
                RecoveryCode.QUALITY_DECREASED,
                f"cq on W_F would drop from {before.cq:.4f} to {after.cq:.4f}",
            )
        )
    return RecoveryVerdict(
        not violations, tuple(violations), tuple(verdicts), before, after, tuple(resolves),
        changed, state.decl,
    )


def commit_recovery(
    state: State,
    verdict: RecoveryVerdict,
    *,
    agent: str,
    note: str,
    head_view: HeadView | None = None,
) -> list[Verdict]:
    """Commit an accepted recovery to X (``X^+ = Commit_D(X_f)``) and resolve its flags.

    A recovery is one audited repair (icore Alg. 1; design.md 4.4): its proposals and the
    resolution of the flags it resolves are written in one log transaction, or nothing
    is written at all (fail closed): X, its log and its metrics are then exactly as
    before. When X and D are as the recovery audit left them, the candidate's verdicts
    are committed as audited (:meth:`State.commit_verdicts
    <icore.state.State.commit_verdicts>`: no proposal is audited or validated again);
    otherwise they are audited again on X (:meth:`State.commit_all
    <icore.state.State.commit_all>`).

    Raises:
        AuditError: the verdict was not accepted, or a proposal does not commit on X
            (X changed since the recovery audit); nothing is written.
        InterfaceError: an interface of D misbehaved on some proposal; nothing is
            written.
    """
    if not verdict.accepted:
        raise AuditError("cannot commit a rejected recovery")
    if (
        verdict.declaration is state.decl
        and verdict.verdicts
        and all(v.committed for v in verdict.verdicts)
        and verdict.verdicts[0].base_seq == state.seq
    ):
        # X and D are as the recovery audit saw them: commit its verdicts as audited
        return state.commit_verdicts(
            verdict.verdicts, resolve=verdict.resolves, by=agent, note=note
        )
    # X or D changed since the audit: audit again, all or nothing
    got = state.commit_all(
        [v.proposal for v in verdict.verdicts],
        head_view=head_view,
        resolve=verdict.resolves,
        by=agent,
        note=note,
    )
    if len(got) != len(verdict.verdicts) or not all(v.committed for v in got):
        refused = got[-1] if got else None
        raise AuditError(
            "accepted recovery no longer commits (X changed); nothing was recorded",
            proposal=None if refused is None else refused.proposal.id,
        )
    return got
