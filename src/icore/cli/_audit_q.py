"""``icore audit --json``'s per-run Q, per-agent counts and metric timeline (QA qa-new15c S3).

What a researcher's own scripts need besides the summary: the obligations of Q (what
the HTML report's obligation graph draws), counts per agent, and the per-step
snd/astab/cq timeline (the report's chart). Read from an :class:`AuditResult`; each
list is bounded so a long run's ``--json`` stays small (:data:`MAX_OBLIGATIONS`,
:data:`MAX_TIMELINE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from icore.adapters import AuditResult, MetricPoint, StepKind

MAX_OBLIGATIONS = 1000
"""Obligations ``--json`` lists per run at most. Beyond it the ones not ε-stable or not
sound are kept first, then the others in Q's order; ``obligations_left_off`` counts the
rest (the per-agent counts still count every obligation)."""

MAX_TIMELINE = 500
"""Timeline points ``--json`` lists per run at most. Only the steps where a value
changes are listed (the values hold until the next listed step); beyond that the
points are sampled evenly (the first and the last kept) and ``timeline_sampled`` is
true."""

HUMAN = "human"
"""The per-agent key of every speaker that is not a declared agent of the run (the task's
poser, a user, an undeclared name): how the audit itself counts them."""


def _r(v: float) -> float:
    return round(float(v), 6)


def obligation_rows(r: AuditResult) -> list[dict[str, Any]]:
    """Every obligation of Q after the run, in Q's order.

    Each row: ``id``, ``kind`` (work kind), ``assignee`` (None: nobody holds it),
    ``status`` (effective status), ``parent``, ``weight``, ``stable`` (ε-stable, icore
    Def. 9), ``sound`` (icore Def. 7) and ``in_w`` (counted in W(X)).
    """
    x = r.state
    in_w = set(x.evaluated())
    return [{"id": o.id, "kind": o.kind, "assignee": o.assignee,
             "status": str(o.effective_status), "parent": o.parent,
             "weight": _r(o.weight), "stable": x.is_stable(o.id), "sound": x.is_sound(o.id),
             "in_w": o.id in in_w} for o in x.obligations.values()]


def bounded_obligations(rows: list[dict[str, Any]],
                        limit: int = MAX_OBLIGATIONS) -> tuple[list[dict[str, Any]], int]:
    """At most ``limit`` of ``rows`` and how many were left off.

    The unstable or unsound ones are kept first, then the others; Q's order is kept.
    """
    if len(rows) <= limit:
        return rows, 0
    keep = {i for i, o in enumerate(rows) if not (o["stable"] and o["sound"])}
    keep = set(sorted(keep)[:limit])
    for i in range(len(rows)):
        if len(keep) >= limit:
            break
        keep.add(i)
    return [rows[i] for i in sorted(keep)], len(rows) - len(keep)


def agent_counts(r: AuditResult, rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per agent: what it holds, said and was told.

    Obligations held (``obligations``; of them ``unstable``, ``unsound``), ``outputs``,
    ``tool_outputs``, ``instructions_given`` and ``instructions_received``.
    ``rows``: :func:`obligation_rows` of ``r`` (all of them). Every declared agent of the
    run is a key (zeros when it did nothing); a speaker that is not one counts as
    :data:`HUMAN`, as the audit treats it.
    """
    declared = r.state.decl.agents
    out: dict[str, dict[str, int]] = {}

    def row(name: str | None) -> dict[str, int]:
        key = name if name is not None and name in declared else HUMAN
        return out.setdefault(key, dict.fromkeys(
            ("obligations", "unstable", "unsound", "outputs", "tool_outputs",
             "instructions_given", "instructions_received"), 0))

    for name in declared:
        row(name)
    for o in rows:
        if o["assignee"] is not None:
            c = row(o["assignee"])
            c["obligations"] += 1
            c["unstable"] += not o["stable"]
            c["unsound"] += not o["sound"]
    for s in r.trace.steps:
        if s.kind == StepKind.OUTPUT:
            row(s.agent)["outputs"] += 1
        elif s.kind == StepKind.TOOL_OUTPUT:
            row(s.agent)["tool_outputs"] += 1
        elif s.kind == StepKind.INSTRUCTION:
            row(s.agent)["instructions_given"] += 1
            row(s.to)["instructions_received"] += 1
    return out


def timeline_points(timeline: Sequence[MetricPoint],
                    limit: int = MAX_TIMELINE) -> tuple[list[dict[str, Any]], bool]:
    """The timeline's change points, at most ``limit`` of them, and whether sampled.

    The steps where snd, astab, cq, flags or stalls change (the first and the last
    always); beyond ``limit`` sampled evenly. Values rounded to 6 decimals.
    """
    pts: list[dict[str, Any]] = []
    last_key: tuple[float, ...] | None = None
    n = len(timeline)
    for i, p in enumerate(timeline):
        key = (_r(p.snd), _r(p.astab), _r(p.cq), p.flags, p.stalls)
        if key != last_key or i == n - 1:
            pts.append({"step": p.step, "snd": key[0], "astab": key[1], "cq": key[2],
                        "flags": p.flags, "stalls": p.stalls})
            last_key = key
    if len(pts) <= limit:
        return pts, False
    idx = sorted({round(i * (len(pts) - 1) / (limit - 1)) for i in range(limit)})
    return [pts[i] for i in idx], True


def detail_json(r: AuditResult) -> dict[str, Any]:
    """The keys :func:`icore.cli._audit_json.run_json` adds for a run's Q and timeline.

    ``obligations`` (:func:`obligation_rows`, at most :data:`MAX_OBLIGATIONS`;
    ``obligations_left_off`` when some were), ``agents`` (:func:`agent_counts`) and
    ``timeline`` (:func:`timeline_points`; ``timeline_sampled`` when sampled).
    """
    rows = obligation_rows(r)
    shown, left = bounded_obligations(rows)
    pts, sampled = timeline_points(r.timeline)
    return {"obligations": shown, **({"obligations_left_off": left} if left else {}),
            "agents": agent_counts(r, rows), "timeline": pts,
            **({"timeline_sampled": True} if sampled else {})}


__all__ = ["HUMAN", "MAX_OBLIGATIONS", "MAX_TIMELINE", "agent_counts", "bounded_obligations",
           "detail_json", "obligation_rows", "timeline_points"]
