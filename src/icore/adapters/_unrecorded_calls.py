"""Calls a gate authorized whose decision line is missing: outcome unknown (qa-new15b).

An MCP gateway writes, for a call it authorized, a plan line, a gate thought
(``gate: {outcome: authorized, tool}``, with the call's ``task``), the action record and
the decision line, then forwards the call. A gateway killed while the upstream runs it
may leave the file cut after the gate thought or the record: the decision line is gone
(QA qa-new15b S2, case K1), the call disappeared from the audit, and a trace whose only
possibly-run call it was read as nothing unknown having happened. Such a task is now an
action of its own, ``outcome unknown`` (authorized, forwarded, no result): its lineage
status comes from a stand-in decision (``authorized``, no roots: ``unchecked``), which
says the decision line is missing. Pure: reads the trace's PlanFence lines only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from icore.fence import DecisionEntry

MISSING_DECISION = ("its gate thought shows the gate authorized it, but its decision line "
                    "is missing (the file was cut, as by a gateway killed mid-call)")
"""The stand-in decision's detail of a call whose decision line is missing."""


def unrecorded_calls(planfence: Any, lineages: Sequence[Any],
                     make: Any) -> tuple[Any, ...]:
    """The actions of ``planfence.gated`` that no decision line names, outcome unknown.

    Args:
        planfence: the trace's :class:`~icore.adapters.PlanfenceLog`.
        lineages: the actions built from its decision lines.
        make: ``lineage_of`` (name, title, records, decisions) -> ActionLineage.

    A run whose chain breaks adds none: its action records no decision cites are
    counted (``INVALID``) from the records already, the same calls.

    Returns:
        One lineage per such task (``outcome_unknown``, its ``agent`` and ``args`` from
        the event lines naming the task), in the order of the gate thoughts.
    """
    gated = getattr(planfence, "gated", None) or {}
    if not gated or getattr(planfence, "chain_broken", None):  # then every action record
        return ()  # no decision cites is an INVALID action already (QA qa-new13a S2)
    named = {a.action for a in lineages}
    decisions = getattr(planfence, "decisions", ())
    named |= {str(d.task) for d in decisions if d.task}
    untasked = {d.action for d in decisions if not d.task}  # a writer naming no task:
    callers = getattr(planfence, "callers", {}) or {}
    out = []
    for task, tool in gated.items():
        if task in named or tool in untasked:  # its decisions are not told apart
            continue
        entry = DecisionEntry(outcome="authorized", reason="valid", action=tool, task=task,
                              detail=MISSING_DECISION)
        a = make(task, f"{task} · {tool}", (), [entry])
        agent, args = callers.get(task, (None, None))
        out.append(replace(a, outcome_unknown=True, agent=agent, args=args))
    return tuple(out)


def missing_decisions(lineages: Sequence[Any]) -> tuple[str, ...]:
    """The warning naming the actions :func:`unrecorded_calls` added (empty: none)."""
    tasks = [a.action for a in lineages if a.points and a.points[-1].entry.detail
             == MISSING_DECISION]
    if not tasks:
        return ()
    return (f"{len(tasks)} call(s) the gate authorized have no decision line ("
            f"{', '.join(tasks[:5])}{', ...' if len(tasks) > 5 else ''}): {MISSING_DECISION}; "
            "counted outcome unknown",)


__all__ = ["MISSING_DECISION", "missing_decisions", "unrecorded_calls"]
