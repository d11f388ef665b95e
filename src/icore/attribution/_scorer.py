"""A transparent learned scorer over attribution candidates (logistic regression).

Two linear models over the standardized features of :mod:`icore.attribution._features`,
fitted with scikit-learn's L2-regularized :class:`~sklearn.linear_model.LogisticRegression`
(class-balanced) on annotated failed runs:

- the **step model** scores each (agent, step) candidate: label 1 for the annotated step;
- the **agent models** score each agent of the run: the *aggregate* model from its
  candidates' features aggregated (``max:<feature>`` and ``mean:<feature>`` over the
  agent's steps), the *per-step* model from each of its candidates (label 1 for every
  step of the annotated agent; the agent's score is the mean over its steps). The agent
  score is ``(1 - mix) * aggregate + mix * per-step``; ``mix`` (one of :data:`MIXES`) is
  chosen by an inner grouped cross-validation on the training runs only.

The prediction is the top agent and, for the step, the best-scored candidate of that
agent (so agent and step agree); the top three candidates are reported with the
features that contributed most to their score (coefficient x standardized value).

Inference needs only the stored coefficients (:meth:`ScorerModel.to_json`), not
scikit-learn; fitting needs ``pip install 'icore[attribution]'``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from icore.adapters import AdapterError, AuditResult, name_key
from icore.attribution._features import Candidate, candidates, feature_names

REGULARIZATION_C = 0.1
"""Inverse L2 strength of both models (fixed a priori: few runs, many candidates)."""

MIXES = (0.5, 0.0, 1.0)
"""Candidate weights of the per-step agent model (ties go to the first)."""

INNER_FOLDS = 4
"""Folds of the inner cross-validation that chooses ``mix``."""

MODEL_RESOURCE = "attribution_model.json"
"""The shipped model file inside ``icore.adapters`` (trained on the whole development half)."""


@dataclass(frozen=True, slots=True)
class Linear:
    """A standardized linear score: ``b + Σ w_i (x_i - μ_i) / σ_i``."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def terms(self, x: Sequence[float]) -> list[float]:
        """Per-feature contributions to the score (same order as ``x``)."""
        return [w * (v - m) / s for w, v, m, s in zip(self.coef, x, self.mean, self.scale,
                                                      strict=True)]

    def score(self, x: Sequence[float]) -> float:
        """The logit."""
        return self.intercept + sum(self.terms(x))

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"mean": list(self.mean), "scale": list(self.scale), "coef": list(self.coef),
                "intercept": self.intercept}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Linear:
        """Inverse of :meth:`to_json`."""
        return cls(tuple(map(float, d["mean"])), tuple(map(float, d["scale"])),
                   tuple(map(float, d["coef"])), float(d["intercept"]))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -500 else 0.0


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    """A scored candidate.

    Attributes:
        agent, step, kind: the candidate.
        score: the step model's probability that this is the decisive step.
        agent_score: the agent model's mean probability for the candidate's agent.
        reasons: the features that raised the step score most, as ``(name, value,
            contribution)`` (largest contribution first, positive ones only, at most 4).
    """

    agent: str
    step: int
    kind: str
    score: float
    agent_score: float
    reasons: tuple[tuple[str, float, float], ...]

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"agent": self.agent, "step": self.step, "kind": self.kind,
                "score": round(self.score, 4), "agent_score": round(self.agent_score, 4),
                "reasons": [{"feature": n, "value": round(v, 4), "contribution": round(c, 4)}
                            for n, v, c in self.reasons]}


