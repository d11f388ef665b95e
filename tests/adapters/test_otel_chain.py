"""OpenTelemetry gate and human-answer spans carry a digest and a chain link (#29).

``OtelExporter`` writes ``icore.gate.digest`` / ``icore.approval.digest`` (the span's
``icore.gate.*`` / ``icore.approval.*`` attributes hashed) and ``icore.chain.writer``,
``.seq``, ``.prev``. The OTLP importer recomputes them: an edited span makes its action
``INVALID``; a span lost or repeated breaks the exporter's chain (checked in ``seq``
order: span order in a file is the exporter's batching), and every action is
``INVALID``. Spans without digests (other exporters) are read as before.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from icore.adapters import OtelExporter, make_provider, otlp_json
from icore.cli import app

from .test_otel_approvals import _run


@pytest.fixture
def doc() -> Iterator[dict[str, Any]]:
    """Two protected ``book`` calls, each put to a human (approved, rejected), as OTLP."""
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    try:
        _run(OtelExporter(tracer_provider=provider, capture_content=True), [True, False])
        yield otlp_json(list(spans.get_finished_spans()))
    finally:
        provider.shutdown()


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def _audit(tmp_path: Path, doc: dict[str, Any], name: str) -> tuple[int, dict[str, Any]]:
    p = tmp_path / f"{name}.otlp.json"
    p.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    js = tmp_path / f"{name}.json"
    res = CliRunner().invoke(app, ["audit", str(p), "--no-report", "--json", str(js),
                                   "--fail-on", "invalid"])
    return res.exit_code, json.loads(js.read_text())["runs"][0]


def _gates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in _spans(doc) if "icore.gate.outcome" in _attrs(s)]


def test_the_exported_spans_are_sealed_and_audit_clean(doc: dict[str, Any],
                                                       tmp_path: Path) -> None:
    sealed = [_attrs(s) for s in _spans(doc)
              if "icore.gate.digest" in _attrs(s) or "icore.approval.digest" in _attrs(s)]
    assert len(sealed) == 4
    assert sorted(int(a["icore.chain.seq"]["intValue"]) for a in sealed) == [1, 2, 3, 4]
    code, run = _audit(tmp_path, doc, "honest")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["valid", "valid"]
    assert not [w for w in run.get("warnings", ()) if "digest" in w or "chain" in w]


def test_an_edited_gate_span_makes_its_action_invalid(doc: dict[str, Any],
                                                      tmp_path: Path) -> None:
    bad = copy.deepcopy(doc)
    gate = _gates(bad)[0]
    for a in gate["attributes"]:
        if a["key"] == "icore.gate.policy":
            a["value"] = {"stringValue": "edited"}
    code, run = _audit(tmp_path, bad, "edited")
    assert code == 3
    assert sorted(lv["status"] for lv in run["lineage"]) == ["INVALID", "valid"]
    assert any("does not match its digest" in w for w in run["warnings"])


def test_a_lost_gate_span_breaks_the_chain(doc: dict[str, Any], tmp_path: Path) -> None:
    bad = copy.deepcopy(doc)
    first = min(_gates(bad), key=lambda s: int(_attrs(s)["icore.chain.seq"]["intValue"]))
    for rs in bad["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if s is not first]
    code, run = _audit(tmp_path, bad, "lost")
    assert code == 3 and {lv["status"] for lv in run["lineage"]} == {"INVALID"}
    assert any("chain of writer" in w and "breaks at span" in w for w in run["warnings"])


def test_spans_without_digests_audit_as_before(doc: dict[str, Any], tmp_path: Path) -> None:
    old = copy.deepcopy(doc)
    for s in _spans(old):
        s["attributes"] = [a for a in s["attributes"] if not a["key"].endswith(".digest")
                           and not a["key"].startswith("icore.chain.")]
    code, run = _audit(tmp_path, old, "old")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["valid", "valid"]
    assert not [w for w in run.get("warnings", ()) if "digest" in w or "chain" in w]
