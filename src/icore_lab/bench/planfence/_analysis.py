"""Aggregates and paired comparisons of a run's rows (the orderings: :mod:`._orderings`).

Implements planfence Sec. 5, App. A.1, A.6, B, C.

Every ordering is checked on the numbers of the run and stated as reproduced or not, next
to the paper's numbers. Cost per action is the pooled mean (total over scheduled actions,
blocked ones included, as the paper keeps every action in the denominator); paired
comparisons bootstrap it over the three families (2,000 draws) and apply the 10%
practical-tie rule.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icore_lab.bench.planfence._replay_stats import (
    PairedComparison,
    binomial_upper,
    cluster_bootstrap_diff,
)

EXACT = ("centralized_lineage", "metadata_sync_k1", "per_key_all_key", "batched_all_key",
         "planfence", "majority_replica", "all_replica")
"""Labels of the exact-lineage policies."""


@dataclass
class Agg:
    """Aggregate of one (study, cell, policy).

    Attributes: counts over scheduled actions, pooled costs per action, the one-sided
    95% exact-binomial upper bound of the invalid rate, and per-template sums (family ->
    list of (template key, stall, bytes, actions)) for the cluster bootstrap.
    """

    study: str
    cell: str
    policy: str
    facets: dict[str, Any]
    exact_lineage: bool
    actions: int = 0
    invalid: int = 0
    executed: int = 0
    raced: int = 0
    replanned: int = 0
    stall_sum: float = 0.0
    bytes_sum: int = 0
    heads_sum: int = 0
    rpcs_sum: int = 0
    validations: int = 0
    artifact_fetches: int = 0
    artifact_violations: int = 0
    stalls: list[float] = field(default_factory=list)
    per_template: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)

    @property
    def blocked(self) -> int:
        """Scheduled actions whose tool did not run."""
        return self.actions - self.executed

    @property
    def stall_ms(self) -> float:
        """Pooled stall per scheduled action, ms."""
        return self.stall_sum / self.actions if self.actions else 0.0

    @property
    def kib(self) -> float:
        """Pooled traffic per scheduled action, KiB."""
        return self.bytes_sum / 1024 / self.actions if self.actions else 0.0

    @property
    def stall_median(self) -> float:
        """Median per-action stall, ms."""
        return statistics.median(self.stalls) if self.stalls else 0.0

    @property
    def heads_per_validation(self) -> float:
        """Head items checked per gate validation."""
        return self.heads_sum / self.validations if self.validations else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON/CSV-ready summary."""
        return {
            "study": self.study, "cell": self.cell, "policy": self.policy,
            "exact_lineage": self.exact_lineage, "actions": self.actions,
            "invalid": self.invalid, "invalid_upper95": binomial_upper(self.invalid,
                                                                       self.actions)
            if self.actions else 1.0,
            "completed": self.executed, "blocked": self.blocked, "raced": self.raced,
            "replanned": self.replanned, "stall_ms_per_action": round(self.stall_ms, 3),
            "stall_ms_median": round(self.stall_median, 3),
            "kib_per_action": round(self.kib, 3),
            "rpcs_per_action": round(self.rpcs_sum / self.actions, 3) if self.actions else 0,
            "heads_per_validation": round(self.heads_per_validation, 3),
            "heads_per_action": round(self.heads_sum / self.actions, 3) if self.actions
            else 0,
            "reasons": dict(sorted(self.reasons.items())),
            "artifact_fetches": self.artifact_fetches,
            "artifact_violations": self.artifact_violations,
            **{f"f_{k}": v for k, v in self.facets.items()},
        }


def aggregate(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], Agg]:
    """Group rows by (study, cell, policy)."""
    out: dict[tuple[str, str, str], Agg] = {}
    for r in rows:
        k = (r["study"], r["cell"], r["policy"])
        a = out.get(k)
        if a is None:
            facets = {kk[2:]: v for kk, v in r.items() if kk.startswith("f_")}
            a = out[k] = Agg(r["study"], r["cell"], r["policy"], facets, r["exact_lineage"])
        a.actions += 1
        a.invalid += int(r["invalid"])
        a.executed += int(r["executed"])
        a.raced += int(r["raced"])
        a.replanned += int(r["replanned"])
        a.stall_sum += r["stall_ms"]
        a.bytes_sum += r["bytes"]
        a.heads_sum += r["heads_checked"]
        a.rpcs_sum += r["rpcs"]
        a.validations += r["validations"]
        a.artifact_fetches += int(r.get("artifact_fetches", 0))
        a.artifact_violations += int(r.get("artifact_violations", 0))
        a.stalls.append(r["stall_ms"])
        a.reasons[r["reason"]] = a.reasons.get(r["reason"], 0) + 1
        t = a.per_template.setdefault(r["family"], {})
        acc = t.setdefault(f"{r['template']}#{r['race_seed']}", [0.0, 0.0, 0.0])
        acc[0] += r["stall_ms"]
        acc[1] += r["bytes"]
        acc[2] += 1
    return out


def compare(aggs: dict[tuple[str, str, str], Agg], study: str, cell: str, a: str, b: str,
            metric: str = "stall", *, seed: int = 0) -> PairedComparison | None:
    """Paired cluster-bootstrap comparison of policy ``a`` vs ``b`` in one cell.

    Args:
        aggs: (study, cell, policy) -> aggregate (:func:`aggregate`).
        study: the study.
        cell: the cell.
        a: policy A's label.
        b: policy B's label.
        metric: ``"stall"`` (ms/action) or ``"traffic"`` (KiB/action).
        seed: bootstrap seed.

    Returns:
        The comparison, or None when either policy has no aggregate in the cell.
    """
    x, y = aggs.get((study, cell, a)), aggs.get((study, cell, b))
    if x is None or y is None:
        return None
    i = 0 if metric == "stall" else 1
    scale = 1.0 if metric == "stall" else 1 / 1024

    def clusters(g: Agg) -> dict[str, list[tuple[float, float]]]:
        return {fam: [(v[i] * scale, v[2]) for _, v in sorted(t.items())]
                for fam, t in g.per_template.items()}

    try:
        return cluster_bootstrap_diff(clusters(x), clusters(y), seed=seed)
    except ValueError:
        return None


def summary_rows(aggs: dict[tuple[str, str, str], Agg]) -> list[dict[str, Any]]:
    """Aggregates as dicts, in study/cell/policy order of first appearance."""
    return [a.to_dict() for a in aggs.values()]


__all__ = ["EXACT", "Agg", "aggregate", "compare", "summary_rows"]
