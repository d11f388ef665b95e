"""Never a crash: arbitrary damage to a run gives a result or an AdapterError, nothing else."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, audit_trace, parse_jsonl, parse_who_and_when_data

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 200) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6,
)
_texts = st.sampled_from([
    "", "Updated Ledger:\n{}", "Updated Ledger:\n{\"next_speaker\": {\"answer\": \"Nobody\"}}",
    "Initial plan:\n", "New plan:\n", "Stalled.... Replanning...", "Next speaker Ghost",
    "FINAL ANSWER: 1", "```python\nprint(1)\n```", "exitcode: 0\nCode output: 1", "TERMINATE",
    "Replan counter exceeded... Terminating.",
]) | st.text(max_size=30)
_roles = st.sampled_from([
    "human", "Orchestrator (thought)", "Orchestrator (-> Ghost)", "Orchestrator (-> websurfer)",
    "Orchestrator (termination condition)", "WebSurfer", "ghost", "Computer_terminal", "",
    "()", "x (-> )",
]) | st.text(max_size=12)


def _check(data: Any) -> None:
    try:
        t = parse_who_and_when_data(data, file="f.json")
    except AdapterError as e:
        err: AdapterError | None = e
    else:
        err = None
        audit_trace(t)
    assert err is None or (err.file == "f.json" and err.field)


# keep the loaded profile (deadline, examples) and allow the pure factory fixtures
_FIXTURE_OK = settings(
    settings.default,
    suppress_health_check=[*settings.default.suppress_health_check,
                           HealthCheck.function_scoped_fixture],
)


@_FIXTURE_OK
@given(st.data())
def test_damaged_magentic_runs(make_magentic: Callable[..., dict[str, Any]],
                               data: st.DataObject) -> None:
    """Replace fields, roles and contents of a Magentic-One run at random."""
    d = copy.deepcopy(make_magentic())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(d["history"]) - 1))
        what = data.draw(st.sampled_from(["role", "content", "entry"]))
        if not isinstance(d["history"][i], dict):
            continue
        if what == "role":
            d["history"][i]["role"] = data.draw(_roles)
        elif what == "content":
            d["history"][i]["content"] = data.draw(_texts)
        else:
            d["history"][i] = data.draw(_json)
    if data.draw(st.booleans()):
        d[data.draw(st.sampled_from(sorted(d)))] = data.draw(_json)
    _check(d)


@_FIXTURE_OK
@given(st.data())
def test_damaged_captain_runs(make_captain: Callable[..., dict[str, Any]],
                              data: st.DataObject) -> None:
    """Replace names, contents and top-level fields of a CaptainAgent run at random."""
    d = copy.deepcopy(make_captain())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(d["history"]) - 1))
        what = data.draw(st.sampled_from(["name", "content", "prompt"]))
        if what == "name":
            d["history"][i]["name"] = data.draw(_roles)
        elif what == "content":
            d["history"][i]["content"] = data.draw(_texts)
        else:
            d["system_prompt"][data.draw(_roles)] = data.draw(_texts)
    if data.draw(st.booleans()):
        d[data.draw(st.sampled_from(sorted(d)))] = data.draw(_json)
    _check(d)


@given(st.lists(st.fixed_dictionaries(
    {"agent": _roles, "kind": st.sampled_from(["task", "plan", "ledger", "instruction",
                                                "thought", "output", "tool_output", "stall",
                                                "termination", "other"])},
    optional={"to": _roles, "content": _texts, "ledger": _json, "exitcode": _json,
              "final_answer": _json, "terminates": _json}), min_size=1, max_size=8))
def test_random_jsonl(lines: list[dict[str, Any]]) -> None:
    """Random JSONL event streams import and audit, or fail with a typed error."""
    import json

    text = "\n".join(json.dumps(x) for x in lines)
    try:
        t = parse_jsonl(text, file="f.jsonl")
    except AdapterError as e:
        err: AdapterError | None = e
    else:
        err = None
        audit_trace(t)
    assert err is None or err.file == "f.jsonl"


# ------------------------------------------------- issue 29: one fuzz test per importer
# Structured JSON over the importers' real field names, with the values that crashed
# main (NaN, infinities, huge integers, "²", naive ISO times, wrong shapes). Each test
# asserts "a result or an AdapterError naming the file, never another exception", for
# the in-memory parser and for the streamed file reader.
_BIG_INT = "<a 5000-digit JSON number>"
_BIG_NEG = "<a negative 5000-digit JSON number>"
# any ISO time from year 1 to 9999: naive, UTC, or with an offset (before 1970 and after
# 2262 are out of the ns range; naive ones have no zone)
_iso_times = st.builds(
    lambda dt, tz: dt.isoformat() + tz,
    st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31)),
    st.sampled_from(["", "Z", "+00:00", "-23:59", "+05:30"]))
_wild = (st.none() | st.booleans() | st.integers() | st.sampled_from([10**30, -1, 2**63])
         | st.floats(allow_nan=True, allow_infinity=True)
         | st.sampled_from(["", "²", "NaN", "Infinity", "12", "1e400", "abc", "0x1f",
                            "2026-01-01T00:00:00", "2026-01-01T00:00:00Z", "9" * 30,
                            "ab" * 16, "cd" * 8, "\u2028", "{}", "[1,2]",
                            # second report: lone surrogates, markup, ids
                            "x\ud800y", "\udcff", "[/x]", "a" * 64, "zz" * 8, "-inf",
                            # the sweep (tools/badinput_sweep.py): over Python's
                            # 4300-digit int limit, as a string and as a JSON number
                            "9" * 5000, _BIG_INT, _BIG_NEG,
                            # bad dates and times (sweep seed 7): year 0, Feb 30, leap
                            # second, 5-digit and negative years, offsets past 24 h
                            "0000-01-01T00:00:00Z", "2026-02-30T00:00:00Z",
                            "9999-12-31T23:59:60Z", "10000-01-01T00:00:00Z",
                            "-0001-01-01T00:00:00Z", "2026-01-01T00:00:00+99:00",
                            "2026-01-01 00:00:00", "nan", "-Infinity"])
         | _iso_times | st.text(max_size=8))
_val = st.recursive(_wild, lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=5)
_ids = st.sampled_from([f"{i:016x}" for i in range(1, 5)] + ["", None, 7, "zz"])
_any_value = st.one_of(
    st.fixed_dictionaries({"stringValue": _val}), st.fixed_dictionaries({"intValue": _val}),
    st.fixed_dictionaries({"doubleValue": _val}), st.fixed_dictionaries({"boolValue": _val}),
    st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(
        st.fixed_dictionaries({"stringValue": _val}), max_size=2) | _wild})}),
    st.fixed_dictionaries({"kvlistValue": _val}), _val)
_attr_keys = st.sampled_from(["openinference.span.kind", "agent.name", "gen_ai.agent.name",
                              "gen_ai.operation.name", "input.value", "output.value",
                              "handoff.to", "gen_ai.tool.name", "icore.call", "icore.seq",
                              "icore.gate.outcome", "icore.gate.reason", "icore.gate.point",
                              "icore.gate.roots", "icore.gate.frontier.keys",
                              "icore.gate.frontier.ids", "icore.gate.at_ms"])
_attrs = st.lists(st.fixed_dictionaries({"key": _attr_keys | _val, "value": _any_value}),
                  max_size=3) | _val
_otlp_span = st.fixed_dictionaries(
    {"traceId": st.sampled_from(["ab" * 16, "cd" * 16]) | _val, "spanId": _ids,
     "name": st.sampled_from(["agent", "handoff", "transfer_to_b", "chat"]) | _val},
    optional={"parentSpanId": _ids, "startTimeUnixNano": _wild, "endTimeUnixNano": _wild,
              "attributes": _attrs, "kind": _wild, "status": _val | st.fixed_dictionaries(
                  {"code": _wild}),
              "events": st.lists(st.fixed_dictionaries(
                  {"name": _val, "timeUnixNano": _wild, "attributes": _attrs}), max_size=2)})
_otlp_doc = st.fixed_dictionaries({"resourceSpans": st.lists(st.fixed_dictionaries(
    {"scopeSpans": st.lists(st.fixed_dictionaries(
        {"spans": st.lists(_otlp_span, max_size=4)}, optional={"scope": _val}),
        min_size=1, max_size=2)},
    optional={"resource": _val | st.fixed_dictionaries({"attributes": _attrs})}),
    min_size=1, max_size=2)})
_phoenix = st.lists(st.fixed_dictionaries(
    {"name": _val, "context": st.fixed_dictionaries({"trace_id": _val, "span_id": _ids})
     | _val},
    optional={"parent_id": _ids, "span_kind": st.sampled_from(["AGENT", "TOOL", "LLM"]) | _val,
              "start_time": _wild, "end_time": _wild, "status_code": _val,
              "attributes": _val, "events": st.lists(st.fixed_dictionaries(
                  {"name": _val, "timestamp": _wild}), max_size=2)}), min_size=1, max_size=4)
_langfuse = st.fixed_dictionaries({"id": _val, "observations": st.lists(
    st.fixed_dictionaries({"id": st.sampled_from(["o1", "o2", "o3"]) | _val},
                          optional={"type": st.sampled_from(["AGENT", "TOOL", "GENERATION",
                                                             "SPAN"]) | _val,
                                    "parentObservationId": st.sampled_from(["o1", "o2"]) | _val,
                                    "startTime": _wild, "endTime": _wild, "traceId": _val,
                                    "input": _val, "output": _val, "level": _val,
                                    "name": _val, "metadata": _val}),
    min_size=1, max_size=4)})
_jaeger = st.fixed_dictionaries({"data": st.lists(st.fixed_dictionaries(
    {"traceID": st.just("ab" * 16) | _val, "spans": st.lists(st.fixed_dictionaries(
        {"operationName": st.sampled_from(["agent", "tool"]) | _val, "spanID": _ids},
        optional={"traceID": _val, "startTime": _wild, "duration": _wild,
                  "tags": st.lists(st.fixed_dictionaries({"key": _attr_keys, "value": _val}),
                                   max_size=3) | _val,
                  "references": st.lists(st.fixed_dictionaries(
                      {"refType": st.just("CHILD_OF") | _val, "spanID": _ids}), max_size=2)
                  | _val,
                  "processID": _val}), min_size=1, max_size=4)},
    optional={"processes": _val}), min_size=1, max_size=2)})


def _dumps(doc: Any, indent: int | None = None) -> str:
    import json
    import re

    # NaN/Infinity as JSON5 tokens, like main saw
    text = json.dumps(doc, ensure_ascii=False, indent=indent)
    text = text.replace(f'"{_BIG_INT}"', "9" * 5000)  # a JSON number json.loads refuses
    text = text.replace(f'"{_BIG_NEG}"', "-" + "9" * 5000)
    # a lone surrogate can only be written as its JSON escape (valid JSON, issue 29)
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def _otel_check(doc: Any, *, lines: bool = False) -> None:
    """In memory and streamed from a file: runs or an AdapterError, nothing else.

    The file is also written indented (its first line is no JSON), so it is read by the
    streamed one-document reader rather than as JSON lines.
    """

    text = _dumps(doc)
    if not lines:
        _otel_check_text(_dumps(doc, indent=1))
    if lines:
        text = text + "\n" + text
    _otel_check_text(text)


def _otel_check_text(text: str) -> None:
    import tempfile
    from pathlib import Path

    from icore.adapters import parse_otlp_runs
    from icore.adapters._otel_import import load_otlp_runs

    for how in ("memory", "file"):
        try:
            if how == "memory":
                runs = parse_otlp_runs(text, file="f.otlp.json")
            else:
                with tempfile.TemporaryDirectory() as d:
                    p = Path(d) / "f.otlp.json"
                    p.write_text(text, encoding="utf-8")
                    runs = load_otlp_runs(p)
            for t in runs:
                audit_trace(t)
        except AdapterError as e:
            assert e.field and e.file.endswith("f.otlp.json")  # noqa: PT017


@settings(max_examples=40)
@given(_otlp_doc, st.booleans())
def test_fuzz_otlp(doc: dict[str, Any], lines: bool) -> None:
    _otel_check(doc, lines=lines)


@settings(max_examples=30)
@given(_phoenix)
def test_fuzz_phoenix(doc: list[Any]) -> None:
    _otel_check(doc)


@settings(max_examples=30)
@given(_langfuse)
def test_fuzz_langfuse(doc: dict[str, Any]) -> None:
    _otel_check(doc)


@settings(max_examples=30)
@given(_jaeger)
def test_fuzz_jaeger(doc: dict[str, Any]) -> None:
    _otel_check(doc)


@settings(max_examples=30)
@given(st.lists(st.fixed_dictionaries(
    {"agent": _val | st.sampled_from(["user", "a"]),
     "kind": st.sampled_from(["task", "output", "ledger", "instruction"]) | _val},
    optional={"step": _wild, "content": _val, "to": _val, "exitcode": _wild,
              "ledger": _val, "final_answer": _val, "terminates": _wild,
              "planfence": st.fixed_dictionaries({"decision": st.fixed_dictionaries(
                  {"outcome": _val, "reason": _val},
                  optional={"point": _wild, "deps": _val, "roots": _val, "heads": _val,
                            "frontier": _val, "replanned": _wild})})}),
    min_size=1, max_size=6))
def test_fuzz_jsonl_values(lines: list[dict[str, Any]]) -> None:
    """JSONL with the wild values (NaN step, huge exitcode, malformed decisions)."""
    import tempfile
    from pathlib import Path

    from icore.adapters import load_jsonl

    text = "\n".join(_dumps(x) for x in lines)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.jsonl"
        p.write_text(text, encoding="utf-8")
        try:
            t = load_jsonl(p)
        except AdapterError as e:
            assert e.file.endswith("f.jsonl")  # noqa: PT017
            return
    audit_trace(t)


_rid = st.sampled_from(["a" * 64, "b" * 64, "", "A" * 64, "abc"]) | _val
_decision = st.fixed_dictionaries(
    {"outcome": st.sampled_from(["authorized", "blocked", "replan_required"]) | _val,
     "reason": st.sampled_from(["valid", "stale"]) | _val},
    optional={"point": _wild, "deps": st.lists(st.just("req/t") | _val, max_size=2) | _val,
              "roots": st.lists(_rid, max_size=2) | _val,
              "heads": st.dictionaries(st.just("req/t"), _rid, max_size=1) | _val,
              "frontier": st.dictionaries(st.just("req/t"), _rid, max_size=1) | _val,
              "replanned": _wild, "at_ms": _wild, "task": _val, "action": _val,
              "owners_contacted": _wild, "policy": _val})
_record = st.fixed_dictionaries({"id": _rid, "key": st.just("req/t") | _val},
                                optional={"seq": _wild, "parents": st.lists(_rid, max_size=2)
                                          | _val, "owner": _val, "type": _val})


@settings(max_examples=30)
@given(st.lists(st.one_of(st.fixed_dictionaries({"record": _record}),
                          st.fixed_dictionaries({"decision": _decision})),
                min_size=1, max_size=4))
def test_fuzz_planfence_lines(lines: list[dict[str, Any]]) -> None:
    """PlanFence lines with wild fields: a lineage verdict from a well-formed decision,
    or an AdapterError naming the line; never another exception (DecisionFormatError,
    a DeclarationError from the audit, ...)."""
    text = "\n".join(_dumps(x) for x in [{"agent": "u", "kind": "task", "content": "q"},
                                         *({"planfence": x} for x in lines),
                                         {"agent": "a", "kind": "output", "content": "x"}])
    try:
        t = parse_jsonl(text, file="p.jsonl")
    except AdapterError as e:
        assert e.file == "p.jsonl" and e.field.startswith("line ")  # noqa: PT017
        return
    r = audit_trace(t)
    assert all(lv.status in ("valid", "INVALID", "unchecked", "blocked", "not issued")
               for lv in r.lineage)


_LIVE: dict[str, Any] = {}


def _live_doc() -> dict[str, Any]:
    """One small live run's export (made once per session)."""
    if "doc" not in _LIVE:
        import json
        import tempfile
        from pathlib import Path

        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from icore.adapters import OtelExporter, make_provider, otlp_json
        from icore.live import default_manifest, run_live

        spans = InMemorySpanExporter()
        ex = OtelExporter(tracer_provider=make_provider(exporter=spans, batch=False))
        with tempfile.TemporaryDirectory() as d:
            run_live(default_manifest("reservation").with_(seeds=[0]), Path(d) / "r",
                     policy="planfence", observer=ex)
        _LIVE["doc"] = json.loads(json.dumps(otlp_json(spans.get_finished_spans())))
    return _LIVE["doc"]


