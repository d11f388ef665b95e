"""Issue 29, QA r8-bad (D4-D8, D11, D20, D23): hostile inputs the importers let through
or named wrongly now end in an AdapterError naming the file, the line or span and the
field, and what was expected."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import (
    AdapterError,
    audit_path,
    load_jsonl,
    parse_jsonl,
    parse_otlp,
    parse_who_and_when_data,
)

R1, R2 = "1" * 64, "2" * 64
_HEAD = {"run": {"id": "r1", "question": "q"}}
_BODY = [{"agent": "user", "kind": "task", "content": "q"},
         {"agent": "a", "kind": "output", "content": "x"}]


def _jsonl(*rows: dict[str, Any]) -> str:
    return "\n".join(json.dumps(x) for x in [_HEAD, *rows, *_BODY])


def _rec(rid: str, *parents: str, key: str = "k") -> dict[str, Any]:
    return {"planfence": {"record": {"id": rid, "key": key, "owner": "o", "seq": 1,
                                     "parents": list(parents)}}}


@pytest.mark.parametrize(("rows", "field", "words"), [
    ([_rec(R1, R1)], "line 2.planfence.record.parents", "cycle"),
    ([_rec(R1, R2), _rec(R2, R1)], "line 2.planfence.record.parents", "line 3"),
    ([_rec(R1), _rec(R1, key="other")], "line 3.planfence.record.id", "line 2"),
])
def test_cyclic_or_clashing_records_are_refused(rows: list[dict[str, Any]], field: str,
                                                 words: str) -> None:
    """D5: a record id is its content's digest: a cycle or one id with two contents."""
    with pytest.raises(AdapterError) as e:
        parse_jsonl(_jsonl(*rows), file="p.jsonl")
    assert e.value.field == field and words in str(e.value), e.value


def test_a_repeated_record_line_and_an_outside_parent_still_read() -> None:
    t = parse_jsonl(_jsonl(_rec(R1, R2), _rec(R1, R2)), file="p.jsonl")
    assert t.planfence is not None and len(t.planfence.records) == 1


