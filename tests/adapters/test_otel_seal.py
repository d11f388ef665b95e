"""Each trace's chain of gate spans is its own, sealed on its root: a lost last span is seen.

The chain (``icore.chain.*``) shows a span lost between two others, not one lost after
the last: nothing follows it. So the exporter seals each trace's chain
(``icore.chain_end.*``: how many spans it holds, the link of its last) on the trace's
root span at its end: a live run's span, a root ``execute_tool`` span of
:meth:`OtelExporter.protect`, a gate or answer span with no parent. The chain is per
trace: the audit reads each trace of a file as its own run, and one chain over an
exporter's several traces read as broken in every trace after the first (an honest
export failed ``--fail-on invalid``). Once a seal is there every gate and human-answer
span must carry its digest and link. An export without a seal reads as before.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from icore.adapters import OtelExporter, make_provider, otlp_json
from icore.cli import app

from .test_otel import _live, _write
from .test_otel_approvals import _run
from .test_otel_chain import _attrs, _spans


def _export(body: Any) -> dict[str, Any]:
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    try:
        body(OtelExporter(tracer_provider=provider, capture_content=True))
        return otlp_json(list(spans.get_finished_spans()))
    finally:
        provider.shutdown()


def _root_calls(otel: OtelExporter, answers: Sequence[bool]) -> None:
    """One protected call per answer at the root (each its own trace)."""
    _run(otel, answers, root=True)


def _audit(tmp_path: Path, doc: dict[str, Any], name: str
           ) -> tuple[int, list[dict[str, Any]]]:
    p = tmp_path / f"{name}.otlp.json"
    p.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return _audit_file(p)


def _audit_file(p: Path) -> tuple[int, list[dict[str, Any]]]:
    js = p.with_suffix(".out.json")
    res = CliRunner().invoke(app, ["audit", str(p), "--no-report", "--json", str(js),
                                   "--fail-on", "invalid"])
    return res.exit_code, json.loads(js.read_text())["runs"]


def _statuses(runs: list[dict[str, Any]]) -> list[str]:
    return [lv["status"] for r in runs for lv in r["lineage"]]


def _without_last_chained(doc: dict[str, Any]) -> dict[str, Any]:
    bad = copy.deepcopy(doc)
    last = max((s for s in _spans(bad) if "icore.chain.seq" in _attrs(s)),
               key=lambda s: int(_attrs(s)["icore.chain.seq"]["intValue"]))
    for rs in bad["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if s is not last]
    return bad


def test_one_exporter_s_several_traces_each_audit_clean(tmp_path: Path) -> None:
    """Two agent turns (two traces) through one exporter: each run's chain is whole
    (one chain over both read as broken in the second run: INVALID, exit 3)."""
    doc = _export(lambda ex: (_run(ex, [True, False]), _run(ex, [True])))
    code, runs = _audit(tmp_path, doc, "two")
    assert len(runs) == 2
    assert code == 0 and _statuses(runs) == ["valid"] * 3
    assert not [w for r in runs for w in r.get("warnings", ()) if "chain" in w]


def test_a_root_call_s_trace_is_sealed_and_its_lost_last_span_seen(tmp_path: Path
                                                                     ) -> None:
    doc = _export(lambda ex: _root_calls(ex, [True]))
    (tool,) = [s for s in _spans(doc) if s["name"] == "execute_tool book"]
    assert int(_attrs(tool)["icore.chain_end.lines"]["intValue"]) == 2  # gate, answer
    code, runs = _audit(tmp_path, doc, "honest")
    assert code == 0 and _statuses(runs) == ["valid"]
    code, runs = _audit(tmp_path, _without_last_chained(doc), "lost")  # the answer
    assert code == 3 and _statuses(runs) == ["INVALID"]
    assert any("breaks at the run's end" in w for w in runs[0]["warnings"])


def test_several_root_calls_each_audit_clean(tmp_path: Path) -> None:
    code, runs = _audit(tmp_path, _export(lambda ex: _root_calls(ex, [True, False, True])),
                        "calls")
    assert code == 0 and len(runs) == 3 and "INVALID" not in _statuses(runs)


def test_digests_stripped_beside_a_seal_are_edits(tmp_path: Path) -> None:
    bad = _export(lambda ex: _root_calls(ex, [False]))
    for s in _spans(bad):
        s["attributes"] = [a for a in s["attributes"] if not a["key"].endswith(".digest")
                           and not a["key"].startswith("icore.chain.")]
    code, runs = _audit(tmp_path, bad, "stripped")
    assert code == 3 and _statuses(runs) == ["INVALID"]
    assert any("promises one" in w for w in runs[0]["warnings"])


def test_a_live_run_span_carries_the_seal(tmp_path: Path) -> None:
    """The run span seals the run's chain; a lost gate span fails the audit."""
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    try:
        _live(tmp_path, OtelExporter(tracer_provider=provider), "planfence")
        got = list(spans.get_finished_spans())
    finally:
        provider.shutdown()
    (run,) = [s for s in got if s.parent is None]
    chained = [s for s in got if "icore.chain.seq" in (s.attributes or {})]
    assert chained and dict(run.attributes or {})["icore.chain_end.lines"] == len(chained)
    last = max(chained, key=lambda s: int((s.attributes or {})["icore.chain.seq"]))
    code, runs = _audit_file(_write(got, tmp_path / "live.otlp.jsonl"))
    assert code == 0 and "INVALID" not in _statuses(runs)
    lost = _write([s for s in got if s is not last], tmp_path / "lost.otlp.jsonl")
    res = CliRunner().invoke(app, ["audit", str(lost), "--no-report", "--fail-on",
                                   "invalid"])
    assert res.exit_code in (1, 3)  # the live replay or the seal refuses it
