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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from icore.state._components import EffectTemplate, OperationDecl, Transition, ValidatorInput
from icore.state._entries import Body, Committed, FlagRaised, ProposalRecorded, Rejected
from icore.state._errors import StateInputError
from icore.state._heads import HeadView, lineage_of
from icore.state._interfaces import checked_progress
from icore.state._json import is_json
from icore.state._model import (
    JSON,
    TRANSPORTED_TO,
    Assertion,
    AssertionKind,
    Certificate,
    CertificateRequest,
    Decision,
    Effect,
    Event,
    EventSpec,
    FlagKind,
    HardFlag,
    Justification,
    Obligation,
    Proposal,
    ReasonCode,
    RejectionReason,
    Status,
)
from icore.state._package import DeclarationPackage
from icore.state._view import StateView

_DONE = (Status.DISCHARGED, Status.SETTLED)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of :func:`check_legality` (icore Def. 6).

    Attributes:
        decision: commit or reject.
        proposal: the proposal, with its assigned id.
        reasons: typed rejection reasons (empty on commit).
        flags: hard flags the rejection raises (empty on commit).
        assertions: assertions a commit adds (empty on reject).
        certificates: certificates V issued on the proposal's requests (on reject, the
            ones that ran, for diagnosis; they are not added to Π).
        progress: D's ``progress`` predicate on the committed transition.
        base_seq: the state's sequence number when audited (a verdict applies only there).
        bodies: the log entry bodies that record this verdict.
        progressed: obligations whose declared progress field the commit changed (empty
            unless ``progress``): what per-obligation patience resets.
    """

    decision: Decision
    proposal: Proposal
    reasons: tuple[RejectionReason, ...]
    flags: tuple[HardFlag, ...]
    assertions: tuple[Assertion, ...]
    certificates: tuple[Certificate, ...]
    progress: bool
    base_seq: int
    bodies: tuple[Body, ...]
    progressed: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        """True for a commit."""
        return self.decision == Decision.COMMIT

    @property
    def codes(self) -> frozenset[ReasonCode]:
        """The set of reason codes."""
        return frozenset(r.code for r in self.reasons)

    @property
    def touched(self) -> tuple[str, ...]:
        """Obligations the proposal's effects name (sorted, unique)."""
        return tuple(sorted({e.obligation for e in self.proposal.effects}))


def check_event(
    spec: EventSpec, eid: str, state: StateView, pending: set[str]
) -> tuple[ReasonCode, str] | None:
    """Check one event against O_D, M_D and G (plus ``pending`` ids of the same proposal)."""
    ot = state.decl.observables.get(spec.type)
    if ot is None:
        return (ReasonCode.INVALID_EVENT, f"event type {spec.type!r} is not declared in O_D")
    if spec.agent not in state.decl.agents:
        return (ReasonCode.UNKNOWN_AGENT, f"event agent {spec.agent!r} is not in M_D")
    if eid in state.events or eid in pending:
        return (ReasonCode.INVALID_EVENT, f"event id {eid!r} is already used")
    missing = [f for f in ot.fields if f not in spec.fields]
    if missing:
        return (ReasonCode.INVALID_EVENT, f"event {eid!r} lacks declared fields {missing}")
    for c in spec.causes:
        if c not in state.events and c not in pending:
            return (ReasonCode.INVALID_EVENT, f"event {eid!r} has unknown cause {c!r}")
    if not all(isinstance(k, str) for k in spec.fields) or not is_json(dict(spec.fields)):
        return (ReasonCode.INVALID_EVENT, f"event {eid!r} fields are not JSON")
    return None


