"""Log entries: every change to X is one of these (design.md 4.2 "event-sourced log").

An entry is an envelope (:class:`LogEntry`: sequence number, time, kind) around a frozen
body. Bodies carry the *results* of a decision (ids, certificates with their verdicts),
so replay never re-runs validators and rebuilds the same X byte for byte.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from icore.state._xmodel import (
    JSON,
    Assertion,
    Certificate,
    Event,
    HardFlag,
    Justification,
    Proposal,
    RejectionReason,
)

LOG_SCHEMA_VERSION = 1
"""Schema version of log entries; stored in the log's metadata."""


class EntryKind(enum.StrEnum):
    """Kinds of log entries."""

    EVENT = "event"
    """An event imported into G."""
    PROPOSAL = "proposal"
    """A proposal received for audit."""
    COMMIT = "commit"
    """A proposal committed (icore Def. 6 legal)."""
    REJECTION = "rejection"
    """A proposal rejected with typed reasons."""
    FLAG = "flag"
    """A hard flag raised."""
    FLAG_RESOLVED = "flag_resolved"
    """A hard flag resolved."""
    REVOCATION = "revocation"
    """Certificates revoked after an owner revision."""
    IMPORT_ASSERTION = "import_assertion"
    """An assertion imported without Definition 6 (trace import)."""
    IMPORT_CERTIFICATE = "import_certificate"
    """A certificate imported as recorded."""
    NOTE = "note"
    """Diagnosis, feedback, recovery or failure record (iCORE-Audit)."""


@dataclass(frozen=True, slots=True)
class EventAdded:
    """Body of :attr:`EntryKind.EVENT`."""

    event: Event


@dataclass(frozen=True, slots=True)
class ProposalRecorded:
    """Body of :attr:`EntryKind.PROPOSAL` (the proposal carries its assigned id)."""

    proposal: Proposal


@dataclass(frozen=True, slots=True)
class Committed:
    """Body of :attr:`EntryKind.COMMIT`: everything the commit adds to G, Q and Π.

    Attributes:
        proposal: proposal id.
        operation: operation name.
        events: events added to G.
        assertions: assertions added to Q (each supersedes its slot's active one).
        justification: the justification shared by the new assertions.
        certificates: certificates issued (all passed).
        resolved_flags: revocation flags resolved because every flagged assertion is
            now superseded.
        progress: whether D's ``progress`` predicate holds for this transition.
    """

    proposal: str
    operation: str
    proposer: str
    events: tuple[Event, ...]
    assertions: tuple[Assertion, ...]
    justification: Justification
    certificates: tuple[Certificate, ...]
    resolved_flags: tuple[str, ...] = ()
    progress: bool = False


@dataclass(frozen=True, slots=True)
class Rejected:
    """Body of :attr:`EntryKind.REJECTION` (certificates are what V said; not added to Π)."""

    proposal: str
    proposer: str
    reasons: tuple[RejectionReason, ...]
    certificates: tuple[Certificate, ...] = ()


@dataclass(frozen=True, slots=True)
class FlagRaised:
    """Body of :attr:`EntryKind.FLAG`."""

    flag: HardFlag


@dataclass(frozen=True, slots=True)
class FlagResolved:
    """Body of :attr:`EntryKind.FLAG_RESOLVED`."""

    flag: str
    by: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Revoked:
    """Body of :attr:`EntryKind.REVOCATION` (design.md 4.2; icore Sec. 4).

    Attributes:
        key: the semantic key whose owner revised it.
        new_head: the owner's new head (None: no head / unavailable, fail closed).
        certificates: revoked certificate ids.
        assertions: active assertions that cited them (exactly the dependent ones).
        obligations: their obligations, now ``repair_pending``.
    """

    key: str
    new_head: str | None
    certificates: tuple[str, ...]
    assertions: tuple[str, ...]
    obligations: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AssertionImported:
    """Body of :attr:`EntryKind.IMPORT_ASSERTION` (justification None: none recorded)."""

    assertion: Assertion
    justification: Justification | None


@dataclass(frozen=True, slots=True)
class CertificateImported:
    """Body of :attr:`EntryKind.IMPORT_CERTIFICATE`."""

    certificate: Certificate


@dataclass(frozen=True, slots=True)
class Note:
    """Body of :attr:`EntryKind.NOTE`: ``kind`` is e.g. diagnosis, feedback, recovery, failure."""

    kind: str
    payload: JSON = None
    ref: str | None = None


Body: TypeAlias = (
    EventAdded
    | ProposalRecorded
    | Committed
    | Rejected
    | FlagRaised
    | FlagResolved
    | Revoked
    | AssertionImported
    | CertificateImported
    | Note
)

BODY_TYPES: dict[EntryKind, type] = {
    EntryKind.EVENT: EventAdded,
    EntryKind.PROPOSAL: ProposalRecorded,
    EntryKind.COMMIT: Committed,
    EntryKind.REJECTION: Rejected,
    EntryKind.FLAG: FlagRaised,
    EntryKind.FLAG_RESOLVED: FlagResolved,
    EntryKind.REVOCATION: Revoked,
    EntryKind.IMPORT_ASSERTION: AssertionImported,
    EntryKind.IMPORT_CERTIFICATE: CertificateImported,
    EntryKind.NOTE: Note,
}
KIND_OF: dict[type, EntryKind] = {t: k for k, t in BODY_TYPES.items()}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One log entry.

    Attributes:
        seq: position in the log, 1, 2, ... (gapless, monotone).
        t_ms: time from the state's injected clock, in ms.
        kind: entry kind (matches the body's type).
        body: the entry body.
    """

    seq: int
    t_ms: float
    kind: EntryKind
    body: Body
