"""Authorized calls whose outcome a run that did not end normally never recorded.

A gateway writes a protected call's decision before it forwards the call and the call's
result when it comes back; stopped at once (a second Ctrl-C, a kill), it leaves a call
that was authorized and forwarded with no result (the upstream may well have finished
it). Its lineage verdict stands (``valid``: the plan was current), but the audit must
not present it as a call known to have run: it is counted :data:`OUTCOME_UNKNOWN`
(QA qa-crew S4). Pure: reads the trace's steps only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from icore._trace_marks import MAY_HAVE_RUN_MARK
from icore.adapters._trace import Step, StepKind, run_ended
from icore.fence import action_ran


class _Action(Protocol):
    """What is read of an :class:`~icore.adapters.ActionLineage`.

    A frozen dataclass with an ``outcome_unknown`` field; not imported here (its module
    imports this one).
    """

    @property
    def points(self) -> Sequence[Any]:
        """Its validation points (the first names the tool)."""

    @property
    def status(self) -> str:
        """Its lineage status."""

    @property
    def ran_anyway(self) -> str | None:
        """The output saying a refused call ran, else None."""

    @property
    def error(self) -> str | None:
        """The tool's error when it failed after authorization, else None."""

    @property
    def outcome_unknown(self) -> bool:
        """Authorized with no known result."""

    @property
    def leaves_open(self) -> bool:
        """Its recorded failure leaves the effect open (structured, else by text)."""


_A = TypeVar("_A", bound=_Action)

OUTCOME_UNKNOWN = "outcome unknown"
"""What the audit counts an action as when the gate authorized it, the run then ended
without its terminal marker and no result of the call was recorded
(``ActionLineage.outcome_unknown``)."""


# MAY_HAVE_RUN_MARK (re-exported): how a recorded ``error`` that leaves the call's effect
# open starts: the MCP gateway's upstream timed out or its answer was lost after the
# call was sent (#29, QA qa-new8 S2).
_OPEN_ERRORS = (MAY_HAVE_RUN_MARK, "CancelledError:", "TimeoutError")
"""Error texts (as the recorders write them: ``Type: message``) of a call whose effect is
unknown: sent and not answered, cancelled or timed out while the tool ran."""


def may_have_run(error: str | None) -> bool:
    """True when ``error`` says the call failed in a way that may have left its effect.

    A timeout, a cancellation while the tool ran, or an upstream answer lost after the
    call was sent: the audit counts the call ``outcome unknown``, never ``failed``. The
    fallback for traces written before #29: a decision's recorded ``may_have_run``
    (:attr:`icore.fence.DecisionEntry.may_have_run`) is read first.
    """
    return error is not None and error.lstrip().startswith(_OPEN_ERRORS)


def unknown_outcomes(lineages: Sequence[_A], steps: Sequence[Step], *,
                     gate_only: bool = False) -> tuple[_A, ...]:
    """``lineages``, each authorized call with no recorded result marked outcome unknown.

    A call whose recorded failure leaves its effect open (the decision's
    ``may_have_run``; for a trace before #29, :func:`may_have_run` of the error's text)
    is marked in any run. Otherwise only in a run that recorded steps and did not end
    normally (:func:`~icore.adapters._trace.run_ended`: its last request has no
    ``termination`` step, no terminating message): a run that ended normally recorded
    every result. Per tool, the recorded results (its ``tool_output`` steps but those of
    calls the framework's schema refused before any gate, ``Step.invalid_args``;
    less one per refused call: a refusal is handed to the model as that call's output;
    an authorized call whose body never ran is a known outcome too) are held against its
    actions that ran (the gate authorized them); when fewer, the last authorized ones
    without a recorded failure are the calls whose result is missing, as many as the
    shortfall.

    ``gate_only``: the trace holds the gate's lines and no step at all (a run killed
    inside its first protected call before any other line reached disk, QA qa-new17b
    #2): it did not end and recorded no result, so every authorized call is unknown.

    Returns:
        The lineages, those actions with ``outcome_unknown=True``; the rest unchanged.
    """
    lineages = tuple(
        dataclasses.replace(a, outcome_unknown=True)  # type: ignore[type-var]
        if not a.outcome_unknown and a.leaves_open else a for a in lineages)
    if (not steps and not gate_only) or (steps and run_ended(steps)):
        return lineages
    ran: dict[str, list[int]] = {}
    refused: dict[str, int] = {}
    for i, a in enumerate(lineages):
        if a.points and action_ran(a.status) and a.ran_anyway is None:
            ran.setdefault(a.points[0].entry.action, []).append(i)
        elif a.points:
            tool = a.points[0].entry.action
            refused[tool] = refused.get(tool, 0) + 1
    results: dict[str, int] = {}
    for s in steps:  # every output line is some call's result; a refused call's is its refusal
        if s.kind == StepKind.TOOL_OUTPUT and s.tool in ran and not s.invalid_args:
            results[s.tool] = results.get(s.tool, 0) + 1
    for tool, n in refused.items():
        if tool in results:
            results[tool] = max(0, results[tool] - n)
    out = list(lineages)
    for tool, idxs in ran.items():
        missing = len(idxs) - results.get(tool, 0)
        if missing <= 0:
            continue
        for i in [i for i in idxs if lineages[i].error is None][-missing:]:
            out[i] = dataclasses.replace(lineages[i], outcome_unknown=True)  # type: ignore[type-var]
    return tuple(out)


__all__ = ["MAY_HAVE_RUN_MARK", "OUTCOME_UNKNOWN", "may_have_run", "unknown_outcomes"]