@settings(max_examples=25)
@given(st.data())
def test_fuzz_live_export(data: st.DataObject) -> None:
    """Edit the attributes of an icore live export at random: re-audit or AdapterError."""
    pytest.importorskip("opentelemetry.sdk")
    doc = copy.deepcopy(_live_doc())
    spans = [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
             for sp in ss["spans"]]
    for _ in range(data.draw(st.integers(1, 3))):
        sp = spans[data.draw(st.integers(0, len(spans) - 1))]
        attrs = sp.setdefault("attributes", [])
        if attrs and data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(attrs) - 1))
            attrs[i]["value"] = data.draw(_any_value)
        else:
            attrs.append({"key": data.draw(st.sampled_from([
                "icore.call", "icore.seq", "icore.task", "icore.event.fields",
                "icore.event.id", "icore.gate.outcome", "icore.gate.point",
                "icore.record.id", "icore.run.manifest", "gen_ai.agent.id",
                "icore.verdict.decisions"])), "value": data.draw(_any_value)})
    try:
        for t in parse_otlp_runs_(doc):
            audit_trace(t)  # re-audits the live steps: an edit is an AdapterError here
    except AdapterError as e:
        assert e.field  # noqa: PT017


def parse_otlp_runs_(doc: Any) -> Any:
    from icore.adapters import parse_otlp_runs

    return parse_otlp_runs(_dumps(doc), file="live.otlp.json")
