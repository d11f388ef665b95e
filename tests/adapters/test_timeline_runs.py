"""The cq timeline kept as runs of equal points (issue 29) reads back every point."""

from __future__ import annotations

import math
from dataclasses import astuple

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import MetricPoint
from icore.adapters._results import Timeline

_NUM = st.sampled_from([0.0, -0.0, 0.5, 1.0, math.nan, math.inf]) | st.floats()


def _same(a: MetricPoint, b: MetricPoint) -> bool:
    # the same numbers bit for bit (NaN is NaN, -0.0 is not 0.0)
    return all(x == y if not isinstance(x, float) else
               (math.isnan(x) and math.isnan(y)) or
               (x == y and math.copysign(1, x) == math.copysign(1, y))
               for x, y in zip(astuple(a), astuple(b), strict=True))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-2, 3), _NUM, _NUM, _NUM, st.integers(0, 2),
                               st.integers(0, 2), st.integers(1, 4)), max_size=40),
       start=st.integers(-3, 10**12))
def test_points_read_back_exactly(rows: list[tuple[int, float, float, float, int, int, int]],
                                  start: int) -> None:
    pts = []
    step = start
    for gap, snd, astab, cq, flags, stalls, times in rows:
        for _ in range(times):  # repeated points: one row while their steps run on
            step += gap  # 1: the next step; 0, negative, 2+: a new row
            pts.append(MetricPoint(step, snd, astab, cq, flags, stalls))
    t = Timeline(pts)
    assert len(t) == len(pts)
    assert all(_same(a, b) for a, b in zip(t, pts, strict=True))
    assert all(_same(t[i], pts[i]) for i in range(-len(pts), len(pts)))
    assert len(t.cqs()) == len(pts)
    assert all(_same(a, b) for a, b in zip(t[1:6], pts[1:6], strict=True))


def test_equal_points_at_consecutive_steps_share_a_row() -> None:
    t = Timeline()
    for i in range(100):
        t.append(i, 1.0, 0.5, 0.75, 0, 0)
    t.append(100, 1.0, 0.5, 0.75, 1, 0)
    t.append(102, 1.0, 0.5, 0.75, 1, 0)  # a step skipped: a new row
    t.append(103, -0.0, 0.5, 0.75, 1, 0)
    t.append(104, 0.0, 0.5, 0.75, 1, 0)  # not the same number as -0.0
    assert len(t._first) == 5 and len(t) == 104
    assert t[99] == MetricPoint(99, 1.0, 0.5, 0.75, 0, 0)
    assert math.copysign(1, t[102].snd) == -1 and math.copysign(1, t[103].snd) == 1
