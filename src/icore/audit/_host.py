"""The host-policy interface ``Schedule_D`` of icore Alg. 1 (design.md 4.4).

iCORE-Audit neither defines the task nor generates ordinary work: it asks the host for a
proposal, audits it, and, when a trigger fires, sends state-grounded feedback to the
responsible agent and audits the recovery the host answers with. The interface is two
methods, so an existing framework's step function can be wrapped with
:class:`FunctionPolicy` (see ``examples/audit_plain_loop.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from icore.state import Proposal, State, Verdict

if TYPE_CHECKING:
    from icore.audit._feedback import Feedback


@dataclass(frozen=True, slots=True)
class HostView:
    """What the loop hands the host at one iteration.

    Attributes:
        step: iteration index (0-based; one agent call each).
        state: X, read-only by convention (None in the MAS-only condition, which keeps
            no iCORE state).
    """

    step: int
    state: State | None


@dataclass(frozen=True, slots=True)
class HostOutcome:
    """What happened to the host's last ordinary proposal (told to the host).

    Attributes:
        proposal: the proposal as audited (with its assigned id).
        verdict: the Definition 6 verdict, or None when nothing audited it (MAS-only)
            or the recovery was rejected before reaching X.
        enforced: True when a rejection kept the effects out (iCORE-Audit); False when
            the host's effects take place in its world regardless (MAS-only, passive).
        accepted: True when the host should consider its effects done.
        recovery: True for a proposal answering feedback.
    """

    proposal: Proposal
    verdict: Verdict | None
    enforced: bool
    accepted: bool
    recovery: bool = False

    @classmethod
    def of(cls, proposal: Proposal, verdict: Verdict | None, *, enforced: bool) -> HostOutcome:
        """Outcome of an ordinary proposal: accepted unless an enforced audit rejected it."""
        ok = verdict is None or verdict.committed or not enforced
        return cls(proposal, verdict, enforced, ok)


@runtime_checkable
class HostPolicy(Protocol):
    """``Schedule_D`` of icore Alg. 1: the host execution policy iCORE-Audit wraps."""

    def propose(self, view: HostView) -> Proposal | None:
        """Return the next ordinary proposal, or None for a nonproductive step."""
        ...

    def observe(self, outcome: HostOutcome) -> None:
        """Learn the outcome of the last proposal (commit, reject, not audited)."""
        ...

    def recover(self, feedback: Feedback, view: HostView) -> Sequence[Proposal]:
        """Answer routed feedback with a recovery (one or more proposals, or none).

        Every proposal must come from ``feedback.to`` (the routed agent, icore Sec. 4).
        """
        ...


class Environment(Protocol):
    """The task environment's own moves (owner revisions, deadlines, closing evidence)."""

    def tick(self, step: int, state: State | None) -> None:
        """Apply what happens before iteration ``step``.

        E.g. an owner revises a record and calls ``state.on_head_change``.
        """
        ...

    def close(self, state: State | None) -> None:
        """Record terminal evidence when the run ends (e.g. unfinished work)."""
        ...


class NoEnvironment:
    """An environment that does nothing."""

    def tick(self, step: int, state: State | None) -> None:
        """Nothing happens."""

    def close(self, state: State | None) -> None:
        """Nothing to record."""


StepFn = Callable[[HostView], Proposal | None]
RecoverFn = Callable[["Feedback", HostView], Sequence[Proposal]]


class FunctionPolicy:
    """Wrap plain functions (an existing framework's step function) as a host policy.

    Args:
        step: ``view -> proposal | None``; called once per ordinary iteration.
        recover: ``(feedback, view) -> proposals``; None answers no feedback (every
            intervention then ends in a failure-and-feedback record).
        observe: called with every :class:`HostOutcome`.
    """

    def __init__(
        self,
        step: StepFn,
        *,
        recover: RecoverFn | None = None,
        observe: Callable[[HostOutcome], None] | None = None,
    ) -> None:
        self._step = step
        self._recover = recover
        self._observe = observe

    def propose(self, view: HostView) -> Proposal | None:
        """Call the wrapped step function."""
        return self._step(view)

    def observe(self, outcome: HostOutcome) -> None:
        """Forward the outcome, if an observer was given."""
        if self._observe is not None:
            self._observe(outcome)

    def recover(self, feedback: Feedback, view: HostView) -> Sequence[Proposal]:
        """Call the wrapped recovery function (no recovery without one)."""
        if self._recover is None:
            return ()
        return self._recover(feedback, view)
