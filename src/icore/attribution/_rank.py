"""Failure attribution from iCORE diagnoses, and scoring against annotations.

Method (docs/audit-real-runs.md, "Failure attribution"): every (agent, step) candidate of
a failed run gets the features of :mod:`icore.attribution._features`, read from X (failed
certificates by kind, unsound and revoked assertions, unstable assignments, stall onset,
loops, repeated observations, instruction coverage, cq drops, unsupported numbers); a
transparent learned scorer (:mod:`icore.attribution._scorer`, logistic regression) ranks
them. :func:`attribute` names the top candidate's agent and step, keeps the top three
with the features that ranked them, and the chain of evidence: the diagnoses at the
predicted step, the later diagnoses that cite its events or obligations, and the
terminal diagnosis. By default it uses the shipped model, trained on the whole Who&When
development half; every accuracy figure icore reports is cross-validated instead
(:mod:`icore.attribution._crossval`).

Baselines (same candidates, no learning unless stated): :func:`first_unsupported` (the
earlier rule: the first output whose ``output_evidence`` certificate failed),
:func:`first_error_marker`, :func:`last_agent_before_answer`,
:func:`first_output_after_replan`, :func:`majority_agent` (learned on training folds) and
the expected accuracy of a uniform guess (:func:`random_expectation`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.adapters import (
    HUMAN,
    AdapterError,
    AuditResult,
    Finding,
    StepKind,
    name_key,
    output_facts,
    tool_facts,
)
from icore.attribution._features import Candidate, candidates
from icore.attribution._scorer import ModelSet, RankedCandidate, ScorerModel, load_shipped_model

PUBLISHED_BEST = {"agent": 0.535, "step": 0.142}
"""Best published Who&When results (Zhang et al., ICML 2025): agent-level 53.5%, step 14.2%."""

PUBLISHED: Mapping[str, Mapping[str, tuple[float | None, float | None]]] = {
    "captain_agent": {
        "all-at-once (GPT-4o, with GT)": (0.543, 0.125),
        "step-by-step (GPT-4o, with GT)": (0.352, 0.255),
        "A2P (LLM)": (None, 0.475),
    },
    "magentic_one": {
        "all-at-once (GPT-4o, with GT)": (0.552, 0.053),
        "step-by-step (GPT-4o, with GT)": (0.345, 0.070),
        "AgenTracer-8B (LLM)": (0.691, None),
        "A2P (LLM)": (None, 0.293),
    },
}
"""Published per-subset (agent, step) accuracies on the full Who&When dataset (issue 19);
none is LLM-free, none is on the same runs: context, not a like-for-like comparison."""

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
        agent: predicted responsible agent (None: nothing to attribute).
        step: predicted step (index into the source history).
        diagnosis: id of the first diagnosis at the predicted step, if any.
        chain: the diagnoses at the predicted step, then what rests on it (later
            diagnoses citing its events or obligations), ending with the terminal one.
        rule: how it was chosen: ``scorer:<family>`` (the learned scorer and the family
            of the model used) or the baseline's name.
        candidates: the top candidates (at most three) with the features that ranked them.
        model: what the model was trained on (empty for rules).
    """

    run: str
    agent: str | None
    step: int | None
    diagnosis: str | None
    chain: tuple[ChainLink, ...]
    rule: str
    candidates: tuple[RankedCandidate, ...] = ()
    model: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "run": self.run, "agent": self.agent, "step": self.step,
            "diagnosis": self.diagnosis, "rule": self.rule, "model": self.model,
            "chain": [
                {"diagnosis": c.diagnosis, "defect": c.defect, "step": c.step,
                 "agent": c.agent, "events": list(c.events), "detail": c.detail}
                for c in self.chain
            ],
            "candidates": [c.to_json() for c in self.candidates],
        }


def _link(d: Finding) -> ChainLink:
    return ChainLink(d.id, d.defect, d.step, d.responsible, d.events, d.detail)


def _chain(result: AuditResult, step: int | None) -> tuple[str | None, tuple[ChainLink, ...]]:
    """The diagnoses at ``step``, the later ones resting on them, then the terminal one."""
    diags = [d for d in result.diagnoses if d.step is not None]
    roots = [d for d in diags if d.step == step and d.defect != "terminal"]
    chain = [_link(d) for d in roots]
    evs = {e for d in roots for e in d.events}
    if step is not None and step in result.step_events:
        evs.add(result.step_events[step])
    obls = {o for d in roots for o in d.obligations}
    for d in diags:
        if d in roots or d.defect == "terminal" or step is None or (d.step or 0) <= step:
            continue
        if evs & set(d.events) or obls & set(d.obligations):
            chain.append(_link(d))
            evs |= set(d.events)
    chain += [_link(d) for d in result.diagnoses if d.defect == "terminal"]
    return (roots[0].id if roots else None), tuple(chain)


