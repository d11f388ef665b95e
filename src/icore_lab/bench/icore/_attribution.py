"""The evaluation protocol of failure attribution (issue 19; docs/audit-real-runs.md).

Every figure is cross-validated and reported per subset (Who&When Hand-Crafted =
``magentic_one``, Algorithm-Generated = ``captain_agent``; other families as they come):

- k-fold cross-validation over the annotated failed runs of one subset, folds grouped
  with scikit-learn's :class:`~sklearn.model_selection.GroupKFold` so that the runs of one
  question (``question_ID``, else the normalized question text) stay together, repeated
  with ``repeats`` shuffles of the groups; the learned scorer and the majority-agent
  baseline are fitted on the training folds only;
- two settings: without and with the run's ground-truth answer (the ``gt`` features);
- agent-level accuracy, step-level accuracy at tolerance ±0..±5 steps (Who&When paper,
  Table 2);
- 95% intervals: percentile bootstrap over runs (2,000 draws) of each run's accuracy
  averaged over the repeats; plus the standard deviation over repeats and over folds
  (the CV variance);
- baselines in the same table (:mod:`icore.adapters._attribution`): the expected
  accuracy of a uniform guess over the same candidates, the majority agent of the
  training folds, first error marker, last agent before the final answer, first output
  after the last replan, and the earlier rule (first failed certificate).
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from icore.adapters import (
    BASELINES,
    FEATURES,
    PUBLISHED,
    REGULARIZATION_C,
    AttributionScore,
    AuditResult,
    Candidate,
    Prediction,
    ScorerModel,
    ScoreRow,
    agent_counts,
    candidates,
    fit_scorer,
    group_key,
    majority_agent,
    name_key,
    random_expectation,
)

TOLERANCES = (0, 1, 2, 3, 4, 5)
"""Step tolerances reported (a step within ±k of the annotated one counts)."""

SUBSET_NAMES = {"magentic_one": "Hand-Crafted", "captain_agent": "Algorithm-Generated"}
"""Who&When's names of the two families."""

TARGETS = {"magentic_one": (0.70, 0.30), "captain_agent": (0.68, 0.48)}
"""Issue 19's (agent, step) targets per subset, cross-validated, without an LLM."""

SCORER = "icore scorer"
RANDOM = "uniform random (expected)"
MAJORITY = "majority agent (training folds)"
BOOTSTRAP_DRAWS = 2000


@dataclass(frozen=True, slots=True)
class MethodResult:
    """One row of the table: a method on a subset in one setting.

    Attributes:
        subset: the family (``magentic_one``, ``captain_agent``, ...).
        method: method name.
        ground_truth: the setting (None: the method never reads the ground truth).
        n: runs.
        agent: agent-level accuracy (mean over runs of the per-run accuracy averaged
            over repeats).
        agent_ci: 95% bootstrap interval of ``agent``.
        step: step-level accuracy at each tolerance of :data:`TOLERANCES`.
        step_ci: 95% intervals of ``step``.
        agent_sd_repeats, step_sd_repeats: standard deviation over repeats of the
            subset accuracy (step at ±0); 0 for methods that learn nothing.
        agent_sd_folds, step_sd_folds: standard deviation over all folds of the fold
            accuracy.
    """

    subset: str
    method: str
    ground_truth: bool | None
    n: int
    agent: float
    agent_ci: tuple[float, float]
    step: tuple[float, ...]
    step_ci: tuple[tuple[float, float], ...]
    agent_sd_repeats: float = 0.0
    step_sd_repeats: float = 0.0
    agent_sd_folds: float = 0.0
    step_sd_folds: float = 0.0

    @property
    def label(self) -> str:
        """Method name with its setting."""
        if self.ground_truth is None:
            return self.method
        return f"{self.method} ({'with' if self.ground_truth else 'without'} GT)"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"subset": self.subset, "method": self.method,
                "ground_truth": self.ground_truth, "n": self.n, "agent": self.agent,
                "agent_ci": list(self.agent_ci),
                "step": {f"±{k}": v for k, v in zip(TOLERANCES, self.step, strict=True)},
                "step_ci": {f"±{k}": list(ci) for k, ci in zip(TOLERANCES, self.step_ci,
                                                               strict=True)},
                "agent_sd_repeats": self.agent_sd_repeats,
                "step_sd_repeats": self.step_sd_repeats,
                "agent_sd_folds": self.agent_sd_folds, "step_sd_folds": self.step_sd_folds}


