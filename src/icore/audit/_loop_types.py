"""The iCORE-Audit loop's configuration, records and result (icore Alg. 1; design.md 4.4).

:class:`LoopConfig` (what a run of :class:`~icore.audit.AuditLoop` does),
:class:`StepRecord` (one iteration of the trajectory), :class:`Intervention` (one
diagnosis and its recovery), :class:`AuditRunResult` (a run), and
:func:`observe_unaudited` (passive observation of a rejected proposal's effects).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from icore.audit._diagnosis import Diagnosis
from icore.audit._feedback import Feedback
from icore.audit._views import (
    View,
)
from icore.state import (
    AssertionKind,
    HeadView,
    Metrics,
    Proposal,
    State,
    StateInputError,
)

Mode = Literal["audit", "passive"]


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """Configuration of one run.

    Attributes:
        mode: ``audit`` (iCORE-Audit) or ``passive`` (full-state observation only).
        max_steps: iteration budget (one agent call at most per iteration).
        max_attempts_per_flag: recoveries tried per hard flag before it is left open
            (a ``failure`` note records the escalation).
        cooldown: iterations before the same (trigger, obligations) is diagnosed again.
        head_view: owners' current heads for cited PlanFence records.
        view: what the auditor's decisions may read: ``X`` (all), ``G`` (events only) or
            ``Q`` (obligations only); see :mod:`icore.audit._views`.
    """

    mode: Mode = "audit"
    max_steps: int = 200
    max_attempts_per_flag: int = 3
    cooldown: int = 3
    head_view: HeadView | None = None
    view: View = "X"


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one iteration did and measured (the trajectory)."""

    step: int
    call: str
    decision: str
    h: int
    snd: float
    astab: float
    cq: float
    triggers: tuple[str, ...]
    diagnosis: str | None


@dataclass(frozen=True, slots=True)
class Intervention:
    """One intervention: F, what the routed agent was told, what it answered, the verdict."""

    diagnosis: Diagnosis
    agent: str | None
    feedback: Feedback | None
    proposals: tuple[str, ...] = ()
    accepted: bool = False
    violations: tuple[str, ...] = ()
    cq_before: float = 0.0
    cq_after: float | None = None
    changed: tuple[str, ...] = ()


@dataclass(slots=True)
class AuditRunResult:
    """Everything a run measured (frozen once returned, by convention).

    Attributes:
        mode: ``audit``, ``passive`` or ``mas_only``.
        steps: iterations run.
        agent_calls: agent calls made (ordinary + recovery).
        extra_calls: calls spent answering feedback.
        terminal: whether D's terminal predicate held at the end.
        trajectory: per-iteration records.
        interventions: every diagnosis and its outcome.
        proposals: ordinary proposals audited.
        rejections: ordinary proposals rejected.
        audit_ms: total time auditing ordinary proposals (injected clock), in ms.
        feedback_tokens: total tokens of feedback sent.
        final: metrics of X after the environment closed the run (None: MAS-only).
        fired: how many iterations each trigger fired in.
        named: obligations the auditor named (diagnosed, or target/subject of an enforced
            rejection): what the loop detected.
    """

    mode: str
    steps: int = 0
    agent_calls: int = 0
    extra_calls: int = 0
    terminal: bool = False
    trajectory: list[StepRecord] = field(default_factory=list)
    interventions: list[Intervention] = field(default_factory=list)
    proposals: int = 0
    rejections: int = 0
    audit_ms: float = 0.0
    feedback_tokens: int = 0
    final: Metrics | None = None
    fired: dict[str, int] = field(default_factory=dict)
    named: set[str] = field(default_factory=set)

    @property
    def trajectory_quality(self) -> float:
        """Mean cq over the run's iterations (0.0 for an empty or MAS-only run)."""
        if not self.trajectory:
            return 0.0
        return sum(r.cq for r in self.trajectory) / len(self.trajectory)

    @property
    def audit_ms_per_proposal(self) -> float:
        """Mean audit time per ordinary proposal, in ms."""
        return self.audit_ms / self.proposals if self.proposals else 0.0

    @property
    def accepted_recoveries(self) -> int:
        """Interventions whose recovery was committed."""
        return sum(1 for i in self.interventions if i.accepted)


def observe_unaudited(state: State, proposal: Proposal) -> int:
    """Record a rejected proposal's claimed effects as observed (passive observation).

    Its events are added to G and its effects imported into Q without Definition 6, so
    the state shows what the host did and soundness is computed honestly (e.g. a
    completion claimed without the required certificate is unsound). Effects the state
    cannot represent (unknown obligations, malformed values) are skipped.

    Returns:
        The number of effects imported.
    """
    for spec in proposal.events:
        try:
            state.add_event(spec)
        except StateInputError:
            continue
    events = [e for e in proposal.justification if e in state.events]
    op = proposal.operation if proposal.operation in state.decl.operations else None
    proposer = proposal.proposer if proposal.proposer in state.decl.agents else None
    n = 0
    ordered = sorted(proposal.effects, key=lambda e: e.kind != AssertionKind.NODE)
    for eff in ordered:
        try:
            state.import_assertion(eff, events=events, operation=op, proposer=proposer)
        except StateInputError:
            continue
        n += 1
    return n
