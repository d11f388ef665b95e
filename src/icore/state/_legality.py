"""Legality of a proposal: icore Definition 6 as fixed by design.md 4.3.

:func:`check_legality` is pure: it reads X, runs the validators of V on the proposal's inputs and
returns a :class:`Verdict` holding the log entries that would record it. It changes
nothing; :meth:`State.apply_verdict` (or :meth:`State.submit`) records it.

A proposal is legal when
  1. its operation is declared and the proposer is a declared agent authorized for it;
  2. its new events are well formed (declared type and fields, known agent, known causes);
  3. the target and every obligation it names exist (or are created by it);
  4. the operation's preconditions hold on the target;
  5. cited assertions are active and sound, cited records are their owners' heads;
  6. every new assertion is justified by events in G or in the proposal, and every
     certificate passes V (validators are run twice: raising, a non-boolean or two
     answers is a validator inconsistency); required certificate kinds are present;
  7. the effects are exactly the operation's declared effects;
  8. no obligation is settled or removed without settlement or transport evidence: a
     settlement needs a passing certificate that cites the settled obligation; a
     transport needs a replacement with the same required coverage that the proposal
     creates, or that a passing certificate of the proposal ties to the removed
     obligation (it cites both).
Otherwise it is rejected: none of its effects is committed, and the rejection plus a hard
flag (``validator_inconsistency`` and/or ``unsupported_assertion``) is recorded.
"""


from __future__ import annotations

from dataclasses import replace

from icore.state._errors import StateInputError
from icore.state._heads import HeadView
from icore.state._legality_check import _LegalityCheck
from icore.state._legality_outcome import commit, reject
from icore.state._legality_rules import (
    EffectView,
    Verdict,
    check_effect_value,
    check_event,
    make_event,
    match_effects,
    run_validator,
    transport_problem,
)
from icore.state._view import StateView
from icore.state._xmodel import Proposal


def check_legality(
    proposal: Proposal, state: StateView, *, head_view: HeadView | None = None
) -> Verdict:
    """Check one proposal's legality against X (icore Def. 6; design.md 4.3). Pure.

    The checks run in the order of the module docstring (1-8), each collecting typed
    reasons; any reason rejects.

    Args:
        proposal: the labelled proposal.
        state: X.
        head_view: key -> owner's current head, used for cited records; without it, a
            proposal citing records - directly, by a certificate request, or through a
            cited certificate over records - is rejected (``stale_record``: currency
            unprovable).

    Returns:
        A :class:`Verdict`; record it with :meth:`State.apply_verdict`.

    Raises:
        StateInputError: the proposal's id was already used.
        InterfaceError: D's ``progress`` interface raised or returned a non-bool on the
            transition a legal proposal would commit.

    Cost: proportional to the proposal (its effects, events, citations, certificates
    and the validators it runs), independent of |X|.
    """
    pid = proposal.id or f"p{state.proposal_count() + 1}"
    if state.has_proposal(pid):
        raise StateInputError("proposal id was already used", proposal=pid)
    run = _LegalityCheck(state, replace(proposal, id=pid), head_view)
    run.check_operation()
    run.check_events()
    run.check_obligations()
    run.check_preconditions()
    run.check_citations()
    run.check_justification()
    run.check_certificates()
    run.check_effects()
    run.check_removals()
    return reject(run) if run.reasons else commit(run)


def audit(proposal: Proposal, state: StateView, *, head_view: HeadView | None = None) -> Verdict:
    """Deprecated alias of :func:`check_legality` (the Definition 6 check; issue 26).

    "audit" names iCORE-Audit (:mod:`icore.audit`); this name is kept for callers of
    ``icore.state.audit``. Same arguments, result and errors as :func:`check_legality`.
    """
    return check_legality(proposal, state, head_view=head_view)


__all__ = [
    "EffectView",
    "Verdict",
    "audit",
    "check_effect_value",
    "check_event",
    "check_legality",
    "make_event",
    "match_effects",
    "run_validator",
    "transport_problem",
]
