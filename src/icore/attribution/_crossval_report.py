"""The attribution evaluation's outputs: markdown tables, weights, CSV and JSON files.

Renders an :class:`AttributionEval` (:mod:`icore.attribution._crossval`, split for size
in issue 26); ``icore bench attribution`` and ``icore audit --attribution`` print them.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from icore.attribution._crossval import (
    MAJORITY,
    RANDOM,
    SCORER,
    SUBSET_NAMES,
    TARGETS,
    AttributionEval,
    MethodResult,
)
from icore.attribution._features import FEATURES
from icore.attribution._rank import (
    BASELINES,
    PUBLISHED,
)


def best_baseline(ev: AttributionEval, subset: str, level: str) -> MethodResult | None:
    """The baseline with the highest agent (``level="agent"``) or ±0 step accuracy.

    Baselines are item 2 of issue 19: not the scorer, not an LLM row.
    """
    rows = [r for r in ev.rows if r.subset == subset
            and r.method in (RANDOM, MAJORITY, *BASELINES)]
    if not rows:
        return None
    return max(rows, key=lambda r: r.agent if level == "agent" else r.step[0])


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
