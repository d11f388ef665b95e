"""Representation sufficiency (icore Sec. 5, claim 1): which defects G, Q or X can detect.

Each detector reads one projection of a passively observed run's log:

* ``G`` (interaction only): events of G (type, agent, semantic fields, causes);
* ``Q`` (task only): obligations and their assertion values (status, assignee, result,
  notes, relations), with D's capability values, but no justification and no evidence;
* ``X`` (full): G, Q and Π with the audit verdicts (Definition 6 and Definition 9).

A detector flags (defect kind, obligation) pairs; the simulated agents record every
defect they inject (ground truth), so recall and false alarms are measured, not assumed.
Detector rules (docs/audit.md): *unsupported work*: a completion assertion lacking its
required certificate (X only); *assignment*: an assignment whose gain (Def. 9) exceeds ε
(needs assignees, obligation kinds and values: Q, X); *stall*: H consecutive
nonproductive steps on one obligation (G: message events without a work artifact; Q: note
assertions without a status/result change; X: committed nonproductive transitions);
*deletion*: a supersession without transport relation (Q) or without transport or
settlement evidence (X); *evidence revocation*: a revoked or stale cited record (X only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from icore.state import (
    TRANSPORTED_TO,
    AssertionImported,
    AssertionKind,
    Committed,
    DeclarationPackage,
    EventAdded,
    LogEntry,
    ProposalRecorded,
    ReasonCode,
    Rejected,
    Revoked,
    Status,
)

DEFECTS = ("unsupported_work", "assignment", "stall", "deletion", "evidence_revocation")
REPRESENTATIONS = ("G", "Q", "X")

Flag = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Detection:
    """Detections of one representation on one run."""

    representation: str
    flags: frozenset[Flag]


def _gain(decl: DeclarationPackage, kind: str, agent: str) -> float:
    vals = {a.id: a.capabilities.get(kind) for a in decl.agents.values()}
    mine = vals.get(agent) or 0.0
    others = [v for a, v in vals.items() if a != agent and v is not None]
    return (max(others) - mine) if others else 0.0


def detect_g(entries: Iterable[LogEntry], patience: int) -> frozenset[Flag]:
    """G only: stalls as runs of message events on one item without a work artifact."""
    out: set[Flag] = set()
    run: dict[str, int] = {}
    for e in entries:
        evs = []
        b = e.body
        if isinstance(b, Committed):
            evs = list(b.events)
        elif isinstance(b, EventAdded):
            evs = [b.event]
        elif isinstance(b, ProposalRecorded):
            continue
        for ev in evs:
            item = ev.fields.get("item")
            if not isinstance(item, str):
                continue
            if ev.type == "message":
                run[item] = run.get(item, 0) + 1
                if run[item] >= patience:
                    out.add(("stall", item))
            elif ev.type in ("work", "review"):
                run[item] = 0
    return frozenset(out)


def detect_q(entries: Iterable[LogEntry], decl: DeclarationPackage) -> frozenset[Flag]:
    """Q only: assignment gain, note runs without progress, supersession w/o transport."""
    out: set[Flag] = set()
    eps = decl.parameters.epsilon
    patience = decl.parameters.patience
    kinds: dict[str, str] = {}
    notes: dict[str, int] = {}
    for e in entries:
        b = e.body
        if isinstance(b, Committed):
            assertions = list(b.assertions)
        elif isinstance(b, AssertionImported):
            assertions = [b.assertion]
        else:
            continue
        touched_status: set[str] = set()
        relations: set[str] = set()
        for a in assertions:
            if a.kind == AssertionKind.NODE:
                kinds[a.obligation] = str(a.value["kind"])
            elif a.kind == AssertionKind.ASSIGNEE and a.value is not None:
                k = kinds.get(a.obligation)
                if k is not None and _gain(decl, k, str(a.value)) > eps:
                    out.add(("assignment", a.obligation))
            elif a.kind in (AssertionKind.STATUS, AssertionKind.RESULT):
                touched_status.add(a.obligation)
                notes[a.obligation] = 0
            elif a.kind == AssertionKind.CLAIM and a.key == "note":
                notes[a.obligation] = notes.get(a.obligation, 0) + 1
                if notes[a.obligation] >= patience:
                    out.add(("stall", a.obligation))
            elif a.kind == AssertionKind.RELATION and a.key == TRANSPORTED_TO:
                relations.add(a.obligation)
        for a in assertions:
            if (
                a.kind == AssertionKind.STATUS
                and a.value == Status.SUPERSEDED
                and a.obligation not in relations
            ):
                out.add(("deletion", a.obligation))
    return frozenset(out)


def detect_x(entries: Iterable[LogEntry], decl: DeclarationPackage) -> frozenset[Flag]:
    """Full X: Definition 6 verdicts, revocations, Definition 9 gain, progress runs."""
    out: set[Flag] = set()
    eps = decl.parameters.epsilon
    patience = decl.parameters.patience
    kinds: dict[str, str] = {}
    idle: dict[str, int] = {}
    proposals: dict[str, tuple[str | None, str]] = {}
    for e in entries:
        b = e.body
        if isinstance(b, ProposalRecorded):
            p = b.proposal
            proposals[str(p.id)] = (p.target, p.operation)
        elif isinstance(b, Rejected):
            target, _op = proposals.get(b.proposal, (None, ""))
            stale = any(r.code == ReasonCode.STALE_RECORD for r in b.reasons)
            for r in b.reasons:
                subject = target if target is not None else r.subject
                if subject is None:
                    continue
                if (
                    r.code in (ReasonCode.MISSING_CERTIFICATE, ReasonCode.CERTIFICATE_FAILED)
                    and not stale  # a certificate refused for a stale record is revocation
                ):
                    out.add(("unsupported_work", subject))
                elif r.code == ReasonCode.UNSUPPORTED_REMOVAL:
                    out.add(("deletion", r.subject or subject))
                elif r.code == ReasonCode.STALE_RECORD:
                    out.add(("evidence_revocation", subject))
        elif isinstance(b, Revoked):
            for o in b.obligations:
                out.add(("evidence_revocation", o))
        elif isinstance(b, Committed):
            op = decl.operations.get(b.operation)
            for a in b.assertions:
                if a.kind == AssertionKind.NODE:
                    kinds[a.obligation] = str(a.value["kind"])
                elif a.kind == AssertionKind.ASSIGNEE and a.value is not None:
                    k = kinds.get(a.obligation)
                    if k is not None and _gain(decl, k, str(a.value)) > eps:
                        out.add(("assignment", a.obligation))
            touched = {a.obligation for a in b.assertions}
            for o in touched:
                if b.progress:
                    idle[o] = 0
                elif op is not None and not op.productive:
                    idle[o] = idle.get(o, 0) + 1
                    if idle[o] >= patience:
                        out.add(("stall", o))
    return frozenset(out)


def detect_all(entries: list[LogEntry], decl: DeclarationPackage) -> dict[str, frozenset[Flag]]:
    """Run the three detectors on one run's log entries."""
    return {
        "G": detect_g(entries, decl.parameters.patience),
        "Q": detect_q(entries, decl),
        "X": detect_x(entries, decl),
    }
