"""Issue 29, bad-input sweep (tools/badinput_sweep.py): wrong types at the Python API
that escaped as AttributeError/TypeError (or were accepted) are typed errors at the call,
naming the argument."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import AdapterError, audit_trace, parse_jsonl, parse_otlp, parse_spans
from icore.errors import FenceCallError, IntegrationError


@pytest.mark.parametrize("parse", [parse_otlp, parse_jsonl, parse_spans])
@pytest.mark.parametrize(("text", "file", "field"), [
    (None, "f", "text"), (b"\xff\xfe", "f", "text"), (5, "f", "text"), ([1, 2], "f", "text"),
    ("{}", 5, "file")])
def test_parse_functions_refuse_what_is_not_text(parse: Any, text: Any, file: Any,
                                                 field: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse(text, file=file)
    assert e.value.field == field and field in str(e.value)
    if isinstance(text, bytes):
        assert "decode" in e.value.problem


@pytest.mark.parametrize("trace", [None, "x", {"steps": []}])
def test_audit_trace_refuses_what_is_not_a_trace(trace: Any) -> None:
    with pytest.raises(AdapterError) as e:
        audit_trace(trace)
    assert e.value.field == "trace" and "must be a Trace" in e.value.problem


def test_audit_trace_refuses_a_wrong_declaration() -> None:
    t = parse_jsonl('{"agent": "u", "kind": "task", "content": "q"}', file="f.jsonl")
    with pytest.raises(AdapterError) as e:
        audit_trace(t, decl="generic")  # type: ignore[arg-type]
    assert e.value.field == "decl" and e.value.file == "f.jsonl"


@pytest.mark.parametrize("argument", ["recorder", "replicator"])
def test_fence_guard_refuses_a_wrong_recorder_or_replicator(argument: str) -> None:
    """``recorder='x'`` was accepted and failed as AttributeError ('str' object has no
    attribute 'fenced_tools') in every framework's wrapper."""
    from icore.integrations import FenceGuard
    from icore.workspace import Workspace

    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)
    kw: dict[str, Any] = {argument: "x"}
    agent = ws.agent("a")
    with pytest.raises(IntegrationError, match=f"{argument}= must be"):
        FenceGuard(agent=agent, depends_on={"k/1"}, **kw)