class EffectView(Protocol):
    """What :func:`check_effect_value` reads of X: D and Q's obligations."""

    @property
    def decl(self) -> DeclarationPackage:
        """D."""
        ...

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations."""
        ...


def check_effect_value(
    e: Effect, state: EffectView, new_obligations: set[str]
) -> tuple[ReasonCode, str] | None:
    """Check an effect's value is well formed for its kind."""
    known = state.obligations
    if not isinstance(e.key, str):
        return (ReasonCode.EFFECT_MISMATCH, "effect key must be a string")
    if e.kind == AssertionKind.NODE:
        v = e.value
        if not isinstance(v, dict) or not isinstance(v.get("kind"), str):
            return (ReasonCode.EFFECT_MISMATCH, "node value must be a mapping with a 'kind'")
        w = v.get("weight", 1.0)
        if not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
            return (ReasonCode.EFFECT_MISMATCH, f"node weight {w!r} is not a finite number >= 0")
        refs = list(v.get("deps", ()))
        if v.get("parent") is not None:
            refs.append(v["parent"])
        for r in refs:
            if r not in known and r not in new_obligations:
                return (ReasonCode.UNKNOWN_OBLIGATION, f"node refers to unknown obligation {r!r}")
    elif e.kind == AssertionKind.STATUS:
        if e.value not in Status.__members__.values() or e.value == Status.REPAIR_PENDING:
            return (ReasonCode.EFFECT_MISMATCH, f"{e.value!r} is not an assertable status")
    elif e.kind == AssertionKind.ASSIGNEE:
        if e.value is not None and e.value not in state.decl.agents:
            return (ReasonCode.UNKNOWN_AGENT, f"assignee {e.value!r} is not in M_D")
    elif (
        e.kind == AssertionKind.RELATION and e.value not in known and e.value not in new_obligations
    ):
        return (ReasonCode.UNKNOWN_OBLIGATION, f"relation to unknown obligation {e.value!r}")
    if not is_json(e.value):
        return (ReasonCode.EFFECT_MISMATCH, "effect value is not JSON")
    return None


def _fits(e: Effect, t_kind: AssertionKind, t: object, p: Proposal, new: set[str]) -> bool:
    assert isinstance(t, EffectTemplate)
    if e.kind != t_kind:
        return False
    if t.key is not None and e.key != t.key:
        return False
    if t.values is not None and e.value not in t.values:
        return False
    if t.target == "subject":
        return e.obligation == p.target
    if t.target == "new":
        return e.obligation in new
    return True


def match_effects(op: OperationDecl, p: Proposal, new: set[str]) -> str | None:
    """Check the effects are exactly ``op``'s declared effects, independent of order.

    Legal iff there is an assignment of effects to templates in which every effect has
    a template it fits, every template gets at least one effect and a template without
    ``many`` gets exactly one. Found by bipartite matching (augmenting paths): first a
    matching that gives every template one effect, then augmenting paths that place each
    effect no ``many`` template accepts ("rigid") on a single template, freeing an effect
    a ``many`` template can absorb. By the Mendelsohn–Dulmage argument this finds an
    assignment whenever one exists. Cost O(|T|·|E|·(|T|+|E|)) for T templates, E effects.
    """
    ts = op.effects
    effs = p.effects
    fits = [[i for i, t in enumerate(ts) if _fits(e, t.kind, t, p, new)] for e in effs]
    for j, e in enumerate(effs):
        if not fits[j]:
            return (
                f"effect {e.kind}:{e.key or '-'}={e.value!r} on {e.obligation!r} matches no "
                f"declared effect of {op.name!r}"
            )
    by_t: list[list[int]] = [[] for _ in ts]
    for j, fl in enumerate(fits):
        for i in fl:
            by_t[i].append(j)
    owner: list[int | None] = [None] * len(ts)  # template -> effect
    held: list[int | None] = [None] * len(effs)  # effect -> template

    def cover(i: int, seen: set[int]) -> bool:  # give template i an effect
        for j in by_t[i]:
            if j in seen:
                continue
            seen.add(j)
            k = held[j]
            if k is None or cover(k, seen):
                owner[i], held[j] = j, i
                return True
        return False

    for i, t in enumerate(ts):
        if not cover(i, set()):
            return f"declared effect {t.kind} (target {t.target}) of {op.name!r} is missing"
    flexible = [any(ts[i].many for i in fl) for fl in fits]

    def place(j: int, seen: set[int]) -> bool:  # give effect j a template, keeping cover
        for i in fits[j]:
            if i in seen:
                continue
            seen.add(i)
            k = owner[i]
            assert k is not None
            if flexible[k] or place(k, seen):
                if flexible[k]:
                    held[k] = None
                owner[i], held[j] = j, i
                return True
        return False

    for j, e in enumerate(effs):
        if held[j] is None and not flexible[j] and not place(j, set()):
            return (
                f"effect {e.kind}:{e.key or '-'}={e.value!r} on {e.obligation!r} has no "
                f"declared effect of {op.name!r} left (each is used once)"
            )
    return None


