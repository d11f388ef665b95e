"""The audit's batched trusted-import path gives the same audit as one import per call
(issue 29 item 4): real Who&When runs (generated traces: tests/lab/adapters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icore.adapters import AuditResult, audit_trace, load_trace
from icore.adapters._trace_builder import _XWriter

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
    _XWriter.batched = False
    try:
        one = [_fingerprint(audit_trace(t)) for t in load()]
    finally:
        _XWriter.batched = True
    assert batched
    return list(zip(batched, one, strict=True))


@pytest.mark.parametrize("name", REAL)
def test_real_runs_same_audit(shared_data: Path, name: str) -> None:
    """A Who&When run: same summary, diagnoses, timeline, notes and X either way."""
    path = shared_data / "who_and_when" / name
    for b, o in _both(lambda: [load_trace(path)]):
        assert b == o
        assert b["diagnoses"]  # the runs fail: there is something to diagnose