def _otlp_agent(value: dict[str, Any]) -> str:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "invoke_agent planner",
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
            "attributes": [{"key": "gen_ai.operation.name",
                            "value": {"stringValue": "invoke_agent"}},
                           {"key": "gen_ai.agent.name", "value": value}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


@pytest.mark.parametrize("value", [
    {"intValue": "7"}, {"arrayValue": {"values": [{"stringValue": "a"}]}},
    {"kvlistValue": {"values": [{"key": "a", "value": {"stringValue": "b"}}]}},
    {"boolValue": True}, {"doubleValue": 1.5},
])
def test_a_non_string_otlp_agent_name_is_refused(value: dict[str, Any]) -> None:
    """D4: it was read as no name, and the agent's turns went to ``system``."""
    with pytest.raises(AdapterError) as e:
        parse_otlp(_otlp_agent(value), file="o.json")
    assert e.value.field == "span cdcdcdcdcdcdcdcd ('invoke_agent planner').gen_ai.agent.name"
    assert "must be a string" in str(e.value)


def test_a_string_otlp_agent_name_still_reads() -> None:
    t = parse_otlp(_otlp_agent({"stringValue": "planner"}), file="o.json")
    assert "planner" in t.agents


def test_a_phoenix_agent_name_map_is_refused() -> None:
    span = {"name": "planner", "context": {"trace_id": "aa" * 16, "span_id": "22" * 8},
            "parent_id": None, "span_kind": "AGENT",
            "start_time": "2026-01-01T00:00:01+00:00", "end_time": "2026-01-01T00:00:02+00:00",
            "status_code": "OK", "attributes": {"agent": {"name": {"x": 1}}}}
    with pytest.raises(AdapterError) as e:
        parse_otlp(json.dumps([span]), file="ph.json")
    assert e.value.field.endswith(".agent.name"), e.value


def _jaeger(tag: str) -> str:
    return ('{"data": [{"traceID": "abc123", "spans": [{"traceID": "abc123", "spanID": "02",'
            ' "operationName": "invoke_agent planner", "references": [], "startTime": 1,'
            f' "duration": 5, "tags": [{tag}], "processID": "p1"}}],'
            ' "processes": {"p1": {"serviceName": "svc", "tags": []}}}]}')


@pytest.mark.parametrize(("tag", "words"), [
    ('{"key": "x", "type": "float64", "value": NaN}', "nan is not JSON"),
    ('{"key": "x", "type": "float64", "value": -Infinity}', "-inf is not JSON"),
    ('{"key": "gen_ai.agent.name", "type": "int64", "value": "planner"}', "an integer"),
    ('{"key": "x", "type": "bool", "value": "maybe"}', "true or false"),
    ('{"key": "x", "type": "int64", "value": true}', "an integer"),
    ('{"key": "x", "type": "string", "value": 5}', "a string"),
])
def test_jaeger_nan_tokens_and_mistyped_tags_are_refused(tag: str, words: str) -> None:
    """D6: a bare NaN token was accepted; D4: an int64 tag holding a name was the name."""
    with pytest.raises(AdapterError) as e:
        parse_otlp(_jaeger(tag), file="jg.json")
    assert words in str(e.value), e.value


def test_well_typed_jaeger_tags_still_read() -> None:
    tags = ('{"key": "gen_ai.agent.name", "type": "string", "value": "planner"}, '
            '{"key": "n", "type": "int64", "value": 3}, '
            '{"key": "f", "type": "float64", "value": 2}, '
            '{"key": "b", "type": "bool", "value": false}')
    assert parse_otlp(_jaeger(tags), file="jg.json").steps


@pytest.mark.parametrize(("text", "field", "words"), [
    (_jsonl().replace(json.dumps(_HEAD) + "\n", "") + "\n" + json.dumps(_HEAD),
     "line 3.run", "before the steps (the first step is line 1)"),
    (json.dumps(_HEAD) + "\n" + _jsonl(), "line 2.run",
     "a second run header (the first is line 1)"),
    (_jsonl().replace('"content": "x"', '"content": null'), "line 3.content", "or null"),
])
def test_jsonl_headers_out_of_place_and_null_content_are_named(text: str, field: str,
                                                                  words: str) -> None:
    """D7: was ``line 3.agent: missing field`` (the header read as a step)."""
    with pytest.raises(AdapterError) as e:
        parse_jsonl(text, file="h.jsonl")
    assert e.value.field == field and words in str(e.value), e.value


def test_a_bom_is_dropped_and_gzip_is_named(tmp_path: Path) -> None:
    """D8: a BOM was "decode using utf-8-sig" (a Python hint); gzip was "not UTF-8"."""
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + _jsonl().encode())
    assert load_jsonl(bom).id == "r1"
    assert parse_jsonl("\ufeff" + _jsonl()).id == "r1"
    for name in ("gz.jsonl", "gz.otlp.json"):
        gz = tmp_path / name
        gz.write_bytes(gzip.compress(_jsonl().encode()))
        with pytest.raises(AdapterError) as e:
            audit_path(gz)
        assert "gzip-compressed" in str(e.value) and e.value.field == "<root>", e.value


def test_who_and_when_with_both_outcome_fields_is_named() -> None:
    """D20: was ``history[0].name: missing field`` (read as a CaptainAgent run)."""
    run = {"is_corrected": True, "is_correct": False, "question": "q",
           "history": [{"role": "human", "content": "q"}]}
    with pytest.raises(AdapterError) as e:
        parse_who_and_when_data(run, file="w.json")
    assert e.value.field == "is_correct" and "both outcome fields" in str(e.value)


def test_lenient_values_the_docs_refuse_are_refused() -> None:
    """D11: a string boolValue decided ``icore.paused``; a Phoenix status 5 and a
    Langfuse level 3 were read as a status."""
    with pytest.raises(AdapterError, match="boolValue is not a boolean"):
        parse_otlp(_otlp_agent({"boolValue": "true"}).replace(
            '"gen_ai.agent.name"', '"icore.paused"'), file="o.json")
    span = {"name": "planner", "context": {"trace_id": "aa" * 16, "span_id": "22" * 8},
            "parent_id": None, "span_kind": "AGENT", "status_code": 5,
            "start_time": "2026-01-01T00:00:01+00:00", "end_time": "2026-01-01T00:00:02+00:00",
            "attributes": {"agent": {"name": "planner"}}}
    with pytest.raises(AdapterError) as e:
        parse_otlp(json.dumps([span]), file="ph.json")
    assert e.value.field.endswith("status_code"), e.value
    obs = {"id": "t", "observations": [{"id": "o1", "type": "AGENT", "name": "a", "level": 3,
                                        "startTime": "2026-01-01T00:00:01Z"}]}
    with pytest.raises(AdapterError) as e:
        parse_otlp(json.dumps(obs), file="lf.json")
    assert e.value.field.endswith("observations[0].level"), e.value