def test_langgraph_fenced_tool_refuses_a_wrong_recorder_when_wrapping() -> None:
    pytest.importorskip("langchain_core")
    from icore.integrations.langgraph import fenced_tool
    from icore.workspace import Workspace

    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)

    def t(x: int) -> int:
        """Add."""
        return x

    with pytest.raises(IntegrationError, match="recorder= must be"):
        fenced_tool(t, depends_on={"k/1"}, agent=ws.agent("a"), recorder="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["no", 1, None])
def test_fence_execute_refuses_a_raise_on_block_that_is_not_a_bool(value: Any) -> None:
    """``raise_on_block="no"`` was read as True."""
    from icore.fence import Fence, bind_action, protected
    from icore.memory import LocalOwners, MemoryStore, OwnershipMap
    from icore.records import Record, derive

    own = OwnershipMap({"k": "o"}, {"plan/*": "p"})
    s = MemoryStore(own, "o")
    r = Record.create(key="k", owner="o", seq=1, content={})
    s.commit(r, writer="o")
    plan = derive(key="plan/1", owner="p", seq=1, content=bind_action("book", {}), inputs=[r])
    s.install(plan)

    @protected(depends_on={"k"})
    def book() -> int:
        return 1

    f = Fence.for_store(s, LocalOwners({"o": s}))
    with pytest.raises(FenceCallError) as e:
        f.execute(book, roots=[plan.id], args={}, raise_on_block=value)
    assert e.value.fields["argument"] == "raise_on_block"
    assert f.execute(book, roots=[plan.id], args={}, raise_on_block=False).executed


_BIG = "1" * 5000  # over Python's 4300-digit limit of int(str): a plain ValueError


@pytest.mark.parametrize(("name", "text", "field"), [
    ("r.jsonl", '{"agent": "u", "kind": "task", "content": "q", "step": ' + _BIG + "}",
     "line 1"),
    ("r.jsonl", '{"agent": "u", "kind": "task", "content": "q", "step": "' + _BIG + '"}',
     "line 1.step"),
    ("w.json", '{"question": "q", "history": [], "level": ' + _BIG + "}", "level"),
])
def test_an_integer_over_the_digit_limit_is_an_adapter_error(tmp_path: Path, name: str,
                                                             text: str, field: str) -> None:
    """json.loads raises a plain ValueError (not JSONDecodeError) for it, and a step of
    5000 digits as a string overflowed float(): both were internal errors."""
    from icore.adapters import audit_file

    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(AdapterError) as e:
        audit_file(p)
    assert e.value.file == str(p) and e.value.field == field
    assert len(str(e.value)) < 500



@pytest.mark.parametrize(("name", "data"), [
    ("w.json", b'{"question": "q\xff", "history": []}'),
    ("r.jsonl", b'{"agent": "u", "kind": "task", "content": "q\xff"}\n'),
    ("t.json", b'[{"name": "x\xff", "context": {"span_id": "1"}}]')])
def test_invalid_utf8_names_the_byte(tmp_path: Path, name: str, data: bytes) -> None:
    """The sweep's "field not named" review: invalid UTF-8 said only "<root>"."""
    from icore.adapters import audit_file

    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(AdapterError, match=r"not UTF-8 text: .* at byte \d+"):
        audit_file(p)


@pytest.mark.parametrize("key", ["k/\ud800", "k/\x00", "k/" + "x" * 600])
def test_a_key_no_store_can_hold_is_refused_at_the_call(key: str, tmp_path: Path) -> None:
    """Sweep seed 7: ``ws.put('k/\\ud800', 1)`` on a SQLite workspace escaped as
    UnicodeEncodeError from the store's head lookup; a 600-character key read as "never
    written" instead of malformed."""
    from icore.workspace import Workspace, WorkspaceError

    ws = Workspace.sqlite({"k/*": "o"}, tmp_path)
    for call in (lambda: ws.put(key, 1), lambda: ws.value(key, default=None),
                 lambda: ws.agent("a").read(key)):
        with pytest.raises(WorkspaceError, match="a fact key"):
            call()


@pytest.mark.parametrize("field", ["key", "owner", "type"])
def test_a_record_field_with_a_lone_surrogate_is_malformed_and_named(field: str) -> None:
    """It was refused as 'content is not canonical JSON' (field='content'), naming the
    wrong field."""
    from icore.errors import MalformedRecord
    from icore.records import Record

    kw: dict[str, Any] = {"key": "k", "owner": "o", "type": "fact", field: "x\udc80"}
    with pytest.raises(MalformedRecord) as e:
        Record.create(seq=1, content={}, **kw)
    assert e.value.fields["field"] == field


@pytest.mark.parametrize("name", ["a\ud800", "a\x00", "a" * 600])
def test_an_agent_name_no_trace_can_hold_is_refused(name: str) -> None:
    from icore.workspace import Workspace, WorkspaceError

    with pytest.raises(WorkspaceError, match="an agent name"):
        Workspace({"k/*": "o"}).agent(name)


def test_a_sqlite_folder_with_a_nul_is_a_store_error() -> None:
    """``Workspace.sqlite(facts, '/tmp/x\\x00')`` escaped as ValueError (embedded null
    byte) from pathlib."""
    from icore.errors import StoreError
    from icore.workspace import Workspace

    with pytest.raises(StoreError, match="cannot open store"):
        Workspace.sqlite({"k/*": "o"}, "/tmp/x\x00")


@pytest.mark.parametrize("values", [float("-inf"), 5, True, "abc", {"a": 1}])
def test_an_array_value_whose_values_is_no_list_names_the_field(values: Any) -> None:
    """Found by the sweep's values at every OTLP path (in process, seed 23):
    ``{"arrayValue": {"values": -Infinity}}`` escaped as TypeError (not iterable)."""
    span = {"traceId": "ab" * 16, "spanId": "1" * 16, "name": "a",
            "attributes": [{"key": "tags", "value": {"arrayValue": {"values": "@"}}}]}
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    text = text.replace('"@"', "-Infinity" if values == float("-inf") else json.dumps(values))
    with pytest.raises(AdapterError) as e:
        parse_otlp(text, file="f.otlp.json")
    assert e.value.file == "f.otlp.json"
    if values != float("-inf"):  # -Infinity is refused by the JSON reader first
        assert (e.value.field or "").endswith("arrayValue.values"), e.value


def test_an_array_value_of_infinity_in_a_file_is_an_adapter_error(tmp_path: Path) -> None:
    """The file reader (streamed) took ``-Infinity`` as a float and then failed."""
    from icore.adapters import audit_path

    span = {"traceId": "ab" * 16, "spanId": "1" * 16, "name": "a",
            "attributes": [{"key": "tags", "value": {"arrayValue": {"values": "@"}}}]}
    p = tmp_path / "t.otlp.json"
    p.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
                            ).replace('"@"', "-Infinity"))
    with pytest.raises(AdapterError) as e:
        audit_path(p)
    assert e.value.file == str(p)


def _gate_doc(deps: Any) -> str:
    """OTLP/JSON of one agent span and its gate decision: ``book`` authorized on a stale
    frontier (plan bound to ``b...``, owner's head ``a...``), ``icore.gate.deps`` as given."""
    def arr(*xs: str) -> dict[str, Any]:
        return {"arrayValue": {"values": [{"stringValue": x} for x in xs]}}

    old, new = "b" * 64, "a" * 64
    attrs = {"openinference.span.kind": {"stringValue": "AGENT"},
             "agent.name": {"stringValue": "a0"},
             "gen_ai.operation.name": {"stringValue": "apply_guardrail"},
             "icore.gate.outcome": {"stringValue": "authorized"},
             "icore.gate.reason": {"stringValue": "valid"},
             "icore.gate.action": {"stringValue": "book"},
             "icore.gate.roots": arr(new), "icore.gate.deps": deps,
             "icore.gate.frontier.keys": arr("req/t"), "icore.gate.frontier.ids": arr(old),
             "icore.gate.heads.keys": arr("req/t"), "icore.gate.heads.ids": arr(new),
             "icore.gate.point": {"intValue": "1"}}
    root = {"traceId": "ab" * 16, "spanId": "1" * 16, "name": "agent 1",
            "attributes": [{"key": "openinference.span.kind",
                            "value": {"stringValue": "AGENT"}}]}
    gate = {"traceId": "ab" * 16, "spanId": "2" * 16, "parentSpanId": "1" * 16,
            "name": "agent 2", "attributes": [{"key": k, "value": v} for k, v in attrs.items()]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, gate]}]}]})


