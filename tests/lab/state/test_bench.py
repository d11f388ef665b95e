"""The state benchmark harness runs end to end at tiny sizes (figures are not asserted)."""

from __future__ import annotations

from icore.state import State
from icore_lab.bench.micro._state import bench_declaration, populate, run


def test_bench_runs_and_reports():
    lines: list[str] = []
    res = run(
        (50,), samples=5, speedup_at=100, rebuild_entries=120, memory_at=20,
        trace_sizes=(200,), trial_at=(200,), echo=lines.append,
    )
    assert len(res.audits) == 1 and res.audits[0].proposals == 15
    assert res.rebuild_entries >= 120 and res.speedup > 0 and res.bytes_per_obligation > 0
    assert any("speed-up" in ln for ln in lines) and any("rebuild" in ln for ln in lines)
    assert len(res.traces) == 1 and any("200-event generic JSONL run" in ln for ln in lines)


def test_populate_builds_sound_state():
    x = State(bench_declaration())
    populate(x, 1500)
    assert len(x.obligations) == 1500
    assert x.metrics() == x.recompute_metrics()
    assert x.metrics().snd == 1.0
