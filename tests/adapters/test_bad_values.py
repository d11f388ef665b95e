"""Issue 29, second bad-input report (badinput D6, D7, D11, D12): values the importers
let through on main now end in an AdapterError naming the file and the field, or (lone
surrogates) are read as U+FFFD with a warning; nothing else is raised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import (
    AdapterError,
    audit_file,
    audit_path,
    audit_trace,
    load_jsonl,
    load_trace,
    load_who_and_when,
    parse_jsonl,
    parse_otlp,
    parse_who_and_when_data,
)
from icore.adapters._valid_text import valid_text

R = "a" * 64


def _sp(sid: int, parent: int | None = None, *, attrs: dict[str, Any] | None = None,
        **over: Any) -> dict[str, Any]:
    kv = [{"key": "openinference.span.kind", "value": {"stringValue": "AGENT"}},
          {"key": "agent.name", "value": {"stringValue": "a"}}]
    for k, v in (attrs or {}).items():
        kv.append({"key": k, "value": v})
    d: dict[str, Any] = {"traceId": "ab" * 16, "spanId": f"{sid:016x}", "name": f"s{sid}",
                         "startTimeUnixNano": str(1000 + sid),
                         "endTimeUnixNano": str(2000 + sid), "attributes": kv}
    if parent is not None:
        d["parentSpanId"] = f"{parent:016x}"
    d.update(over)
    return d


def _otlp(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _s(v: str) -> dict[str, Any]:
    return {"stringValue": v}


def _arr(*vs: Any) -> dict[str, Any]:
    return {"arrayValue": {"values": [_s(v) if isinstance(v, str) else {"intValue": str(v)}
                                      for v in vs]}}


_GATE = {"gen_ai.operation.name": _s("apply_guardrail"), "icore.gate.outcome": _s("authorized"),
         "icore.gate.reason": _s("valid"), "icore.gate.action": _s("book"),
         "icore.gate.roots": _arr(R), "icore.gate.deps": _arr("req/t"),
         "icore.gate.frontier.keys": _arr("req/t"), "icore.gate.frontier.ids": _arr(R),
         "icore.gate.heads.keys": _arr("req/t"), "icore.gate.heads.ids": _arr(R)}


def _gate(**over: Any) -> str:
    attrs = {**_GATE, **over}
    return _otlp(_sp(1), _sp(2, 1, attrs={k: v for k, v in attrs.items() if v is not None}))


def test_a_well_formed_gate_span_still_reads() -> None:
    t = parse_otlp(_gate(), file="g.otlp.json")
    assert t.planfence is not None and t.planfence.decisions[0].outcome == "authorized"
    assert audit_trace(t).lineage[0].status == "valid"


@pytest.mark.parametrize(("over", "field"), [
    ({"icore.gate.point": {"intValue": "-5"}}, "icore.gate.point"),  # D7 (was a
    # DecisionFormatError that stopped the whole audit)
    ({"icore.gate.frontier.ids": _arr()}, "icore.gate.frontier"),  # 1 key, 0 ids
    ({"icore.gate.frontier.keys": _arr("req/t", "req/t"),
      "icore.gate.frontier.ids": _arr(R, "b" * 64)}, "icore.gate.frontier.keys"),
    ({"icore.gate.outcome": _s("maybe")}, "icore.gate.outcome"),
    ({"icore.gate.heads.ids": _s(R)}, "icore.gate.heads"),  # a string, not an array
    ({"icore.gate.heads.keys": None}, "icore.gate.heads"),  # ids without keys
    ({"icore.gate.roots": _s(R)}, "icore.gate.roots"),
    ({"icore.gate.at_ms": {"doubleValue": -1.0}}, "icore.gate.at_ms"),
    ({"icore.gate.owners_contacted": {"intValue": "-2"}}, "icore.gate.owners_contacted"),
    ({"icore.gate.frontier.keys": _arr(7)}, "icore.gate.frontier.keys"),
])
def test_malformed_gate_spans_are_refused(over: dict[str, Any], field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(_gate(**over), file="g.otlp.json")
    assert e.value.file == "g.otlp.json" and e.value.field.endswith(field), e.value
    assert e.value.field.startswith("span 0000000000000002")


def _pf(*lines: dict[str, Any]) -> str:
    rows: list[Any] = [{"agent": "u", "kind": "task", "content": "q"}]
    rows += [{"planfence": x} for x in lines]
    return "\n".join(json.dumps(x) for x in rows)


_DEC = {"outcome": "authorized", "reason": "valid", "action": "book", "roots": [R],
        "deps": ["req/t"], "frontier": {"req/t": R}, "heads": {"req/t": R}, "point": 1}


@pytest.mark.parametrize(("line", "field"), [
    ({"decision": {**_DEC, "outcome": "approved"}}, "decision.outcome"),
    ({"decision": {**_DEC, "outcome": 1}}, "decision.outcome"),
    ({"decision": {**_DEC, "reason": 3}}, "decision.reason"),
    ({"decision": {**_DEC, "reason": ""}}, "decision.reason"),
    ({"decision": {**_DEC, "at_ms": float("-inf")}}, "decision.at_ms"),
    ({"decision": {**_DEC, "at_ms": float("nan")}}, "decision.at_ms"),
    ({"decision": {**_DEC, "task": {}}}, "decision.task"),
    ({"decision": {**_DEC, "action": ["book"]}}, "decision.action"),
    ({"decision": {**_DEC, "roots": [7]}}, "decision.roots[0]"),
    ({"decision": {**_DEC, "deps": [""]}}, "decision.deps"),
    ({"decision": {**_DEC, "heads": {"req/t": 5}}}, "decision.heads.req/t"),
    ({"decision": {**_DEC, "heads_checked": True}}, "decision.heads_checked"),
    ({"record": {"id": "", "key": "k"}}, "record.id"),
    ({"record": {"id": "A" * 64, "key": "k"}}, "record.id"),
    ({"record": {"id": R, "key": ""}}, "record.key"),
    ({"record": {"id": R, "key": "k", "owner": 5}}, "record.owner"),
    ({"record": {"id": R, "key": "k", "parents": ["short"]}}, "record.parents[0]"),
])
def test_malformed_planfence_lines_are_refused(line: dict[str, Any], field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_jsonl(_pf(line), file="p.jsonl")
    assert e.value.field == f"line 2.planfence.{field}", e.value


def test_a_planfence_line_holds_one_thing() -> None:
    """The reporter's ``pf_task_dict``: a ``task`` beside the decision was ignored."""
    with pytest.raises(AdapterError) as e:
        parse_jsonl(_pf({"decision": _DEC, "task": {"a": 1}}), file="p.jsonl")
    assert e.value.field == "line 2.planfence.task"