@pytest.mark.parametrize("kind", ["arrayValue", "kvlistValue"])
@pytest.mark.parametrize("value", ["req/t", [{"stringValue": "req/t"}], 5, True])
def test_an_array_value_that_is_no_object_is_refused(tmp_path: Path, kind: str,
                                                     value: Any) -> None:
    """Found by the sweep (seed 11, ``arrayValue: "{"``): an ``arrayValue`` (or
    ``kvlistValue``) of another type was read as empty, so a stale action whose
    ``icore.gate.deps`` had one was audited valid (it depended on nothing)."""
    from icore.adapters import audit_path

    p = tmp_path / "t.otlp.json"
    p.write_text(_gate_doc({kind: value}))
    with pytest.raises(AdapterError) as e:
        audit_path(p)
    assert e.value.file == str(p)
    assert (e.value.field or "").endswith(f".value.{kind}"), e.value


@pytest.mark.parametrize("empty", [None, {}])
def test_an_empty_array_value_is_still_read_as_empty(empty: Any) -> None:
    """OTLP/JSON may write an empty array as ``{}`` or ``null``: still read as empty."""
    assert parse_otlp(_gate_doc({"arrayValue": empty}), file="f.otlp.json") is not None


def test_the_stale_gate_span_of_these_tests_is_invalid(tmp_path: Path) -> None:
    """The document above, deps intact: the action is INVALID (the refusal is not vacuous)."""
    from icore.adapters import audit_path

    p = tmp_path / "t.otlp.json"
    p.write_text(_gate_doc({"arrayValue": {"values": [{"stringValue": "req/t"}]}}))
    assert audit_path(p).invalid_actions == 1


@pytest.mark.parametrize("gone", ["icore.gate.outcome", "icore.gate.reason"])
@pytest.mark.parametrize("how", ["deleted", "empty AnyValue", "an integer"])
def test_a_gate_span_without_outcome_or_reason_is_refused_not_dropped(
        tmp_path: Path, gone: str, how: str) -> None:
    """Found by the same values at every path of a stale gate span (seed 11): without
    a string ``icore.gate.outcome``/``reason`` the span was taken for another tool's
    guardrail, the stale action vanished and ``--fail-on invalid`` passed."""
    from icore.adapters import audit_path

    doc = json.loads(_gate_doc({"arrayValue": {"values": [{"stringValue": "req/t"}]}}))
    attrs = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"]
    i = next(i for i, kv in enumerate(attrs) if kv["key"] == gone)
    if how == "deleted":
        del attrs[i]
    else:
        attrs[i]["value"] = {} if how == "empty AnyValue" else {"intValue": "1"}
    p = tmp_path / "t.otlp.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(AdapterError) as e:
        audit_path(p)
    assert (e.value.field or "").endswith(gone), e.value


def test_another_tools_guardrail_span_is_still_no_decision(tmp_path: Path) -> None:
    """A guardrail span with no ``icore.gate.*`` attribute is no icore decision."""
    from icore.adapters import audit_path

    doc = json.loads(_gate_doc({"arrayValue": {}}))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span["attributes"] = [kv for kv in span["attributes"]
                          if not kv["key"].startswith("icore.gate.")]
    p = tmp_path / "t.otlp.json"
    p.write_text(json.dumps(doc))
    assert audit_path(p).lineage == ()


@pytest.mark.parametrize("op", [None, "1e400", "invoke_agent"])
def test_a_gate_span_whose_operation_is_damaged_is_still_a_decision(
        tmp_path: Path, op: str | None) -> None:
    """Same probe: ``gen_ai.operation.name`` deleted or changed made the gate span an
    agent span (its ``openinference.span.kind`` was AGENT) and its stale action vanished."""
    from icore.adapters import audit_path

    doc = json.loads(_gate_doc({"arrayValue": {"values": [{"stringValue": "req/t"}]}}))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span["attributes"] = [kv for kv in span["attributes"]
                          if kv["key"] != "gen_ai.operation.name"]
    if op is not None:
        span["attributes"].append({"key": "gen_ai.operation.name",
                                   "value": {"stringValue": op}})
    p = tmp_path / "t.otlp.json"
    p.write_text(json.dumps(doc))
    assert audit_path(p).invalid_actions == 1
