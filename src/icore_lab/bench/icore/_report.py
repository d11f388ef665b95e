"""Outputs of ``icore bench icore``: CSV, JSON, PNG (matplotlib Agg) and a markdown summary."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from icore._extras import require
from icore_lab.bench.icore._loop import loop_markdown
from icore_lab.bench.icore._stats import PAPER_ANCHORS, Paired


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write dict rows (same keys) as CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        path.write_text("", encoding="utf-8")
        return
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _pp(x: float) -> str:
    return f"{100 * x:+.1f}"


def markdown(summary: dict[str, Any]) -> str:
    """The markdown summary of one evaluation."""
    cmp = [Paired(**c) for c in summary["comparisons"]]
    lines = [
        "# iCORE-Audit controlled evaluation",
        "",
        f"Preset `{summary['preset']}`: {summary['instances']} matched instances "
        f"({summary['per_mode']} per mode x {len(summary['modes'])} modes, "
        f"{summary.get('agents', 'simulated')} agents), conditions "
        "MAS-only, passive full-state observation, iCORE-Audit; "
        f"{summary['bootstrap']} paired bootstrap draws; runtime {summary['runtime_s']:.1f} s "
        f"with {summary['jobs']} job(s).",
        "",
        "## Representation sufficiency, detection only (claim 1)",
        "",
        "Recall = detected / injected defects (ground truth from the simulated agents), "
        "on the passive runs; false alarms = flagged pairs with no injected defect.",
        "",
        "| defect | G-only recall | Q-only recall | full X recall | injected | "
        "false alarms G / Q / X |",
        "|---|---|---|---|---|---|",
    ]
    rep = summary["representation"]
    for d in sorted({r["defect"] for r in rep}, key=[r["defect"] for r in rep].index):
        cells = {r["representation"]: r for r in rep if r["defect"] == d}

        def rc(k: str, cells: dict[str, Any] = cells) -> str:
            v = cells[k]["recall"]
            return "n/a" if v is None else f"{v:.2f}"

        lines.append(
            f"| {d} | {rc('G')} | {rc('Q')} | {rc('X')} | {cells['X']['injected']} | "
            f"{cells['G']['false_alarms']} / {cells['Q']['false_alarms']} / "
            f"{cells['X']['false_alarms']} |"
        )
    lines.append("")
    lines += loop_markdown(summary.get("loop_ablation", []))
    lines += [
        "## iCORE-Audit vs passive observation (claim 2)",
        "",
        "Absolute differences in percentage points (audit − passive), 95% paired bootstrap "
        "interval, Wilcoxon signed-rank p. Trajectory quality = mean cq over the run; "
        "terminal performance = ground-truth Perf.",
        "",
        "| mode | n | quality passive | quality audit | Δ quality pp [95% CI] | p | "
        "Perf passive | Perf audit | Δ Perf pp [95% CI] | p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    modes = [c.mode for c in cmp if c.metric == "quality"]
    for m in modes:
        q = next(c for c in cmp if c.metric == "quality" and c.mode == m)
        p = next(c for c in cmp if c.metric == "perf" and c.mode == m)
        lines.append(
            f"| {m} | {q.n} | {q.control:.3f} | {q.treatment:.3f} | {_pp(q.diff)} "
            f"[{_pp(q.lo)}, {_pp(q.hi)}] | {q.wilcoxon_p:.2g} | {p.control:.3f} | "
            f"{p.treatment:.3f} | {_pp(p.diff)} [{_pp(p.lo)}, {_pp(p.hi)}] | "
            f"{p.wilcoxon_p:.2g} |"
        )
    qa = next(c for c in cmp if c.metric == "quality" and c.mode == "all")
    pa = next(c for c in cmp if c.metric == "perf" and c.mode == "all")
    sanity = next(c for c in cmp if c.metric == "perf_passive_vs_mas" and c.mode == "all")
    lines += [
        "",
        f"Paper anchors (controlled): +{PAPER_ANCHORS['quality']} pp trajectory quality, "
        f"+{PAPER_ANCHORS['perf']} pp terminal performance. Measured here: "
        f"{_pp(qa.diff)} pp [{_pp(qa.lo)}, {_pp(qa.hi)}] quality and {_pp(pa.diff)} pp "
        f"[{_pp(pa.lo)}, {_pp(pa.hi)}] terminal performance over {qa.n} matched instances.",
        f"Sanity check: passive observation vs MAS-only terminal performance differs by "
        f"{_pp(sanity.diff)} pp (observation alone changes nothing).",
        "",
        "## Proposition 4 check (claim 3)",
        "",
    ]
    p4 = summary["prop4"]
    if p4["declared_runs"]:
        lines += [
            f"Where D declares the conditions (deadline, review, allocation), as an "
            f"expectation bound: mean Perf >= p_min·max(0, 2·mean cq − 1) − slack, the "
            f"Hoeffding slack (1 + 2·p_min)·sqrt(ln(2/δ)/(2n)) at δ="
            f"{p4['failure_probability']} (p_min: the least the mode's instances declare).",
            "",
            "| mode | condition | n | p_min | mean cq | bound | slack | mean Perf | holds | "
            "runs below the pointwise bound (diagnostic) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in p4["expectation"]:
            lines.append(
                f"| {e['mode']} | {e['condition']} | {e['n']} | {e['p_min']:.3f} | "
                f"{e['mean_cq']:.3f} | {e['bound']:.3f} | {e['slack']:.3f} | "
                f"{e['mean_perf']:.3f} | {'yes' if e['holds'] else 'NO'} | "
                f"{e['diag_fraction_runs_below_pointwise_bound']:.3f} |"
            )
        lines.append("")
    if "pearson_r" in p4:
        lines.append(
            f"Where it does not ({p4['undeclared_runs']} runs; cq is a process diagnostic): "
            f"Pearson r(final cq, Perf) = {p4['pearson_r']:.3f}, Spearman ρ = "
            f"{p4['spearman_rho']:.3f}; r(trajectory quality, Perf) = "
            f"{p4['pearson_r_trajectory']:.3f}."
        )
    lines += [
        "",
        "## Cost",
        "",
        "| condition | audit ms/proposal | agent calls | extra calls (feedback) | "
        "interventions | accepted | feedback tokens | wall ms/run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in summary["costs"]:
        lines.append(
            f"| {c['condition']} | {c['audit_ms_per_proposal']:.3f} | {c['agent_calls']:.1f} | "
            f"{c['extra_calls']:.2f} | {c['interventions']:.2f} | "
            f"{c['accepted_recoveries']:.2f} | {c['feedback_tokens']:.0f} | {c['wall_ms']:.1f} |"
        )
    lines.append("")
    return "\n".join(lines)


def plot(path: Path, summary: dict[str, Any]) -> None:
    """Bar chart: quality and Perf per mode, passive vs audit, with paired intervals."""
    matplotlib = require("matplotlib", "bench", feature="icore bench icore plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cmp = [Paired(**c) for c in summary["comparisons"]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, metric, title in (
        (axes[0], "quality", "trajectory quality (mean cq)"),
        (axes[1], "perf", "terminal performance (Perf)"),
    ):
        cs = [c for c in cmp if c.metric == metric]
        xs = range(len(cs))
        ax.bar([x - 0.2 for x in xs], [c.control for c in cs], 0.4, label="passive")
        ax.bar([x + 0.2 for x in xs], [c.treatment for c in cs], 0.4, label="iCORE-Audit",
               yerr=[[c.diff - c.lo for c in cs], [c.hi - c.diff for c in cs]], capsize=3)
        ax.set_xticks(list(xs), [c.mode for c in cs], rotation=30, ha="right")
        ax.set_ylim(0, 1)
        ax.set_title(title)
        ax.legend(loc="lower right")
    fig.suptitle("iCORE-Audit vs passive observation (error bars: 95% CI of the paired Δ)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(out: Path, summary: dict[str, Any], runs: Sequence[dict[str, Any]],
              reps: Sequence[dict[str, Any]]) -> dict[str, Path]:
    """Write runs.csv, representation.csv, summary.json, summary.md, icore.png."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "runs": out / "runs.csv",
        "representation": out / "representation.csv",
        "json": out / "summary.json",
        "markdown": out / "summary.md",
        "png": out / "icore.png",
    }
    write_csv(paths["runs"], runs)
    write_csv(paths["representation"], reps)
    paths["json"].write_text(json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8")
    paths["markdown"].write_text(markdown(summary), encoding="utf-8")
    plot(paths["png"], summary)
    return paths


def paired_json(cs: Sequence[Paired]) -> list[dict[str, Any]]:
    """Paired comparisons as JSON-ready dicts."""
    return [asdict(c) for c in cs]