_SHIPPED: list[ModelSet] = []


def shipped_models() -> ModelSet:
    """The shipped model set (loaded once)."""
    if not _SHIPPED:
        _SHIPPED.append(load_shipped_model())
    return _SHIPPED[0]


def rank_candidates(result: AuditResult, model: ScorerModel,
                    cands: Sequence[Candidate] | None = None) -> list[RankedCandidate]:
    """All candidates of a run ranked by ``model`` (best first)."""
    return model.rank(candidates(result) if cands is None else cands)


def attribute(result: AuditResult, *, model: ScorerModel | ModelSet | None = None,
              ground_truth: bool = False, top: int = 3) -> Attribution | None:
    """Attribute the failure of an audited run with the learned scorer.

    Args:
        result: the audited run.
        model: a fitted model, a model set (the run's family is looked up, ``any`` as
            fallback), or None for the shipped model set (trained on the whole Who&When
            development half).
        ground_truth: use the model of the "with ground truth" setting (features that
            read the run's expected answer).
        top: how many ranked candidates to keep.

    Returns:
        None if the run is recorded as successful; else the attribution (agent and step
        None when the run has no candidate).

    Raises:
        AdapterError: the shipped model cannot be loaded, or the set has no model for
            the run's family.
    """
    if result.trace.succeeded is True:
        return None
    ms = shipped_models() if model is None else model
    if isinstance(ms, ModelSet):
        m = ms.get(result.trace.family, ground_truth=ground_truth)
        if m is None:
            
            raise AdapterError(f"no attribution model for family {result.trace.family!r}",
                               file=result.trace.file, field="family")
    else:
        m = ms
    ranked = rank_candidates(result, m)
    if not ranked:
        return Attribution(result.trace.id, None, None, None, _chain(result, None)[1], "none")
    best = ranked[0]
    did, chain = _chain(result, best.step)
    return Attribution(result.trace.id, best.agent, best.step, did, chain,
                       f"scorer:{m.family}", tuple(ranked[:top]), m.trained_on)


# ------------------------------------------------------------------ baselines
Prediction = tuple[str | None, int | None]
"""A baseline's (agent, step)."""


def _cands(result: AuditResult) -> list[Candidate]:
    return candidates(result)


def first_unsupported(result: AuditResult) -> Prediction:
    """Attribute by the earlier rule: the earliest diagnosis, by kind priority.

    The earliest ``work`` diagnosis (first output whose ``output_evidence`` failed), else
    the earliest ``assignment``/``evidence`` one, else the ``terminal`` one; the agent is
    that diagnosis's repair authority.
    """
    diags = [d for d in result.diagnoses if d.step is not None]
    for kinds in _PRIORITY:
        cs = [d for d in diags if d.defect in kinds]
        if cs:
            root = min(cs, key=lambda d: (d.step if d.step is not None else 0, d.id))
            return root.responsible, root.step
    return None, None


def first_error_marker(result: AuditResult) -> Prediction:
    """Attribute to the first message showing an error marker.

    The markers are :mod:`icore.adapters._evidence`'s vocabulary. A failed tool run is
    attributed to the candidate whose code it ran (the latest candidate before it). No
    marker: the last candidate.
    """
    cs = _cands(result)
    if not cs:
        return None, None
    by_step = {c.step: c for c in cs}
    last: Candidate | None = None
    for s in result.trace.steps:
        if s.index in by_step:
            c = by_step[s.index]
            if output_facts(s.content)["error"]:
                return c.agent, c.step
            last = c
        elif s.kind == StepKind.TOOL_OUTPUT and tool_facts(s.content, s.exitcode)["error"]:
            if last is not None:
                return last.agent, last.step
    return cs[-1].agent, cs[-1].step


def _is_output(c: Candidate) -> bool:
    return bool(c.features["is_output"])


