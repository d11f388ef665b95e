"""Statistics of the controlled replay (planfence App. A.1; design.md 3.5).

* paired schedules: every policy replays the same schedules, so comparisons are
  differences of paired aggregates;
* cluster bootstrap: 2,000 draws that resample the three workflow families (clusters)
  with replacement and pool their templates;
* practical ties: a difference below 10% of the larger value is a tie;
* one-sided 95% exact-binomial (Clopper-Pearson) upper bounds for event counts
  (0/330 -> 0.90%, 0/30 -> 9.5%, 0/13,200 -> 0.023%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icore._extras import require

BOOTSTRAP_DRAWS = 2000
"""Bootstrap draws (App. A.1)."""

TIE_THRESHOLD = 0.10
"""Relative difference below which two costs are a practical tie (App. A.1)."""


def binomial_upper(events: int, n: int, *, confidence: float = 0.95) -> float:
    """One-sided exact-binomial (Clopper-Pearson) upper bound on the event rate.

    Args:
        events: observed events (e.g. invalid actions).
        n: trials (scheduled actions), > 0.
        confidence: one-sided confidence level.

    Returns:
        The upper bound in [0, 1] (1.0 when every trial is an event).

    Raises:
        ValueError: ``n <= 0`` or ``events`` outside ``[0, n]``.
    """
    if n <= 0 or not 0 <= events <= n:
        raise ValueError(f"need 0 <= events <= n and n > 0 (events={events}, n={n})")
    if events == n:
        return 1.0
    st = require("scipy.stats", "bench", feature="icore bench statistics")
    return float(st.beta.ppf(confidence, events + 1, n - events))


def practical_tie(a: float, b: float, *, threshold: float = TIE_THRESHOLD) -> bool:
    """True when ``a`` and ``b`` differ by less than ``threshold`` of the larger one."""
    hi = max(abs(a), abs(b))
    if hi == 0:
        return True
    return abs(a - b) / hi < threshold


def relative_reduction(baseline: float, new: float) -> float:
    """Return ``(baseline - new) / baseline`` (0 when the baseline is 0)."""
    return 0.0 if baseline == 0 else (baseline - new) / baseline


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """A paired cost comparison of policy A against policy B.

    Attributes:
        a / b: the two point estimates (pooled cost per action).
        diff: ``a - b``.
        ci_low / ci_high: 95% percentile interval of ``a - b`` over the cluster
            bootstrap.
        ratio: ``max / min`` (the runner-up/winner ratio of Fig. 3).
        tie: the 10% practical-tie rule.
        winner: ``"a"``, ``"b"`` or ``"tie"``.
    """

    a: float
    b: float
    diff: float
    ci_low: float
    ci_high: float
    ratio: float
    tie: bool
    winner: str

    def to_dict(self) -> dict[str, float | bool | str]:
        """Return a JSON-ready dict."""
        return {"a": self.a, "b": self.b, "diff": self.diff, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "ratio": self.ratio, "tie": self.tie,
                "winner": self.winner}


def cluster_bootstrap_diff(
    a: Mapping[str, Sequence[tuple[float, float]]],
    b: Mapping[str, Sequence[tuple[float, float]]],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
    threshold: float = TIE_THRESHOLD,
) -> PairedComparison:
    """Paired cluster bootstrap of a pooled per-action cost (A minus B).

    Args:
        a: cluster (family) -> per-template ``(total cost, actions)`` pairs of policy
            A, in the same template order as ``b`` (paired schedules).
        b: the same for policy B.
        draws: bootstrap draws.
        seed: generator seed (deterministic output).
        threshold: practical-tie threshold.

    Returns:
        :class:`PairedComparison`; the point estimates pool every template.

    Raises:
        ValueError: the clusters of A and B differ or a cluster is empty.
    """
    if set(a) != set(b) or not a:
        raise ValueError("A and B need the same non-empty clusters")
    np = require("numpy", "bench", feature="icore bench statistics")
    clusters = sorted(a)
    sums = np.zeros((len(clusters), 3))
    for i, c in enumerate(clusters):
        if len(a[c]) != len(b[c]) or not a[c]:
            raise ValueError(f"cluster {c!r} is empty or unpaired")
        sums[i, 0] = sum(x for x, _ in a[c])
        sums[i, 1] = sum(x for x, _ in b[c])
        sums[i, 2] = sum(n for _, n in a[c])
    tot = sums.sum(axis=0)
    pa, pb = tot[0] / tot[2], tot[1] / tot[2]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(clusters), size=(draws, len(clusters)))
    boot = sums[idx].sum(axis=1)
    diffs = (boot[:, 0] - boot[:, 1]) / boot[:, 2]
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    tie = practical_tie(pa, pb, threshold=threshold)
    lo_v, hi_v = min(pa, pb), max(pa, pb)
    ratio = float(hi_v / lo_v) if lo_v > 0 else float("inf") if hi_v > 0 else 1.0
    winner = "tie" if tie else ("a" if pa < pb else "b")
    return PairedComparison(float(pa), float(pb), float(pa - pb), float(lo), float(hi),
                            ratio, tie, winner)


__all__ = [
    "BOOTSTRAP_DRAWS",
    "TIE_THRESHOLD",
    "PairedComparison",
    "binomial_upper",
    "cluster_bootstrap_diff",
    "practical_tie",
    "relative_reduction",
]
