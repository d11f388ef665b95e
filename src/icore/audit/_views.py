"""Restricted auditor views for the loop-level representation ablation (icore Sec. 5, claim 1).

iCORE-Audit reads the coupled state X = (G, Q, Π). The ablation asks what the *loop*
(triggers, diagnosis, routing, gate and recovery audit; :class:`~icore.audit.AuditLoop`)
achieves when the auditor can read only one part of it. The state itself is always the
full X (it is the measuring instrument the benchmark reads quality from, and the host
sees the same :class:`~icore.audit.HostView` in every view); what a view restricts is
which of the auditor's *decisions* it can base on what it reads:

=========== =================================================================
view        what the auditor may use
=========== =================================================================
``X``       everything (the unrestricted loop)
``Q``       obligations, statuses, assignees, dependencies, progress fields and D's
            capability values; no events, no justification, no certificates
``G``       events of G (type, author, semantic fields, causes); no obligations,
            statuses, assignments or certificates
=========== =================================================================

Concretely (docs/audit.md "Loop-level representation ablation"):

* **gate**: Definition 6 runs in full, but a rejection is *enforced* only when one of its
  reasons is visible in the view (:data:`GATE_REASONS`); an unenforced rejection is
  observed as in passive mode (its effects are imported without Definition 6), so work
  the view cannot judge goes through;
* **triggers**: ``Q`` evaluates ``no_productive_work``, ``patience`` (per obligation, on
  Q's progress fields) and ``reassignment``; ``G`` evaluates only its own stall rule
  (:class:`GStall`: H consecutive ``message`` events on an item without a ``work``,
  ``test`` or ``review`` event); ``hard_flag`` and ``low_quality`` need Π (X only);
* **routing**: ``Q`` and ``X`` use D's rule; ``G`` routes to the last agent (other than
  the environment) that authored an event on the diagnosed item, the only owner G shows;
* **recovery audit**: the matched-set audit runs in full; its rejection is enforced only
  when one of its violations is visible (:data:`RECOVERY_CODES`), otherwise the recovery's
  proposals go through the view's gate one by one.

The diagnosis content (W_F, evidence gaps, alternatives) and the feedback are built by
the same code in every view, from X. That leaks information *to* the restricted views (a
G-only auditor could not list Q's alternatives), so it can only narrow the measured gap
between X and G/Q: the ablation is conservative for the claim that X is needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from icore.audit._recovery import RecoveryCode
from icore.audit._triggers import Trigger
from icore.state import Committed, EventAdded, LogEntry, ReasonCode

View = Literal["X", "G", "Q"]
VIEWS: tuple[View, ...] = ("G", "Q", "X")

_D = frozenset({ReasonCode.UNKNOWN_OPERATION, ReasonCode.UNKNOWN_AGENT,
                ReasonCode.UNAUTHORIZED_PROPOSER})
GATE_REASONS: dict[str, frozenset[ReasonCode] | None] = {
    "X": None,
    "G": _D | {ReasonCode.INVALID_EVENT, ReasonCode.UNKNOWN_EVENT,
               ReasonCode.MISSING_JUSTIFICATION},
    "Q": _D | {ReasonCode.UNKNOWN_OBLIGATION, ReasonCode.PRECONDITION_FAILED,
               ReasonCode.STALE_CITATION, ReasonCode.EFFECT_MISMATCH},
}
"""Definition 6 reasons each view can see (``None``: all). D's declarations (Ω, M_D) are
readable in every view; certificates, validators, record heads and settlement/transport
evidence (Π) only in X."""

TRIGGERS: dict[str, frozenset[Trigger]] = {
    "X": frozenset(Trigger),
    "Q": frozenset({Trigger.NO_PRODUCTIVE_WORK, Trigger.PATIENCE, Trigger.REASSIGNMENT}),
    "G": frozenset({Trigger.PATIENCE}),
}
"""Triggers each view can evaluate (``G``'s patience is :class:`GStall`)."""

RECOVERY_CODES: dict[str, frozenset[RecoveryCode] | None] = {
    "X": None,
    "Q": frozenset({RecoveryCode.NO_RECOVERY, RecoveryCode.WRONG_AGENT,
                    RecoveryCode.OUTSIDE_MATCHED_SET}),
    "G": frozenset({RecoveryCode.NO_RECOVERY, RecoveryCode.WRONG_AGENT}),
}
"""Recovery-audit violations each view can see (``None``: all). Soundness, flags, cq on
W_F and removal evidence need Π."""

WORK_EVENTS = frozenset({"work", "test", "review"})
"""Event types G reads as a work artifact on an item (the simulated team's vocabulary)."""


def check_view(view: str) -> View:
    """``view`` as a :data:`View`.

    Raises:
        ValueError: not one of ``X``, ``G``, ``Q``.
    """
    if view == "X":
        return "X"
    if view == "G":
        return "G"
    if view == "Q":
        return "Q"
    raise ValueError(f"view must be one of X, G, Q, not {view!r}")


class GStall:
    """G's stall rule: per item, ``message`` events since its last work artifact.

    Reads only events (``Committed.events`` and ``EventAdded``) and their ``item`` field
    and author; O(new events) per update.
    """

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.author: dict[str, str] = {}

    def update(self, entries: Iterable[LogEntry]) -> None:
        """Read the events of ``entries``."""
        for e in entries:
            b = e.body
            if isinstance(b, Committed):
                evs = list(b.events)
            elif isinstance(b, EventAdded):
                evs = [b.event]
            else:
                continue
            for ev in evs:
                item = ev.fields.get("item")
                if not isinstance(item, str):
                    continue
                if ev.agent != "env":
                    self.author[item] = ev.agent
                if ev.type == "message":
                    self.count[item] = self.count.get(item, 0) + 1
                elif ev.type in WORK_EVENTS:
                    self.count[item] = 0

    def stalled(self, patience: int) -> tuple[int, list[str]]:
        """The largest count and the items at or above ``patience``, longest first."""
        h = max(self.count.values(), default=0)
        hit = [i for i, n in self.count.items() if n >= patience]
        return h, sorted(hit, key=lambda i: (-self.count[i], i))

    def reset(self, item: str) -> None:
        """Forget ``item``'s run (after a recovery addressed it)."""
        self.count.pop(item, None)
