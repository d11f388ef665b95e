"""iCORE state X = (G, Q, Π): declaration packages, legality, metrics, event-sourced log.

icore Sec. 3-4 (Definitions 6 and 9, Proposition 4) as fixed by design.md 4.1-4.3. See
docs/state.md.

Import rule (design.md 2): ``icore.state`` imports only ``icore.errors``,
``icore._clock``, ``icore.records`` and ``icore.memory`` (plus stdlib and third-party).
It is pure except its I/O edge: :mod:`icore.state._log` (SQLite) and
:mod:`icore.state._loader` (reads declaration files, imports the callables they name).
Time comes from an injected clock and ids from the state's own counters, so a replay
reproduces X byte for byte. Module map: docs/state.md "Modules".
"""

from icore.state._apply import Log
from icore.state._components import (
    ASSIGNER_ROLE,
    BOUND_CONDITIONS,
    TASK_ROLE,
    AgentDecl,
    DiagnosisLike,
    EffectTemplate,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    Transition,
    ValidatorInput,
    ValidatorSpec,
)
from icore.state._entries import (
    AssertionImported,
    CertificateImported,
    Committed,
    EntryKind,
    EventAdded,
    FlagRaised,
    FlagResolved,
    LogEntry,
    Note,
    ProposalRecorded,
    Rejected,
    Revoked,
)
from icore.state._errors import (
    DeclarationPackageError,
    InterfaceError,
    LogError,
    StateError,
    StateInputError,
    ValidatorError,
)
from icore.state._heads import (
    UNKNOWN_KEY,
    HeadView,
    LineageHeadView,
    RecordSource,
    StoreHeadView,
    owners_head_view,
    store_head_view,
)
from icore.state._interfaces import BUILTIN_VALIDATORS, Interfaces
from icore.state._legality import (
    Verdict,
    audit,
    check_legality,
    run_validator,
    transport_problem,
)
from icore.state._loader import declaration_from_dict, load_declaration
from icore.state._log import MemoryLog, SQLiteLog, decode_entry, encode_entry, rebuild
from icore.state._metrics import MatchedSet, Metrics, fixed
from icore.state._normalize import equivalent, export_json, full_metrics, normalize
from icore.state._package import DeclarationPackage
from icore.state._state import State
from icore.state._view import StateView
from icore.state._xmodel import (
    CLOSED_STATUSES,
    TRANSPORTED_TO,
    Assertion,
    AssertionKind,
    Certificate,
    CertificateRequest,
    CitedRecord,
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

__all__ = [
    "ASSIGNER_ROLE",
    "BOUND_CONDITIONS",
    "BUILTIN_VALIDATORS",
    "CLOSED_STATUSES",
    "TASK_ROLE",
    "TRANSPORTED_TO",
    "UNKNOWN_KEY",
    "AgentDecl",
    "Assertion",
    "AssertionImported",
    "AssertionKind",
    "Certificate",
    "CertificateImported",
    "CertificateRequest",
    "CitedRecord",
    "Committed",
    "Decision",
    "DeclarationPackage",
    "DeclarationPackageError",
    "DiagnosisLike",
    "Effect",
    "EffectTemplate",
    "EntryKind",
    "Event",
    "EventAdded",
    "EventSpec",
    "FlagKind",
    "FlagRaised",
    "FlagResolved",
    "HardFlag",
    "HeadView",
    "InterfaceError",
    "Interfaces",
    "Justification",
    "LineageHeadView",
    "Log",
    "LogEntry",
    "LogError",
    "MatchedSet",
    "MemoryLog",
    "Metrics",
    "Note",
    "Obligation",
    "ObservableType",
    "OperationDecl",
    "Parameters",
    "Preconditions",
    "Proposal",
    "ProposalRecorded",
    "ReasonCode",
    "RecordSource",
    "Rejected",
    "RejectionReason",
    "Revoked",
    "SQLiteLog",
    "State",
    "StateError",
    "StateInputError",
    "StateView",
    "Status",
    "StoreHeadView",
    "Transition",
    "ValidatorError",
    "ValidatorInput",
    "ValidatorSpec",
    "Verdict",
    "audit",
    "check_legality",
    "declaration_from_dict",
    "decode_entry",
    "encode_entry",
    "equivalent",
    "export_json",
    "fixed",
    "full_metrics",
    "load_declaration",
    "normalize",
    "owners_head_view",
    "rebuild",
    "run_validator",
    "store_head_view",
    "transport_problem",
]