def last_agent_before_answer(result: AuditResult) -> Prediction:
    """The last agent output before the message that ends the run (the final answer)."""
    cs = _cands(result)
    if not cs:
        return None, None
    steps = result.trace.steps
    end = next((s.index for s in steps if s.terminates), steps[-1].index)
    outs = [c for c in cs if _is_output(c) and c.step < end]
    c = outs[-1] if outs else cs[-1]
    return c.agent, c.step


def first_output_after_replan(result: AuditResult) -> Prediction:
    """The first agent output after the last plan or replan (first output if none)."""
    cs = _cands(result)
    if not cs:
        return None, None
    plans = [s.index for s in result.trace.steps if s.kind == StepKind.PLAN]
    after = plans[-1] if plans else -1
    outs = [c for c in cs if _is_output(c) and c.step > after] or [c for c in cs if
                                                                   _is_output(c)] or cs
    return outs[0].agent, outs[0].step


def agent_counts(results: Iterable[AuditResult]) -> dict[str, int]:
    """How often each agent (``name_key``) is the annotated culprit (training folds)."""
    out: dict[str, int] = {}
    for r in results:
        ann = r.trace.annotation
        if ann is not None and ann.agent and r.trace.succeeded is not True:
            k = name_key(ann.agent)
            out[k] = out.get(k, 0) + 1
    return out


def majority_agent(result: AuditResult, counts: Mapping[str, int]) -> Prediction:
    """Attribute to the run's candidate annotated most often in training, at its first step.

    ``counts`` holds the training annotations per agent; ties and unseen agents go to the
    earliest speaker.
    """
    cs = _cands(result)
    if not cs:
        return None, None
    best = max(cs, key=lambda c: (counts.get(name_key(c.agent), 0), -c.step))
    first = min(c.step for c in cs if c.agent == best.agent)
    return best.agent, first


def random_expectation(result: AuditResult, tolerance: int = 0) -> tuple[float, float]:
    """Expected (agent, step) accuracy of a uniform guess among the run's candidates.

    A step within ``tolerance`` steps of the annotated one counts as right.
    """
    ann = result.trace.annotation
    cs = _cands(result)
    if ann is None or not cs:
        return 0.0, 0.0
    key = name_key(ann.agent or "")
    agent = sum(1 for c in cs if name_key(c.agent) == key) / len(cs)
    step = (sum(1 for c in cs if abs(c.step - ann.step) <= tolerance) / len(cs)
            if ann.step is not None else 0.0)
    return agent, step


BASELINES = {
    "first error marker": first_error_marker,
    "last agent before the final answer": last_agent_before_answer,
    "first output after the last replan": first_output_after_replan,
    "first failed certificate (earlier rule)": first_unsupported,
}
"""The deterministic baselines, by name (majority agent and random need more inputs)."""


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
        random_agent: expected agent accuracy of a uniform guess among the candidates.
        random_step: expected step accuracy of a uniform guess among the candidates.
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


def score(results: Iterable[AuditResult], *,
          attributions: Mapping[str, Attribution | None] | None = None) -> AttributionScore:
    """Score attributions against the annotations of the annotated, failed runs.

    Args:
        results: audited runs (unannotated and successful ones are skipped).
        attributions: run id -> attribution to score (default: :func:`attribute` with
            the shipped model; that is in-sample on the development half, so the
            figures icore reports come from the cross-validation in
            :mod:`icore.attribution._crossval` instead).
    """
    rows: list[ScoreRow] = []
    for r in results:
        ann = r.trace.annotation
        if ann is None or r.trace.succeeded is True:
            continue
        att = attributions.get(r.trace.id) if attributions is not None else attribute(r)
        agent = att.agent if att else None
        step = att.step if att else None
        true_key = name_key(ann.agent or "")
        ra, rs = random_expectation(r)
        rows.append(ScoreRow(
            run=r.trace.id, family=r.trace.family, true_agent=ann.agent, true_step=ann.step,
            agent=agent, step=step,
            agent_ok=bool(agent) and name_key(agent or "") == true_key,
            step_ok=step is not None and step == ann.step,
            random_agent=ra, random_step=rs,
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
    "BASELINES",
    "PUBLISHED",
    "PUBLISHED_BEST",
    "Attribution",
    "AttributionScore",
    "ChainLink",
    "Prediction",
    "ScoreRow",
    "agent_counts",
    "attribute",
    "first_error_marker",
    "first_output_after_replan",
    "first_unsupported",
    "last_agent_before_answer",
    "majority_agent",
    "random_expectation",
    "rank_candidates",
    "score",
    "shipped_models",
    "speakers",
]
