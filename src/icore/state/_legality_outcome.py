"""The outcome of a Definition 6 run: the commit or the rejection (icore Def. 6, Sec. 4).

Functions of a finished :class:`~icore.state._legality_check._LegalityCheck`: the
rejection records the proposal, its typed reasons and its hard flag(s); the commit
records the new assertions, their justification, the flags it resolves and D's
``progress`` verdict on the transition.
"""

from __future__ import annotations

from collections.abc import Sequence

from icore.state._components import Transition
from icore.state._entries import Body, Committed, FlagRaised, ProposalRecorded, Rejected
from icore.state._interfaces import checked_progress
from icore.state._legality_check import _LegalityCheck
from icore.state._legality_rules import Verdict
from icore.state._view import StateView
from icore.state._xmodel import (
    Assertion,
    AssertionKind,
    Decision,
    FlagKind,
    HardFlag,
    Justification,
    ReasonCode,
)


def reject(run: _LegalityCheck) -> Verdict:
    """The rejection: the proposal, the reasons, and its hard flag(s)."""
    p, reasons, inconsistent = run.p, run.reasons, run.inconsistent
    assert p.id is not None
    touched = tuple(
        sorted({e.obligation for e in p.effects} | ({p.target} if p.target else set()))
    )
    flags: list[HardFlag] = []
    fids = run.state.next_ids("f", 2)
    if inconsistent:
        flags.append(
            HardFlag(
                fids[len(flags)],
                FlagKind.VALIDATOR_INCONSISTENCY,
                touched,
                (),
                p.id,
                p.proposer,
                tuple(r for r in reasons if r.code == ReasonCode.VALIDATOR_INCONSISTENT),
                tuple(inconsistent),
                "validator inconsistency",
            )
        )
    others = tuple(r for r in reasons if r.code != ReasonCode.VALIDATOR_INCONSISTENT)
    if others:
        flags.append(
            HardFlag(
                fids[len(flags)],
                FlagKind.UNSUPPORTED_ASSERTION,
                touched,
                (),
                p.id,
                p.proposer,
                others,
                (),
                "unsupported attempted assertion(s)",
            )
        )
    bodies: list[Body] = [
        ProposalRecorded(p),
        Rejected(p.id, p.proposer, tuple(reasons), tuple(run.certs)),
        *(FlagRaised(f) for f in flags),
    ]
    return Verdict(
        Decision.REJECT,
        p,
        tuple(reasons),
        tuple(flags),
        (),
        tuple(run.certs),
        False,
        run.state.seq,
        tuple(bodies),
    )


def commit(run: _LegalityCheck) -> Verdict:
    """The commit: the new assertions, their justification, ``progress``.

    Raises:
        InterfaceError: ``progress`` misbehaved on the transition.
    """
    p, op, state, certs = run.p, run.op, run.state, run.certs
    assert op is not None and p.id is not None
    pid = p.id
    aids = state.next_ids("a", len(p.effects))
    assertions = tuple(
        Assertion(aid, e.obligation, AssertionKind(e.kind), e.key, e.value, p.proposer,
                  pid, True)
        for aid, e in zip(aids, p.effects, strict=True)
    )
    justification = Justification(
        tuple(p.justification),
        op.name,
        tuple(c.id for c in certs) + tuple(p.cite_certificates),
        tuple(p.cites),
    )
    resolved = _resolved_flags(state, assertions)
    transition = Transition(
        op, p, assertions, state.slot_values(assertions),
        run.decl.parameters.progress_fields,
    )
    progress = checked_progress(run.decl.interfaces, transition)
    progressed = (
        tuple(dict.fromkeys(a.obligation for a in transition.changed())) if progress else ()
    )
    committed = Committed(
        pid,
        op.name,
        p.proposer,
        tuple(run.new_events.values()),
        assertions,
        justification,
        tuple(certs),
        resolved,
        progress,
    )
    return Verdict(
        Decision.COMMIT,
        p,
        (),
        (),
        assertions,
        tuple(certs),
        progress,
        state.seq,
        (ProposalRecorded(p), committed),
        progressed,
    )


def _resolved_flags(state: StateView, assertions: Sequence[Assertion]) -> tuple[str, ...]:
    """Open revocation flags all of whose assertions the commit supersedes."""
    superseded: set[str] = set()
    for a in assertions:
        o = state.obligations.get(a.obligation)
        if o is not None:
            old = o.active.get((str(a.kind), a.key))
            if old is not None:
                superseded.add(old)
    out: set[str] = set()
    for aid in superseded:
        for fid in state.flags_on(aid):
            if state.flag_resolution(fid) is not None or fid in out:
                continue
            flag = state.flags[fid]
            if flag.kind != FlagKind.REVOCATION:
                continue
            if all(x in superseded or not state.is_active(x) for x in flag.assertions):
                out.add(fid)
    return tuple(sorted(out))
