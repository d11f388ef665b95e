"""The lineage verdict's values: one action's :class:`ActionLineage` and its points (#26).

:mod:`icore.adapters._action_lineage` builds them from a trace's PlanFence lines; this
module holds the values and the count an action is filed under (:func:`counted_as`), so
the passes over lineages can live beside it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icore.adapters._unknown_outcome import OUTCOME_UNKNOWN, may_have_run
from icore.fence import ActionVerdict, DecisionEntry, action_ran

GATE = "gate"
"""Frontier source: the gate recorded F(x)."""
PLAN_PARENTS = "plan parents"
"""Frontier source: the policy computed no F(x); the roots' exact parents stand in."""
NONE = "none"
"""Frontier source: no frontier could be read."""
FAILED_AFTER_AUTHORIZATION = "failed after authorization"
"""What the audit counts an action as when the gate authorized it and the tool then failed
(raised or was cancelled; :attr:`ActionLineage.error`): its lineage status (``valid``,
``unchecked``) stays as the gate judged it; an ``INVALID`` one is counted ``INVALID``."""


@dataclass(frozen=True, slots=True)
class ValidationPoint:
    """One gate decision of an action with the frontier it is judged on.

    Attributes:
        entry: the decision as recorded.
        frontier: F(x) per key: the decision's own, else the versions the roots cite
            as exact parents (``frontier_source`` says which).
        frontier_source: ``gate``, ``plan parents`` or ``none``.
        verdict: :func:`icore.fence.judge_action` of D(a), ``frontier`` and the
            recorded heads.
    """

    entry: DecisionEntry
    frontier: Mapping[str, str]
    frontier_source: str
    verdict: ActionVerdict