@dataclass(frozen=True, slots=True)
class ScorerModel:
    """The fitted step and agent models of one run family and setting.

    Attributes:
        family: the run family it was fitted on (``magentic_one``, ``captain_agent``,
            or ``any`` for all families pooled).
        ground_truth: whether the ``gt`` features are used.
        features: candidate feature names, in step-model coefficient order (the aggregate
            agent model's are :func:`agent_feature_names` of them).
        step: the step model.
        agent: the aggregate agent model.
        runs: number of training runs.
        trained_on: what it was trained on (free text, shown in reports).
        agent_step: the per-step agent model (None: not fitted, ``mix`` ignored).
        mix: weight of the per-step agent model in the agent score.
    """

    family: str
    ground_truth: bool
    features: tuple[str, ...]
    step: Linear
    agent: Linear
    runs: int
    trained_on: str = ""
    agent_step: Linear | None = None
    mix: float = 0.0

    def rank(self, cands: Sequence[Candidate]) -> list[RankedCandidate]:
        """Candidates ranked best first: agent score, then step score, then earlier step."""
        if not cands:
            return []
        xs = [c.vector(self.features) for c in cands]
        p_step = [_sigmoid(self.step.score(x)) for x in xs]
        agent_score = {a: _sigmoid(self.agent.score(v))
                       for a, v in agent_vectors(cands, self.features).items()}
        if self.agent_step is not None and self.mix > 0:
            per: dict[str, list[float]] = {}
            for c, x in zip(cands, xs, strict=True):
                per.setdefault(c.agent, []).append(_sigmoid(self.agent_step.score(x)))
            agent_score = {a: (1 - self.mix) * p + self.mix * sum(per[a]) / len(per[a])
                           for a, p in agent_score.items()}
        out = []
        for c, x, ps in zip(cands, xs, p_step, strict=True):
            terms = self.step.terms(x)
            top = sorted(((n, v, t) for n, v, t in zip(self.features, x, terms, strict=True)
                          if t > 0), key=lambda r: -r[2])[:4]
            out.append(RankedCandidate(c.agent, c.step, c.kind, ps, agent_score[c.agent],
                                       tuple(top)))
        best_agent = max(agent_score.items(), key=lambda kv: (kv[1], -_first(cands, kv[0])))[0]
        out.sort(key=lambda r: (r.agent != best_agent, -r.score, r.step))
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON form (the shipped model file holds one per family)."""
        return {"family": self.family, "ground_truth": self.ground_truth,
                "features": list(self.features), "step": self.step.to_json(),
                "agent": self.agent.to_json(), "runs": self.runs, "trained_on": self.trained_on,
                "agent_step": self.agent_step.to_json() if self.agent_step else None,
                "mix": self.mix}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ScorerModel:
        """Inverse of :meth:`to_json`."""
        return cls(str(d["family"]), bool(d["ground_truth"]), tuple(map(str, d["features"])),
                   Linear.from_json(d["step"]), Linear.from_json(d["agent"]), int(d["runs"]),
                   str(d.get("trained_on", "")),
                   Linear.from_json(d["agent_step"]) if d.get("agent_step") else None,
                   float(d.get("mix", 0.0)))


def agent_feature_names(names: Sequence[str]) -> tuple[str, ...]:
    """The agent model's features: ``max:`` and ``mean:`` of each candidate feature."""
    return tuple([f"max:{n}" for n in names] + [f"mean:{n}" for n in names])


def agent_vectors(cands: Sequence[Candidate], names: Sequence[str]) -> dict[str, list[float]]:
    """Agent -> its aggregated feature vector (order of :func:`agent_feature_names`)."""
    rows: dict[str, list[list[float]]] = {}
    for c in cands:
        rows.setdefault(c.agent, []).append(c.vector(names))
    out = {}
    for a, vs in rows.items():
        cols = list(zip(*vs, strict=True))
        out[a] = [max(col) for col in cols] + [sum(col) / len(col) for col in cols]
    return out


def _first(cands: Sequence[Candidate], agent: str) -> int:
    return min(c.step for c in cands if c.agent == agent)


