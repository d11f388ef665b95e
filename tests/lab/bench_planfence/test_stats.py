"""Statistics helpers (planfence App. A.1)."""

from __future__ import annotations

import pytest

from icore_lab.bench import binomial_upper, cluster_bootstrap_diff, practical_tie


@pytest.mark.parametrize(("n", "want"), [(330, 0.0090), (30, 0.095), (13_200, 0.00023)])
def test_zero_event_bounds_match_the_paper(n: int, want: float) -> None:
    """0/330 -> 0.90%, 0/30 -> 9.5%, 0/13,200 -> 0.023% (one-sided 95%)."""
    assert binomial_upper(0, n) == pytest.approx(want, rel=0.02)
    assert binomial_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-6)


def test_binomial_upper_general() -> None:
    """All events -> 1; bounds grow with events; bad input raises."""
    assert binomial_upper(10, 10) == 1.0
    assert binomial_upper(1, 100) > binomial_upper(0, 100)
    with pytest.raises(ValueError, match="events"):
        binomial_upper(5, 4)


def test_practical_tie() -> None:
    """Below 10% of the larger value is a tie."""
    assert practical_tie(100, 91)
    assert not practical_tie(100, 89)
    assert practical_tie(0, 0)


def _clusters(vals: dict[str, list[float]]) -> dict[str, list[tuple[float, float]]]:
    return {k: [(v, 1.0) for v in vs] for k, vs in vals.items()}


def test_bootstrap_identical_is_zero_tie() -> None:
    """Identical paired costs: difference 0, interval [0, 0], a tie."""
    a = _clusters({"f1": [1, 2], "f2": [3, 4], "f3": [5, 6]})
    c = cluster_bootstrap_diff(a, a, seed=1)
    assert c.diff == 0 and c.ci_low == 0 and c.ci_high == 0 and c.tie


def test_bootstrap_constant_shift() -> None:
    """A constant per-action shift gives that shift with a degenerate interval."""
    a = _clusters({"f1": [1, 2], "f2": [3, 4], "f3": [5, 6]})
    b = _clusters({"f1": [3, 4], "f2": [5, 6], "f3": [7, 8]})
    c = cluster_bootstrap_diff(a, b, seed=1)
    assert c.diff == pytest.approx(-2.0)
    assert c.ci_low == pytest.approx(-2.0) and c.ci_high == pytest.approx(-2.0)
    assert c.winner == "a" and not c.tie
    assert c.ratio == pytest.approx(5.5 / 3.5)


def test_bootstrap_resamples_families_deterministically() -> None:
    """Family-level resampling: the interval spans the per-family differences, and the
    same seed gives the same interval."""
    a = _clusters({"f1": [1, 1], "f2": [1, 1], "f3": [1, 1]})
    b = _clusters({"f1": [2, 2], "f2": [4, 4], "f3": [6, 6]})
    c1 = cluster_bootstrap_diff(a, b, seed=3)
    c2 = cluster_bootstrap_diff(a, b, seed=3)
    assert c1 == c2
    assert -5.0 <= c1.ci_low < c1.diff < c1.ci_high <= -1.0
    assert c1.diff == pytest.approx(-3.0)


def test_bootstrap_rejects_unpaired() -> None:
    """Clusters must match."""
    with pytest.raises(ValueError, match="clusters"):
        cluster_bootstrap_diff(_clusters({"f1": [1]}), _clusters({"f2": [1]}))


def test_ordering_verdict_is_a_plain_bool() -> None:
    """A verdict computed with numpy comparisons is stored as a bool: it counts as
    reproduced and serializes as JSON true/false, not the string "True"."""
    import json

    import numpy as np

    from icore_lab.bench import Ordering

    o = Ordering("x", "paper", "measured", np.float64(1.0) < np.float64(2.0))  # type: ignore[arg-type]
    assert o.reproduced is True
    assert json.loads(json.dumps(o.to_dict()))["reproduced"] is True
    assert Ordering("y", "p", "m", None).reproduced is None
