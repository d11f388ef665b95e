"""Loop-level representation ablation (icore Sec. 5, claim 1; issue 14 deliverable 3).

The whole iCORE-Audit loop (triggers, diagnosis, routing, gate, recovery audit) runs on
the same matched instance, with the same faults and common random numbers, once per
auditor view: ``G`` (events only), ``Q`` (obligations only) and ``X`` (the full state;
the ``audit`` condition). :mod:`icore.audit._views` states what each view may read.

Outcomes come from the simulator world, never from the detectors' formulas:

* Δ Perf: ground-truth terminal performance (``SimWorld.performance``) of the view's run
  minus the passive run's;
* Δ quality: trajectory cq of the view's run minus the passive run's, both measured on
  the full X (the instrument is the same in every view; only the auditor is restricted);
* defect recall: an injected defect (``SimWorld.injected``: kind, item) counts as
  detected when the loop *named* its item (diagnosed it, or enforced a rejection naming
  it); false alarms are named items on which the world injected nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from icore_lab.bench.icore._repr import DEFECTS

LOOP_VIEWS = ("G", "Q")
"""Restricted views run besides the full-X ``audit`` condition."""
ALL_VIEWS = ("G", "Q", "X")


def loop_detection(
    injected: Iterable[tuple[str, str]], named: Iterable[str]
) -> list[tuple[str, int, int, int]]:
    """Per defect kind: (defect, injected, detected, false alarms), plus an ``any`` row.

    Args:
        injected: the world's ground-truth defects, (kind, item) pairs.
        named: items the loop named.

    Returns:
        One tuple per kind of :data:`~icore_lab.bench.icore._repr.DEFECTS`, then ``any``
        (all kinds, with the false alarms: named items without any injected defect).
    """
    truth = set(injected)
    seen = set(named)
    bad = {i for _, i in truth}
    out = []
    for d in DEFECTS:
        inj = {t for t in truth if t[0] == d}
        out.append((d, len(inj), sum(1 for t in inj if t[1] in seen), 0))
    out.append(("any", len(truth), sum(1 for t in truth if t[1] in seen), len(seen - bad)))
    return out


def loop_table(
    runs: Sequence[dict[str, Any]],
    loop_runs: Sequence[dict[str, Any]],
    loop_reps: Sequence[dict[str, Any]],
    *,
    draws: int,
) -> list[dict[str, Any]]:
    """Per view: Δ quality and Δ Perf vs passive (paired bootstrap 95% CI) and recall.

    Args:
        runs: the controlled evaluation's run rows (``passive`` and ``audit``).
        loop_runs: the restricted-view run rows (``audit_G``, ``audit_Q``).
        loop_reps: :class:`~icore_lab.bench.icore._evaluate.ReprRow` dicts of every view.
        draws: bootstrap resamples.
    """
    from icore_lab.bench.icore._stats import paired

    def by(cond: str) -> dict[tuple[str, int], dict[str, Any]]:
        return {(r["mode"], r["seed"]): r for r in [*runs, *loop_runs]
                if r["condition"] == cond}

    pas = by("passive")
    out: list[dict[str, Any]] = []
    for view in ALL_VIEWS:
        cond = "audit" if view == "X" else f"audit_{view}"
        rs = by(cond)
        keys = sorted(k for k in rs if k in pas)
        if not keys:
            continue
        row: dict[str, Any] = {"representation": view, "n": len(keys)}
        for metric in ("quality", "perf"):
            p = paired(metric, "all", [pas[k][metric] for k in keys],
                       [rs[k][metric] for k in keys], draws=draws)
            row[metric] = p.treatment
            row[f"d_{metric}_pp"] = 100 * p.diff
            row[f"d_{metric}_lo"] = 100 * p.lo
            row[f"d_{metric}_hi"] = 100 * p.hi
        row["terminal"] = sum(1 for k in keys if rs[k]["terminal"]) / len(keys)
        for d in (*DEFECTS, "any"):
            xs = [r for r in loop_reps if r["representation"] == view and r["defect"] == d]
            inj = sum(r["injected"] for r in xs)
            det = sum(r["detected"] for r in xs)
            row[f"recall_{d}"] = det / inj if inj else None
            row[f"injected_{d}"] = inj
            if d == "any":
                row["false_alarms"] = sum(r["false_alarms"] for r in xs)
        out.append(row)
    return out


def loop_markdown(table: Sequence[dict[str, Any]]) -> list[str]:
    """The loop-level ablation as Markdown lines (empty when it did not run)."""
    if not table:
        return []

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.0f}%"

    lines = [
        "## Loop-level representation ablation (claim 1)",
        "",
        "The whole audit loop run with a G-only, Q-only or full-X view on the same "
        "instances and faults (docs/audit.md). Δ vs passive, pp, 95% paired bootstrap CI; "
        "Perf and recall from the simulator world's ground truth.",
        "",
        "| view | n | Δ quality pp | Δ Perf pp | terminal | recall (all) | "
        + " | ".join(f"recall {d}" for d in DEFECTS) + " | false alarms |",
        "|---|---|---|---|---|---|" + "---|" * len(DEFECTS) + "---|",
    ]
    for r in table:
        lines.append(
            f"| {r['representation']} | {r['n']} | {r['d_quality_pp']:+.1f} "
            f"[{r['d_quality_lo']:+.1f}, {r['d_quality_hi']:+.1f}] | {r['d_perf_pp']:+.1f} "
            f"[{r['d_perf_lo']:+.1f}, {r['d_perf_hi']:+.1f}] | {100 * r['terminal']:.0f}% | "
            f"{pct(r['recall_any'])} | "
            + " | ".join(pct(r[f"recall_{d}"]) for d in DEFECTS)
            + f" | {r['false_alarms']} |"
        )
    lines.append("")
    return lines
