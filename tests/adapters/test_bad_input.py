"""Issue 29: every bad value the importers met on main ends in an AdapterError naming the
file and the field, never another exception; big files are streamed (same result as the
in-memory parser) and refused over the size limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import AdapterError, audit_file, load_jsonl, parse_jsonl, parse_otlp
from icore.adapters._otel_import import iter_file_spans, load_otlp_runs, parse_spans


def _sp(sid: int, parent: int | None = None, *, trace: str = "ab" * 16, **over: Any
        ) -> dict[str, Any]:
    d: dict[str, Any] = {"traceId": trace, "spanId": f"{sid:016x}", "name": f"s{sid}",
                         "startTimeUnixNano": str(1000 + sid), "endTimeUnixNano": str(2000 + sid),
                         "attributes": [{"key": "openinference.span.kind",
                                         "value": {"stringValue": "AGENT"}},
                                        {"key": "agent.name", "value": {"stringValue": "a"}}]}
    if parent is not None:
        d["parentSpanId"] = f"{parent:016x}"
    d.update(over)
    return d


def _otlp(*spans: dict[str, Any]) -> str:  # raw non-ASCII, as exporters write it
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "t"}, "spans": list(spans)}]}]}, ensure_ascii=False)


@pytest.mark.parametrize(("over", "field"), [
    ({"startTimeUnixNano": float("nan")}, "startTimeUnixNano"),
    ({"startTimeUnixNano": float("inf")}, "startTimeUnixNano"),
    ({"endTimeUnixNano": "²"}, "endTimeUnixNano"),
    ({"startTimeUnixNano": "2026-01-01T00:00:00"}, "startTimeUnixNano"),  # naive ISO
    ({"startTimeUnixNano": -5}, "startTimeUnixNano"),
    ({"startTimeUnixNano": 10**30}, "startTimeUnixNano"),
    ({"events": [{"name": "e", "timeUnixNano": "NaN"}]}, "events[0].timeUnixNano"),
    ({"attributes": [{"key": "k", "value": {"doubleValue": "abc"}}]}, "attributes[0].value"),
    ({"attributes": [{"key": "k", "value": {"intValue": 1e400}}]}, "attributes[0].value"),
    ({"attributes": [{"key": "k", "value": {"intValue": "9" * 5000}}]}, "attributes[0].value"),
    ({"attributes": [{"key": "k", "value": {"doubleValue": float("nan")}}]},
     "attributes[0].value"),
    ({"attributes": [{"key": "k", "value": {"boolValue": "maybe"}}]}, "attributes[0].value"),
])
def test_otlp_numbers_and_times_are_validated(over: dict[str, Any], field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(_otlp(_sp(1, **over)), file="t.otlp.json")
    assert e.value.file == "t.otlp.json" and e.value.field.endswith(field), e.value


def test_zoned_iso_and_digit_strings_still_read() -> None:
    t = parse_otlp(_otlp(_sp(1, startTimeUnixNano="2026-01-01T00:00:00Z",
                             endTimeUnixNano="2026-01-01T00:00:01.5+00:00")))
    assert t.steps[0].kind.value == "task"
    assert parse_spans(_otlp(_sp(1, attributes=[
        {"key": "k", "value": {"doubleValue": "1.5"}},
        {"key": "i", "value": {"intValue": "-7"}}])))[0].attributes == {"k": 1.5, "i": -7}


@pytest.mark.parametrize(("spans", "named"), [
    ([_sp(1, 2), _sp(2, 1)], ("0000000000000001", "0000000000000002")),  # a 2-cycle
    ([_sp(1, 1)], ("0000000000000001",)),  # a self-parent
    ([_sp(1), _sp(2, 3), _sp(3, 2)], ("0000000000000002", "0000000000000003")),  # + a root
])
def test_parent_cycles_are_an_input_error_naming_the_spans(
        spans: list[dict[str, Any]], named: tuple[str, ...]) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(_otlp(*spans), file="c.otlp.json")
    assert "cycle" in e.value.problem and all(n in e.value.problem for n in named)


def test_a_cycle_refuses_the_whole_file_as_documented(tmp_path: Path) -> None:
    """Documented choice: one cyclic trace refuses the file (its good traces too)."""
    p = tmp_path / "two.otlp.json"
    p.write_text(_otlp(_sp(1), _sp(5, 6, trace="cd" * 16), _sp(6, 5, trace="cd" * 16)))
    with pytest.raises(AdapterError, match="cycle in trace " + "cd" * 16):
        load_otlp_runs(p)


def test_json_lines_recursion_and_line_separators(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(AdapterError) as e:
        parse_spans(_otlp(_sp(1)) + "\n" + deep, file="d.otlp.jsonl")
    assert e.value.field == "line 2"
    # a raw U+2028 inside a JSON string is text, not a line break (OTLP and JSONL)
    sp = _sp(1, attributes=[{"key": "output.value", "value": {"stringValue": "a\u2028b"}}])
    text = _otlp(sp) + "\n" + _otlp(_sp(2, 1))
    assert "\u2028" in text
    assert len(parse_spans(text)) == 2
    p = tmp_path / "sep.otlp.jsonl"
    p.write_text(text, encoding="utf-8")
    assert len(list(iter_file_spans(p))) == 2
    jl = ('{"agent": "user", "kind": "task", "content": "x\u2028y"}\n'
          '{"agent": "a", "kind": "output", "content": "ok\u2029"}\n')
    assert parse_jsonl(jl).steps[0].content == "x\u2028y"
    q = tmp_path / "sep.jsonl"
    q.write_text(jl, encoding="utf-8")
    assert load_jsonl(q).steps[1].content == "ok\u2029"


@pytest.mark.parametrize(("doc", "field"), [
    ({"id": "t", "observations": [{"id": "o", "type": "AGENT", "startTime": "²"}]},
     "observations[0].startTime"),
    ({"id": "t", "observations": [{"id": "o", "type": "AGENT",
                                   "startTime": "2026-01-01T00:00:00"}]},
     "observations[0].startTime"),
    ({"data": [{"traceID": "ab" * 16, "spans": [{"traceID": "ab" * 16, "spanID": "cd" * 8,
                                                 "operationName": "x", "startTime": 1,
                                                 "duration": "NaN"}]}]},
     "spans[0].duration"),
    ({"data": [{"traceID": "ab" * 16, "spans": [{"traceID": "ab" * 16, "spanID": "cd" * 8,
                                                 "operationName": "x", "startTime": 2**62,
                                                 "duration": 1}]}]},
     "spans[0].startTime"),
])
def test_langfuse_and_jaeger_times(doc: dict[str, Any], field: str, tmp_path: Path) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(json.dumps(doc), file="x.json")
    assert e.value.field.endswith(field)
    p = tmp_path / "x.otlp.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(AdapterError):
        load_otlp_runs(p)


def _big(n: int) -> str:
    spans = [_sp(1)] + [_sp(i, 1 + (i % 7 == 0)) for i in range(2, n)]
    return json.dumps({"resourceSpans": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
         "scopeSpans": [{"scope": {"name": "sc"}, "spans": spans[: n // 2]},
                        {"scope": {"name": "sc2"}, "spans": spans[n // 2:]}]}]}, indent=1)


def test_streamed_import_matches_the_in_memory_parser(tmp_path: Path) -> None:
    one = tmp_path / "one.otlp.json"  # one resource, one scope: the C-built fast path
    one.write_text(_otlp(*[_sp(i, 1 if i > 1 else None) for i in range(1, 50)]).replace(
        '"attributes": []', '"attributes": [{"key": "service.name", "value": '
        '{"stringValue": "s"}}]'))
    fast = list(iter_file_spans(one))
    assert fast == parse_spans(one.read_text(), file=str(one)) and len(fast) == 49
    assert fast[0].resource == {"service.name": "s"} and fast[0].scope == "t"
    text = _big(400)
    p = tmp_path / "big.otlp.json"
    p.write_text(text)
    streamed = list(iter_file_spans(p))
    whole = parse_spans(text, file=str(p))
    assert streamed == whole and len(streamed) == 399
    assert streamed[0].resource == {"service.name": "s"} and streamed[-1].scope == "sc2"
    # JSON lines of the same documents
    q = tmp_path / "big.otlp.jsonl"
    q.write_text(json.dumps(json.loads(text)) + "\n" + _otlp(_sp(9999, trace="cd" * 16)) + "\n")
    assert len(list(iter_file_spans(q))) == 400
    assert [r.trace.id for r in audit_file(q)] == ["big-abababab", "big-cdcdcdcd"]


def test_size_limit_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.otlp.json"
    p.write_text(_big(2000))
    q = tmp_path / "t.jsonl"
    q.write_text('{"agent": "a", "kind": "task", "content": "' + "x" * 300_000 + '"}\n')
    monkeypatch.setenv("ICORE_MAX_INPUT_MB", "0.1")
    for f in (p, q):
        with pytest.raises(AdapterError, match="input limit") as e:
            audit_file(f)
        assert e.value.field == "<root>" and "ICORE_MAX_INPUT_MB" in e.value.problem
    monkeypatch.setenv("ICORE_MAX_INPUT_MB", "nan")
    with pytest.raises(AdapterError, match="ICORE_MAX_INPUT_MB"):
        audit_file(q)


# ------------------------------------------------------------- live exports re-audited
@pytest.fixture(scope="module")
def live_export(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One live run's spans as OTLP JSON (a JSON document per line), written once."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from icore.adapters import OtelExporter, make_provider, otlp_json
    from icore.live import default_manifest, run_live

    spans = InMemorySpanExporter()
    ex = OtelExporter(tracer_provider=make_provider(exporter=spans, batch=False))
    d = tmp_path_factory.mktemp("live")
    run_live(default_manifest("reservation").with_(seeds=[0], concurrency=1), d / "run",
             policy="planfence", observer=ex)
    return json.dumps(otlp_json(spans.get_finished_spans()))


def _edit(doc: str, pick: Any, key: str, value: dict[str, Any],
          also: dict[str, Any] | None = None) -> str:
    """Set attribute ``key`` (an OTLP AnyValue; and ``also``) on the first span picked."""
    d = json.loads(doc)
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                attrs = {kv["key"]: kv["value"] for kv in sp.get("attributes", [])}
                if pick(attrs):
                    new = {key: value, **(also or {})}
                    sp["attributes"] = [kv for kv in sp["attributes"] if kv["key"] not in new]
                    sp["attributes"] += [{"key": k, "value": v} for k, v in new.items()]
                    return json.dumps(d)
    raise AssertionError("no span to edit")


def _call(name: str) -> Any:
    return lambda a: a.get("icore.call", {}).get("stringValue") == name


@pytest.mark.parametrize(("pick", "key", "value", "field"), [
    (_call("run"), "icore.run.manifest", {"stringValue": "[1,2]"}, "icore.run.manifest"),
    (_call("run"), "icore.run.manifest", {"stringValue": "{"}, "icore.run.manifest"),
    (_call("committed"), "icore.event.fields", {"stringValue": "not json"},
     "icore.event.fields"),
    (_call("committed"), "icore.event.fields", {"stringValue": "[1, 2]"},
     "icore.event.fields"),
    (_call("committed"), "icore.event.fields", {"stringValue": "{\"a\": 1}"},
     "(event)"),  # a committed step replayed as an event lacking its fields
    (_call("gate"), "icore.gate.outcome", {"intValue": "3"}, "icore.gate.outcome"),
    (_call("gate"), "icore.gate.point", {"stringValue": "x"}, "icore.gate.point"),
    (_call("planned"), "icore.task", {"stringValue": "t-other"}, "icore.event.id"),
    (_call("planned"), "icore.verdict.decisions", {"arrayValue": {"values": [
        {"stringValue": "rejected"}]}}, "icore.verdict.decisions"),
    (_call("committed"), "icore.task", {"stringValue": "t-other"}, "icore.event.id"),
    (_call("audited"), "icore.audit.verdict", {"intValue": "1"}, "icore.audit.verdict"),
    # second report (badinput D11): the edits that audited as valid, and variants
    (_call("committed"), "icore.record.id", {"stringValue": "abc"}, "icore.record.id"),
    (_call("committed"), "icore.record.seq", {"doubleValue": 1.5}, "icore.record.seq"),
    (_call("committed"), "icore.record.seq", {"intValue": "0"}, "icore.record.seq"),
    (_call("planned"), "icore.replan", {"stringValue": "yes"}, "icore.replan"),
    (_call("planned"), "icore.plan.requirement.id", {"stringValue": "x" * 64},
     "icore.plan.requirement.id"),
    (_call("gate"), "icore.gate.outcome", {"stringValue": "maybe"}, "icore.gate.outcome"),
    (_call("gate"), "icore.gate.point", {"intValue": "-1"}, "icore.gate.point"),
])
def test_edited_live_exports_are_refused(live_export: str, pick: Any, key: str,
                                         value: dict[str, Any], field: str,
                                         tmp_path: Path) -> None:
    from icore.adapters import audit_path

    assert audit_path(_write(tmp_path / "ok.otlp.json", live_export)).final.cq >= 0
    also = ({"icore.call": {"stringValue": "event"}} if key == "icore.event.fields" else None)
    edited = _edit(live_export, pick, key, value, also)
    with pytest.raises(AdapterError) as e:
        audit_path(_write(tmp_path / "x.otlp.json", edited))
    assert e.value.field.endswith(field), e.value


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p
