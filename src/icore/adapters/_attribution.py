"""Failure attribution from iCORE diagnoses, and scoring against annotations.

Method (docs/audit-real-runs.md, "Failure attribution"): for a failed run, the predicted
responsible agent and step are those of the *first committed unsupported or unstable
decision the failure traces back to*:

1. the earliest ``work`` diagnosis: an agent output whose ``output_evidence``
   certificate failed (the root of the chain: later ledger claims and the final answer
   rest on it); its responsible agent is the repair authority of D (the assignee, i.e.
   the agent that produced the output);
2. if no output is unsupported, the earliest ``assignment`` (ε-unstable assignment) or
   ``evidence`` (unsupported orchestrator claim) diagnosis: the assigner/claimant;
3. if neither exists, the ``terminal`` diagnosis (the agent that ended the run).

The chain of evidence lists the root diagnosis, the later diagnoses whose cited events
include its events or whose obligations depend on it, and the terminal diagnosis.
No parameter of the rule is fitted to individual files.

Scoring: agent-level accuracy (case/punctuation-insensitive name match) and step-level
accuracy (exact index) over annotated failed runs; the random baseline is the expected
accuracy of a uniform guess computed the same way: an agent drawn from the agents that
speak in the run, a step drawn from the run's steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.adapters._audit import AuditResult, Diagnosis
from icore.adapters._decl import HUMAN
from icore.adapters._trace import name_key

PUBLISHED_BEST = {"agent": 0.535, "step": 0.142}
"""Best published Who&When results (Zhang et al., ICML 2025): agent-level 53.5%, step 14.2%."""

_PRIORITY = (("work",), ("assignment", "evidence"), ("terminal",))


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One link of the chain of evidence behind an attribution."""

    diagnosis: str
    defect: str
    step: int | None
    agent: str | None
    events: tuple[str, ...]
    detail: str


@dataclass(frozen=True, slots=True)
class Attribution:
    """Predicted responsible agent and step of a failed run, with the chain of evidence.

    Attributes:
        run: run id.
        agent: predicted responsible agent (None: no diagnosis to trace back to).
        step: predicted step (index into the source history).
        diagnosis: id of the root diagnosis.
        chain: root first, then what rests on it, ending with the terminal diagnosis.
        rule: which priority level chose the root (``work``, ``assignment/evidence``,
            ``terminal`` or ``none``).
    """

    run: str
    agent: str | None
    step: int | None
    diagnosis: str | None
    chain: tuple[ChainLink, ...]
    rule: str

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "run": self.run, "agent": self.agent, "step": self.step,
            "diagnosis": self.diagnosis, "rule": self.rule,
            "chain": [
                {"diagnosis": c.diagnosis, "defect": c.defect, "step": c.step,
                 "agent": c.agent, "events": list(c.events), "detail": c.detail}
                for c in self.chain
            ],
        }


def _link(d: Diagnosis) -> ChainLink:
    return ChainLink(d.id, d.defect, d.step, d.responsible, d.events, d.detail)


def attribute(result: AuditResult) -> Attribution | None:
    """Attribute the failure of an audited run (None if the run is recorded as successful)."""
    if result.trace.succeeded is True:
        return None
    diags = [d for d in result.diagnoses if d.step is not None]
    root: Diagnosis | None = None
    rule = "none"
    for kinds in _PRIORITY:
        cands = [d for d in diags if d.defect in kinds]
        if cands:
            root = min(cands, key=lambda d: (d.step if d.step is not None else 0, d.id))
            rule = "/".join(kinds)
            break
    if root is None:
        return Attribution(result.trace.id, None, None, None, (), rule)
    chain = [_link(root)]
    evs = set(root.events)
    obls = set(root.obligations)
    for d in diags:
        if d is root or d.defect == "terminal" or (d.step or 0) < (root.step or 0):
            continue
        if evs & set(d.events) or obls & set(d.obligations):
            chain.append(_link(d))
            evs |= set(d.events)
    chain += [_link(d) for d in result.diagnoses if d.defect == "terminal" and d is not root]
    return Attribution(result.trace.id, root.responsible, root.step, root.id, tuple(chain),
                       rule)


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One scored run."""

    run: str
    family: str
    true_agent: str | None
    true_step: int | None
    agent: str | None
    step: int | None
    agent_ok: bool
    step_ok: bool
    random_agent: float
    random_step: float
    rule: str


@dataclass(frozen=True)
class AttributionScore:
    """Attribution accuracy over a set of annotated failed runs.

    Attributes:
        n: runs scored.
        agent_accuracy: share with the predicted agent equal to the annotated one.
        step_accuracy: share with the predicted step equal to the annotated one.
        random_agent: expected agent accuracy of a uniform guess among the run's speakers.
        random_step: expected step accuracy of a uniform guess among the run's steps.
        by_family: the same four numbers (and n) per source family.
        rows: per-run rows.
        published: the best published Who&When results, for comparison.
    """

    n: int
    agent_accuracy: float
    step_accuracy: float
    random_agent: float
    random_step: float
    by_family: dict[str, dict[str, float]]
    rows: tuple[ScoreRow, ...]
    published: dict[str, float] = field(default_factory=lambda: dict(PUBLISHED_BEST))


def speakers(result: AuditResult) -> list[str]:
    """Agents that speak in the run (the candidate set of the random baseline)."""
    seen: dict[str, None] = {}
    for s in result.trace.steps:
        if s.agent != HUMAN:
            seen.setdefault(s.agent, None)
    return list(seen)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _agg(rows: Sequence[ScoreRow]) -> dict[str, float]:
    return {
        "n": float(len(rows)),
        "agent_accuracy": _mean([float(r.agent_ok) for r in rows]),
        "step_accuracy": _mean([float(r.step_ok) for r in rows]),
        "random_agent": _mean([r.random_agent for r in rows]),
        "random_step": _mean([r.random_step for r in rows]),
    }


def score(results: Iterable[AuditResult]) -> AttributionScore:
    """Score attributions against the annotations of the annotated, failed runs."""
    rows: list[ScoreRow] = []
    for r in results:
        ann = r.trace.annotation
        if ann is None or r.trace.succeeded is True:
            continue
        att = attribute(r)
        agent = att.agent if att else None
        step = att.step if att else None
        cands = speakers(r)
        true_key = name_key(ann.agent or "")
        in_cands = any(name_key(c) == true_key for c in cands)
        rows.append(ScoreRow(
            run=r.trace.id, family=r.trace.family, true_agent=ann.agent, true_step=ann.step,
            agent=agent, step=step,
            agent_ok=bool(agent) and name_key(agent or "") == true_key,
            step_ok=step is not None and step == ann.step,
            random_agent=(1.0 / len(cands)) if cands and in_cands else 0.0,
            random_step=(1.0 / r.trace.length)
            if r.trace.length and ann.step is not None and ann.step < r.trace.length else 0.0,
            rule=att.rule if att else "none",
        ))
    fams = sorted({r.family for r in rows})
    overall = _agg(rows)
    return AttributionScore(
        n=len(rows),
        agent_accuracy=overall["agent_accuracy"],
        step_accuracy=overall["step_accuracy"],
        random_agent=overall["random_agent"],
        random_step=overall["random_step"],
        by_family={f: _agg([r for r in rows if r.family == f]) for f in fams},
        rows=tuple(rows),
    )


__all__ = [
    "PUBLISHED_BEST",
    "Attribution",
    "AttributionScore",
    "ChainLink",
    "ScoreRow",
    "attribute",
    "score",
    "speakers",
]
