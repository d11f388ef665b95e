"""OpenTelemetry in and out (#16): GenAI spans from live runs, fence decisions and audits
(SDK in-memory exporter), the OTLP JSON / Phoenix / Langfuse importer, the round trip."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from icore.adapters import (
    ICORE_LIVE,
    OTEL,
    AdapterError,
    OtelExporter,
    StepKind,
    audit_file,
    audit_path,
    audit_trace,
    load_otlp,
    load_trace,
    make_provider,
    otlp_json,
    parse_otlp,
    parse_spans,
    traces_endpoint,
)
from icore.cli import app
from icore.fence import (
    DecisionLog,
    Fence,
    ProtectedTool,
    Replan,
    ReplanRequest,
    bind_action,
)
from icore.live import LiveRunResult, default_manifest, run_live
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive


@pytest.fixture
def mem() -> Iterator[tuple[InMemorySpanExporter, OtelExporter]]:
    """An exporter writing synchronously to the SDK's in-memory exporter."""
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    ex = OtelExporter(tracer_provider=provider)
    try:
        yield spans, ex
    finally:
        provider.shutdown()


def _by_name(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _live(tmp_path: Path, ex: OtelExporter, policy: str, seeds: Sequence[int] = (0,)
          ) -> LiveRunResult:
    m = default_manifest("reservation").with_(seeds=list(seeds), concurrency=len(seeds))
    return run_live(m, tmp_path / f"run-{policy}", policy=policy, observer=ex)


def _write(spans: Sequence[ReadableSpan], path: Path, *, lines: int = 1) -> Path:
    """OTLP JSON as the Collector's file exporter writes it (``lines`` batches)."""
    chunk = max(1, -(-len(spans) // lines))
    with path.open("w", encoding="utf-8") as f:
        for i in range(0, len(spans), chunk):
            f.write(json.dumps(otlp_json(spans[i:i + chunk])) + "\n")
    return path


# ------------------------------------------------------------------ export: a live run
def test_live_run_spans_follow_genai_conventions(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path) -> None:
    """The 2026 GenAI conventions: invoke_workflow for the run and each task, plan per
    plan, invoke_agent per other turn, execute_tool per protected call, its gate
    decisions as apply_guardrail children with gen_ai.guardrail.* results; metrics."""
    spans_x, ex = mem
    res = _live(tmp_path, ex, "planfence")
    spans = spans_x.get_finished_spans()
    flows = _by_name(spans, "invoke_workflow ")
    run = [s for s in flows if s.parent is None]
    assert len(run) == 1 and run[0].attributes is not None
    assert run[0].attributes["icore.run.policy"] == "planfence"
    assert run[0].attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run[0].attributes["gen_ai.agent.name"] == run[0].name.split(" ", 1)[1]
    wf = next(s for s in flows if s.parent is not None)
    assert wf.parent is not None and wf.parent.span_id == run[0].context.span_id
    assert wf.attributes is not None
    assert wf.attributes["gen_ai.conversation.id"] == "reservation-00"
    assert wf.attributes["gen_ai.operation.name"] == "invoke_workflow"
    agents = _by_name(spans, "invoke_agent ") + _by_name(spans, "plan ")
    assert {s.attributes["gen_ai.agent.id"] for s in agents if s.attributes} == {
        "reviser-1", "retriever-1", "planner-1", "auditor-1"}
    for s in agents:
        assert s.attributes is not None
        assert s.attributes["gen_ai.operation.name"] == (
            "plan" if s.attributes["icore.call"] == "planned" else "invoke_agent")
        assert s.attributes["openinference.span.kind"] == "AGENT"
        assert str(s.attributes["gen_ai.agent.description"]).split()[0] in (
            "reviser", "retriever", "planner", "auditor")
        assert s.parent is not None and s.parent.span_id == wf.context.span_id
    plans = [s for s in agents if s.attributes and s.attributes["icore.call"] == "planned"]
    assert [bool(s.attributes and s.attributes["icore.replan"]) for s in plans] == [False, True]
    assert all(s.attributes and str(s.attributes["icore.record.key"]).startswith("plan/")
               and isinstance(s.attributes["icore.record.seq"], int) for s in plans)
    assert all(s.attributes and s.attributes["icore.verdict.decisions"] == ("commit",)
               and s.attributes["icore.verdict.operations"] == ("plan",) for s in plans)
    (tool,) = _by_name(spans, "execute_tool ")
    a = tool.attributes
    assert a is not None
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == "book"
    assert a["openinference.span.kind"] == "TOOL" and a["gen_ai.tool.call.id"]
    assert a["icore.decision"] == "authorized" and a["icore.replan.count"] == 1
    assert "gen_ai.tool.call.arguments" not in a  # content capture is opt-in
    gates = _by_name(spans, "apply_guardrail ")
    assert all(g.parent is not None and g.parent.span_id == tool.context.span_id
               for g in gates)
    ga = [g.attributes for g in gates if g.attributes]
    assert [x["icore.gate.outcome"] for x in ga] == ["replan_required", "authorized"]
    for g, x in zip(gates, ga, strict=True):
        assert g.name == "apply_guardrail PlanFence"
        assert x["gen_ai.operation.name"] == "apply_guardrail"
        assert x["gen_ai.guardrail.component.name"] == "PlanFence"
        assert x["gen_ai.guardrail.policy.id"] == "planfence"
        assert x["gen_ai.guardrail.result.type"] == "outcome"
        assert x["gen_ai.guardrail.result.value"] == x["icore.gate.outcome"]
        assert x["gen_ai.guardrail.result.reason"] == x["icore.gate.reason"]
        (ev,) = [e for e in g.events if e.name == "gen_ai.guardrail.result"]
        assert ev.attributes and ev.attributes["gen_ai.guardrail.result.value"] == \
            x["icore.gate.outcome"]
    assert ga[0]["icore.gate.reason"] == "stale"
    assert list(ga[0]["icore.gate.deps"]) == ["req/reservation-00"]  # D(a)
    assert ga[0]["icore.gate.roots"]
    assert ga[0]["icore.gate.frontier.keys"] == ("req/reservation-00",)
    assert ga[0]["icore.gate.frontier.ids"] != ga[0]["icore.gate.heads.ids"]  # stale
    assert ga[1]["icore.gate.frontier.ids"] == ga[1]["icore.gate.heads.ids"]
    assert [e.name for e in tool.events].count("icore.gate_decision") == 2
    # iCORE: metrics after each audited step, the revocation flag citing its obligation
    events = [e for s in spans for e in s.events]
    metrics = [e for e in events if e.name == "icore.metrics"]
    assert metrics and all(e.attributes and {"icore.snd", "icore.astab", "icore.cq"}
                           <= set(e.attributes) for e in metrics)
    flags = [e for e in events if e.name == "icore.hard_flag"]
    assert len(flags) == res.icore["hard_flags"] == 1
    assert flags[0].attributes and flags[0].attributes["icore.flag.kind"] == "revocation"
    assert "reservation-00/plan" in list(flags[0].attributes["icore.flag.obligations"])


def test_content_capture_is_opt_in(tmp_path: Path) -> None:
    """Arguments and results are recorded only with capture_content."""
    spans_x = InMemorySpanExporter()
    provider = make_provider(exporter=spans_x, batch=False)
    try:
        _live(tmp_path, OtelExporter(tracer_provider=provider, capture_content=True),
              "planfence")
        (tool,) = _by_name(spans_x.get_finished_spans(), "execute_tool ")
        assert tool.attributes is not None
        assert "option" in json.loads(str(tool.attributes["gen_ai.tool.call.arguments"]))
        assert json.loads(str(tool.attributes["gen_ai.tool.call.result"]))["executed"]
    finally:
        provider.shutdown()


# ------------------------------------------------------------------ round trip
@pytest.mark.parametrize(("policy", "seeds"), [("planfence", (0,)),
                                               ("owner_head_freshness", (0, 1, 2))])
def test_round_trip_audits_to_the_native_metrics(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path, policy: str,
        seeds: Sequence[int]) -> None:
    """A live run exported and imported back re-audits to its own snd, astab and cq."""
    spans_x, ex = mem
    res = _live(tmp_path, ex, policy, seeds)
    f = _write(spans_x.get_finished_spans(), tmp_path / "run.otlp.json", lines=3)
    r = audit_path(f)
    assert r.trace.family == ICORE_LIVE
    native = res.icore
    assert (r.final.snd, r.final.astab, r.final.cq) == pytest.approx(
        (native["snd"], native["astab"], native["cq"]))
    assert len(r.state.flags) == native["hard_flags"]
    assert len(r.state.events) == native["events"]
    if policy == "owner_head_freshness":
        assert native["cq"] < 1.0  # stale actions are rejected: a non-trivial audit


def test_a_file_of_several_runs_audits_each(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path) -> None:
    """One trace per run (as a Collector's file exporter or --matched writes them)."""
    spans_x, ex = mem
    runs = {p: _live(tmp_path, ex, p) for p in ("planfence", "owner_head_freshness")}
    f = _write(spans_x.get_finished_spans(), tmp_path / "two.otlp.json", lines=4)
    with pytest.raises(AdapterError) as e:
        load_otlp(f)
    assert e.value.field == "traceId"
    results = audit_file(f)
    assert [r.trace.id for r in results] == ["two-planfence", "two-owner_head_freshness"]
    for r in results:
        native = runs[r.trace.id.removeprefix("two-")].icore
        assert (r.final.snd, r.final.astab, r.final.cq) == pytest.approx(
            (native["snd"], native["astab"], native["cq"]))


def test_a_tampered_export_is_refused(mem: tuple[InMemorySpanExporter, OtelExporter],
                                      tmp_path: Path) -> None:
    """Dropping a recorded step makes the replayed event ids differ: typed error."""
    spans_x, ex = mem
    _live(tmp_path, ex, "planfence")
    spans = [s for s in spans_x.get_finished_spans()
             if not (s.attributes and s.attributes.get("icore.event.type") == "catalog_committed")]
    f = _write(spans, tmp_path / "cut.otlp.json")
    with pytest.raises(AdapterError) as e:
        audit_path(f)
    assert e.value.field.endswith("icore.event.id")


def _edit_spans(path: Path, edit: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
    """Rewrite an OTLP JSON file: ``edit(span, attrs)`` may change a span (attrs: by key,
    the value objects themselves); a span for which it returns False is deleted."""
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    for d in docs:
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [sp for sp in ss["spans"] if edit(sp, {
                    a["key"]: a["value"] for a in sp.get("attributes", [])})]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def _set_policy(sp: dict[str, Any], attrs: dict[str, Any]) -> bool:
    for k in ("icore.gate.policy", "icore.run.policy", "gen_ai.guardrail.policy.id"):
        if k in attrs:
            attrs[k]["stringValue"] = "planfence"
    return True


def _drop_auditor(sp: dict[str, Any], attrs: dict[str, Any]) -> bool:
    return attrs.get("icore.call", {}).get("stringValue") != "audited"


@pytest.mark.parametrize(("edit", "field"), [(_set_policy, "icore.gate.policy"),
                                             (_drop_auditor, "icore.audit.verdict")])
def test_an_edited_policy_or_a_cut_off_tail_is_refused(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path,
        edit: Callable[[dict[str, Any], dict[str, Any]], bool], field: str) -> None:
    """QA r8-bad D23: the policy set to one the run did not use, or the auditor's last
    step deleted, re-audited as recorded."""
    spans_x, ex = mem
    _live(tmp_path, ex, "owner_head_freshness")
    f = _write(spans_x.get_finished_spans(), tmp_path / "le.otlp.json")
    audit_path(f)  # as exported: it re-audits
    _edit_spans(f, edit)
    with pytest.raises(AdapterError) as e:
        audit_path(f)
    assert e.value.field.endswith(field), e.value


# ------------------------------------------------------------------ the library's fence
OM = OwnershipMap({"req/a": "alice"}, {"plan/*": "planner"})


def _world() -> tuple[MemoryStore, MemoryStore, MemoryStore, LocalOwners, Record]:
    alice, planner, ex = MemoryStore(OM, "alice"), MemoryStore(OM, "planner"), MemoryStore(
        OM, "executor")
    owners = LocalOwners({"alice": alice, "planner": planner})
    a1 = Record.create(key="req/a", owner="alice", seq=alice.next_seq(), content="A1",
                       type="requirement")
    alice.commit(a1, writer="alice")
    ex.install(a1)
    return alice, planner, ex, owners, a1


def test_fence_decisions_become_spans(mem: tuple[InMemorySpanExporter, OtelExporter]) -> None:
    """protect(): one execute_tool span; each decision an event and a child gate span."""
    spans_x, otel = mem
    alice, planner, ex, owners, a1 = _world()

    def plan(*inputs: Record) -> Record:
        p = derive(key="plan/1", owner="planner", seq=planner.next_seq(),
                   content=bind_action("book", {"dest": inputs[0].content}),
                   inputs=list(inputs))
        head = planner.head("plan/1")  # a re-derived plan states the head it replaces
        planner.commit(p, writer="planner", expected_head=head and head.record_id)
        ex.install(p)
        return p

    p = plan(a1)
    a2 = Record.create(key="req/a", owner="alice", seq=alice.next_seq(), content="A2",
                       parents=[a1.id], type="requirement")
    alice.commit(a2, writer="alice")
    log = DecisionLog()
    fence = Fence.for_store(ex, owners, log=otel.fence_log(log))
    tool = ProtectedTool(lambda dest: f"booked {dest}", depends_on={"req/a"}, name="book")

    def replan(req: ReplanRequest) -> Replan:
        fresh = req.fresh["req/a"]
        return Replan([plan(fresh).id])  # the fresh plan's bound arguments

    res = otel.protect(fence, tool, roots=[p.id], args={"dest": "A1"}, replan=replan,
                       call_id="call-7", agent="executor")
    assert res.executed and len(log) == 2 and otel.dropped == 0
    spans = spans_x.get_finished_spans()
    (span,) = _by_name(spans, "execute_tool ")
    a = span.attributes
    assert a is not None and a["gen_ai.tool.call.id"] == "call-7"
    assert a["icore.decision"] == "authorized" and a["icore.replan.count"] == 1
    assert [e.attributes["icore.decision"] for e in span.events if e.attributes] == [
        "replan_required", "authorized"]
    gates = _by_name(spans, "apply_guardrail ")
    assert len(gates) == 2 and all(g.parent and g.parent.span_id == span.context.span_id
                                   for g in gates)
    g0 = gates[0].attributes
    assert g0 is not None and list(g0["icore.gate.fresh.keys"]) == ["req/a"]
    assert list(g0["icore.gate.fresh.ids"]) == [a2.id] and list(g0["icore.gate.fresh.seqs"]) == [2]


def test_decision_log_sink_and_blocked_status(
        mem: tuple[InMemorySpanExporter, OtelExporter]) -> None:
    """DecisionLog(sink=...) feeds standalone gate spans; a block is an ERROR span."""
    spans_x, otel = mem
    _alice, _planner, ex, owners, a1 = _world()
    fence = Fence.for_store(ex, owners, log=DecisionLog(sink=otel.decision_sink))
    tool = ProtectedTool(lambda: None, depends_on={"req/missing"}, name="noop")
    res = otel.protect(fence, tool, roots=[a1.id], args={})
    assert not res.executed
    spans = spans_x.get_finished_spans()
    (span,) = _by_name(spans, "execute_tool ")
    assert span.status.status_code.name == "ERROR"
    assert span.attributes and span.attributes["error.type"] == "blocked"
    (gate,) = _by_name(spans, "apply_guardrail ")
    assert gate.attributes and gate.attributes["icore.gate.outcome"] == "blocked"
    assert gate.attributes["gen_ai.guardrail.result.value"] == "blocked"


def test_a_users_own_provider_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a provider or endpoint, the global SDK provider the user set is used."""
    import icore.adapters._otel_export as mod

    spans_x = InMemorySpanExporter()
    provider = make_provider(exporter=spans_x, batch=False)
    monkeypatch.setattr(mod.trace, "get_tracer_provider", lambda: provider)
    try:
        ex = OtelExporter()
        assert ex.provider is provider
        ex.decision_sink({"outcome": "authorized", "reason": "valid", "action": "a"})
        ex.shutdown()  # a user's provider is flushed, never shut down
        assert [s.name for s in spans_x.get_finished_spans()] == ["apply_guardrail PlanFence"]
        provider.get_tracer("t").start_span("still-open").end()
        assert len(spans_x.get_finished_spans()) == 2
    finally:
        provider.shutdown()


# ------------------------------------------------------------------ export: audits
def test_audit_spans_cite_obligations(mem: tuple[InMemorySpanExporter, OtelExporter],
                                      tmp_path: Path) -> None:
    """An audited trace: one span, cq timeline, hard flags and diagnoses as events."""
    spans_x, ex = mem
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [
        {"run": {"id": "r1", "ground_truth": "42", "agents": {"coder": "writes code"}}},
        {"agent": "user", "kind": "task", "content": "What is 6*7?"},
        {"agent": "coder", "kind": "output", "content": "The answer is 41."},
        {"agent": "coder", "kind": "termination", "final_answer": "41"}]), encoding="utf-8")
    r = audit_path(f)
    ex.audit(r)
    (span,) = spans_x.get_finished_spans()
    assert span.name == "icore.audit r1" and span.attributes is not None
    assert span.attributes["icore.cq"] == pytest.approx(r.final.cq)
    names = [e.name for e in span.events]
    assert names.count("icore.metrics") == len(r.timeline)
    diags = [e.attributes for e in span.events if e.name == "icore.diagnosis" and e.attributes]
    assert len(diags) == len(r.diagnoses) and all(d["icore.diagnosis.obligations"]
                                                  for d in diags)
    assert names.count("icore.hard_flag") == len(r.state.flags) > 0


# ------------------------------------------------------------------ import: other sources
def _kv(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, bool):
            val: dict[str, Any] = {"boolValue": v}
        elif isinstance(v, int):
            val = {"intValue": str(v)}
        elif isinstance(v, list):
            val = {"arrayValue": {"values": [{"stringValue": str(x)} for x in v]}}
        else:
            val = {"stringValue": str(v)}
        out.append({"key": k, "value": val})
    return out


def _span(sid: int, name: str, parent: int | None, t: int, attrs: dict[str, Any],
          status: int = 0, b64: bool = False) -> dict[str, Any]:
    tid, spid = "ab" * 16, f"{sid:016x}"
    if b64:
        tid = base64.b64encode(bytes.fromhex(tid)).decode()
        spid = base64.b64encode(bytes.fromhex(spid)).decode()
    d: dict[str, Any] = {"traceId": tid, "spanId": spid, "name": name, "kind": 1,
                         "startTimeUnixNano": str(t), "endTimeUnixNano": str(t + 5),
                         "attributes": _kv(attrs), "status": {"code": status}}
    if parent is not None:
        pid = f"{parent:016x}"
        d["parentSpanId"] = base64.b64encode(bytes.fromhex(pid)).decode() if b64 else pid
    return d


def _framework_trace(b64: bool = False) -> str:
    """An OpenInference-instrumented two-agent run (as an agents SDK would emit)."""
    S = [
        _span(1, "Agent workflow", None, 0, {"openinference.span.kind": "CHAIN",
                                            "input.value": "What is 6*7?",
                                            "output.value": "42"}, status=1, b64=b64),
        _span(2, "triage", 1, 10, {"openinference.span.kind": "AGENT", "agent.name": "triage"},
              b64=b64),
        _span(3, "chat gpt-4o", 2, 11, {"gen_ai.operation.name": "chat",
                                        "output.value": "route to math"}, b64=b64),
        _span(4, "transfer_to_math", 2, 12, {"openinference.span.kind": "TOOL"}, b64=b64),
        _span(5, "invoke_agent math", 1, 20, {"gen_ai.operation.name": "invoke_agent",
                                              "gen_ai.agent.name": "math",
                                              "output.value": "The answer is 42"}, b64=b64),
        _span(6, "execute_tool python", 5, 21, {"gen_ai.operation.name": "execute_tool",
                                                "gen_ai.tool.name": "python",
                                                "output.value": "42"}, b64=b64),
        _span(7, "execute_tool python", 5, 22, {"gen_ai.operation.name": "execute_tool",
                                                "gen_ai.tool.name": "python"}, status=2,
              b64=b64),
        _span(8, "search docs", 5, 23, {"openinference.span.kind": "RETRIEVER"}, b64=b64),
    ]
    return json.dumps({"resourceSpans": [{"resource": {"attributes": _kv(
        {"service.name": "demo"})}, "scopeSpans": [{"scope": {"name": "oi"}, "spans": S}]}]})


@pytest.mark.parametrize("b64", [False, True])
def test_openinference_genai_spans_map_to_the_trace(b64: bool) -> None:
    """Agents -> turns (a start, their output at their end), LLM -> outputs, tools ->
    tool outputs with status, handoffs -> instructions, parents -> causes, unknown kinds
    kept as events (never dropped); the agent that hands off is the orchestrator."""
    t = parse_otlp(_framework_trace(b64), file="x.otlp.json", run_id="demo")
    assert t.family == OTEL and t.question == "What is 6*7?" and t.succeeded is True
    kinds = [(s.kind, s.agent) for s in t.steps]
    assert kinds == [
        (StepKind.TASK, "user"), (StepKind.THOUGHT, "triage"), (StepKind.OUTPUT, "triage"),
        (StepKind.INSTRUCTION, "triage"), (StepKind.THOUGHT, "math"),
        (StepKind.TOOL_OUTPUT, "math"), (StepKind.TOOL_OUTPUT, "math"),
        (StepKind.THOUGHT, "math"), (StepKind.OUTPUT, "math"), (StepKind.TERMINATION, "triage")]
    assert t.steps[3].to == "math" and t.orchestrator == "triage"
    # the math agent's own answer comes after its tool work, caused by its turn's start
    assert (t.steps[8].content, t.steps[8].parent) == ("The answer is 42", 4)
    assert [s.exitcode for s in t.steps if s.kind == StepKind.TOOL_OUTPUT] == [0, 1]
    assert t.steps[2].parent == 1 and t.steps[5].parent == 4  # parent/child
    assert t.steps[-1].final_answer == "42"
    assert t.extras["unknown_spans"] == {"RETRIEVER": 1}
    assert set(t.agents) == {"triage", "math"}
    r = audit_trace(t)
    ev = r.state.events
    # causes follow the span tree, not the file order
    assert ev[r.step_events[5]].causes == (r.step_events[4],)
    assert r.final.cq <= 1.0 and r.terminated


def test_phoenix_and_langfuse_exports() -> None:
    """Phoenix span lists (nested attributes, ISO times) and Langfuse observations."""
    phoenix = [
        {"name": "run", "context": {"trace_id": "1" * 32, "span_id": "a" * 16},
         "span_kind": "CHAIN", "start_time": "2026-01-01T00:00:00+00:00",
         "end_time": "2026-01-01T00:00:09+00:00", "status_code": "OK",
         "attributes": {"input": {"value": "q?"}, "output": {"value": "done"}}},
        {"name": "writer", "context": {"trace_id": "1" * 32, "span_id": "b" * 16},
         "parent_id": "a" * 16, "span_kind": "AGENT", "start_time": "2026-01-01T00:00:01Z",
         "end_time": "2026-01-01T00:00:02Z", "status_code": "OK",
         "attributes": {"agent": {"name": "writer"}, "output": {"value": "draft"}}},
        {"name": "lookup", "context": {"trace_id": "1" * 32, "span_id": "c" * 16},
         "parent_id": "b" * 16, "span_kind": "TOOL", "start_time": "2026-01-01T00:00:03Z",
         "end_time": "2026-01-01T00:00:04Z", "status_code": "ERROR", "attributes": {}}]
    t = parse_otlp(json.dumps({"data": phoenix, "next_cursor": None}))
    assert [(s.kind, s.agent) for s in t.steps] == [
        (StepKind.TASK, "user"), (StepKind.THOUGHT, "writer"),
        (StepKind.TOOL_OUTPUT, "writer"), (StepKind.OUTPUT, "writer"),
        (StepKind.TERMINATION, "writer")]
    assert t.steps[2].exitcode == 1 and t.steps[3].content == "draft"
    assert t.orchestrator is None  # nothing routes: no agent holds assignment authority
    langfuse = {"id": "tr1", "name": "run", "observations": [
        {"id": "o1", "traceId": "tr1", "type": "AGENT", "name": "planner",
         "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:05Z",
         "input": "plan a trip", "output": "plan"},
        {"id": "o2", "traceId": "tr1", "type": "GENERATION", "name": "llm",
         "parentObservationId": "o1", "startTime": "2026-01-01T00:00:01Z",
         "endTime": "2026-01-01T00:00:02Z", "output": {"text": "ok"}, "model": "m"},
        {"id": "o3", "traceId": "tr1", "type": "TOOL", "name": "book",
         "parentObservationId": "o1", "startTime": "2026-01-01T00:00:03Z",
         "endTime": "2026-01-01T00:00:04Z", "level": "ERROR", "statusMessage": "no seats"},
        {"id": "o4", "traceId": "tr1", "type": "EVENT", "name": "note",
         "parentObservationId": "o1", "startTime": "2026-01-01T00:00:04Z"}]}
    t2 = parse_otlp(json.dumps(langfuse))
    # the root agent's own output is the final answer: the termination carries it
    assert [(s.kind, s.agent) for s in t2.steps] == [
        (StepKind.TASK, "user"), (StepKind.THOUGHT, "planner"), (StepKind.OUTPUT, "planner"),
        (StepKind.TOOL_OUTPUT, "planner"), (StepKind.THOUGHT, "planner"),
        (StepKind.TERMINATION, "planner")]
    assert t2.steps[-1].final_answer == "plan"
    assert t2.steps[3].exitcode == 1 and t2.steps[3].content == "no seats"
    assert t2.extras["unknown_spans"] == {"EVENT": 1}


@pytest.mark.parametrize(("doc", "field"), [
    ({"traces": []}, "resourceSpans"),
    ({"resourceSpans": {}}, "resourceSpans"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]},
     "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8,
                                                    "name": "x", "attributes": [
                                                        {"key": "k", "value": {"intValue":
                                                                               "zz"}}]}]}]}]},
     "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value"),
    ([{"foo": 1}], "[0].context"),
    ("just a string", "<root>"),
])
def test_non_otlp_input_gets_a_typed_error_naming_the_field(doc: Any, field: str) -> None:
    """A file that is not OTLP: AdapterError with the offending field."""
    with pytest.raises(AdapterError) as e:
        parse_spans(json.dumps(doc), file="bad.otlp.json")
    assert e.value.field == field and e.value.file == "bad.otlp.json"


def test_file_type_dispatch(tmp_path: Path) -> None:
    """*.otlp.json by name, an OTLP .json by content; Who&When .json still goes there."""
    a = tmp_path / "run.otlp.json"
    a.write_text(_framework_trace(), encoding="utf-8")
    b = tmp_path / "phoenix-export.json"
    b.write_text(_framework_trace(), encoding="utf-8")
    assert load_trace(a).family == OTEL and load_trace(b).family == OTEL
    assert load_otlp(a).id == "run"
    c = tmp_path / "ww.json"
    c.write_text(json.dumps({"history": [], "question": "q"}), encoding="utf-8")
    with pytest.raises(AdapterError) as e:
        load_trace(c)
    assert "otlp" not in e.value.problem.lower()


def test_cli_run_export_and_audit_round_trip(tmp_path: Path) -> None:
    """`icore run --otlp-endpoint file:...` then `icore audit run.otlp.json`."""
    f = tmp_path / "live.otlp.json"
    runner = CliRunner()
    r1 = runner.invoke(app, ["run", "-o", str(tmp_path / "run"), "--json",
                             "--otlp-endpoint", f"file:{f}"])
    assert r1.exit_code == 0, r1.output
    native = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))["icore"]
    out = tmp_path / "audit"
    r2 = runner.invoke(app, ["audit", str(f), "-o", str(out), "--no-report",
                             "--otlp-endpoint", f"file:{tmp_path / 'audit.otlp.json'}"])
    assert r2.exit_code == 0, r2.output
    assert "icore_live" in r2.output and f"{native['cq']:.3f}" in r2.output
    spans = parse_spans((tmp_path / "audit.otlp.json").read_text(encoding="utf-8"))
    assert [s.name for s in spans] == ["icore.audit live"]


def test_traces_endpoint() -> None:
    """A bare base URL gets /v1/traces; a full path is kept; other schemes refused."""
    assert traces_endpoint("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert traces_endpoint("http://h:4318/") == "http://h:4318/v1/traces"
    full = "https://cloud.langfuse.com/api/public/otel/v1/traces"
    assert traces_endpoint(full) == full
    with pytest.raises(AdapterError):
        traces_endpoint("grpc://h:4317")


def test_an_unwritable_file_endpoint_is_refused(tmp_path: Path) -> None:
    """`file:` into a missing folder: a typed error before anything runs."""
    with pytest.raises(AdapterError) as e:
        OtelExporter(endpoint=f"file:{tmp_path / 'missing' / 'x.otlp.json'}")
    assert "missing" in e.value.file


_attr = st.one_of(st.booleans(), st.integers(-2**62, 2**62), st.text(max_size=20),
                  st.floats(allow_nan=False, allow_infinity=False),
                  st.lists(st.text(max_size=5), max_size=3))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), _attr, max_size=6))
def test_otlp_json_round_trips_attributes(attrs: dict[str, Any]) -> None:
    """otlp_json -> parse_spans keeps every attribute value (types included)."""
    spans_x = InMemorySpanExporter()
    provider = make_provider(exporter=spans_x, batch=False)
    try:
        provider.get_tracer("t").start_span("s", attributes=attrs).end()
        (back,) = parse_spans(json.dumps(otlp_json(spans_x.get_finished_spans())))
    finally:
        provider.shutdown()
    assert back.attributes == {k: list(v) if isinstance(v, list) else v
                               for k, v in attrs.items()}


def test_jaeger_json_and_its_otlp_api() -> None:
    """Jaeger's own JSON (UI download) and its api_v3 OTLP wrapper both import."""
    jaeger = {"data": [{"traceID": "ab" * 16, "processes": {"p1": {"serviceName": "svc"}},
                        "spans": [
        {"traceID": "ab" * 16, "spanID": "01" * 8, "operationName": "invoke_agent boss",
         "references": [], "startTime": 1000, "duration": 50, "processID": "p1",
         "tags": [{"key": "gen_ai.operation.name", "type": "string", "value": "invoke_agent"},
                  {"key": "gen_ai.agent.name", "type": "string", "value": "boss"}]},
        {"traceID": "ab" * 16, "spanID": "02" * 8, "operationName": "execute_tool search",
         "references": [{"refType": "CHILD_OF", "traceID": "ab" * 16, "spanID": "01" * 8}],
         "startTime": 1010, "duration": 5, "processID": "p1",
         "tags": [{"key": "gen_ai.operation.name", "type": "string", "value": "execute_tool"},
                  {"key": "error", "type": "bool", "value": True}]}]}]}
    t = parse_otlp(json.dumps(jaeger))
    assert [(s.kind, s.agent) for s in t.steps] == [
        (StepKind.TASK, "user"), (StepKind.THOUGHT, "boss"), (StepKind.TOOL_OUTPUT, "boss"),
        (StepKind.TERMINATION, "boss")]
    assert t.steps[2].exitcode == 1 and t.steps[2].parent == 1
    v3 = {"result": json.loads(_framework_trace())}
    assert len(parse_otlp(json.dumps(v3)).steps) == 10


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**70) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "spanId",
                         "parentSpanId", "name", "attributes", "key", "value", "stringValue",
                         "intValue", "arrayValue", "values", "events", "status", "code",
                         "context", "span_id", "trace_id", "parent_id", "start_time",
                         "observations", "id", "type", "data", "result", "spans",
                         "operationName", "tags", "references", "startTimeUnixNano"]),
        c, max_size=4),
    max_leaves=12,
)


