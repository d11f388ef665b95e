"""One run of icore Definition 6 over one proposal: the checks (design.md 4.3).

:class:`_LegalityCheck` holds what steps 1-8 (:mod:`icore.state._legality`) found so far;
:func:`~icore.state.check_legality` runs the steps in order and builds the outcome
(:mod:`icore.state._legality_outcome`). Pure: it reads X and runs validators of V.
"""

from __future__ import annotations

from icore.state._components import ValidatorInput
from icore.state._heads import HeadView, lineage_of
from icore.state._json import is_json
from icore.state._legality_rules import (
    _DONE,
    check_effect_value,
    check_event,
    make_event,
    match_effects,
    run_validator,
    transport_problem,
)
from icore.state._view import StateView
from icore.state._xmodel import (
    TRANSPORTED_TO,
    AssertionKind,
    Certificate,
    CertificateRequest,
    Event,
    Proposal,
    ReasonCode,
    RejectionReason,
    Status,
)


class _LegalityCheck:
    """One run of Definition 6 over one proposal: what the checks found so far.

    Steps 1-8 of :mod:`icore.state._legality` as methods; each collects typed reasons.
    The outcome is built from it by :mod:`icore.state._legality_outcome`.
    """

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