@dataclass(frozen=True, slots=True)
class RunPrediction:
    """The out-of-fold prediction of one method for one run in one repeat."""

    run: str
    subset: str
    method: str
    ground_truth: bool | None
    repeat: int
    fold: int
    agent: str | None
    step: int | None
    true_agent: str | None
    true_step: int | None


@dataclass(frozen=True)
class AttributionEval:
    """The cross-validated evaluation of failure attribution.

    Attributes:
        folds: k of the k-fold split (per subset; fewer when a subset has fewer groups).
        repeats: shuffles of the groups.
        seed: seed of the first shuffle (repeat r uses ``seed + r``).
        c: the scorer's inverse regularization strength.
        rows: the table, per subset.
        predictions: every out-of-fold prediction.
        models: the scorer fitted on all runs of each subset (whose weights are printed;
            the shipped model is fitted the same way), by (subset, ground_truth).
        coef_sd: standard deviation over the CV fits of each step-model coefficient,
            by (subset, ground_truth).
        elapsed_s: wall time of the cross-validation.
    """

    folds: int
    repeats: int
    seed: int
    c: float
    rows: tuple[MethodResult, ...]
    predictions: tuple[RunPrediction, ...]
    models: Mapping[tuple[str, bool], ScorerModel]
    coef_sd: Mapping[tuple[str, bool], tuple[float, ...]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def subsets(self) -> list[str]:
        """Subsets evaluated, in table order."""
        return list(dict.fromkeys(r.subset for r in self.rows))

    def row(self, subset: str, method: str, ground_truth: bool | None = None
            ) -> MethodResult | None:
        """The row of a method on a subset (None if absent)."""
        for r in self.rows:
            if r.subset == subset and r.method == method and r.ground_truth == ground_truth:
                return r
        return None

    def to_json(self) -> dict[str, Any]:
        """JSON form (table, settings and fitted weights; per-run predictions apart)."""
        return {
            "protocol": {"folds": self.folds, "repeats": self.repeats, "seed": self.seed,
                         "grouping": "question_ID or normalized question",
                         "tolerances": list(TOLERANCES), "ci": "95% percentile bootstrap "
                         f"over runs, {BOOTSTRAP_DRAWS} draws", "c": self.c},
            "rows": [r.to_json() for r in self.rows],
            "models": [m.to_json() for m in self.models.values()],
            "elapsed_s": self.elapsed_s,
        }


def _annotated(results: Sequence[AuditResult]) -> list[AuditResult]:
    return [r for r in results if r.trace.annotation is not None
            and r.trace.succeeded is not True]


def _bootstrap(values: Sequence[float], rng: np.random.Generator) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return 0.0, 0.0
    idx = rng.integers(0, len(v), size=(BOOTSTRAP_DRAWS, len(v)))
    means = v[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def _hits(pred: Prediction, result: AuditResult) -> tuple[float, list[float]]:
    ann = result.trace.annotation
    assert ann is not None
    agent, step = pred
    a = float(agent is not None and name_key(agent) == name_key(ann.agent or ""))
    if step is None or ann.step is None:
        return a, [0.0] * len(TOLERANCES)
    return a, [float(abs(step - ann.step) <= k) for k in TOLERANCES]


@dataclass
class _Acc:
    """Per-run hits of one (method, setting) summed over repeats, and per-fold means."""

    agent: dict[int, float] = field(default_factory=dict)
    step: dict[int, list[float]] = field(default_factory=dict)
    rep_agent: dict[int, list[float]] = field(default_factory=dict)
    rep_step: dict[int, list[float]] = field(default_factory=dict)
    fold_agent: list[float] = field(default_factory=list)
    fold_step: list[float] = field(default_factory=list)

    def add(self, run: int, rep: int, a: float, s: list[float]) -> None:
        """Add run ``run``'s hits in repeat ``rep``.

        Sums the agent hit and the step hits per run over repeats; per repeat, keeps the agent
        hit and the ±0 step hit.

        Args:
            run: index of the run.
            rep: index of the repeat.
            a: agent hit, 0.0 or 1.0.
            s: step hits, one per tolerance of :data:`TOLERANCES` (±0 first).
        """
        self.agent[run] = self.agent.get(run, 0.0) + a
        prev = self.step.get(run, [0.0] * len(TOLERANCES))
        self.step[run] = [p + v for p, v in zip(prev, s, strict=True)]
        self.rep_agent.setdefault(rep, []).append(a)
        self.rep_step.setdefault(rep, []).append(s[0])


def _scorer_prediction(model: ScorerModel, cands: Sequence[Candidate]) -> Prediction:
    ranked = model.rank(cands)
    return (ranked[0].agent, ranked[0].step) if ranked else (None, None)


def cross_validate(results: Sequence[AuditResult], *, folds: int = 5, repeats: int = 5,
                   seed: int = 0, c: float = REGULARIZATION_C,
                   progress: Callable[[int], None] | None = None) -> AttributionEval:
    """Cross-validate the scorer and the baselines per subset (see the module docstring).

    Args:
        results: audited runs; the annotated failed ones are evaluated, per family.
        folds: k (at least 2; reduced to the number of question groups if fewer).
        repeats: group shuffles (at least 1).
        seed: seed of the first shuffle.
        c: the scorer's inverse L2 strength.
        progress: called with 1 after each (subset, repeat, fold).

    Raises:
        ValueError: ``folds < 2`` or ``repeats < 1``.
        AdapterError: scikit-learn is missing (``pip install 'icore[attribution]'``).
    """
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    from sklearn.model_selection import GroupKFold

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    runs = _annotated(results)
    fams = sorted({r.trace.family for r in runs},
                  key=lambda f: (f not in SUBSET_NAMES, list(SUBSET_NAMES).index(f)
                                 if f in SUBSET_NAMES else 0, f))
    rows: list[MethodResult] = []
    preds: list[RunPrediction] = []
    models: dict[tuple[str, bool], ScorerModel] = {}
    coef_sd: dict[tuple[str, bool], tuple[float, ...]] = {}
    k_used = folds
    for fam in fams:
        rs = [r for r in runs if r.trace.family == fam]
        cands = {r.trace.id: candidates(r) for r in rs}
        groups = [group_key(r) for r in rs]
        k = min(folds, len(set(groups)))
        k_used = min(k_used, k) if k >= 2 else k_used
        accs: dict[tuple[str, bool | None], _Acc] = {}
        coefs: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}

        pos = {id(r): i for i, r in enumerate(rs)}

        def record(method: str, gt: bool | None, r: AuditResult, pred: Prediction,
                   rep: int, fold: int, hits: list[tuple[float, list[float]]],
                   accs: dict[tuple[str, bool | None], _Acc] = accs,
                   fam: str = fam, pos: dict[int, int] = pos) -> None:
            a, s = _hits(pred, r)
            accs.setdefault((method, gt), _Acc()).add(pos[id(r)], rep, a, s)
            hits.append((a, s))
            ann = r.trace.annotation
            preds.append(RunPrediction(r.trace.id, fam, method, gt, rep, fold, pred[0],
                                       pred[1], ann.agent if ann else None,
                                       ann.step if ann else None))

        if k >= 2:
            for rep in range(repeats):
                split = GroupKFold(n_splits=k, shuffle=True, random_state=seed + rep)
                for fold, (tr, te) in enumerate(split.split(rs, groups=groups)):
                    train = [rs[i] for i in tr]
                    test = [rs[i] for i in te]
                    fold_hits: dict[tuple[str, bool | None], list[tuple[float, list[float]]]]
                    fold_hits = {}
                    for gt in (False, True):
                        m = fit_scorer(train, family=fam, ground_truth=gt, c=c)
                        coefs[gt].append(m.step.coef)
                        for r in test:
                            record(SCORER, gt, r, _scorer_prediction(m, cands[r.trace.id]),
                                   rep, fold, fold_hits.setdefault((SCORER, gt), []))
                    counts = agent_counts(train)
                    for r in test:
                        record(MAJORITY, None, r, majority_agent(r, counts), rep, fold,
                               fold_hits.setdefault((MAJORITY, None), []))
                        if rep == 0:
                            for name, fn in BASELINES.items():
                                record(name, None, r, fn(r), rep, fold,
                                       fold_hits.setdefault((name, None), []))
                    for key, hs in fold_hits.items():
                        accs[key].fold_agent.append(float(np.mean([h[0] for h in hs])))
                        accs[key].fold_step.append(float(np.mean([h[1][0] for h in hs])))
                    if progress is not None:
                        progress(1)
            for gt in (False, True):
                models[(fam, gt)] = fit_scorer(rs, family=fam, ground_truth=gt, c=c,
                                               trained_on=f"all {len(rs)} runs of {fam}")
                if coefs[gt]:
                    coef_sd[(fam, gt)] = tuple(map(float, np.std(np.asarray(coefs[gt]),
                                                                 axis=0)))
        n = len(rs)
        order: list[tuple[str, bool | None]] = [(SCORER, False), (SCORER, True)]
        order += [(MAJORITY, None), *((name, None) for name in BASELINES)]
        ra = [random_expectation(r, 0)[0] for r in rs]
        rsteps = [[random_expectation(r, t)[1] for r in rs] for t in TOLERANCES]
        rows.append(MethodResult(fam, RANDOM, None, n, float(np.mean(ra)), _bootstrap(ra, rng),
                                 tuple(float(np.mean(v)) for v in rsteps),
                                 tuple(_bootstrap(v, rng) for v in rsteps)))
        for key in order:
            acc = accs.get(key)
            if acc is None:
                continue
            reps = repeats if key[0] in (SCORER, MAJORITY) else 1
            per_a = [acc.agent[j] / reps for j in range(n)]
            per_s = [[acc.step[j][i] / reps for j in range(n)]
                     for i in range(len(TOLERANCES))]
            learned = key[0] in (SCORER, MAJORITY)
            rows.append(MethodResult(
                fam, key[0], key[1], n, float(np.mean(per_a)), _bootstrap(per_a, rng),
                tuple(float(np.mean(v)) for v in per_s),
                tuple(_bootstrap(v, rng) for v in per_s),
                agent_sd_repeats=float(np.std([np.mean(v) for v in acc.rep_agent.values()]))
                if learned else 0.0,
                step_sd_repeats=float(np.std([np.mean(v) for v in acc.rep_step.values()]))
                if learned else 0.0,
                agent_sd_folds=float(np.std(acc.fold_agent)),
                step_sd_folds=float(np.std(acc.fold_step)),
            ))
        rows.sort(key=lambda r: (fams.index(r.subset), _rank(r)))
    return AttributionEval(k_used, repeats, seed, c, tuple(rows), tuple(preds), models,
                           coef_sd, time.perf_counter() - t0)


def with_llm_rows(ev: AttributionEval, results: Sequence[AuditResult], attributor: Any,
                  ) -> AttributionEval:
    """``ev`` plus one row per subset for an LLM attributor (:class:`LLMAttributor`).

    The LLM learns nothing, but its hints and fallback come from the scorer: it gets the
    scorer fitted on the training folds of the first repeat's split, so the LLM row is
    out-of-fold too.
    """
    from sklearn.model_selection import GroupKFold

    rng = np.random.default_rng(ev.seed + 1)
    rows = list(ev.rows)
    preds = list(ev.predictions)
    name = f"LLM {attributor.mode} ({attributor.settings.model})"
    for fam in ev.subsets:
        rs = [r for r in _annotated(results) if r.trace.family == fam]
        groups = [group_key(r) for r in rs]
        k = min(ev.folds, len(set(groups)))
        if k < 2:
            continue
        hits: dict[int, tuple[float, list[float]]] = {}
        split = GroupKFold(n_splits=k, shuffle=True, random_state=ev.seed)
        for fold, (tr, te) in enumerate(split.split(rs, groups=groups)):
            attributor.model = fit_scorer([rs[i] for i in tr], family=fam,
                                          ground_truth=attributor.ground_truth, c=ev.c)
            for i in te:
                r = rs[i]
                a = attributor.attribute(r)
                pred = (a.agent, a.step) if a is not None else (None, None)
                hits[int(i)] = _hits(pred, r)
                ann = r.trace.annotation
                preds.append(RunPrediction(r.trace.id, fam, name, attributor.ground_truth, 0,
                                           fold, pred[0], pred[1],
                                           ann.agent if ann else None,
                                           ann.step if ann else None))
        per_a = [hits[j][0] for j in range(len(rs))]
        per_s = [[hits[j][1][i] for j in range(len(rs))] for i in range(len(TOLERANCES))]
        rows.append(MethodResult(fam, name, attributor.ground_truth, len(rs),
                                 float(np.mean(per_a)), _bootstrap(per_a, rng),
                                 tuple(float(np.mean(v)) for v in per_s),
                                 tuple(_bootstrap(v, rng) for v in per_s)))
    rows.sort(key=lambda r: (ev.subsets.index(r.subset), _rank(r)))
    return AttributionEval(ev.folds, ev.repeats, ev.seed, ev.c, tuple(rows), tuple(preds),
                           ev.models, ev.coef_sd, ev.elapsed_s)


def _rank(r: MethodResult) -> int:
    names = [SCORER, RANDOM, MAJORITY, *BASELINES]
    i = names.index(r.method) if r.method in names else 1
    return i * 2 + (1 if r.ground_truth else 0)


def best_baseline(ev: AttributionEval, subset: str, level: str) -> MethodResult | None:
    """The baseline with the highest agent (``level="agent"``) or ±0 step accuracy.

    Baselines are item 2 of issue 19: not the scorer, not an LLM row.
    """
    rows = [r for r in ev.rows if r.subset == subset
            and r.method in (RANDOM, MAJORITY, *BASELINES)]
    if not rows:
        return None
    return max(rows, key=lambda r: r.agent if level == "agent" else r.step[0])


def cv_score(ev: AttributionEval, *, ground_truth: bool = False) -> AttributionScore:
    """The scorer's cross-validated figures in the shape of :class:`AttributionScore`.

    Per-run rows: the first repeat's out-of-fold predictions.
    """
    rows = []
    for p in ev.predictions:
        if p.method != SCORER or p.ground_truth != ground_truth or p.repeat != 0:
            continue
        rows.append(ScoreRow(
            p.run, p.subset, p.true_agent, p.true_step, p.agent, p.step,
            p.agent is not None and name_key(p.agent) == name_key(p.true_agent or ""),
            p.step is not None and p.step == p.true_step, 0.0, 0.0, "cross-validated"))
    by_family: dict[str, dict[str, float]] = {}
    for fam in ev.subsets:
        s = ev.row(fam, SCORER, ground_truth)
        rnd = ev.row(fam, RANDOM)
        if s is None or rnd is None:
            continue
        by_family[fam] = {"n": float(s.n), "agent_accuracy": s.agent,
                          "step_accuracy": s.step[0], "random_agent": rnd.agent,
                          "random_step": rnd.step[0]}
    n = sum(int(v["n"]) for v in by_family.values())

    def pooled(key: str) -> float:
        return sum(v[key] * v["n"] for v in by_family.values()) / n if n else 0.0

    return AttributionScore(n, pooled("agent_accuracy"), pooled("step_accuracy"),
                            pooled("random_agent"), pooled("random_step"), by_family,
                            tuple(rows))


# ------------------------------------------------------------------ output
def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(v: float, ci: tuple[float, float]) -> str:
    return f"{_pct(v)} [{_pct(ci[0])}, {_pct(ci[1])}]"


def subset_label(fam: str) -> str:
    """``Hand-Crafted (magentic_one)`` etc."""
    return f"{SUBSET_NAMES[fam]} ({fam})" if fam in SUBSET_NAMES else fam


def markdown(ev: AttributionEval, *, weights: bool = True) -> str:
    """The per-subset tables (and the fitted weights) as markdown."""
    lines = [
        "# Failure attribution: cross-validated, per subset",
        "",
        f"{ev.folds}-fold cross-validation grouped by question, {ev.repeats} repeat(s) "
        f"(seeds {ev.seed}..{ev.seed + ev.repeats - 1}); learned methods fitted on the "
        "training folds only. Accuracy in %, 95% percentile-bootstrap interval over runs; "
        "sd = standard deviation of the accuracy over repeats / over folds (agent; step "
        "±0). GT = the run's ground-truth answer is a feature.",
        "",
    ]
    for fam in ev.subsets:
        rows = [r for r in ev.rows if r.subset == fam]
        lines += [f"## {subset_label(fam)}: {rows[0].n} runs", "",
                  "| method | agent [95% CI] | step ±0 [95% CI] | ±1 | ±2 | ±3 | ±4 | ±5 | "
                  "sd repeats | sd folds |",
                  "|---|---|---|---:|---:|---:|---:|---:|---|---|"]
        for r in rows:
            name = f"**{r.label}**" if r.method == SCORER else r.label
            lines.append(
                f"| {name} | {_ci(r.agent, r.agent_ci)} | {_ci(r.step[0], r.step_ci[0])} | "
                + " | ".join(_pct(v) for v in r.step[1:])
                + f" | {_pct(r.agent_sd_repeats)} / {_pct(r.step_sd_repeats)} "
                f"| {_pct(r.agent_sd_folds)} / {_pct(r.step_sd_folds)} |")
        lines.append("")
        if ev.row(fam, SCORER, False) is None:
            lines += ["Too few question groups to cross-validate (at least 2 needed): only "
                      "the expected accuracy of a uniform guess is shown.", ""]
        lines += _verdict(ev, fam)
        pub = PUBLISHED.get(fam)
        if pub:
            lines.append("Published (full dataset, LLM-based, not the same runs): " + "; ".join(
                f"{k} {'–' if a is None else _pct(a)} / {'–' if s is None else _pct(s)}"
                for k, (a, s) in pub.items()) + ".")
            lines.append("")
    if weights:
        lines += weights_markdown(ev)
    return "\n".join(lines) + "\n"


def _verdict(ev: AttributionEval, fam: str) -> list[str]:
    out: list[str] = []
    s = ev.row(fam, SCORER, False)
    if s is None:
        return out
    ba, bs = best_baseline(ev, fam, "agent"), best_baseline(ev, fam, "step")
    tgt = TARGETS.get(fam)
    parts = []
    if ba is not None and bs is not None:
        parts.append(f"without GT the scorer is {'above' if s.agent > ba.agent else 'NOT above'}"
                     f" every baseline at agent level (best: {ba.label} {_pct(ba.agent)}) and "
                     f"{'above' if s.step[0] > bs.step[0] else 'NOT above'} at step level "
                     f"(best: {bs.label} {_pct(bs.step[0])})")
    if tgt is not None:
        parts.append(f"target agent ≥ {_pct(tgt[0])}: {'met' if s.agent >= tgt[0] else 'not met'}"
                     f"; step ≥ {_pct(tgt[1])}: {'met' if s.step[0] >= tgt[1] else 'not met'}")
    if parts:
        out += ["Verdict: " + "; ".join(parts) + ".", ""]
    return out


def weights_markdown(ev: AttributionEval) -> list[str]:
    """The fitted weights (all runs of each subset) with their sd over the CV fits."""
    desc = {f.name: f.description for f in FEATURES}
    lines = ["## Features and weights", "",
             "Standardized logistic-regression coefficients of the scorer fitted on all runs "
             "of the subset (the shipped model), without GT; ± = sd of the step coefficient "
             "over the CV fits. Positive: makes the candidate more likely.", ""]
    for fam in ev.subsets:
        m = ev.models.get((fam, False))
        if m is None:
            continue
        sd = ev.coef_sd.get((fam, False), tuple(0.0 for _ in m.features))
        lines += [f"### {subset_label(fam)}", "",
                  "| feature | step model | agent model (max / mean) | what it measures |",
                  "|---|---:|---:|---|"]
        order = sorted(range(len(m.features)), key=lambda i: -abs(m.step.coef[i]))
        nf = len(m.features)
        for i in order:
            n = m.features[i]
            lines.append(f"| {n} | {m.step.coef[i]:+.2f} ± {sd[i]:.2f} | "
                         f"{m.agent.coef[i]:+.2f} / {m.agent.coef[nf + i]:+.2f} | "
                         f"{desc.get(n, '')} |")
        lines += [f"| (intercept) | {m.step.intercept:+.2f} | {m.agent.intercept:+.2f} | |",
                  ""]
    return lines


def write_outputs(ev: AttributionEval, out: Path) -> dict[str, Path]:
    """Write ``attribution.md``, ``attribution.json`` and ``predictions.csv`` to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "attribution.md", "json": out / "attribution.json",
             "csv": out / "predictions.csv"}
    paths["markdown"].write_text(markdown(ev), encoding="utf-8")
    paths["json"].write_text(json.dumps(ev.to_json(), indent=1), encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "subset", "method", "ground_truth", "repeat", "fold", "agent",
                    "step", "true_agent", "true_step"])
        for p in ev.predictions:
            w.writerow([p.run, p.subset, p.method, p.ground_truth, p.repeat, p.fold, p.agent,
                        p.step, p.true_agent, p.true_step])
    return paths


__all__ = [
    "RANDOM",
    "SCORER",
    "SUBSET_NAMES",
    "TARGETS",
    "TOLERANCES",
    "AttributionEval",
    "MethodResult",
    "RunPrediction",
    "best_baseline",
    "cross_validate",
    "cv_score",
    "group_key",
    "markdown",
    "subset_label",
    "weights_markdown",
    "with_llm_rows",
    "write_outputs",
]
