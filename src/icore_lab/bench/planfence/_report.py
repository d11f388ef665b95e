"""Write a PlanFence replay run: CSV + JSON + PNG + a markdown summary.

Files in the output folder:

* ``rows.csv``: one row per (cell, template, race seed, policy, action);
* ``summary.csv`` / ``summary.json``: aggregates per (study, cell, policy), paired
  comparisons, the orderings, and the run metadata (command line, seed, timings);
* ``<study>.png``: one figure per study that has one;
* ``summary.md``: tables and every paper ordering stated as reproduced or not.
"""

from __future__ import annotations

import csv
import json
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icore_lab.bench.planfence._analysis import (
    PAPER_TABLE1,
    Agg,
    Ordering,
    aggregate,
    orderings,
    paired_table,
    summary_rows,
)
from icore_lab.bench.planfence._run import ROW_FIELDS, CampaignResult

PAIRS = (("planfence", "centralized_lineage"), ("planfence", "metadata_sync_k1"),
         ("planfence", "batched_all_key"), ("planfence", "per_key_all_key"))


def write_outputs(result: CampaignResult, out: Path, *, preset: str, seed: int,
                  command: str, transport: str = "inproc", plots: bool = True
                  ) -> dict[str, Any]:
    """Write every output file of a run into ``out`` and return the JSON document."""
    out.mkdir(parents=True, exist_ok=True)
    aggs = aggregate(result.rows)
    ords = orderings(aggs, seed=seed)
    summ = summary_rows(aggs)
    pairs = paired_table(aggs, PAIRS, seed=seed)
    facet_cols = sorted({k for r in result.rows for k in r if k.startswith("f_")})
    with (out / "rows.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[*ROW_FIELDS, "exact_lineage", *facet_cols],
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(result.rows)
    scols = [k for k in summ[0] if k != "reasons"] + ["reasons"] if summ else []
    with (out / "summary.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=scols, extrasaction="ignore")
        w.writeheader()
        for r in summ:
            w.writerow({**r, "reasons": json.dumps(r["reasons"])})
    doc: dict[str, Any] = {
        "preset": preset, "seed": seed, "command": command, "transport": transport,
        "elapsed_s": round(result.elapsed_s, 2), "workers": result.workers,
        "jobs": result.jobs, "episodes": result.episodes,
        "scheduled_actions": len(result.rows), "python": platform.python_version(),
        "aggregates": summ, "comparisons": pairs,
        "orderings": [o.to_dict() for o in ords],
    }
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str))
    figures: list[str] = []
    if plots:
        from icore_lab.bench.planfence._plots import plot_all

        figures = plot_all(aggs, out)
    (out / "summary.md").write_text(render_markdown(aggs, ords, doc, figures))
    return doc


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(aggs: dict[tuple[str, str, str], Agg], ords: Sequence[Ordering],
                    doc: dict[str, Any], figures: Sequence[str]) -> str:
    """Render the markdown summary (tables per study, orderings, figures)."""
    md = [f"# PlanFence controlled replay: `{doc['preset']}`", "",
          f"Command: `{doc['command']}`  ",
          f"Seed {doc['seed']}, transport {doc['transport']}, {doc['workers']} worker(s), "
          f"{doc['episodes']} episodes, {doc['scheduled_actions']} scheduled actions, "
          f"{doc['elapsed_s']} s wall clock ("
          + ("virtual time" if doc["transport"] == "inproc" else
             "real time: owner services on 127.0.0.1; stall and bytes vary run to run")
          + ").", ""]
    n_ok = sum(o.reproduced is True for o in ords)
    md += ["## Paper orderings", "",
           f"{n_ok} of {len(ords)} reproduced." if ords else
           "No paper ordering covers this preset (it checks counts only).", ""]
    for o in ords:
        mark = {True: "REPRODUCED", False: "NOT reproduced", None: "not run"}[o.reproduced]
        md += [f"- **{o.id}: {mark}.** Paper: {o.paper}.  ", f"  Measured: {o.measured}."]
    md.append("")
    studies: list[str] = []
    for (s, _, _) in aggs:
        if s not in studies:
            studies.append(s)
    for s in studies:
        md += [f"## {s}", ""]
        rows = []
        for (st, c, p), a in aggs.items():
            if st != s:
                continue
            paper = ""
            if s == "table1" and p in PAPER_TABLE1:
                paper = f"{PAPER_TABLE1[p][0]} ms / {PAPER_TABLE1[p][1]} KiB"
            rows.append([c, p, f"{a.invalid}/{a.actions}",
                         f"{a.executed}/{a.actions}", f"{a.stall_ms:.1f}",
                         f"{a.stall_median:.1f}", f"{a.kib:.2f}",
                         f"{a.heads_per_validation:.1f}", paper])
        md.append(_md_table(["cell", "policy", "invalid", "completed", "stall ms/action",
                             "median stall", "KiB/action", "heads/validation",
                             "paper"], rows))
        md.append("")
        for f in figures:
            if Path(f).stem == s:
                md += [f"![{s}]({Path(f).name})", ""]
    return "\n".join(md)


__all__ = ["PAIRS", "render_markdown", "write_outputs"]