def training_rows(results: Sequence[AuditResult], names: Sequence[str]
                  ) -> tuple[list[list[float]], list[int], list[list[float]], list[int],
                             list[int]]:
    """The training rows of annotated failed runs: step rows, agent rows, step-agent labels.

    Step rows hold candidate features labelled with the annotated step; agent rows hold
    aggregated features labelled with the annotated agent; the per-step agent label of
    each step row says whether its agent is the annotated one.

    Returns:
        (step rows, step labels, agent rows, agent labels, per-step agent labels). Runs
        without an annotation are skipped; a run whose annotated step is no candidate
        has only 0 step labels.
    """
    xs: list[list[float]] = []
    ys: list[int] = []
    xa: list[list[float]] = []
    ya: list[int] = []
    yc: list[int] = []
    for r in results:
        ann = r.trace.annotation
        if ann is None or r.trace.succeeded is True:
            continue
        key = name_key(ann.agent or "")
        cands = candidates(r)
        for c in cands:
            xs.append(c.vector(names))
            ys.append(int(c.step == ann.step))
            yc.append(int(bool(key) and name_key(c.agent) == key))
        for a, v in agent_vectors(cands, names).items():
            xa.append(v)
            ya.append(int(bool(key) and name_key(a) == key))
    return xs, ys, xa, ya, yc


def _fit_linear(xs: list[list[float]], ys: list[int], c: float) -> Linear:
    try:
        import numpy as np
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler
    except ImportError as exc:  # pragma: no cover - the extra is installed by `make venv`
        raise AdapterError("fitting the attribution scorer needs scikit-learn: "
                           "pip install 'icore[attribution]'", file="<model>",
                           field="scikit-learn") from exc
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=int)
    sc = StandardScaler().fit(x)
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0)
    z = (x - sc.mean_) / scale
    if len(set(ys)) < 2:
        # nothing to separate: a constant score
        return Linear(tuple(sc.mean_), tuple(scale), tuple(0.0 for _ in scale), 0.0)
    # liblinear: exact L2 logistic regression, far faster than lbfgs on these small sets
    lr = LogisticRegression(C=c, class_weight="balanced", solver="liblinear", max_iter=2000)
    lr.fit(z, y)
    return Linear(tuple(map(float, sc.mean_)), tuple(map(float, scale)),
                  tuple(map(float, lr.coef_[0])), float(lr.intercept_[0]))


def group_key(result: AuditResult) -> str:
    """The cross-validation group of a run: its ``question_ID``, else its question text.

    The text is normalized; runs of one question must stay in one fold.
    """
    qid = result.trace.source_fields.get("question_ID")
    if isinstance(qid, str | int) and str(qid).strip():
        return f"id:{qid}"
    return "q:" + re.sub(r"\s+", " ", result.trace.question.strip().lower())


def _annotated(results: Sequence[AuditResult]) -> list[AuditResult]:
    return [r for r in results if r.trace.annotation is not None
            and r.trace.succeeded is not True]


def _fit_parts(results: Sequence[AuditResult], names: tuple[str, ...], c: float,
               family: str, ground_truth: bool, trained_on: str) -> ScorerModel:
    xs, ys, xa, ya, yc = training_rows(results, names)
    if not xs:
        raise AdapterError("no annotated failed run to fit the attribution scorer on",
                           file="<model>", field="annotation")
    return ScorerModel(family, ground_truth, names, _fit_linear(xs, ys, c),
                       _fit_linear(xa, ya, c), len(_annotated(results)), trained_on,
                       _fit_linear(xs, yc, c), 0.0)


def _hits(model: ScorerModel, r: AuditResult) -> int:
    ann = r.trace.annotation
    ranked = model.rank(candidates(r))
    if ann is None or not ranked:
        return 0
    top = ranked[0]
    return int(name_key(top.agent) == name_key(ann.agent or "")) + int(top.step == ann.step)