@dataclass(frozen=True, slots=True)
class ActionLineage:
    """One protected action of a recorded run: its decisions, records and status.

    Attributes:
        action: the action's name in the trace (its ``task``, else ``action``).
        title: heading (task and action name).
        status: ``valid``, ``INVALID``, ``unchecked``, ``blocked`` or ``not issued``
            (:func:`icore.fence.action_status` of the last decision, unless a live run's
            ground truth gave it).
        records: the record lines the action's picture shows (its roots and their
            ancestors, the versions of D(a) it saw, the records derived from its roots).
        points: its validation points, in order.
        ran_anyway: the recorded tool output that says the call ran although the gate
            (or a human) refused it (:func:`ran_after_refusal`); its status is then
            ``INVALID``. None: no such output.
        replan_of: the action this one is the recorded replan of (a stale call refused
            with the fresh values, the model's next call its one replan), else None.
        replanned_as: the action that is this one's recorded replan, else None.
        outcome_unknown: authorized, but the run ended abnormally with no result of the
            call recorded (:func:`icore.adapters._unknown_outcome.unknown_outcomes`).
        human: ``approved`` when a recorded human answer approved the call (before its
            gate: :func:`human_answers`), ``rejected`` when a human said no (a recorded
            rejection, or its last decision ``approval_rejected``), else None.
        human_step: the step of the human's recorded answer, when linked.
        human_during: the answer was to a question the tool asked while it ran (after
            its gate authorized it: the MCP gateway's forwarded elicitation), not before
            its gate (QA qa-new11 S3).
        edited: why a record its lineage shows does not match its id, or one of its
            decision lines its digest (``PlanfenceLog.edited``/``edited_decisions``); then
            ``INVALID`` (fail closed: its verdict would rest on the edit). None: none.
        resent_unchanged: of a replan, the facts whose fresh value (handed over with the
            stale refusal) differs from the one the stale call was planned from, although
            its arguments are the stale call's: resent, perhaps without replanning
            (:attr:`PlanfenceLog.resent`; a warning, not a verdict: the arguments may not
            depend on those values). ``()``: none.
        record: the id of the action record the call was judged by (the root of its
            last decision that has one), else None (refused before its gate).
        args: the call's arguments as canonical JSON text: the ones its action record
            binds, else the ones its recorded refused call names; None: not recorded.
        agent: the agent that made the call (its gate thought or refused output, else
            the action record's owner); None: not recorded (#28, QA qa-new10 S3).
        branch: the parallel branch the call was made in (LangGraph ``Send`` branches:
            ``"worker[1]/tools"``, the ``branch`` of its recorded lines); None: not in a
            branch, or not recorded (#28).
        reissue_of: the earlier action of the run whose outcome is unknown that this one
            repeats: the same tool and arguments, authorized from the same versions of
            D(a) (:func:`~icore.adapters._reissued.reissued`; it may have acted twice,
            QA qa-new14 S2), else None.
        called_again: of a call refused ``not_read`` or ``stale``, the next call of its
            tool by its agent that ran, and what it had read ("refused not_read at line
            4; called again at line 9 (ship-2) after reading order/7@2",
            :func:`~icore.adapters._called_again.called_again`, QA qa-new13a S4); else None.

    Both links come from the trace's plan lines (:attr:`PlanfenceLog.replans`), never
    from matching tool names: a call of another session, or a sibling call of the same
    model message, is not a replan (#28, QA qa-crew S2).
    """

    action: str
    title: str
    status: str
    records: tuple[Mapping[str, Any], ...]
    points: tuple[ValidationPoint, ...]
    ran_anyway: str | None = None
    replan_of: str | None = None
    replanned_as: str | None = None
    outcome_unknown: bool = False
    human: str | None = None
    human_step: int | None = None
    human_during: bool = False
    edited: str | None = None
    resent_unchanged: tuple[str, ...] = ()
    record: str | None = None
    args: str | None = None
    agent: str | None = None
    branch: str | None = None
    reissue_of: str | None = None
    called_again: str | None = None

    @property
    def invalid(self) -> bool:
        """True: authorized from a stale plan, or recorded as run after a refusal.

        The second is :attr:`ran_anyway`: a tool output says a refused call ran.
        """
        return self.status == "INVALID"

    @property
    def error(self) -> str | None:
        """The tool's error when it failed after the gate authorized it, else None.

        The last decision's :attr:`icore.fence.DecisionEntry.error` (recorders write it,
        issue 28), for an action that ran; the tool's outcome, not its lineage verdict.
        """
        if not self.points or not action_ran(self.status) or self.ran_anyway is not None:
            return None
        return self.points[-1].entry.error

    @property
    def leaves_open(self) -> bool:
        """True when its tool's recorded failure leaves the call's effect open.

        The last decision's ``may_have_run`` (recorders write it with every ``error``
        since #29); for an older trace without it, the error's text
        (:func:`~icore.adapters._unknown_outcome.may_have_run`: a timeout, a
        cancellation, ``MAY HAVE RUN:``). False when no failure is recorded.
        """
        error = self.error
        if error is None:
            return False
        flag = self.points[-1].entry.may_have_run
        return may_have_run(error) if flag is None else flag

    @property
    def counted(self) -> str:
        """The count the audit files the action under (:func:`counted_as`).

        :data:`FAILED_AFTER_AUTHORIZATION` for a ``valid`` or ``unchecked`` action whose
        tool failed, ``outcome unknown`` for one whose result was never recorded, else
        :attr:`status`.
        """
        return counted_as(self.status, self.error, unknown=self.outcome_unknown,
                          leaves_open=self.leaves_open)


def counted_as(status: str, error: str | None, *, unknown: bool = False,
               leaves_open: bool | None = None) -> str:
    """The count an action of ``status`` goes to (console line, ``--json``, index).

    ``INVALID`` stays ``INVALID`` (a stale plan stays the defect counted); else
    ``outcome unknown`` (:data:`~icore.adapters.OUTCOME_UNKNOWN`) when ``unknown``
    (authorized, no result recorded) or the failure leaves the effect open (a timeout,
    a cancellation, an answer lost after sending: ``leaves_open``, the decision's
    recorded ``may_have_run``; None: judged from ``error``'s text, as for traces before
    #29); :data:`FAILED_AFTER_AUTHORIZATION` when its tool failed (``error`` set); else
    ``status``.
    """
    if status == "INVALID":
        return status
    if unknown or (may_have_run(error) if leaves_open is None else leaves_open):
        return OUTCOME_UNKNOWN
    return FAILED_AFTER_AUTHORIZATION if error is not None else status