def run_validator(fn: object, inp: ValidatorInput) -> tuple[bool | None, str]:
    """Run a validator of V on one input.

    This is the one validator runner (Definition 6 and trace import).

    The validator is run twice: raising, a non-boolean or two different answers is a
    validator inconsistency (icore Def. 6; design.md 4.1).

    Returns:
        (verdict, "") or (None, why it is inconsistent).
    """
    assert callable(fn)
    try:
        r1 = fn(inp)
        r2 = fn(inp)
    except Exception as exc:  # a validator's failure is data, not a crash (design.md 4.1)
        return None, f"raised {type(exc).__name__}: {exc}"
    if not isinstance(r1, bool) or not isinstance(r2, bool):
        return None, f"returned a non-boolean ({type(r1).__name__})"
    if r1 != r2:
        return None, "returned different verdicts on the same input (non-deterministic)"
    return r1, ""


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
    run = _Audit(state, replace(proposal, id=pid), head_view)
    run.check_operation()
    run.check_events()
    run.check_obligations()
    run.check_preconditions()
    run.check_citations()
    run.check_justification()
    run.check_certificates()
    run.check_effects()
    run.check_removals()
    return run.reject() if run.reasons else run.commit()


def audit(proposal: Proposal, state: StateView, *, head_view: HeadView | None = None) -> Verdict:
    """Deprecated alias of :func:`check_legality` (the Definition 6 check; issue 26).

    "audit" names iCORE-Audit (:mod:`icore.audit`); this name is kept for callers of
    ``icore.state.audit``. Same arguments, result and errors as :func:`check_legality`.
    """
    return check_legality(proposal, state, head_view=head_view)


