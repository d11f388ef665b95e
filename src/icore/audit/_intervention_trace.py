"""Reconstruct interventions from the log (icore Sec. 4; design.md 4.4).

Diagnoses, feedback, recoveries and failures are notes in X's log, and the recovery's
proposals are ordinary commit entries, so a later auditor can read back from the log
alone who was told what, who answered, and what changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icore.state import Committed, LogEntry, Note


@dataclass(slots=True)
class InterventionTrace:
    """One intervention as read back from the log.

    Attributes:
        diagnosis: diagnosis id.
        defect: the diagnosed defect.
        obligations: affected obligations.
        told: the agent the feedback was routed to (None: nobody could be routed).
        feedback: the feedback text exactly as sent.
        accepted: whether the recovery was committed.
        proposals: ids of the committed recovery proposals.
        changes: (obligation, kind, key, value) of every assertion the recovery committed.
        violations: why a rejected recovery was rejected.
    """

    diagnosis: str
    defect: str = ""
    obligations: tuple[str, ...] = ()
    told: str | None = None
    feedback: str | None = None
    accepted: bool = False
    proposals: tuple[str, ...] = ()
    changes: list[tuple[str, str, str, Any]] = field(default_factory=list)
    violations: tuple[str, ...] = ()


def reconstruct(entries: Iterable[LogEntry]) -> list[InterventionTrace]:
    """Read every intervention back from log entries (e.g. ``rebuild(SQLiteLog(...))``)."""
    traces: dict[str, InterventionTrace] = {}
    by_proposal: dict[str, str] = {}
    commits: dict[str, Committed] = {}
    for e in entries:
        b = e.body
        if isinstance(b, Committed):
            commits[b.proposal] = b
            continue
        if not isinstance(b, Note) or not isinstance(b.payload, dict):
            continue
        pl: dict[str, Any] = b.payload
        if b.kind == "diagnosis":
            traces[pl["id"]] = InterventionTrace(
                pl["id"], pl.get("defect", ""), tuple(pl.get("obligations", ()))
            )
        elif b.kind == "feedback":
            t = traces.get(pl["diagnosis"])
            if t is not None:
                t.told = pl["to"]
                t.feedback = pl["text"]
        elif b.kind == "recovery":
            t = traces.get(pl["diagnosis"])
            if t is not None:
                t.accepted = True
                t.proposals = tuple(pl.get("proposals", ()))
                for pid in t.proposals:
                    by_proposal[pid] = t.diagnosis
        elif b.kind == "failure":
            t = traces.get(str(pl.get("diagnosis")))
            if t is not None and "flag" not in pl:
                t.violations = tuple(pl.get("violations", ()))
    for pid, did in by_proposal.items():
        c = commits.get(pid)
        if c is None:
            continue
        traces[did].changes.extend(
            (a.obligation, str(a.kind), a.key, a.value) for a in c.assertions
        )
    return list(traces.values())
