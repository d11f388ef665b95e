"""Value types of the iCORE state X = (G, Q, Π) (icore Sec. 3, design.md 1 and 4.2).

Records written to the log (events, assertions, certificates, flags, proposals) are
frozen; what changes later (an assertion superseded, a certificate revoked, a flag
resolved) is kept by :class:`~icore.state.State` as an overlay, so a log entry never
changes after it was written.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from icore.records import Record, RecordId

JSON: TypeAlias = Any
"""A JSON value (None, bool, int, float, str, list, dict with str keys)."""


class Status(enum.StrEnum):
    """Obligation statuses (design.md 4.2)."""

    OPEN = "open"
    ASSIGNED = "assigned"
    ACTIVE = "active"
    SUBMITTED = "submitted"
    DISCHARGED = "discharged"
    FAILED = "failed"
    SETTLED = "settled"
    SUPERSEDED = "superseded"
    REPAIR_PENDING = "repair_pending"


_STATUS_VALUE: dict[str, str] = {s: str(s) for s in Status}
"""Each status as a plain string, one object each (a status effect's value)."""


CLOSED_STATUSES = frozenset({Status.SETTLED, Status.SUPERSEDED})
"""Statuses that take an obligation out of W(X) unless it is a required root (design.md 4.3)."""


class AssertionKind(enum.StrEnum):
    """Kinds of work-level assertions in Q (icore Sec. 3; design.md 1 "assertion").

    ``node`` creates the obligation (its value holds kind, weight, parent, dependencies
    and the required-root flag); ``claim`` is a coverage/compatibility claim and
    ``relation`` a relation to another obligation, both named by the effect's ``key``.
    """

    NODE = "node"
    STATUS = "status"
    ASSIGNEE = "assignee"
    RESULT = "result"
    CLAIM = "claim"
    RELATION = "relation"
    TERMINAL = "terminal"


class FlagKind(enum.StrEnum):
    """Hard-flag kinds (icore Sec. 4; design.md 1 "hard flag")."""

    UNSUPPORTED_ASSERTION = "unsupported_assertion"
    """A rejected proposal attempted assertions that Definition 6 does not support."""
    REVOCATION = "revocation"
    """A certificate was revoked (owner revision); dependent work is repair_pending."""
    VALIDATOR_INCONSISTENCY = "validator_inconsistency"
    """A validator raised, returned a non-boolean, or gave two answers on one input."""


class ReasonCode(enum.StrEnum):
    """Why Definition 6 rejects a proposal (icore Def. 6; design.md 4.3)."""

    UNKNOWN_OPERATION = "unknown_operation"
    """The operation is not declared in Ω."""
    UNKNOWN_AGENT = "unknown_agent"
    """The proposer, an event's agent or an assignee is not in M_D."""
    UNAUTHORIZED_PROPOSER = "unauthorized_proposer"
    """The proposer may not propose this operation."""
    INVALID_EVENT = "invalid_event"
    """A proposed event has an undeclared type, missing fields, unknown causes or a reused id."""
    UNKNOWN_OBLIGATION = "unknown_obligation"
    """An effect or the target names an obligation that does not exist (or re-creates one)."""
    PRECONDITION_FAILED = "precondition_failed"
    """A declared precondition (status, dependencies, assignee) does not hold."""
    STALE_CITATION = "stale_citation"
    """A cited assertion does not exist or is superseded."""
    UNSOUND_CITATION = "unsound_citation"
    """A cited assertion is not sound."""
    STALE_RECORD = "stale_record"
    """A cited PlanFence record is not its owner's head (or no head view was given)."""
    MISSING_JUSTIFICATION = "missing_justification"
    """New assertions cite no event."""
    UNKNOWN_EVENT = "unknown_event"
    """The justification cites an event neither in G nor in the proposal."""
    UNKNOWN_VALIDATOR = "unknown_validator"
    """A certificate names a validator not in V, or a version V does not declare."""
    VALIDATOR_INCONSISTENT = "validator_inconsistent"
    """The validator raised, returned a non-boolean or was non-deterministic."""
    CERTIFICATE_FAILED = "certificate_failed"
    """A validator ran and did not pass."""
    CERTIFICATE_INACTIVE = "certificate_inactive"
    """A cited existing certificate is unknown, revoked or did not pass."""
    MISSING_CERTIFICATE = "missing_certificate"
    """A certificate kind the operation requires is absent."""
    EFFECT_MISMATCH = "effect_mismatch"
    """The effects are not exactly the operation's declared effects."""
    UNSUPPORTED_REMOVAL = "unsupported_removal"
    """An obligation is settled/removed without settlement or transport evidence."""


class Decision(enum.StrEnum):
    """Outcome of :func:`~icore.state.audit`."""

    COMMIT = "commit"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class CitedRecord:
    """A cited PlanFence record version: semantic key and exact record id."""

    key: str
    record_id: RecordId

    @classmethod
    def of(cls, record: Record) -> CitedRecord:
        """Cite ``record`` (its key and id)."""
        return cls(record.key, record.id)


@dataclass(frozen=True, slots=True)
class EventSpec:
    """An event to add to G, as proposed (its time is stamped by the state's clock).

    Attributes:
        type: an observable type of O_D.
        agent: the acting agent (in M_D).
        fields: semantic fields (JSON); the type's declared fields must be present.
        causes: ids of earlier events (in G or earlier in the same proposal).
        id: event id; None lets the state assign ``e<n>``.
    """

    type: str
    agent: str
    fields: Mapping[str, JSON] = field(default_factory=dict)
    causes: tuple[str, ...] = ()
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """A node of G: one observable action or artifact (design.md 4.2).

    Attributes:
        id: event id.
        type: observable type (O_D).
        kind: ``"action"`` or ``"artifact"`` (from the type's declaration).
        agent: acting agent.
        fields: semantic fields.
        causes: ids of events this one depends on (DAG edges, all earlier).
        t_ms: time stamped by the injected clock, in ms (inessential for equivalence).
    """

    id: str
    type: str
    kind: str
    agent: str
    fields: Mapping[str, JSON]
    causes: tuple[str, ...]
    t_ms: float


@dataclass(frozen=True, slots=True)
class Effect:
    """One intended effect of a proposal on Q: an assertion to make (icore Def. 6).

    A new assertion supersedes the active assertion with the same slot
    ``(obligation, kind, key)``. Use the constructors (:meth:`node`, :meth:`status`, ...).
    """

    kind: AssertionKind
    obligation: str
    value: JSON = None
    key: str = ""

    @property
    def slot(self) -> tuple[str, str, str]:
        """The slot this effect writes: (obligation, kind, key)."""
        return (self.obligation, str(self.kind), self.key)

    @classmethod
    def node(
        cls,
        obligation: str,
        kind: str,
        *,
        weight: float = 1.0,
        parent: str | None = None,
        deps: tuple[str, ...] = (),
        required_root: bool = False,
    ) -> Effect:
        """Create obligation ``obligation`` of work kind ``kind`` with weight ``weight`` >= 0."""
        return cls(
            AssertionKind.NODE,
            obligation,
            {
                "kind": kind,
                "weight": float(weight),
                "parent": parent,
                "deps": list(deps),
                "required_root": bool(required_root),
            },
        )

    @classmethod
    def status(cls, obligation: str, status: Status | str) -> Effect:
        """Set the status of ``obligation``."""
        try:
            value = _STATUS_VALUE.get(status)
        except TypeError:  # unhashable: Status() says why
            value = None
        return cls(AssertionKind.STATUS, obligation,
                   value if value is not None else _STATUS_VALUE[Status(status)])

    @classmethod
    def assign(cls, obligation: str, agent: str | None) -> Effect:
        """Assign ``obligation`` to ``agent`` (None unassigns)."""
        return cls(AssertionKind.ASSIGNEE, obligation, agent)

    @classmethod
    def result(cls, obligation: str, signature: JSON) -> Effect:
        """Record the result signature of ``obligation``."""
        return cls(AssertionKind.RESULT, obligation, signature)

    @classmethod
    def claim(cls, obligation: str, name: str, value: JSON = True) -> Effect:
        """A coverage/compatibility claim ``name`` about ``obligation``."""
        return cls(AssertionKind.CLAIM, obligation, value, name)

    @classmethod
    def relation(cls, obligation: str, name: str, other: str) -> Effect:
        """Relation ``name`` from ``obligation`` to obligation ``other``.

        ``relation(o, "transported_to", o2)`` is transport evidence for removing ``o``.
        """
        return cls(AssertionKind.RELATION, obligation, other, name)

    @classmethod
    def terminal(cls, obligation: str, value: JSON = True) -> Effect:
        """A terminal marker attached to ``obligation`` (typically a required root)."""
        return cls(AssertionKind.TERMINAL, obligation, value)


TRANSPORTED_TO = "transported_to"
"""Relation key whose presence is transport evidence for a removal (design.md 4.3)."""


@dataclass(frozen=True, slots=True)
class CertificateRequest:
    """A certificate a proposal asks V to issue: run ``validator`` on these inputs.

    Attributes:
        validator: validator name in V (also the certificate *kind*).
        version: expected validator version; None accepts the declared one.
        events: cited event ids (in G or in the proposal).
        records: cited PlanFence record versions (each must be its owner's head).
        payload: extra JSON input for the validator.
        obligations: the obligations the certificate is about (what it certifies). A
            settlement or transport certificate must cite the obligation it settles or
            transports (icore Def. 6; docs/state.md "Legality details").
    """

    validator: str
    events: tuple[str, ...] = ()
    records: tuple[CitedRecord, ...] = ()
    payload: JSON = None
    version: str | None = None
    obligations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Certificate:
    """Π's evidence: a validator of V passing (or failing) on stated inputs (design.md 4.2).

    Active while it passed, was not revoked, and every cited record is its owner's head
    (revocation is explicit: :meth:`State.on_head_change`).

    ``obligations`` are the obligations it certifies (as requested); ``lineage`` the
    derivation ancestors of its cited records along exact parents (docs/state.md
    "Revocation follows derivation"), each of which must stay current too.
    """

    id: str
    validator: str
    version: str
    events: tuple[str, ...]
    records: tuple[CitedRecord, ...]
    payload: JSON
    verdict: bool
    obligations: tuple[str, ...] = ()
    lineage: tuple[CitedRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class Justification:
    """Π(assertion): events in G, the declared operation, certificates (design.md 4.2).

    Attributes:
        events: event ids in G.
        operation: operation name in Ω (None: imported without one).
        certificates: certificate ids in Π.
        cites: assertion ids cited as preconditions.
    """

    events: tuple[str, ...]
    operation: str | None
    certificates: tuple[str, ...] = ()
    cites: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Assertion:
    """One work-level fact in Q (icore Sec. 3).

    Attributes:
        id: assertion id.
        obligation: the obligation it is about.
        kind: assertion kind.
        key: slot key (claims, relations), else "".
        value: the asserted value.
        proposer: agent who proposed it (None for imports without one).
        proposal: id of the committing proposal (None for imports).
        cited_sound: whether every cited assertion was sound when it was committed.
    """

    id: str
    obligation: str
    kind: AssertionKind
    key: str
    value: JSON
    proposer: str | None
    proposal: str | None
    cited_sound: bool = True

    @property
    def slot(self) -> tuple[str, str, str]:
        """The slot (obligation, kind, key)."""
        return (self.obligation, str(self.kind), self.key)


@dataclass(frozen=True, slots=True)
class RejectionReason:
    """A typed reason of a Definition 6 rejection.

    Attributes:
        code: the reason code.
        detail: human-readable explanation.
        subject: the offending id (agent, event, obligation, assertion, record, validator).
    """

    code: ReasonCode
    detail: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class HardFlag:
    """A repair-requiring defect (icore Sec. 4; design.md 1 "hard flag").

    Attributes:
        id: flag id.
        kind: flag kind.
        obligations: affected obligation ids.
        assertions: affected assertion ids (for a revocation: exactly the dependent ones).
        proposal: the proposal whose attempt produced it, if any.
        proposer: its proposer, if any.
        reasons: Definition 6 reasons (rejections).
        certificates: revoked or inconsistent certificates / validators involved.
        detail: explanation.
    """

    id: str
    kind: FlagKind
    obligations: tuple[str, ...] = ()
    assertions: tuple[str, ...] = ()
    proposal: str | None = None
    proposer: str | None = None
    reasons: tuple[RejectionReason, ...] = ()
    certificates: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Proposal:
    """An agent's intended update, labelled with its effects on G, Q and Π (icore Sec. 4).

    Attributes:
        proposer: proposing agent.
        operation: operation name in Ω.
        target: the subject obligation (preconditions are checked on it).
        events: new events for G.
        effects: new assertions for Q.
        justification: event ids (in G or ``events``) justifying every new assertion.
        certificates: certificates to issue by running V.
        cite_certificates: existing certificate ids to cite (must be active and passed).
        cites: assertion ids cited as preconditions (must be active and sound).
        records: PlanFence record versions cited (must be their owners' heads).
        id: proposal id; None lets the state assign ``p<n>``.
    """

    proposer: str
    operation: str
    target: str | None = None
    events: tuple[EventSpec, ...] = ()
    effects: tuple[Effect, ...] = ()
    justification: tuple[str, ...] = ()
    certificates: tuple[CertificateRequest, ...] = ()
    cite_certificates: tuple[str, ...] = ()
    cites: tuple[str, ...] = ()
    records: tuple[CitedRecord, ...] = ()
    id: str | None = None

    def labels(self) -> dict[str, JSON]:
        """The proposal's intended effects on G, Q and Π, as JSON (icore Sec. 4)."""
        return {
            "G": [e.id for e in self.events],
            "Q": [
                {"kind": str(e.kind), "obligation": e.obligation, "key": e.key, "value": e.value}
                for e in self.effects
            ],
            "Pi": {
                "operation": self.operation,
                "events": list(self.justification),
                "certificates": [c.validator for c in self.certificates]
                + list(self.cite_certificates),
                "cites": list(self.cites),
                "records": [[r.key, r.record_id] for r in self.records],
            },
        }


@dataclass(slots=True)
class Obligation:
    """A node of Q: a unit of work (design.md 4.2). Maintained by the state; read-only.

    ``status`` is the asserted status; :attr:`effective_status` is ``repair_pending``
    while a revocation left some of its assertions without active evidence.
    """

    id: str
    kind: str
    weight: float
    parent: str | None
    deps: tuple[str, ...]
    required_root: bool
    status: Status = Status.OPEN
    assignee: str | None = None
    result: JSON = None
    repair_pending: bool = False
    active: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Active assertion ids by (kind, key) (read-only; replaced, never changed in place)."""

    @property
    def effective_status(self) -> Status:
        """``repair_pending`` while flagged by a revocation, else the asserted status."""
        return Status.REPAIR_PENDING if self.repair_pending else self.status
