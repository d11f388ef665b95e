"""A run paused at an ``interrupt()`` is paused on both paths (issue 29): audited from
the JSONL recording (a last ``thought`` with ``pause: true``) and audited again from the
OpenTelemetry export of that audit (the root span's ``icore.paused`` marker), never "the
run ended with an empty final answer"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.adapters import AdapterError, parse_otlp
from icore.cli import app

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

_PAUSED = ['{"agent": "user", "kind": "task", "content": "Book room R101"}',
           '{"agent": "booker", "kind": "output", "content": "calls book_room"}',
           '{"agent": "booker", "kind": "thought", "content": "paused at interrupt()",'
           ' "pause": true}']


def _audit(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["audit", *args], env={"COLUMNS": "200"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


def _run(out: Path, code: int, path: Path) -> dict[str, Any]:
    assert code == 0
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert len(runs) == 1, runs
    assert runs[0]["file"] == str(path)
    return dict(runs[0])


@pytest.mark.parametrize("ended", [False, True])
def test_a_paused_run_is_paused_from_jsonl_and_from_its_otel_export(
        tmp_path: Path, ended: bool) -> None:
    """Paused from the JSONL trace, and again from the OTLP file its audit exported;
    a run that ended is terminated on both paths (no ``paused``)."""
    lines = _PAUSED + ['{"agent": "booker", "kind": "termination", "final_answer": '
                       '"booked", "content": "done"}'] * ended
    trace = tmp_path / "run.jsonl"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spans = tmp_path / "run.otlp.jsonl"
    code, text = _audit(str(trace), "--no-report", "--json", str(tmp_path / "a.json"),
                        "--otlp-endpoint", f"file:{spans}")
    first = _run(tmp_path / "a.json", code, trace)["summary"]
    code, again_text = _audit(str(spans), "--no-report", "--json", str(tmp_path / "b.json"))
    again = _run(tmp_path / "b.json", code, spans)
    s = again["summary"]
    if ended:
        assert "paused" not in first and "paused" not in s
        assert first["terminated"] and s["terminated"]
        return
    assert first["paused"] is True and s["paused"] is True, (first, s)
    assert s["terminated"] is False and s["succeeded"] is None and again["diagnoses"] == []
    assert "waiting for a human" in text and "waiting for a human" in again_text


def _doc(value: Any) -> str:
    span = {"traceId": "ab" * 16, "spanId": "01" * 8, "name": "icore.audit r",
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000", "status": {"code": 1},
            "attributes": [{"key": "openinference.span.kind",
                            "value": {"stringValue": "EVALUATOR"}},
                           {"key": "icore.paused", "value": value}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def test_the_pause_marker_must_be_a_boolean() -> None:
    t = parse_otlp(_doc({"boolValue": True}), file="p.otlp.json")
    assert t.steps[-1].pause and not any(s.terminates for s in t.steps)
    assert t.succeeded is None
    with pytest.raises(AdapterError) as ei:
        parse_otlp(_doc({"stringValue": "yes"}), file="p.otlp.json")
    assert ei.value.file == "p.otlp.json" and ei.value.field.endswith(".icore.paused")
