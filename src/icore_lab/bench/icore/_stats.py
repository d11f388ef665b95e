"""Statistics of the iCORE evaluation: paired bootstrap, Wilcoxon, Prop. 4 check, tables.

Differences are absolute (percentage points when multiplied by 100), like the paper's
anchors. Intervals are 95% percentile intervals of the mean paired difference over
``draws`` bootstrap resamples of matched instances (seeded, so reruns are identical).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from icore._extras import require
from icore_lab.bench.icore._repr import DEFECTS, REPRESENTATIONS
from icore_lab.workloads import FAILURE_PROBABILITY

np = require("numpy", "bench", feature="icore bench icore")
sps = require("scipy.stats", "bench", feature="icore bench icore")

PAPER_ANCHORS = {"quality": 11.5, "perf": 15.1}
"""icore Sec. 5, controlled setting: absolute improvements over passive observation (pp)."""


@dataclass(frozen=True, slots=True)
class Paired:
    """A paired comparison (treatment - control) over matched instances."""

    metric: str
    mode: str
    n: int
    control: float
    treatment: float
    diff: float
    lo: float
    hi: float
    wilcoxon_p: float


def paired(
    metric: str, mode: str, control: Sequence[float], treatment: Sequence[float], *,
    draws: int, seed: int = 7,
) -> Paired:
    """Mean paired difference with a bootstrap interval and a Wilcoxon signed-rank p."""
    c = np.asarray(control, dtype=float)
    t = np.asarray(treatment, dtype=float)
    d = t - c
    n = len(d)
    rng = np.random.default_rng(seed)
    if n:
        idx = rng.integers(0, n, size=(draws, n))
        means = d[idx].mean(axis=1)
        lo, hi = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    else:
        lo = hi = float("nan")
    if n and np.any(d != 0):
        p = float(sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    else:
        p = 1.0
    return Paired(metric, mode, n, float(c.mean()) if n else math.nan,
                  float(t.mean()) if n else math.nan, float(d.mean()) if n else math.nan,
                  lo, hi, p)


def _by(runs: Sequence[dict[str, Any]], cond: str) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["mode"], r["seed"]): r for r in runs if r["condition"] == cond}


def comparisons(runs: Sequence[dict[str, Any]], *, draws: int) -> list[Paired]:
    """Audit vs passive (quality, perf) and passive vs MAS-only (perf), per mode and all."""
    out: list[Paired] = []
    pas, aud, mas = _by(runs, "passive"), _by(runs, "audit"), _by(runs, "mas_only")
    modes = sorted({k[0] for k in pas})
    for mode in [*modes, "all"]:
        keys = sorted(k for k in pas if (mode == "all" or k[0] == mode) and k in aud)
        for metric in ("quality", "perf"):
            out.append(paired(metric, mode, [pas[k][metric] for k in keys],
                              [aud[k][metric] for k in keys], draws=draws))
        mk = [k for k in keys if k in mas]
        out.append(paired("perf_passive_vs_mas", mode, [mas[k]["perf"] for k in mk],
                          [pas[k]["perf"] for k in mk], draws=draws))
    return out


def representation_table(reps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recall (detected / injected) and false alarms per representation and defect."""
    out = []
    for rep in REPRESENTATIONS:
        for d in DEFECTS:
            rows = [r for r in reps if r["representation"] == rep and r["defect"] == d]
            inj = sum(r["injected"] for r in rows)
            det = sum(r["detected"] for r in rows)
            fa = sum(r["false_alarms"] for r in rows)
            out.append({"representation": rep, "defect": d, "injected": inj, "detected": det,
                        "recall": det / inj if inj else None, "false_alarms": fa})
    return out


