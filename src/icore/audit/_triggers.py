"""The five intervention triggers of iCORE-Audit (icore Sec. 4, Alg. 1; design.md 4.4).

A trigger fires exactly when its condition holds on the current state:

===================== ==========================================================
``no_productive_work`` X is not terminal and no productive update is enabled
``patience``           some enabled assigned obligation made no progress (a change
                       of a declared progress field) for H iterations: its own
                       counter h_o >= H (D's ``parameters.patience``)
``hard_flag``          some hard flag is open (unresolved)
``reassignment``       an ε-beneficial reassignment exists: a reassignable
                       obligation whose gain (icore Def. 9) exceeds ε
``low_quality``        cq_{D,ε}(X) < τ
===================== ==========================================================

Decisions where design.md is silent (docs/audit.md): *enabled productive work* is an
obligation whose effective status is open, assigned, active, repair_pending or submitted
and whose dependencies are all discharged or settled; *reassignable* statuses are open,
assigned, active, repair_pending and failed (reassigning finished work benefits nothing).
:class:`WorkIndex` keeps both sets incrementally from the obligations each log entry
touches, so checking the triggers costs O(touched), not O(|Q|); :meth:`WorkIndex.rebuild`
is the full recompute that tests hold equal.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from icore.state import (
    Metrics,
    State,
    Status,
)

ENABLED_STATUSES = frozenset(
    {Status.OPEN, Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING, Status.SUBMITTED}
)
"""Effective statuses of productive work (enabled once dependencies are done)."""
REASSIGNABLE_STATUSES = frozenset(
    {Status.OPEN, Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING, Status.FAILED}
)
"""Effective statuses at which a reassignment can still change the outcome."""
DONE_STATUSES = frozenset({Status.DISCHARGED, Status.SETTLED})


class Trigger(enum.StrEnum):
    """Why an intervention fires (icore Sec. 4)."""

    NO_PRODUCTIVE_WORK = "no_productive_work"
    PATIENCE = "patience"
    HARD_FLAG = "hard_flag"
    REASSIGNMENT = "reassignment"
    LOW_QUALITY = "low_quality"


TRIGGER_ORDER: tuple[Trigger, ...] = (
    Trigger.HARD_FLAG,
    Trigger.NO_PRODUCTIVE_WORK,
    Trigger.PATIENCE,
    Trigger.REASSIGNMENT,
    Trigger.LOW_QUALITY,
)
"""Priority in which fired triggers are diagnosed (one diagnosis per iteration)."""


@dataclass(frozen=True, slots=True)
class TriggerHit:
    """One fired trigger and what it points at.

    Attributes:
        trigger: the trigger.
        obligations: obligations it concerns (ordered by relevance).
        flags: open hard flags (``hard_flag`` only).
        detail: a short explanation with the measured quantity.
    """

    trigger: Trigger
    obligations: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    detail: str = ""


class WorkIndex:
    """Enabled productive work and ε-beneficial reassignments, kept incrementally.

    Args:
        state: X (read only).
    """

    def __init__(self, state: State) -> None:
        self.state = state
        self.enabled: set[str] = set()
        self.unstable: dict[str, float] = {}
        self._rdeps: dict[str, set[str]] = {}
        self.rebuild()

    def _is_enabled(self, oid: str) -> bool:
        o = self.state.obligations.get(oid)
        if o is None or o.effective_status not in ENABLED_STATUSES:
            return False
        obs = self.state.obligations
        return all(d in obs and obs[d].effective_status in DONE_STATUSES for d in o.deps)

    def _gain_if_reassignable(self, oid: str) -> float | None:
        o = self.state.obligations.get(oid)
        if o is None or o.effective_status not in REASSIGNABLE_STATUSES or o.assignee is None:
            return None
        g = self.state.gain(oid)
        return g if g > self.state.decl.parameters.epsilon else None

    def _refresh_one(self, oid: str) -> None:
        if self._is_enabled(oid):
            self.enabled.add(oid)
        else:
            self.enabled.discard(oid)
        g = self._gain_if_reassignable(oid)
        if g is None:
            self.unstable.pop(oid, None)
        else:
            self.unstable[oid] = g

    def update(self, touched: Iterable[str]) -> None:
        """Re-check the touched obligations and their dependents (O(touched))."""
        todo: set[str] = set()
        for oid in touched:
            o = self.state.obligations.get(oid)
            if o is not None:
                for d in o.deps:
                    self._rdeps.setdefault(d, set()).add(oid)
            todo.add(oid)
            todo.update(self._rdeps.get(oid, ()))
        for oid in todo:
            self._refresh_one(oid)

    def rebuild(self) -> None:
        """Full recompute from X (O(|Q|))."""
        self.enabled.clear()
        self.unstable.clear()
        self._rdeps.clear()
        for oid, o in self.state.obligations.items():
            for d in o.deps:
                self._rdeps.setdefault(d, set()).add(oid)
        for oid in self.state.obligations:
            self._refresh_one(oid)


def unsound_members(state: State) -> list[str]:
    """Members of W(X) that are not sound (O(|Q|); used when ``low_quality`` fires)."""
    return [oid for oid in state.evaluated() if not state.is_sound(oid)]


def blocked_members(state: State) -> list[str]:
    """Members of W(X) that are neither done nor enabled (what blocks progress)."""
    out = []
    for oid in state.evaluated():
        o = state.obligations[oid]
        if o.effective_status not in DONE_STATUSES:
            out.append(oid)
    return out


def evaluate_triggers(
    state: State,
    *,
    index: WorkIndex,
    h: int,
    metrics: Metrics,
    terminal: bool,
    stalled: Sequence[str] = (),
) -> list[TriggerHit]:
    """Evaluate the five triggers on X (icore Alg. 1; design.md 4.4).

    Args:
        state: X.
        index: the work index (kept in step with X by the caller).
        h: the largest per-obligation patience counter (iterations without progress).
        metrics: current metrics of X.
        terminal: whether D's terminal predicate holds.
        stalled: the obligations whose counter reached H, longest without progress first.

    Returns:
        The fired triggers in :data:`TRIGGER_ORDER`.
    """
    p = state.decl.parameters
    hits: dict[Trigger, TriggerHit] = {}
    flags = state.open_flags()
    if flags:
        oids = tuple(dict.fromkeys(o for f in flags for o in f.obligations))
        hits[Trigger.HARD_FLAG] = TriggerHit(
            Trigger.HARD_FLAG, oids, tuple(f.id for f in flags), f"{len(flags)} open hard flag(s)"
        )
    if not terminal and not index.enabled:
        hits[Trigger.NO_PRODUCTIVE_WORK] = TriggerHit(
            Trigger.NO_PRODUCTIVE_WORK,
            tuple(blocked_members(state)),
            detail="no enabled productive update",
        )
    if h >= p.patience:
        hits[Trigger.PATIENCE] = TriggerHit(
            Trigger.PATIENCE, tuple(stalled), detail=f"h={h} >= H={p.patience}"
        )
    if index.unstable:
        ranked = sorted(index.unstable.items(), key=lambda kv: (-kv[1], kv[0]))
        hits[Trigger.REASSIGNMENT] = TriggerHit(
            Trigger.REASSIGNMENT,
            tuple(k for k, _ in ranked),
            detail=f"max gain {ranked[0][1]:.3f} > ε={p.epsilon}",
        )
    if metrics.cq < p.tau:
        hits[Trigger.LOW_QUALITY] = TriggerHit(
            Trigger.LOW_QUALITY,
            tuple(unsound_members(state)),
            detail=f"cq={metrics.cq:.3f} < τ={p.tau}",
        )
    return [hits[t] for t in TRIGGER_ORDER if t in hits]
