"""What the trace audit keeps per step, kept small (issue 29), reads as before.

The cq timeline as runs of equal points, an agent's output digests as sorted numbers,
the outputs since the last ledger as ids and flag bytes.
"""

from __future__ import annotations

import math
from dataclasses import astuple

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import MetricPoint
from icore.adapters._results import Timeline
from icore.adapters._trace_places import DigestSet, OutputsSince

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


_DIGEST = st.integers(0, 2**64 - 1).map("{:016x}".format) | st.sampled_from(
    ["None", "", "0x00000000000000", "+00000000000000a", "000000000000000A",
     "0000_00000000000", " 00000000000000a", "ffffffffffffffff", "0000000000000000"])


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "discard", "in"]), _DIGEST),
                    max_size=80), merge_at=st.sampled_from([1, 3, 2048]))
def test_digest_set_reads_as_a_set(ops: list[tuple[str, str]], merge_at: int) -> None:
    small = type("Small", (DigestSet,), {"MERGE_AT": merge_at, "__slots__": ()})
    got, want = small(), set()
    for op, d in ops:
        if op == "add":
            got.add(d)
            want.add(d)
        elif op == "discard":
            got.discard(d)
            want.discard(d)
        assert (d in got) == (d in want)
        assert len(got) == len(want)
    assert all(d in got for d in want)
    assert 5 not in got


def test_outputs_since_keeps_each_row() -> None:
    rows = [("m1", True, False), ("m2", False, True), ("m3", True, True), ("m4", False, False)]
    o = OutputsSince()
    for r in rows:
        o.append(*r)
    assert list(o.rows()) == rows and o.events == ["m1", "m2", "m3", "m4"]
    assert all(type(p) is bool and type(q) is bool for _, p, q in o.rows())