def expectation_bound(
    perf: Sequence[float], cq: Sequence[float], p_min: float, delta: float
) -> dict[str, Any]:
    """Proposition 4 as an expectation bound, with a stated concentration slack.

    Prop. 4 (icore Sec. 5): where D declares its conditions, E[Perf] >= p_min·max(0,
    2·E[cq] − 1). Over n matched instances with Perf, cq in [0, 1], Hoeffding's
    inequality bounds each sample mean's one-sided deviation from its expectation by
    sqrt(ln(2/δ)/(2n)) with probability >= 1 − δ/2; by a union bound, with probability
    >= 1 − δ, mean Perf >= p_min·max(0, 2·mean cq − 1) − slack, where
    slack = (1 + 2·p_min)·sqrt(ln(2/δ)/(2n)) (the cq term enters the bound with slope
    2·p_min). ``holds`` checks exactly that.

    Args:
        perf: Perf per instance.
        cq: final cq per instance (same order).
        p_min: the least p_min the instances declare (conservative).
        delta: failure probability δ.
    """
    n = len(perf)
    mp, mc = float(np.mean(perf)), float(np.mean(cq))
    bound = p_min * max(0.0, 2.0 * mc - 1.0)
    slack = (1.0 + 2.0 * p_min) * math.sqrt(math.log(2.0 / delta) / (2.0 * n))
    return {
        "n": n,
        "p_min": p_min,
        "mean_perf": mp,
        "mean_cq": mc,
        "bound": bound,
        "slack": slack,
        "bound_minus_slack": bound - slack,
        "holds": mp >= bound - slack - 1e-12,
    }


def prop4_check(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Check Proposition 4: the expectation bound where D declares the conditions, else cq–Perf.

    Where D declares the conditions: the expectation bound per (mode, condition) with its
    Hoeffding slack at δ (:func:`expectation_bound`); per-run violations of the pointwise
    bound only as a diagnostic (an expectation bound says nothing about single runs, so they
    are not compared with δ). Where D does not declare the conditions: the cq–Perf
    correlation (passive and audit runs).
    """
    xs = [r for r in runs if r["condition"] in ("passive", "audit")]
    dec = [r for r in xs if r["declares_bound"] and r["bound"] is not None]
    below = [r for r in dec if r["perf"] < r["bound"] - 1e-12]
    nd = [r for r in xs if not r["declares_bound"] and r["final_cq"] is not None]
    per_mode = []
    for mode in sorted({r["mode"] for r in dec}):
        for cond in ("passive", "audit"):
            rs = [r for r in dec if r["mode"] == mode and r["condition"] == cond]
            if not rs:
                continue
            pm = min(
                (r["p_min"] for r in rs if r.get("p_min") is not None),
                default=None,
            )
            if pm is None:
                continue
            e = expectation_bound([r["perf"] for r in rs], [r["final_cq"] for r in rs], pm,
                                  FAILURE_PROBABILITY)
            e["diag_fraction_runs_below_pointwise_bound"] = (
                sum(1 for r in rs if r["perf"] < r["bound"] - 1e-12) / len(rs)
            )
            per_mode.append({"mode": mode, "condition": cond, **e})
    res: dict[str, Any] = {
        "declared_runs": len(dec),
        "failure_probability": FAILURE_PROBABILITY,
        "expectation": per_mode,
        "all_hold": all(e["holds"] for e in per_mode) if per_mode else None,
        "diag_fraction_runs_below_pointwise_bound": len(below) / len(dec) if dec else None,
        "mean_bound": float(np.mean([r["bound"] for r in dec])) if dec else None,
        "mean_perf_declared": float(np.mean([r["perf"] for r in dec])) if dec else None,
        "undeclared_runs": len(nd),
    }
    if len(nd) >= 3:
        cq = [r["final_cq"] for r in nd]
        pf = [r["perf"] for r in nd]
        res["pearson_r"] = float(sps.pearsonr(cq, pf).statistic)
        res["spearman_rho"] = float(sps.spearmanr(cq, pf).statistic)
        qual = [r["quality"] for r in nd]
        res["pearson_r_trajectory"] = float(sps.pearsonr(qual, pf).statistic)
    return res


def costs(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cost per condition: audit time per proposal, extra calls, feedback tokens."""
    out = []
    for cond in ("mas_only", "passive", "audit"):
        rs = [r for r in runs if r["condition"] == cond]
        if not rs:
            continue
        out.append({
            "condition": cond,
            "runs": len(rs),
            "audit_ms_per_proposal": float(np.mean([r["audit_ms_per_proposal"] for r in rs])),
            "agent_calls": float(np.mean([r["agent_calls"] for r in rs])),
            "extra_calls": float(np.mean([r["extra_calls"] for r in rs])),
            "interventions": float(np.mean([r["interventions"] for r in rs])),
            "accepted_recoveries": float(np.mean([r["accepted"] for r in rs])),
            "feedback_tokens": float(np.mean([r["feedback_tokens"] for r in rs])),
            "wall_ms": float(np.mean([r["wall_ms"] for r in rs])),
        })
    return out