def choose_mix(results: Sequence[AuditResult], *, ground_truth: bool,
               c: float = REGULARIZATION_C, mixes: Sequence[float] = MIXES,
               folds: int = INNER_FOLDS) -> float:
    """Pick ``mix`` by grouped cross-validation over ``results``.

    The score is agent hits plus step hits; ``mixes[0]`` when there are too few
    question groups to cross-validate.
    """
    from sklearn.model_selection import GroupKFold

    runs = _annotated(results)
    groups = [group_key(r) for r in runs]
    k = min(folds, len(set(groups)))
    if k < 2 or len(mixes) < 2:
        return mixes[0]
    names = feature_names(ground_truth=ground_truth)
    total = [0] * len(mixes)
    for tr, te in GroupKFold(n_splits=k).split(runs, groups=groups):
        train = [runs[i] for i in tr]
        if not any(len(set(training_rows([r], names)[1])) > 1 for r in train):
            continue
        base = _fit_parts(train, names, c, "inner", ground_truth, "")
        for j, mix in enumerate(mixes):
            m = replace(base, mix=mix)
            total[j] += sum(_hits(m, runs[i]) for i in te)
    return mixes[max(range(len(mixes)), key=lambda j: (total[j], -j))]


def fit_scorer(results: Sequence[AuditResult], *, family: str, ground_truth: bool,
               c: float = REGULARIZATION_C, trained_on: str = "",
               mixes: Sequence[float] = MIXES) -> ScorerModel:
    """Fit the step and agent models on annotated failed runs.

    Args:
        results: audited annotated runs (the training folds only, when evaluating).
        family: the family label stored in the model.
        ground_truth: use the ``gt`` features.
        c: inverse L2 regularization strength.
        trained_on: description stored in the model.
        mixes: candidate weights of the per-step agent model, chosen by an inner grouped
            cross-validation on ``results`` (:func:`choose_mix`).

    Raises:
        AdapterError: scikit-learn is not installed, or no run has an annotation.
    """
    names = feature_names(ground_truth=ground_truth)
    m = _fit_parts(results, names, c, family, ground_truth, trained_on)
    return replace(m, mix=choose_mix(results, ground_truth=ground_truth, c=c, mixes=mixes))


# ------------------------------------------------------------------ shipped model
@dataclass(frozen=True, slots=True)
class ModelSet:
    """Fitted models by (family, ground_truth); ``any`` serves unknown families."""

    models: Mapping[tuple[str, bool], ScorerModel]

    def get(self, family: str, *, ground_truth: bool) -> ScorerModel | None:
        """The model for a family (falling back to ``any``), or None."""
        return self.models.get((family, ground_truth)) or self.models.get(("any",
                                                                           ground_truth))

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"version": 1, "models": [m.to_json() for m in self.models.values()]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ModelSet:
        """Inverse of :meth:`to_json`."""
        ms = [ScorerModel.from_json(m) for m in d.get("models", ())]
        return cls({(m.family, m.ground_truth): m for m in ms})


def fit_model_set(results: Sequence[AuditResult], *, trained_on: str,
                  c: float = REGULARIZATION_C) -> ModelSet:
    """One model per family present, plus ``any`` (all pooled), in both settings."""
    fams = sorted({r.trace.family for r in results})
    models: dict[tuple[str, bool], ScorerModel] = {}
    for gt in (False, True):
        for fam in fams:
            rs = [r for r in results if r.trace.family == fam]
            models[(fam, gt)] = fit_scorer(rs, family=fam, ground_truth=gt, c=c,
                                           trained_on=trained_on)
        models[("any", gt)] = fit_scorer(results, family="any", ground_truth=gt, c=c,
                                         trained_on=trained_on)
    return ModelSet(models)


def load_shipped_model() -> ModelSet:
    """The model shipped with icore (trained on the whole Who&When development half).

    Raises:
        AdapterError: the packaged model file is missing or malformed.
    """
    try:
        text = resources.files("icore.attribution").joinpath(MODEL_RESOURCE).read_text("utf-8")
        return ModelSet.from_json(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AdapterError(f"cannot load the shipped attribution model: {exc}",
                           file=MODEL_RESOURCE, field="<root>") from None


__all__ = [
    "INNER_FOLDS",
    "MIXES",
    "MODEL_RESOURCE",
    "REGULARIZATION_C",
    "Linear",
    "ModelSet",
    "RankedCandidate",
    "ScorerModel",
    "agent_feature_names",
    "agent_vectors",
    "choose_mix",
    "fit_model_set",
    "fit_scorer",
    "group_key",
    "load_shipped_model",
    "training_rows",
]