def _span_doc(attrs: Any, **kw: Any) -> dict[str, Any]:
    sp = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "s", "attributes": attrs, **kw}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [sp]}]}]}


@settings(max_examples=150, deadline=None)
@given(st.one_of(_json, _json.map(_span_doc),
                 st.builds(lambda a, b: _span_doc([], **{"startTimeUnixNano": a, "status": b}),
                           _json, _json | st.dictionaries(st.just("code"), _json)),
                 st.builds(lambda a: [{"context": {"trace_id": "a", "span_id": "b"},
                                       "name": "x", **a}], st.dictionaries(
                     st.sampled_from(["parent_id", "attributes", "events", "span_kind",
                                      "start_time", "status_code"]), _json)),
                 st.builds(lambda a: {"observations": [{"id": "o", **a}]}, st.dictionaries(
                     st.sampled_from(["type", "parentObservationId", "metadata", "input",
                                      "level", "startTime", "traceId", "model"]), _json)),
                 st.builds(lambda a: {"data": [{"traceID": "ab" * 16, "spans": [
                     {"operationName": "op", "spanID": "01" * 8, **a}]}]}, st.dictionaries(
                     st.sampled_from(["tags", "references", "startTime", "duration",
                                      "processID", "spanID"]), _json))))
def test_any_json_gives_a_trace_or_a_typed_error(doc: Any) -> None:
    """Never a crash: arbitrary JSON is a trace (then audited) or an AdapterError."""
    try:
        t = parse_otlp(json.dumps(doc), file="f.otlp.json")
    except AdapterError as e:
        err: AdapterError | None = e
    else:
        err = None
        audit_trace(t)
    assert err is None or (err.file == "f.otlp.json" and err.field)


