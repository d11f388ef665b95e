"""Gate decisions and their reasons (planfence Alg. 1 outcomes)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.records import Record, RecordId


class Outcome(enum.StrEnum):
    """The three outcomes of planfence Alg. 1."""

    AUTHORIZED = "authorized"
    """Lineage-valid at the logged validation point (Alg. 1 line 13)."""
    REPLAN_REQUIRED = "replan_required"
    """A dependency changed; fresh verified records are attached (line 12)."""
    BLOCKED = "blocked"
    """Validation could not establish lineage validity (lines 3, 7, 11)."""


class Reason(enum.StrEnum):
    """Why the gate decided what it decided (stable codes for logs and reports)."""

    VALID = "valid"
    """F_a(x) == H(x) for every x in D(a)."""
    STALE = "stale"
    """Some F_a(x) != H(x) on the first validation: replan required."""
    SECOND_CHANGE = "second_change"
    """A dependency changed again after the one replan: blocked."""
    INCOMPLETE_DECLARATION = "incomplete_declaration"
    """D(a) is empty, invalid, or misses a key the action's arguments read."""
    LINEAGE_INCOMPLETE = "lineage_incomplete"
    """A root or parent reached from the roots is missing (Alg. 1 line 2)."""
    MISSING_BOUNDARY = "missing_boundary"
    """A key of D(a) is never reached from the roots (Alg. 1 line 2)."""
    FRONTIER_CONFLICT = "frontier_conflict"
    """Two versions of one key of D(a) are reached from the roots."""
    NO_OWNER = "no_owner"
    """A key of D(a) has no owner mapping (Alg. 1 line 2)."""
    OWNER_UNAVAILABLE = "owner_unavailable"
    """An owner did not answer (down, timed out, refused) (Alg. 1 line 6)."""
    MALFORMED_HEAD = "malformed_head"
    """An owner reply is malformed (Alg. 1 line 6)."""
    WRONG_KEY = "wrong_key"
    """An owner reply identifies another key or omits one asked for (line 6)."""
    CONFLICTING_OWNER = "conflicting_owner"
    """A reply comes from another owner than the one asked (line 6)."""
    CONFLICTING_REPLY = "conflicting_reply"
    """A reply carries more than one entry for one key (line 6: conflicting response)."""
    ARGS_MISMATCH = "args_mismatch"
    """The call's arguments are not the ones its roots bind (planfence A.3 step 1)."""
    FETCH_FAILED = "fetch_failed"
    """A changed record could not be fetched or did not verify (line 8)."""
    FAIL_OPEN = "fail_open"
    """ABLATION ONLY: a blocked decision was turned into an authorization."""
    NOT_VALIDATED = "not_validated"
    """An unsafe baseline policy authorized without checking lineage."""


INFRASTRUCTURE_REASONS = frozenset({
    Reason.INCOMPLETE_DECLARATION, Reason.LINEAGE_INCOMPLETE, Reason.MISSING_BOUNDARY,
    Reason.FRONTIER_CONFLICT, Reason.NO_OWNER, Reason.OWNER_UNAVAILABLE,
    Reason.MALFORMED_HEAD, Reason.WRONG_KEY, Reason.CONFLICTING_OWNER, Reason.FETCH_FAILED,
    Reason.CONFLICTING_REPLY,
})
"""Blocked reasons that come from incomplete validation rather than a second change."""


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One gate decision with every input it was made from (logged as is).

    Attributes:
        outcome: :class:`Outcome`.
        reason: :class:`Reason`.
        action: the action name.
        roots: L(a).
        deps: D(a), sorted.
        frontier: F_a(x) for the keys the traversal reached.
        heads: H(x) as reported by the owners.
        fresh: verified current records for changed keys (replan input).
        replanned: the flag the gate was called with.
        point: the validation point: a per-gate monotone counter.
        at_ms: clock time of the validation point, in ms.
        policy: name of the policy that decided.
        detail: human-readable detail (error text).
        owners_contacted: number of owners queried.
        heads_checked: number of head items queried.
    """

    outcome: Outcome
    reason: Reason
    action: str
    roots: tuple[RecordId, ...]
    deps: tuple[str, ...]
    frontier: Mapping[str, RecordId] = field(default_factory=dict)
    heads: Mapping[str, RecordId] = field(default_factory=dict)
    fresh: Mapping[str, Record] = field(default_factory=dict)
    replanned: bool = False
    point: int = 0
    at_ms: float = 0.0
    policy: str = "planfence"
    detail: str = ""
    owners_contacted: int = 0
    heads_checked: int = 0

    @property
    def authorized(self) -> bool:
        """True when the action may execute."""
        return self.outcome is Outcome.AUTHORIZED

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (fresh records by id) for the decision log."""
        return {
            "outcome": self.outcome.value,
            "reason": self.reason.value,
            "action": self.action,
            "roots": list(self.roots),
            "deps": list(self.deps),
            "frontier": dict(self.frontier),
            "heads": dict(self.heads),
            "fresh": {k: r.id for k, r in self.fresh.items()},
            "replanned": self.replanned,
            "point": self.point,
            "at_ms": self.at_ms,
            "policy": self.policy,
            "detail": self.detail,
            "owners_contacted": self.owners_contacted,
            "heads_checked": self.heads_checked,
        }
