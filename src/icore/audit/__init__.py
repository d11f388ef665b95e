"""iCORE-Audit: the event-triggered intervention layer around a host policy.

icore Sec. 4 and Alg. 1 as fixed by design.md 4.4; see docs/audit.md.

Import rule (design.md 2): ``icore.audit`` imports only ``icore.records``,
``icore.memory``, ``icore.fence``, ``icore.net``, ``icore.state`` (plus ``icore.errors``,
``icore._clock``). It is pure: no I/O and no clock reads (time is injected), so a recorded
run replays to the same decisions.
"""

from icore.audit._diagnosis import (
    Diagnosis,
    EvidenceGap,
    alternatives,
    diagnose,
    diagnose_flags,
    diagnose_hit,
    matched_cohort,
    responsible_agent,
)
from icore.audit._errors import AuditError
from icore.audit._feedback import (
    RECOVERY_KINDS,
    Feedback,
    ObligationBrief,
    build_feedback,
    count_tokens,
)
from icore.audit._host import (
    Environment,
    FunctionPolicy,
    HostOutcome,
    HostPolicy,
    HostView,
    NoEnvironment,
)
from icore.audit._intervention_trace import InterventionTrace, reconstruct
from icore.audit._loop import AuditLoop, run_mas_only
from icore.audit._loop_types import (
    AuditRunResult,
    Intervention,
    LoopConfig,
    StepRecord,
    observe_unaudited,
)
from icore.audit._recovery import (
    MatchedQuality,
    RecoveryCode,
    RecoveryVerdict,
    Violation,
    audit_recovery,
    commit_recovery,
    matched_quality,
    removal_supported,
)
from icore.audit._triggers import (
    ENABLED_STATUSES,
    REASSIGNABLE_STATUSES,
    TRIGGER_ORDER,
    Trigger,
    TriggerHit,
    WorkIndex,
    evaluate_triggers,
)
from icore.audit._views import check_view

__all__ = [
    "ENABLED_STATUSES",
    "REASSIGNABLE_STATUSES",
    "RECOVERY_KINDS",
    "TRIGGER_ORDER",
    "AuditError",
    "AuditLoop",
    "AuditRunResult",
    "Diagnosis",
    "Environment",
    "EvidenceGap",
    "Feedback",
    "FunctionPolicy",
    "HostOutcome",
    "HostPolicy",
    "HostView",
    "Intervention",
    "InterventionTrace",
    "LoopConfig",
    "MatchedQuality",
    "NoEnvironment",
    "ObligationBrief",
    "RecoveryCode",
    "RecoveryVerdict",
    "StepRecord",
    "Trigger",
    "TriggerHit",
    "Violation",
    "WorkIndex",
    "alternatives",
    "audit_recovery",
    "build_feedback",
    "check_view",
    "commit_recovery",
    "count_tokens",
    "diagnose",
    "diagnose_flags",
    "diagnose_hit",
    "evaluate_triggers",
    "matched_cohort",
    "matched_quality",
    "observe_unaudited",
    "reconstruct",
    "removal_supported",
    "responsible_agent",
    "run_mas_only",
]
