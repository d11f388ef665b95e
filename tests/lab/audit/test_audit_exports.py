"""The public API of icore.audit is pinned (style habit 2)."""

from __future__ import annotations

import icore.audit

PINNED = [
    "ENABLED_STATUSES", "REASSIGNABLE_STATUSES", "RECOVERY_KINDS", "TRIGGER_ORDER",
    "AuditError", "AuditLoop", "Diagnosis", "Environment", "EvidenceGap", "Feedback",
    "FunctionPolicy", "HostPolicy", "HostView", "Intervention", "InterventionTrace",
    "LoopConfig", "MatchedQuality", "NoEnvironment", "ObligationBrief", "HostOutcome",
    "RecoveryCode", "RecoveryVerdict", "AuditRunResult", "StepRecord", "Trigger", "TriggerHit",
    "Violation", "WorkIndex", "alternatives", "audit_recovery", "build_feedback",
    "check_view", "commit_recovery", "count_tokens", "diagnose", "diagnose_flags", "diagnose_hit",
    "evaluate_triggers",
    "matched_cohort", "matched_quality", "observe_unaudited", "reconstruct", "removal_supported",
    "responsible_agent", "run_mas_only",
]


def test_audit_exports_pinned() -> None:
    """``icore.audit.__all__`` equals the pinned list and every name resolves."""
    assert sorted(icore.audit.__all__) == sorted(PINNED)
    for name in PINNED:
        assert hasattr(icore.audit, name), name


def test_audit_error_is_an_icore_error() -> None:
    """AuditError hangs off the IcoreError tree with code ``audit``."""
    from icore.errors import ErrorCode, IcoreError

    err = icore.audit.AuditError("x", mode="y")
    assert isinstance(err, IcoreError) and err.code == ErrorCode.AUDIT
    assert err.fields == {"mode": "y"}