def test_otel_exporter_otlp_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """No endpoint, no provider: OTEL_EXPORTER_OTLP_ENDPOINT / _HEADERS / OTEL_SERVICE_NAME
    decide where spans go (OTLP/HTTP protobuf to <base>/v1/traces, with the headers)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    got: list[tuple[str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT",
                           f"http://127.0.0.1:{srv.server_address[1]}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=icore-test")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "icore-ci")
        ex = OtelExporter()
        ex.decision_sink({"outcome": "blocked", "reason": "no_owner", "action": "pay",
                          "deps": ["req/a"]})
        ex.shutdown()
    finally:
        srv.shutdown()
        srv.server_close()
        th.join(5)
    (path, headers, body), = got
    assert path == "/v1/traces" and headers["x-team"] == "icore-test"
    assert headers["content-type"] == "application/x-protobuf"
    req = ExportTraceServiceRequest.FromString(body)
    rs = req.resource_spans[0]
    assert {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"] == (
        "icore-ci")
    (span,) = rs.scope_spans[0].spans
    assert span.name == "apply_guardrail PlanFence" and rs.scope_spans[0].scope.name == "icore"


# ------------------------------------------- the 2026 GenAI operations, in and out (#28)
def _gate_attrs(outcome: str, reason: str, frontier: str, head: str) -> dict[str, Any]:
    return {"gen_ai.operation.name": "apply_guardrail",
            "gen_ai.guardrail.component.name": "PlanFence",
            "gen_ai.guardrail.result.type": "outcome",
            "gen_ai.guardrail.result.value": outcome,
            "gen_ai.guardrail.result.reason": reason,
            "icore.gate.outcome": outcome, "icore.gate.reason": reason,
            "icore.gate.action": "ship", "icore.gate.policy": "planfence",
            "icore.gate.point": 1 if reason == "stale" else 2,
            "icore.gate.roots": ["c" * 64], "icore.gate.deps": ["req/o"],
            "icore.gate.frontier.keys": ["req/o"], "icore.gate.frontier.ids": [frontier],
            "icore.gate.heads.keys": ["req/o"], "icore.gate.heads.ids": [head]}


def test_import_reads_the_2026_genai_operations(tmp_path: Path) -> None:
    """invoke_workflow groups, plan is a plan, apply_guardrail a gate thought whose
    icore.gate.* attributes come back as PlanFence decisions (the lineage picture);
    nothing is an unknown span."""
    a, b = "a" * 64, "b" * 64
    spans = [
        _span(1, "invoke_workflow team", None, 10, {
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": "team",
            "input.value": "ship order 7", "output.value": "shipped"}),
        _span(2, "plan alice", 1, 20, {"gen_ai.operation.name": "plan",
                                       "gen_ai.agent.name": "alice",
                                       "output.value": "ship to Berlin"}),
        _span(3, "invoke_agent alice", 1, 30, {"gen_ai.operation.name": "invoke_agent",
                                               "gen_ai.agent.name": "alice",
                                               "output.value": "calling ship"}),
        _span(4, "execute_tool ship", 3, 40, {"gen_ai.operation.name": "execute_tool",
                                              "gen_ai.tool.name": "ship",
                                              "output.value": "shipped"}),
        _span(5, "apply_guardrail PlanFence", 4, 41, _gate_attrs("replan_required",
                                                                  "stale", a, b)),
        _span(6, "apply_guardrail PlanFence", 4, 42, _gate_attrs("authorized", "valid",
                                                                  b, b)),
    ]
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / "genai.otlp.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    t = load_otlp(path)
    assert [s.kind.value for s in t.steps] == ["task", "plan", "thought", "tool_output",
                                               "thought", "thought", "output", "termination"]
    assert t.steps[1].agent == "alice" and t.steps[1].content == "ship to Berlin"
    assert "unknown_spans" not in t.extras and "warnings" not in t.extras
    decs = t.extras["planfence"]["decisions"]
    assert [(d["outcome"], d["reason"]) for d in decs] == [("replan_required", "stale"),
                                                          ("authorized", "valid")]
    assert decs[0]["frontier"] == {"req/o": a} and decs[0]["heads"] == {"req/o": b}
    assert len({d["task"] for d in decs}) == 1
    r = audit_path(path)
    assert r.summary().steps == len(t.steps)


def test_exported_gate_decisions_come_back_as_decisions(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path) -> None:
    """The library's fence decisions exported as apply_guardrail spans and imported
    again carry the same outcome, reason, roots, D(a), frontier and heads."""
    spans_x, otel = mem
    _alice, _planner, ex, owners, a1 = _world()
    plan = derive(key="plan/p", owner="planner", seq=1,
                  content=bind_action("book", {"dest": "A"}), inputs=[a1])
    ex.install(plan)
    log = DecisionLog()
    fence = Fence.for_store(ex, owners, log=otel.fence_log(log))
    tool = ProtectedTool(lambda dest: dest, depends_on={"req/a"}, name="book")
    res = otel.protect(fence, tool, roots=[plan.id], args={"dest": "A"})
    assert res.executed
    path = _write(spans_x.get_finished_spans(), tmp_path / "lib.otlp.json")
    got = load_otlp(path).extras["planfence"]["decisions"]
    want = [d.to_dict() for d in log]
    keys = ("outcome", "reason", "action", "roots", "deps", "frontier", "heads", "policy",
            "point")
    assert [{k: g[k] for k in keys} for g in got] == [{k: w[k] for k in keys} for w in want]
