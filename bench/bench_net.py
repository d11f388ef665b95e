"""Transport benchmark as a script: same figures as ``icore bench net``, written as JSON.

Usage::

    .venv/bin/python bench/bench_net.py [--quick] [--out results/bench_net.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path

from icore_lab.bench.micro._net import PAPER_KIB_PER_ACTION, run_fig2_virtual, run_validation


def main() -> None:
    """Run both parts and write one JSON document."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("results/bench_net.json"))
    ns = ap.parse_args()
    n, seconds, samples = (200, 0.5, 5) if ns.quick else (2000, 3.0, 30)
    figs, loop2 = run_validation(n=n, seconds=seconds)
    traces, loss = run_fig2_virtual(samples=samples)
    doc = {
        "validation": [{**asdict(f), "cpu_bound_per_s": f.cpu_bound_per_s} for f in figs],
        "paper_kib_per_action": PAPER_KIB_PER_ACTION,
        "fig2_loopback_p50_ms": {k: statistics.median(v) for k, v in loop2.items()},
        "fig2_traces_p50_ms": {nm: {k: statistics.median(v) for k, v in d.items()}
                               for nm, d in traces.items()},
        "fig2b_loss_p50_ms": {k: statistics.median(v) for k, v in loss.items()},
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(doc, indent=1))
    for f in figs:
        print(f"{f.mode}: p50 {f.p50_ms:.3f} ms, p99 {f.p99_ms:.3f} ms, "
              f"{f.per_s_8:,.0f} validations/s (8 executors), "
              f"{f.bytes_per_validation:.0f} B/validation, "
              f"CPU-bound {f.cpu_bound_per_s:,.0f}/s")
    print(f"written {ns.out}")


if __name__ == "__main__":
    main()
