"""The audit's batched trusted-import path gives the same audit as one import per call
(issue 29 item 4): real Who&When runs and generated OTLP / JSONL traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icore.adapters import AuditResult, audit_trace, load_jsonl, load_otlp_runs, load_trace
from icore.adapters._audit import _Builder
from icore.bench.micro._import import write_jsonl, write_otlp

REAL = ["Hand-Crafted/13.json", "Hand-Crafted/17.json", "Algorithm-Generated/103.json",
        "Algorithm-Generated/106.json"]


def _fingerprint(r: AuditResult) -> dict[str, Any]:
    """Everything the audit concludes (its wall time aside) and X itself."""
    x = r.state
    return {
        "summary": r.summary(), "diagnoses": r.diagnoses, "timeline": list(r.timeline),
        "notes": [(e.seq, e.kind, e.body) for e in r.notes], "final": r.final,
        "unsupported": r.unsupported, "flags": dict(x.flags), "places": dict(r.flag_places),
        "obligations": dict(x.obligations), "assertions": dict(x.assertions),
        "pi": dict(x.justifications), "certs": dict(x.certificates), "seq": x.seq,
        "evals": {o: x.evaluation(o) for o in x.obligations},
    }


def _both(load: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    batched = [_fingerprint(audit_trace(t)) for t in load()]
    _Builder.batched = False
    try:
        one = [_fingerprint(audit_trace(t)) for t in load()]
    finally:
        _Builder.batched = True
    assert batched
    return list(zip(batched, one, strict=True))


@pytest.mark.parametrize("name", REAL)
def test_real_runs_same_audit(shared_data: Path, name: str) -> None:
    """A Who&When run: same summary, diagnoses, timeline, notes and X either way."""
    path = shared_data / "who_and_when" / name
    for b, o in _both(lambda: [load_trace(path)]):
        assert b == o
        assert b["diagnoses"]  # the runs fail: there is something to diagnose


def test_generated_otlp_same_audit(tmp_path: Path) -> None:
    """A generated OpenInference OTLP trace (agents, LLM/tool calls, handoffs)."""
    p = tmp_path / "t.json"
    write_otlp(p, 0.25, seed=3)
    for b, o in _both(lambda: load_otlp_runs(p)):
        assert b == o
        x_final = b["final"]
        assert b["summary"].steps > 300 and 0.0 <= x_final.cq <= 1.0


def test_generated_jsonl_same_audit(tmp_path: Path) -> None:
    """A generated JSONL run (instructions, outputs, tool outputs with failures)."""
    p = tmp_path / "t.jsonl"
    write_jsonl(p, 600, seed=5)
    for b, o in _both(lambda: [load_jsonl(p)]):
        assert b == o
        assert b["summary"].steps == 599 and b["diagnoses"]


def test_incremental_metrics_equal_full_recompute(tmp_path: Path) -> None:
    """The metrics kept incrementally by the batched path equal a full recompute."""
    p = tmp_path / "t.json"
    write_otlp(p, 0.1, seed=11)
    for t in load_otlp_runs(p):
        r = audit_trace(t)
        assert r.state.metrics() == r.state.recompute_metrics()