@pytest.mark.parametrize(("doc", "field"), [
    ({"id": "t", "observations": [{"id": "o", "type": "AGENT", "name": ["a"]}]},
     "observations[0].name"),
    ({"data": [{"traceID": "ab" * 16, "spans": [{"spanID": "cd" * 8, "operationName": "x",
                                                 "tags": [{"value": 1}]}]}]},
     "spans[0].tags[0].key"),
    ({"data": [{"traceID": "ab" * 16, "processes": {"p1": {"tags": [{"key": 5}]}},
                "spans": [{"spanID": "cd" * 8, "operationName": "x", "processID": "p1"}]}]},
     "processes.p1.tags[0].key"),
])
def test_langfuse_names_and_jaeger_tags(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(json.dumps(doc), file="x.json")
    assert e.value.field.endswith(field), e.value


def test_a_well_formed_planfence_line_still_reads() -> None:
    t = parse_jsonl(_pf({"record": {"id": R, "key": "req/t", "owner": "o", "seq": 1,
                                    "parents": []}}, {"decision": _DEC}))
    assert t.planfence is not None and len(t.planfence.decisions) == 1


@pytest.mark.parametrize(("span", "field"), [
    (_sp(1, traceId="abc"), "traceId"),  # too short for OTLP
    (_sp(1, traceId="zz" * 16), "traceId"),  # not hex
    (_sp(1, spanId="zzzzzzzzzzzzzzzz"), "spanId"),
    (_sp(1, spanId="ab" * 9), "spanId"),  # 9 bytes
    (_sp(1, parentSpanId="not-an-id"), "parentSpanId"),
    (_sp(1, status={"code": 10**30}), "status.code"),
    (_sp(1, status={"code": "STATUS_CODE_MAYBE"}), "status.code"),
    (_sp(1, status={"code": True}), "status.code"),
    (_sp(1, attrs={"x": {"bytesValue": "not base64!"}}), "attributes[2].value"),
    (_sp(1, attrs={"x": {"bytesValue": 5}}), "attributes[2].value"),
    (_sp(1, startTimeUnixNano="3000", endTimeUnixNano="2000"), ".end"),
])
def test_otlp_ids_status_bytes_and_times(span: dict[str, Any], field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_otlp(_otlp(span), file="o.otlp.json")
    assert e.value.field.endswith(field), e.value


def test_base64_ids_and_unended_spans_still_read() -> None:
    import base64

    sp = _sp(1, traceId=base64.b64encode(bytes.fromhex("ab" * 16)).decode(),
             spanId=base64.b64encode(bytes.fromhex("00" * 7 + "01")).decode(),
             endTimeUnixNano="0")
    t = parse_otlp(_otlp(sp, _sp(2, 1)), file="o.otlp.json")
    assert len(t.steps) >= 2


@pytest.mark.parametrize(("line", "field"), [
    ({"agent": 5, "kind": "output"}, "line 2.agent"),
    ({"agent": "a", "kind": "instruction", "to": 7}, "line 2.to"),
    ({"agent": "a", "kind": "output", "step": 10**30}, "line 2.step"),  # D6b
    ({"agent": "a", "kind": "output", "step": 2**53}, "line 2.step"),
])
def test_jsonl_wrong_types_and_huge_steps(line: dict[str, Any], field: str,
                                          tmp_path: Path) -> None:
    text = json.dumps({"agent": "u", "kind": "task", "content": "q"}) + "\n" + json.dumps(line)
    with pytest.raises(AdapterError) as e:
        parse_jsonl(text, file="j.jsonl")
    assert e.value.field == field, e.value
    p = tmp_path / "j.jsonl"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(AdapterError):  # audit_file too: the CLI's path (no OverflowError)
        audit_file(p)


@pytest.mark.parametrize(("header", "field"), [
    ({"orchestrator": "boss"}, "run.orchestrator"),  # D7: was a DeclarationError
    ({"orchestrator": 3}, "run.orchestrator"),
    ({"agents": {"a": 5}}, "run.agents.a"),
    ({"annotation": {"agent": 7, "step": 1}}, "run.annotation.agent"),
])
def test_jsonl_header_fields(header: dict[str, Any], field: str) -> None:
    text = "\n".join(json.dumps(x) for x in [
        {"run": header}, {"agent": "u", "kind": "task"}, {"agent": "a", "kind": "output"}])
    with pytest.raises(AdapterError) as e:
        parse_jsonl(text, file="h.jsonl")
    assert e.value.field == field, e.value


def test_who_and_when_mistake_agent_must_be_a_name(
        make_magentic: Any) -> None:
    d = make_magentic()
    d["mistake_agent"] = 7
    with pytest.raises(AdapterError) as e:
        parse_who_and_when_data(d, file="w.json")
    assert e.value.field == "mistake_agent"


# ------------------------------------------------------------------ D6a: surrogates
@pytest.mark.parametrize("where", ["content", "agent", "final_answer", "question"])
def test_lone_surrogates_read_as_replacement_characters(where: str, tmp_path: Path) -> None:
    """A ``\\ud800`` escape is valid JSON; it is audited as U+FFFD with a warning, and
    every output (report, PROV, JSON summary) can be written."""
    lines: list[dict[str, Any]] = [{"run": {"id": "s"}}, {"agent": "u", "kind": "task"},
                                   {"agent": "a", "kind": "output", "content": "x"}]
    if where == "question":
        lines[0]["run"]["question"] = "q\ud800"
    elif where == "final_answer":
        lines.append({"agent": "a", "kind": "termination", "final_answer": "4\udc802"})
    else:
        lines[2][where] = "x\ud800y"
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    r = audit_path(p)
    assert any("surrogate" in w for w in r.trace.warnings)
    from icore.report import render_report, view_from_audit

    page = render_report(view_from_audit(r), tmp_path / "o")
    assert "\ufffd" in page.read_text(encoding="utf-8")


def test_otlp_surrogate_output_is_audited(tmp_path: Path) -> None:
    """The reporter's ``otlp_surrogate_output``: an output value with ``\\ud800``."""
    p = tmp_path / "s.otlp.json"
    p.write_text(_otlp(_sp(1), _sp(2, 1, attrs={"output.value": _s("a\ud800b")})),
                 encoding="utf-8")
    (r,) = audit_file(p)
    assert any(s.content == "a\ufffdb" for s in r.trace.steps)


def test_valid_text_keeps_pairs_and_plain_text() -> None:
    s = "emoji \U0001F600 ok"
    assert valid_text(s) is s and valid_text("abc") == "abc"
    assert valid_text("\udcff\ud800x") == "\ufffd\ufffdx"


# --------------------------------------------------------------- D12: the API at the call
@pytest.mark.parametrize("bad", [None, 5, 1.5, b"t.jsonl", ["t.jsonl"]])
def test_loaders_refuse_a_non_path(bad: Any) -> None:
    for fn in (audit_path, audit_file, load_trace, load_jsonl, load_who_and_when):
        with pytest.raises(AdapterError) as e:
            fn(bad)
        assert e.value.field == "path"


@pytest.mark.parametrize("mark", ["plain", "\ud800"])
def test_a_deep_planfence_record_is_read_without_recursion(mark: str) -> None:
    """A PlanFence record whose content is nested 900 deep is valid JSON: it is audited
    (the surrogate walk has no recursion limit), with a surrogate at the bottom too."""
    from icore.adapters._valid_text import _Fixer

    value: Any = {"leaf": mark, ("k" + mark): [1, 2.5, None, True]}
    for i in range(900):
        value = {"a": value} if i % 2 else [value, "x" + mark]
    fx = _Fixer()
    got = fx.deep({"content": value}, "planfence.records")
    if mark == "plain":
        assert got == {"content": value} and not fx.places
        return
    assert fx.places and "\ud800" not in json.dumps(got, ensure_ascii=False)
    inner = got["content"]
    for i in reversed(range(900)):
        inner = inner["a"] if i % 2 else inner[0]
    assert inner == {"leaf": "\ufffd", "k\ufffd": [1, 2.5, None, True]}


def test_traces_whose_ids_share_a_prefix_get_short_distinct_run_ids() -> None:
    """64-bit Jaeger trace ids are zero-padded to 32 hex digits, so every trace shares
    its first 8: each run still gets one distinct id of bounded length (it grew by 9
    characters per earlier clash, quadratic in the number of traces)."""
    from icore.adapters import parse_otlp_runs

    spans = [_sp(i + 1, traceId=f"{i + 1:032x}") for i in range(600)]
    runs = parse_otlp_runs(_otlp(*spans), file="j.otlp.json", run_id="j")
    ids = [r.id for r in runs]
    assert len(set(ids)) == 600 and max(map(len, ids)) <= len("j-00000000-") + 32
