"""A human's answer to a protected call, exported to OpenTelemetry and audited (#29).

``OtelExporter.human_answer`` writes ``icore.approval.*`` on an ``apply_guardrail human``
span; the OTLP importer reads it back as the JSONL importer reads an ``approval``
thought, so the audit's lineage says "approved by a human" (or rejected) for the call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from icore.adapters import (
    AdapterError,
    ExportError,
    OtelExporter,
    load_otlp,
    make_provider,
    otlp_json,
)
from icore.cli import app
from icore.fence import DecisionLog, Fence, ProtectedTool, bind_action
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

OM = OwnershipMap({"req/a": "alice"}, {"plan/*": "planner"})


@pytest.fixture
def mem() -> Iterator[tuple[InMemorySpanExporter, OtelExporter]]:
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    try:
        yield spans, OtelExporter(tracer_provider=provider, capture_content=True)
    finally:
        provider.shutdown()


def _write(spans: Sequence[ReadableSpan], path: Path) -> Path:
    path.write_text(json.dumps(otlp_json(list(spans))) + "\n", encoding="utf-8")
    return path


def _run(otel: OtelExporter, answers: Sequence[bool], *, root: bool = False) -> None:
    """A planner's turn: one protected ``book`` call per answer, each put to a human
    (the answer recorded inside the call's span); a rejected call does not run.

    ``root``: the calls are made at the root (no agent span: each its own trace)."""
    alice, planner, ex = (MemoryStore(OM, w) for w in ("alice", "planner", "executor"))
    owners = LocalOwners({"alice": alice, "planner": planner})
    a1 = Record.create(key="req/a", owner="alice", seq=alice.next_seq(), content="A1",
                       type="requirement")
    alice.commit(a1, writer="alice")
    ex.install(a1)
    fence = Fence.for_store(ex, owners, log=otel.fence_log(DecisionLog()))
    with contextlib.nullcontext() if root else otel.tracer.start_as_current_span(
            "invoke_agent planner", attributes={
                "openinference.span.kind": "AGENT", "gen_ai.agent.name": "planner",
                "input.value": "book A1"}):
        for n, yes in enumerate(answers, 1):
            p = derive(key=f"plan/{n}", owner="planner", seq=planner.next_seq(),
                       content=bind_action("book", {"dest": "A1"}), inputs=[a1])
            planner.commit(p, writer="planner")
            ex.install(p)

            def book(dest: str, yes: bool = yes) -> str:
                otel.human_answer("book", yes, args={"dest": dest})
                if not yes:
                    raise PermissionError("a human said no")
                return f"booked {dest}"

            tool = ProtectedTool(book, depends_on={"req/a"}, name="book")
            try:
                otel.protect(fence, tool, roots=[p.id], args={"dest": "A1"})
            except PermissionError:
                pass


def test_an_exported_answer_is_read_back_into_the_lineage(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path) -> None:
    """Approved then rejected: the OTLP trace's lineage says so, in ``--json`` and on
    the console, as for a JSONL recording."""
    spans_x, otel = mem
    _run(otel, [True, False])
    spans = spans_x.get_finished_spans()
    human = [s for s in spans if s.name == "apply_guardrail human"]
    assert len(human) == 2 and human[0].attributes is not None
    assert human[0].attributes["icore.approval.approved"] is True
    assert human[0].attributes["icore.approval.args"] == '{"dest":"A1"}'
    path = _write(spans, tmp_path / "run.otlp.json")
    t = load_otlp(path)
    assert t.planfence is not None
    assert [(a.tool, a.approved, a.args) for a in t.planfence.answers] == [
        ("book", True, '{"dest":"A1"}'), ("book", False, '{"dest":"A1"}')]
    js = tmp_path / "o.json"
    res = CliRunner().invoke(app, ["audit", str(path), "--no-report", "--json", str(js)])
    assert res.exit_code == 0, res.output
    (run,) = json.loads(js.read_text())["runs"]
    assert [lv.get("human") for lv in run["lineage"]] == ["approved", "rejected"]
    assert all(isinstance(lv.get("human_step"), int) for lv in run["lineage"])
    assert "1 approved by a human; 1 rejected by a human" in " ".join(res.output.split())


def test_arguments_are_kept_only_with_content_capture() -> None:
    spans = InMemorySpanExporter()
    provider = make_provider(exporter=spans, batch=False)
    try:
        OtelExporter(tracer_provider=provider, capture_content=False).human_answer(
            "book", True, request="a" * 64, args={"dest": "A1"})
        (s,) = spans.get_finished_spans()
        assert s.attributes is not None and "icore.approval.args" not in s.attributes
        assert s.attributes["icore.approval.request"] == "a" * 64
        with pytest.raises(ExportError):
            OtelExporter(tracer_provider=provider).human_answer("", True)
    finally:
        provider.shutdown()


@pytest.mark.parametrize(("attrs", "field"), [
    ({"icore.approval.approved": "yes", "icore.approval.tool": "book"}, "approved"),
    ({"icore.approval.approved": True}, "tool"),
    ({"icore.approval.approved": True, "icore.approval.tool": "book",
      "icore.approval.request": "abc"}, "request"),
    ({"icore.approval.approved": False, "icore.approval.tool": "book",
      "icore.approval.args": "[1]"}, "args"),
])
def test_a_malformed_answer_is_refused_naming_the_attribute(
        mem: tuple[InMemorySpanExporter, OtelExporter], tmp_path: Path,
        attrs: dict[str, Any], field: str) -> None:
    spans_x, otel = mem
    with otel.tracer.start_as_current_span("invoke_agent a", attributes={
            "openinference.span.kind": "AGENT", "gen_ai.agent.name": "a"}):
        otel.tracer.start_span("apply_guardrail human", attributes=attrs).end()
    path = _write(spans_x.get_finished_spans(), tmp_path / "bad.otlp.json")
    with pytest.raises(AdapterError) as ei:
        load_otlp(path)
    assert str(ei.value.fields.get("field", "")).endswith(f"icore.approval.{field}")