class _Audit:
    """One run of Definition 6 over one proposal: what the checks found so far."""

    __slots__ = (
        "certs", "created", "decl", "head_view", "inconsistent", "new_events", "op", "p",
        "passing_kinds", "reasons", "state", "tied",
    )

    def __init__(self, state: StateView, p: Proposal, head_view: HeadView | None) -> None:
        self.state = state
        self.decl = state.decl
        self.p = p
        self.head_view = head_view
        self.op = self.decl.operations.get(p.operation)
        self.reasons: list[RejectionReason] = []
        self.new_events: dict[str, Event] = {}
        self.created = {e.obligation for e in p.effects if e.kind == AssertionKind.NODE}
        self.certs: list[Certificate] = []
        self.tied: dict[str, set[str]] = {}  # obligation -> kinds of passing certs citing it
        self.passing_kinds: set[str] = set()
        self.inconsistent: list[str] = []

    def bad(self, code: ReasonCode, detail: str, subject: str | None = None) -> None:
        """Record one rejection reason."""
        self.reasons.append(RejectionReason(code, detail, subject))

    def current(self, key: str, rid: str) -> bool:
        """``rid`` is the owner's head of ``key`` (False without a head view)."""
        return self.head_view is not None and self.head_view(key) == rid

    # 1. operation and proposer
    def check_operation(self) -> None:
        """The operation is in Ω; the proposer is in M_D and may propose it."""
        p, op, decl, bad = self.p, self.op, self.decl, self.bad
        if op is None:
            bad(ReasonCode.UNKNOWN_OPERATION, f"operation {p.operation!r} is not in Ω",
                p.operation)
        if p.proposer not in decl.agents:
            bad(ReasonCode.UNKNOWN_AGENT, f"proposer {p.proposer!r} is not in M_D", p.proposer)
        elif op is not None and not decl.may_propose(p.proposer, p.operation):
            bad(
                ReasonCode.UNAUTHORIZED_PROPOSER,
                f"{p.proposer!r} may not propose {p.operation!r}",
                p.proposer,
            )

    # 2. new events
    def check_events(self) -> None:
        """The proposal's new events are well formed (ids assigned ``e<n>`` when absent)."""
        state, new_events = self.state, self.new_events
        n = len(state.events) + 1
        for spec in self.p.events:
            eid = spec.id
            if eid is None:
                while f"e{n}" in state.events or f"e{n}" in new_events:
                    n += 1
                eid = f"e{n}"
            problem = check_event(spec, eid, state, set(new_events))
            if problem is not None:
                self.bad(problem[0], problem[1], eid)
                continue
            new_events[eid] = make_event(spec, eid, state)

    # 3. obligations named
    def check_obligations(self) -> None:
        """Every obligation an effect names exists or is created; one effect per slot."""
        state, created, bad = self.state, self.created, self.bad
        seen_slots: set[tuple[str, str, str]] = set()
        for e in self.p.effects:
            if e.kind == AssertionKind.NODE:
                if e.obligation in state.obligations:
                    bad(ReasonCode.UNKNOWN_OBLIGATION, "obligation already exists", e.obligation)
            elif e.obligation not in state.obligations and e.obligation not in created:
                bad(ReasonCode.UNKNOWN_OBLIGATION, "effect names an unknown obligation",
                    e.obligation)
            if e.slot in seen_slots:
                bad(ReasonCode.EFFECT_MISMATCH, f"two effects write slot {e.slot}", e.obligation)
            seen_slots.add(e.slot)
            problem = check_effect_value(e, state, created)
            if problem is not None:
                bad(problem[0], problem[1], e.obligation)

    # 4. preconditions on the target
    def check_preconditions(self) -> None:
        """The operation's preconditions hold on the target."""
        p, op, state, bad = self.p, self.op, self.state, self.bad
        if op is None:
            return
        target = state.obligations.get(p.target) if p.target is not None else None
        pre = op.preconditions
        if pre.target_required and target is None:
            bad(ReasonCode.UNKNOWN_OBLIGATION, "operation needs an existing target", p.target)
        elif p.target is not None and target is None and p.target not in self.created:
            bad(ReasonCode.UNKNOWN_OBLIGATION, "target is unknown", p.target)
        if target is None:
            return
        if pre.status_in is not None and target.effective_status not in pre.status_in:
            bad(
                ReasonCode.PRECONDITION_FAILED,
                f"target status {target.effective_status} not in "
                f"{[str(s) for s in pre.status_in]}",
                target.id,
            )
        if pre.deps_done:
            for d in target.deps:
                dep = state.obligations.get(d)
                if dep is None or dep.effective_status not in _DONE:
                    bad(ReasonCode.PRECONDITION_FAILED, f"dependency {d!r} is not done", d)
        if pre.assignee_is_proposer and target.assignee != p.proposer:
            bad(
                ReasonCode.PRECONDITION_FAILED,
                f"target is assigned to {target.assignee!r}, not the proposer",
                target.id,
            )

    # 5. citations
    def check_citations(self) -> None:
        """Check the citations: cited assertions and records are current.

        Cited assertions are active and sound; cited records (and what they derive from)
        are their owners' heads.
        """
        p, state, bad = self.p, self.state, self.bad
        for aid in p.cites:
            if not state.is_active(aid):
                bad(ReasonCode.STALE_CITATION, "cited assertion is missing or superseded", aid)
            elif not state.assertion_sound(aid):
                bad(ReasonCode.UNSOUND_CITATION, "cited assertion is not sound", aid)
        for r in p.records:
            if not self.current(r.key, r.record_id):
                bad(ReasonCode.STALE_RECORD, f"record of {r.key!r} is not its owner's head",
                    r.record_id)
        for r in lineage_of(self.head_view, p.records):
            if not self.current(r.key, r.record_id):
                bad(
                    ReasonCode.STALE_RECORD,
                    f"a cited record derives from {r.key!r} {r.record_id}, no longer its head",
                    r.record_id,
                )

    # 6. justification and certificates
    def check_justification(self) -> None:
        """New assertions cite events, all in G or in the proposal."""
        p = self.p
        if p.effects and not p.justification:
            self.bad(ReasonCode.MISSING_JUSTIFICATION, "new assertions cite no event")
        for eid in p.justification:
            if eid not in self.state.events and eid not in self.new_events:
                self.bad(ReasonCode.UNKNOWN_EVENT, "justification cites an event not in G", eid)

    def check_certificates(self) -> None:
        """Check the certificates: requested, cited and required ones.

        Every requested certificate is issued by V and passes, cited certificates are
        active and current, and the operation's required kinds are present.
        """
        cert_ids = self.state.next_ids("c", len(self.p.certificates))
        for cid, req in zip(cert_ids, self.p.certificates, strict=True):
            self._issue(cid, req)
        for cid in self.p.cite_certificates:
            self._cited_certificate(cid)
        if self.op is not None:
            for kind in self.op.requires:
                # an inconsistent validator is reported as such, not also as a missing kind
                if kind not in self.passing_kinds and kind not in self.inconsistent:
                    self.bad(
                        ReasonCode.MISSING_CERTIFICATE,
                        f"operation requires a {kind!r} certificate",
                        kind,
                    )

    def _issue(self, cid: str, req: CertificateRequest) -> None:
        """Run V on one certificate request (checked inputs first)."""
        bad, state = self.bad, self.state
        vspec = self.decl.validators.get(req.validator)
        if vspec is None:
            bad(ReasonCode.UNKNOWN_VALIDATOR, "validator is not in V", req.validator)
            return
        if req.version is not None and req.version != vspec.version:
            bad(
                ReasonCode.UNKNOWN_VALIDATOR,
                f"version {req.version!r} requested, V declares {vspec.version!r}",
                req.validator,
            )
            return
        evs: list[Event] = []
        ok = True
        for eid in req.events:
            ev = state.events.get(eid) or self.new_events.get(eid)
            if ev is None:
                bad(ReasonCode.UNKNOWN_EVENT, "certificate cites an event not in G", eid)
                ok = False
            else:
                evs.append(ev)
        for r in req.records:
            if not self.current(r.key, r.record_id):
                bad(ReasonCode.STALE_RECORD, f"certificate cites a stale {r.key!r}", r.record_id)
                ok = False
        lineage = lineage_of(self.head_view, req.records)
        for r in lineage:
            if not self.current(r.key, r.record_id):
                bad(
                    ReasonCode.STALE_RECORD,
                    f"certificate input derives from a stale {r.key!r}",
                    r.record_id,
                )
                ok = False
        for oid in req.obligations:
            if oid not in state.obligations and oid not in self.created:
                bad(ReasonCode.UNKNOWN_OBLIGATION, "certificate cites an unknown obligation", oid)
                ok = False
        if not is_json(req.payload):
            bad(ReasonCode.INVALID_EVENT, "certificate payload is not JSON", req.validator)
            ok = False
        if not ok:
            return
        verdict, why = run_validator(
            vspec.fn, ValidatorInput(tuple(evs), tuple(req.records), req.payload, vspec.params)
        )
        if verdict is None:
            self.inconsistent.append(req.validator)
            bad(ReasonCode.VALIDATOR_INCONSISTENT, f"validator {why}", req.validator)
            return
        self.certs.append(
            Certificate(
                cid,
                req.validator,
                vspec.version,
                tuple(req.events),
                tuple(req.records),
                req.payload,
                verdict,
                tuple(req.obligations),
                lineage,
            )
        )
        if verdict:
            self.passing_kinds.add(req.validator)
            for oid in req.obligations:
                self.tied.setdefault(oid, set()).add(req.validator)
        else:
            bad(ReasonCode.CERTIFICATE_FAILED, "validator did not pass", req.validator)

    def _cited_certificate(self, cid: str) -> None:
        """A certificate of Π the proposal cites: active, over current records."""
        state, head_view = self.state, self.head_view
        c = state.certificates.get(cid)
        if c is None or not state.certificate_active(cid):
            self.bad(
                ReasonCode.CERTIFICATE_INACTIVE,
                "cited certificate is unknown, revoked or failed",
                cid,
            )
            return
        # without a head view no cited record can be shown current (fail closed, as for
        # records cited directly): a certificate over records is then stale
        stale = [r for r in (*c.records, *c.lineage) if not self.current(r.key, r.record_id)]
        if stale:
            self.bad(ReasonCode.STALE_RECORD,
                     "cited certificate cites a stale record" if head_view is not None
                     else "cited certificate cites records and no head view is given", cid)
            return
        self.passing_kinds.add(c.validator)
        for oid in c.obligations:
            self.tied.setdefault(oid, set()).add(c.validator)

    # 7. effects exactly as declared
    def check_effects(self) -> None:
        """The effects are exactly the operation's declared effects."""
        if self.op is not None:
            mismatch = match_effects(self.op, self.p, self.created)
            if mismatch is not None:
                self.bad(ReasonCode.EFFECT_MISMATCH, mismatch)

    # 8. no removal without settlement or transport evidence tied to the removed work
    def check_removals(self) -> None:
        """No obligation is settled or removed without evidence tied to it."""
        op, p, bad = self.op, self.p, self.bad
        if op is None:
            return
        # settlement evidence: a passing certificate citing the obligation, of a kind the
        # operation requires (any kind when it requires none)
        ev_of = {
            oid for oid, kinds in self.tied.items()
            if not op.requires or kinds & set(op.requires)
        }
        node_of = {
            e.obligation: e.value
            for e in p.effects
            if e.kind == AssertionKind.NODE and isinstance(e.value, dict)
        }
        transported: set[str] = set()
        for e in p.effects:
            if not (e.kind == AssertionKind.RELATION and e.key == TRANSPORTED_TO):
                continue
            why_not = transport_problem(self.state, e.obligation, e.value, node_of, ev_of)
            if why_not is None:
                transported.add(e.obligation)
            elif op.transports:
                bad(ReasonCode.UNSUPPORTED_REMOVAL, why_not, e.obligation)
        for e in p.effects:
            if e.kind != AssertionKind.STATUS:
                continue
            settled_ok = op.settles and e.obligation in ev_of
            if e.value == Status.SETTLED and not settled_ok:
                bad(
                    ReasonCode.UNSUPPORTED_REMOVAL,
                    "settled without settlement evidence (a settling operation and a "
                    "passing certificate citing the settled obligation)",
                    e.obligation,
                )
            elif e.value == Status.SUPERSEDED and not (
                op.removes and ((op.transports and e.obligation in transported) or settled_ok)
            ):
                bad(
                    ReasonCode.UNSUPPORTED_REMOVAL,
                    "removed without transport or settlement evidence tied to it",
                    e.obligation,
                )

    # outcomes
    def reject(self) -> Verdict:
        """The rejection: the proposal, the reasons, and its hard flag(s)."""
        p, reasons, inconsistent = self.p, self.reasons, self.inconsistent
        assert p.id is not None
        touched = tuple(
            sorted({e.obligation for e in p.effects} | ({p.target} if p.target else set()))
        )
        flags: list[HardFlag] = []
        fids = self.state.next_ids("f", 2)
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
            Rejected(p.id, p.proposer, tuple(reasons), tuple(self.certs)),
            *(FlagRaised(f) for f in flags),
        ]
        return Verdict(
            Decision.REJECT,
            p,
            tuple(reasons),
            tuple(flags),
            (),
            tuple(self.certs),
            False,
            self.state.seq,
            tuple(bodies),
        )

    def commit(self) -> Verdict:
        """The commit: the new assertions, their justification, ``progress``.

        Raises:
            InterfaceError: ``progress`` misbehaved on the transition.
        """
        p, op, state, certs = self.p, self.op, self.state, self.certs
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
            self.decl.parameters.progress_fields,
        )
        progress = checked_progress(self.decl.interfaces, transition)
        progressed = (
            tuple(dict.fromkeys(a.obligation for a in transition.changed())) if progress else ()
        )
        committed = Committed(
            pid,
            op.name,
            p.proposer,
            tuple(self.new_events.values()),
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


def transport_problem(
    state: StateView,
    removed: str,
    to: object,
    created: dict[str, JSON],
    tied: set[str],
) -> str | None:
    """Why ``removed`` -> ``to`` is not valid transport evidence, or None (icore Def. 6).

    A removal counts as transported only to a replacement that the same proposal creates
    (``created``: obligation id -> its node value) or that settlement evidence ties to
    the removed obligation (a passing certificate citing both, ``tied``), and only if the
    replacement carries the same required coverage: it is open work (not settled or
    superseded) and, when the removed obligation is a required root, a required root too.
    """
    if not isinstance(to, str) or to == removed:
        return "transported_to must name another obligation"
    old = state.obligations.get(removed)
    root = bool(old is not None and old.required_root)
    if to in created:
        v = created[to]
        if root and not (isinstance(v, dict) and v.get("required_root")):
            return f"replacement {to!r} of a required root is not a required root"
        return None
    o = state.obligations.get(to)
    if o is None:
        return f"replacement {to!r} does not exist"
    if not (removed in tied and to in tied):
        return (
            f"replacement {to!r} is neither created by the proposal nor tied to {removed!r} "
            "by a passing certificate citing both"
        )
    if o.status in (Status.SETTLED, Status.SUPERSEDED):
        return f"replacement {to!r} is closed ({o.status}); it cannot carry the work"
    if root and not o.required_root:
        return f"replacement {to!r} of a required root is not a required root"
    return None


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


def make_event(spec: EventSpec, eid: str, state: StateView) -> Event:
    """Build the G event for ``spec`` (kind from O_D, time from the state's clock)."""
    ot = state.decl.observables[spec.type]
    return Event(
        id=eid,
        type=spec.type,
        kind=ot.kind,
        agent=spec.agent,
        fields=dict(spec.fields),
        causes=tuple(spec.causes),
        t_ms=float(state.clock.now_ms()),
    )
