"""OpenTelemetry out: live runs, fence decisions and audits as GenAI spans (design.md 2).

Built on ``opentelemetry-sdk`` and the OTLP/HTTP exporter (extra ``icore[otel]``). One
:class:`OtelExporter` serves three sources:

- **live runs** (planfence Sec. 5.2, App. A.5): pass it as ``observer`` to
  :func:`icore.live.run_live` / :func:`icore.live.run_matched` (``icore run
  --otlp-endpoint URL``). Each run is one trace, named as the 2026 GenAI semantic
  conventions (open-telemetry/semantic-conventions-genai v0.1.0) name them: an
  ``invoke_workflow`` run span, one ``invoke_workflow`` span per task
  (``gen_ai.conversation.id`` = the task), a ``plan`` span per plan or replan, an
  ``invoke_agent`` span per other agent turn and an ``execute_tool`` span per protected
  call, whose children are the gate decisions as ``apply_guardrail PlanFence`` spans
  (``gen_ai.guardrail.*`` result attributes and event; planfence Alg. 1) with roots L(a),
  D(a), frontier, heads, outcome and reason in ``icore.gate.*``. Every
  audited step carries the iCORE verdicts, hard flags and the metrics snd/astab/cq after
  it as span events (icore Def. 6, Sec. 4). The step's arguments are attributes, so the
  importer can re-audit the run (:func:`icore.adapters.load_otlp`).
- **the library's fence decisions**: :meth:`OtelExporter.fence_log` is a
  ``Fence(log=...)`` callable (it wraps a :class:`icore.fence.DecisionLog`), and
  :meth:`OtelExporter.decision_sink` a ``DecisionLog(sink=...)``; :meth:`OtelExporter.protect`
  runs one protected action inside an ``execute_tool`` span. fence/ stays pure: it never
  imports opentelemetry, the exporter only listens.
- **audits** (``icore audit ... --otlp-endpoint URL``): :meth:`OtelExporter.audit` emits one
  span per audited run with the final metrics, the cq timeline, hard flags and diagnoses
  with the obligations they cite.

Tracer provider: the one passed in, else the global one when the application set an SDK
provider (a user's own provider and processors are used as they are), else a new
:class:`~opentelemetry.sdk.trace.TracerProvider` with a batch span processor and an
OTLP/HTTP exporter that honours ``OTEL_EXPORTER_OTLP_*`` (endpoint, headers, timeout,
compression, certificates) and ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``.
Arguments and results of tool calls are recorded only with ``capture_content=True``
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), as the GenAI conventions ask.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from icore.adapters import _otel_names as N
from icore.adapters._errors import ExportError
from icore.fence import ActionResult, DecisionLog, Fence, GateDecision, ProtectedTool, Replanner
from icore.records import RecordId

if TYPE_CHECKING:
    from icore.adapters._results import AuditResult
    from icore.live import LiveRunResult, RunManifest, TaskResult

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]

_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL of ``url``: a bare base gets ``/v1/traces`` appended.

    ``http://127.0.0.1:6006`` -> ``http://127.0.0.1:6006/v1/traces``; a URL with a path
    (``https://cloud.langfuse.com/api/public/otel/v1/traces``) is used as given.

    Raises:
        ExportError: not an ``http(s)://`` URL.
    """
    u = url.strip()
    if not u.startswith(("http://", "https://")):
        raise ExportError(f"OTLP/HTTP endpoint must be an http(s) URL, not {url!r}",
                          file="<otlp>", field="endpoint")
    rest = u.split("://", 1)[1]
    if "/" not in rest or (rest.endswith("/") and rest.count("/") == 1):
        return u.rstrip("/") + "/v1/traces"
    return u


def make_provider(*, endpoint: str | None = None, headers: Mapping[str, str] | None = None,
                  exporter: SpanExporter | None = None, batch: bool = True,
                  service_name: str | None = None) -> TracerProvider:
    """A new SDK provider exporting over OTLP/HTTP (or to ``exporter``).

    Args:
        endpoint: collector URL (see :func:`traces_endpoint`); None: the
            ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
            variables (default ``http://localhost:4318/v1/traces``).
        headers: extra HTTP headers (else ``OTEL_EXPORTER_OTLP_HEADERS``).
        exporter: export here instead (e.g. the SDK's in-memory exporter in tests).
        batch: a batch span processor (default) or a simple, synchronous one.
        service_name: ``service.name`` (else ``OTEL_SERVICE_NAME``, else ``icore``).
    """
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=traces_endpoint(endpoint) if endpoint else None,
                                    headers=dict(headers) if headers else None)
    attrs: dict[str, str] = {}
    if service_name or not os.environ.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = service_name or "icore"
    provider = TracerProvider(resource=Resource.create(attrs))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch
                                else SimpleSpanProcessor(exporter))
    return provider


class SpanCounter(SpanProcessor):
    """A span processor that only counts ended spans (for benchmarks; negligible cost)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        """Count one ended span."""
        self.ended += 1


def _user_provider() -> trace.TracerProvider | None:
    p = trace.get_tracer_provider()
    return None if isinstance(p, trace.ProxyTracerProvider | trace.NoOpTracerProvider) else p


def _now() -> int:
    return time.time_ns()


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))


def decision_attributes(d: Mapping[str, Any], *, prefix: str = N.G) -> dict[str, AttrValue]:
    """OTel attributes of one gate decision (a :meth:`GateDecision.to_dict` dict).

    Maps become parallel arrays (``<prefix>frontier.keys`` / ``.ids``), since attribute
    values cannot be maps; record sequences are given for fresh records when known
    (``<prefix>fresh.seqs``).
    """
    out: dict[str, AttrValue] = {}
    for k in ("outcome", "reason", "action", "policy", "detail"):
        if d.get(k) is not None:
            out[prefix + k] = str(d[k])
    for k in ("replanned",):
        if d.get(k) is not None:
            out[prefix + k] = bool(d[k])
    for k in ("point", "owners_contacted", "heads_checked"):
        if isinstance(d.get(k), int):
            out[prefix + k] = int(d[k])
    if isinstance(d.get("at_ms"), int | float):
        out[prefix + "at_ms"] = float(d["at_ms"])
    out[prefix + "roots"] = [str(r) for r in d.get("roots") or ()]
    out[prefix + "deps"] = [str(r) for r in d.get("deps") or ()]
    for m in ("frontier", "heads", "fresh"):
        v = d.get(m) or {}
        keys = sorted(v)
        out[f"{prefix}{m}.keys"] = keys
        out[f"{prefix}{m}.ids"] = [str(v[k]) for k in keys]
    seqs = d.get("fresh_seqs")
    if isinstance(seqs, Mapping):
        out[prefix + "fresh.seqs"] = [int(seqs.get(k, -1)) for k in sorted(d.get("fresh") or {})]
    return out


def guardrail_attributes(d: Mapping[str, Any]) -> dict[str, AttrValue]:
    """The GenAI guardrail attributes of one gate decision (``apply_guardrail``).

    semantic-conventions-genai, "GenAI guardrails": the component is ``PlanFence``, the
    policy id the gate's policy, the source ``tool_input`` (the gate judges a tool call
    before it runs), and the result the gate's own ``outcome`` field and value
    (``authorized`` / ``replan_required`` / ``blocked``) with its reason code, kept as
    the gate reports them (no allow/deny translation).
    """
    out: dict[str, AttrValue] = {
        N.OPERATION: N.APPLY_GUARDRAIL, N.PROVIDER: "icore", N.GR_COMPONENT: N.GATE_COMPONENT,
        N.GR_SOURCE: N.GATE_SOURCE, N.GR_RESULT_TYPE: N.GATE_RESULT,
        N.GR_RESULT_VALUE: str(d.get("outcome"))}
    if d.get("policy"):
        out[N.GR_POLICY] = str(d["policy"])
    if d.get("reason"):
        out[N.GR_RESULT_REASON] = str(d["reason"])
    return out


def _guardrail_span(tracer: trace.Tracer, d: Mapping[str, Any], extra: Mapping[str, AttrValue],
                    *, context: Any = None, start: int | None = None) -> Span:
    """An ``apply_guardrail PlanFence`` span for one decision, with its result event."""
    attrs = {**extra, **decision_attributes(d), **guardrail_attributes(d),
             N.SPAN_KIND: "GUARDRAIL", N.DECISION: str(d.get("outcome")),
             N.REASON: str(d.get("reason"))}
    span = tracer.start_span(f"{N.APPLY_GUARDRAIL} {N.GATE_COMPONENT}", context=context,
                             start_time=start, kind=SpanKind.CLIENT, attributes=attrs)
    span.add_event(N.EV_GUARDRAIL_RESULT, {k: v for k, v in attrs.items()
                                           if k.startswith("gen_ai.guardrail.")})
    return span


def _decision_dict(d: GateDecision) -> dict[str, Any]:
    out = d.to_dict()
    out["fresh_seqs"] = {k: r.seq for k, r in d.fresh.items()}
    return out


def _outcome_events(span: Span, outcome: Mapping[str, Any]) -> None:
    """Verdicts (attributes), hard flags and metrics (span events) of one audited step."""
    verdicts = outcome.get("verdicts") or ()
    if verdicts:  # attributes, not events: one set call per step (export cost)
        span.set_attributes({
            "icore.verdict.operations": [str(v.get("operation")) for v in verdicts],
            "icore.verdict.targets": [str(v.get("target")) for v in verdicts],
            "icore.verdict.decisions": [str(v.get("decision")) for v in verdicts],
            "icore.verdict.reasons": ["; ".join(map(str, v.get("reasons") or ()))
                                      for v in verdicts]})
    for f in outcome.get("flags") or ():
        span.add_event(N.EV_FLAG, {
            "icore.flag.id": str(f.get("id")), "icore.flag.kind": str(f.get("kind")),
            "icore.flag.obligations": [str(o) for o in f.get("obligations") or ()],
            "icore.flag.assertions": [str(a) for a in f.get("assertions") or ()],
            "icore.flag.detail": str(f.get("detail", ""))})
    if "cq" in outcome:
        span.add_event(N.EV_METRICS, {"icore.snd": float(outcome["snd"]),
                                      "icore.astab": float(outcome["astab"]),
                                      "icore.cq": float(outcome["cq"])})


@dataclass
class _TaskSpans:
    span: Span
    last_ns: int
    tool: Span | None = None
    gates: int = 0
    replans: int = 0
    authorized: bool = False


@dataclass
class _RunSpans:
    span: Span | None = None
    tasks: dict[str, _TaskSpans] = field(default_factory=dict)
    seq: int = 0
    provider_name: str = "icore"
    roles: dict[str, str] = field(default_factory=dict)


class OtelExporter:
    """Emits icore runs, fence decisions and audits as OpenTelemetry GenAI spans.

    Args:
        endpoint: OTLP/HTTP collector URL for a new provider (used instead of a global
            provider); ``file:PATH`` appends OTLP JSON lines to PATH instead (the
            Collector file exporter's format, readable by ``icore audit``); None: the
            global SDK provider if set, else the ``OTEL_EXPORTER_OTLP_*`` variables.
        tracer_provider: use this provider (default: the global SDK provider when one
            is set, else a new batch-exporting one, shut down by :meth:`shutdown`).
        headers: extra HTTP headers for a new provider (e.g. Langfuse's Authorization).
        capture_content: record tool arguments and results (default: the
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` variable, off).

    Usable as a live-run observer (:class:`icore.live.RunObserver`).
    """

    def __init__(self, *, endpoint: str | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 headers: Mapping[str, str] | None = None,
                 capture_content: bool | None = None) -> None:
        provider = tracer_provider or (None if endpoint else _user_provider())
        self._own = provider is None
        self.delivery: DeliveryCheck | None = None
        """Counts spans the exporter could not deliver (when this exporter made the
        provider): ``icore audit --otlp-endpoint`` fails on them."""
        if provider is None:
            inner: SpanExporter
            if endpoint and endpoint.startswith("file:"):
                inner = OtlpJsonFileExporter(endpoint.removeprefix("file://")
                                             .removeprefix("file:"))
            else:
                inner = OTLPSpanExporter(
                    endpoint=traces_endpoint(endpoint) if endpoint else None,
                    headers=dict(headers) if headers else None)
            self.delivery = DeliveryCheck(inner)
        self.provider: trace.TracerProvider = provider or make_provider(
            exporter=self.delivery)
        self.tracer = self.provider.get_tracer(N.SCOPE)
        if capture_content is None:
            capture_content = os.environ.get(_CAPTURE_ENV, "").strip().lower() == "true"
        self.capture_content = capture_content
        self._lock = threading.Lock()
        self._run = _RunSpans()
        self.dropped = 0
        """Live-run steps whose spans could not be built (an observer never raises)."""

    @contextmanager
    def _safe(self) -> Iterator[None]:
        try:
            yield
        except Exception:  # never stop a run over telemetry; count what was lost
            self.dropped += 1

    # -- lifecycle --------------------------------------------------------------------
    def flush(self, timeout_s: float = 30.0) -> bool:
        """Export every finished span now; False when the provider timed out."""
        fn = getattr(self.provider, "force_flush", None)
        return bool(fn(int(timeout_s * 1000))) if callable(fn) else True

    def shutdown(self) -> None:
        """Flush, and shut down the provider when the exporter created it."""
        self.flush()
        if self._own:
            fn = getattr(self.provider, "shutdown", None)
            if callable(fn):
                fn()

    def __enter__(self) -> OtelExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- live runs (icore.live.RunObserver) -------------------------------------------
    def run_started(self, manifest: RunManifest, policy: str) -> None:
        """Open the run span (one trace per run)."""
        with self._lock, self._safe():
            self._end_run()
            backend = manifest.backend.kind
            self._run = _RunSpans(provider_name="openai" if backend == "llm" else "icore",
                                  roles={a.id: a.role for a in manifest.agents})
            self._run.span = self.tracer.start_span(
                f"{N.INVOKE_WORKFLOW} {manifest.name}", kind=SpanKind.INTERNAL, attributes={
                    N.OPERATION: N.INVOKE_WORKFLOW, N.AGENT_NAME: manifest.name,
                    N.WORKFLOW_NAME: manifest.name, N.PROVIDER: "icore",
                    N.SPAN_KIND: "CHAIN", N.RUN_NAME: manifest.name, N.RUN_POLICY: policy,
                    N.RUN_FAMILY: manifest.family, N.CALL: "run",
                    N.RUN_MANIFEST: _json(manifest.model_dump(mode="json")),
                    "icore.run.backend": backend})

    def audit_call(self, call: str, task: str, args: Mapping[str, Any],
                   outcome: Mapping[str, Any]) -> None:
        """One step recorded by the live audit (:data:`icore.live.AuditListener`)."""
        with self._lock, self._safe():
            self._audit_call(call, task, args, outcome)

    def task_done(self, result: TaskResult) -> None:
        """Close the workflow's spans with its outcome."""
        with self._lock, self._safe():
            t = self._run.tasks.pop(result.task, None)
            if t is None:
                return
            now = _now()
            self._close_tool(t, now)
            s = t.span
            s.set_attribute("icore.task.success", result.success)
            s.set_attribute("icore.task.executed", result.executed)
            s.set_attribute("icore.task.invalid", result.invalid)
            s.set_attribute(N.REPLAN_COUNT, int(result.replanned))
            if result.audit_verdict is not None:
                s.set_attribute(N.AUDIT_VERDICT, result.audit_verdict)
            if result.error:
                s.set_status(Status(StatusCode.ERROR, result.error[:500]))
            s.end(end_time=now)

    def run_done(self, result: LiveRunResult) -> None:
        """Close the run span with the run's summary and iCORE metrics."""
        with self._lock, self._safe():
            for t in list(self._run.tasks.values()):
                self._close_tool(t, _now())
                t.span.end()
            self._run.tasks.clear()
            s = self._run.span
            if s is None:
                return
            summ = result.summary()
            for k in ("tasks", "succeeded", "invalid_actions", "successful_replans",
                      "blocked", "crashes"):
                s.set_attribute(f"icore.run.{k}", int(summ[k]))
            ic = result.icore
            if ic:
                s.add_event(N.EV_METRICS, {f"icore.{k}": float(ic[k])
                                           for k in ("snd", "astab", "cq") if k in ic})
                s.set_attribute("icore.hard_flags", int(ic.get("hard_flags", 0)))
            if result.error or result.crashes:
                s.set_status(Status(StatusCode.ERROR, result.error or "agent crash"))
            self._end_run()

    def _end_run(self) -> None:
        if self._run.span is not None:
            self._run.span.end()
            self._run.span = None

    def _task(self, task: str, now: int) -> _TaskSpans:
        t = self._run.tasks.get(task)
        if t is None:
            parent = trace.set_span_in_context(self._run.span) if self._run.span else None
            span = self.tracer.start_span(
                f"{N.INVOKE_WORKFLOW} {task}", context=parent, start_time=now,
                kind=SpanKind.INTERNAL, attributes={
                    N.OPERATION: N.INVOKE_WORKFLOW, N.AGENT_NAME: task,
                    N.WORKFLOW_NAME: task, N.PROVIDER: "icore",
                    N.SPAN_KIND: "CHAIN", N.CONVERSATION: task, N.OI_SESSION: task,
                    N.TASK: task})
            t = self._run.tasks[task] = _TaskSpans(span, now)
        return t

    def _common(self, task: str, call: str, agent: str | None) -> dict[str, AttrValue]:
        self._run.seq += 1
        out: dict[str, AttrValue] = {N.CALL: call, N.SEQ: self._run.seq, N.TASK: task,
                                     N.CONVERSATION: task, N.OI_SESSION: task,
                                     N.PROVIDER: self._run.provider_name}
        if agent:
            out[N.AGENT_ID] = agent
            out[N.AGENT_NAME] = agent
            out[N.OI_AGENT_NAME] = agent
            if agent in self._run.roles:
                out[N.AGENT_DESCRIPTION] = f"{self._run.roles[agent]} (icore live team)"
        return out

    def _child(self, t: _TaskSpans, name: str, attrs: Mapping[str, AttrValue], start: int,
               *, parent: Span | None = None, kind: SpanKind = SpanKind.INTERNAL) -> Span:
        ctx = trace.set_span_in_context(parent or t.span)
        return self.tracer.start_span(name, context=ctx, start_time=start, kind=kind,
                                      attributes=attrs)

    def _close_tool(self, t: _TaskSpans, now: int) -> None:
        if t.tool is None:
            return
        if not t.authorized:
            t.tool.set_attribute(N.DECISION, "blocked")
            t.tool.set_attribute(ERROR_ATTR, "blocked")
            t.tool.set_status(Status(StatusCode.ERROR, "blocked by the gate"))
        t.tool.set_attribute(N.REPLAN_COUNT, t.replans)
        t.tool.end(end_time=now)
        t.tool = None
        t.last_ns = now

    def _audit_call(self, call: str, task: str, args: Mapping[str, Any],
                    outcome: Mapping[str, Any]) -> None:
        now = _now()
        if call == "introduce":
            t = self._task(task, now)
            t.span.set_attributes(self._common(task, call, None))
            if outcome.get("event"):
                t.span.set_attribute(N.EVENT_ID, str(outcome["event"]))
            _outcome_events(t.span, outcome)
            return
        t = self._task(task, now)
        agent = str(args.get("agent") or "") or None
        attrs = self._common(task, call, agent)
        if outcome.get("event"):
            attrs[N.EVENT_ID] = str(outcome["event"])
        if call == "gate":
            self._gate(t, attrs, args, outcome, now)
            return
        if call == "executed":
            self._executed(t, attrs, args, outcome, now)
            return
        if t.tool is not None:
            self._close_tool(t, now)
        attrs[N.OPERATION] = N.INVOKE_AGENT
        attrs[N.SPAN_KIND] = "AGENT"
        rec = args.get("record")
        if isinstance(rec, Mapping):
            for k, name in (("id", N.RECORD_ID), ("key", N.RECORD_KEY),
                            ("owner", N.RECORD_OWNER)):
                if rec.get(k) is not None:
                    attrs[name] = str(rec[k])
            if isinstance(rec.get("seq"), int):
                attrs[N.RECORD_SEQ] = int(rec["seq"])
            opt = ((rec.get("content") or {}).get("args") or {}).get("option")
            if opt is not None:
                attrs[N.PLAN_OPTION] = str(opt)
        status: Status | None = None
        if call == "committed":
            attrs[N.EVENT_TYPE] = str(args.get("type"))
        elif call == "revised":
            attrs[N.EVENT_TYPE] = "requirement_revised"
        elif call == "planned":
            attrs[N.EVENT_TYPE] = "plan_written"
            attrs[N.PLAN_REQ_KEY] = str(args.get("req_key"))
            attrs[N.PLAN_REQ_ID] = str(args.get("req_id"))
            attrs[N.REPLAN] = bool(args.get("replan"))
            if args.get("replan"):
                t.replans += 1
        elif call == "audited":
            attrs[N.EVENT_TYPE] = "audit_done"
            attrs[N.AUDIT_VERDICT] = str(args.get("verdict"))
            attrs[N.AUDIT_REQ_KEY] = str(args.get("req_key"))
            attrs[N.AUDIT_REQ_ID] = str(args.get("req_id"))
        elif call in ("failed", "event"):
            attrs[N.EVENT_TYPE] = str(args.get("type"))
            attrs[N.EVENT_FIELDS] = _json(args.get("fields") or {})
            if call == "failed":
                attrs[N.OBLIGATION] = str(args.get("obligation"))
                attrs[ERROR_ATTR] = str(args.get("type"))
                status = Status(StatusCode.ERROR, str(args.get("type")))
            else:
                attrs[N.EVENT_CAUSES] = [str(c) for c in args.get("causes") or ()]
        else:
            attrs[N.EVENT_TYPE] = call
        op = N.PLAN if call == "planned" else N.INVOKE_AGENT
        attrs[N.OPERATION] = op
        name = f"{op} {agent}" if agent else f"icore.{call}"
        span = self._child(t, name, attrs, t.last_ns)
        _outcome_events(span, outcome)
        if status is not None:
            span.set_status(status)
        span.end(end_time=now)
        t.last_ns = now

    def _gate(self, t: _TaskSpans, attrs: dict[str, AttrValue], args: Mapping[str, Any],
              outcome: Mapping[str, Any], now: int) -> None:
        d = args.get("decision") or {}
        action = str(d.get("action") or "action")
        if t.tool is None:
            t.gates = 0
            t.authorized = False
            t.tool = self._child(t, f"{N.EXECUTE_TOOL} {action}", {
                N.OPERATION: N.EXECUTE_TOOL, N.SPAN_KIND: "TOOL", N.TOOL_NAME: action,
                N.OI_TOOL_NAME: action, N.TOOL_TYPE: "function", N.CONVERSATION: attrs[N.TASK],
                N.OI_SESSION: attrs[N.TASK], N.TASK: attrs[N.TASK],
                **({N.AGENT_ID: attrs[N.AGENT_ID], N.AGENT_NAME: attrs[N.AGENT_ID]}
                   if N.AGENT_ID in attrs else {})}, t.last_ns)
        t.gates += 1
        g = _guardrail_span(self.tracer, d, attrs, context=trace.set_span_in_context(t.tool),
                            start=now)
        _outcome_events(g, outcome)
        g.end(end_time=now)
        t.tool.add_event(N.EV_GATE, {N.DECISION: str(d.get("outcome")),
                                     N.REASON: str(d.get("reason")),
                                     N.G + "point": int(d.get("point") or 0)})
        if str(d.get("outcome")) == "replan_required":
            t.replans = max(t.replans, 1)

    def _executed(self, t: _TaskSpans, attrs: dict[str, AttrValue], args: Mapping[str, Any],
                  outcome: Mapping[str, Any], now: int) -> None:
        action = str(args.get("action"))
        span = t.tool or self._child(t, f"{N.EXECUTE_TOOL} {action}", {}, t.last_ns)
        attrs.update({N.OPERATION: N.EXECUTE_TOOL, N.SPAN_KIND: "TOOL", N.TOOL_NAME: action,
                      N.OI_TOOL_NAME: action, N.TOOL_TYPE: "function",
                      N.TOOL_CALL_ID: f"{attrs[N.TASK]}/{action}/{args.get('gate_event')}",
                      N.OPTION: str(args.get("option")), N.LINEAGE_KEY: str(args.get("req_key")),
                      N.LINEAGE_FRONTIER: str(args.get("frontier_id")),
                      N.GATE_EVENT: str(args.get("gate_event")), N.DECISION: "authorized",
                      N.EVENT_TYPE: "action_done"})
        if self.capture_content:
            attrs[N.TOOL_ARGS] = _json({"option": args.get("option")})
            attrs[N.OI_INPUT] = attrs[N.TOOL_ARGS]
            decided = [v.get("decision") for v in outcome.get("verdicts") or ()]
            attrs[N.TOOL_RESULT] = _json({"executed": True, "icore": decided})
            attrs[N.OI_OUTPUT] = attrs[N.TOOL_RESULT]
        span.set_attributes(attrs)
        _outcome_events(span, outcome)
        t.authorized = True
        t.tool = span
        self._close_tool(t, now)

    # -- the library's fence decisions ----------------------------------------------------
    def decision(self, d: GateDecision) -> None:
        """Record one gate decision (a ``Fence(log=...)`` callable).

        Inside :meth:`protect` (or any recording span) it becomes an
        ``icore.gate_decision`` event of the current span plus a child ``apply_guardrail
        PlanFence`` span (GenAI guardrail attributes and a ``gen_ai.guardrail.result``
        event); on its own, a standalone ``apply_guardrail PlanFence`` span.
        """
        self.decision_sink(_decision_dict(d))

    def decision_sink(self, d: Mapping[str, Any]) -> None:
        """Record one decision dict (a ``DecisionLog(sink=...)`` sink)."""
        cur = trace.get_current_span()
        if cur.is_recording():
            cur.add_event(N.EV_GATE, {N.DECISION: str(d.get("outcome")),
                                      N.REASON: str(d.get("reason")),
                                      N.G + "point": int(d.get("point") or 0)})
        _guardrail_span(self.tracer, d, {}).end()

    def fence_log(self, inner: Callable[[GateDecision], None] | None = None
                  ) -> Callable[[GateDecision], None]:
        """A ``Fence(log=...)`` callable: ``inner`` (default a new DecisionLog), then spans."""
        log = inner if inner is not None else DecisionLog()

        def both(d: GateDecision) -> None:
            log(d)
            self.decision(d)

        return both

    def protect(self, fence: Fence, tool: ProtectedTool, *, roots: Sequence[RecordId],
                args: Mapping[str, Any], replan: Replanner | None = None,
                call_id: str | None = None, agent: str | None = None,
                conversation: str | None = None) -> ActionResult:
        """Run :meth:`Fence.execute` inside an ``execute_tool {tool}`` span.

        The span carries ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the final decision
        and reason, the replan count and (with ``capture_content``) the arguments and the
        result; each gate decision the fence logs through :meth:`decision` /
        :meth:`fence_log` lands in it. Blocked actions get status ERROR.

        Raises:
            Exception: whatever :meth:`Fence.execute` raises (recorded on the span).
        """
        attrs: dict[str, AttrValue] = {
            N.OPERATION: N.EXECUTE_TOOL, N.SPAN_KIND: "TOOL", N.TOOL_NAME: tool.name,
            N.OI_TOOL_NAME: tool.name, N.TOOL_TYPE: "function",
            N.G + "roots": [str(r) for r in roots]}
        if call_id:
            attrs[N.TOOL_CALL_ID] = call_id
        if agent:
            attrs[N.AGENT_ID] = agent
            attrs[N.AGENT_NAME] = agent
        if conversation:
            attrs[N.CONVERSATION] = conversation
            attrs[N.OI_SESSION] = conversation
        if self.capture_content:
            attrs[N.TOOL_ARGS] = _json(dict(args))
            attrs[N.OI_INPUT] = attrs[N.TOOL_ARGS]
        with self.tracer.start_as_current_span(f"{N.EXECUTE_TOOL} {tool.name}",
                                               attributes=attrs) as span:
            res = fence.execute(tool, roots=roots, args=args, replan=replan)
            final = res.final
            span.set_attributes({N.DECISION: res.outcome.value, N.REASON: final.reason.value,
                                 N.REPLAN_COUNT: int(res.replanned),
                                 N.G + "deps": list(final.deps)})
            if self.capture_content and res.executed:
                span.set_attribute(N.TOOL_RESULT, _json(res.value))
                span.set_attribute(N.OI_OUTPUT, _json(res.value))
            if not res.executed:
                span.set_attribute(ERROR_ATTR, "blocked")
                span.set_status(Status(StatusCode.ERROR, res.detail[:500] or "blocked"))
            return res

    # -- audits -------------------------------------------------------------------------
    def audit(self, result: AuditResult) -> None:
        """Emit one audited run: final metrics, cq timeline, hard flags, diagnoses."""
        r = result
        s = r.summary()
        attrs: dict[str, AttrValue] = {
            N.SPAN_KIND: "EVALUATOR", "icore.audit.run": s.run, "icore.audit.family": s.family,
            "icore.audit.file": r.trace.file, N.CONVERSATION: s.run, N.OI_SESSION: s.run,
            "icore.snd": s.snd, "icore.astab": s.astab, "icore.cq": s.cq,
            "icore.cq_mean": s.cq_mean, "icore.cq_min": s.cq_min,
            "icore.hard_flags": s.hard_flags, "icore.stalls": s.stalls,
            N.REPLAN_COUNT: s.replans, "icore.unsupported": s.unsupported,
            "icore.diagnoses": s.diagnoses, "icore.terminated": s.terminated}
        with self.tracer.start_as_current_span(f"icore.audit {s.run}",
                                               attributes=attrs) as span:
            for p in r.timeline:
                span.add_event(N.EV_METRICS, {"icore.step": p.step, "icore.snd": p.snd,
                                              "icore.astab": p.astab, "icore.cq": p.cq,
                                              "icore.flags": p.flags})
            for f in r.state.flags.values():
                span.add_event(N.EV_FLAG, {
                    "icore.flag.id": f.id, "icore.flag.kind": str(f.kind),
                    "icore.flag.obligations": list(f.obligations),
                    "icore.flag.assertions": list(f.assertions),
                    "icore.flag.detail": f.detail[:1000]})
            for d in r.diagnoses:
                span.add_event(N.EV_DIAGNOSIS, {
                    "icore.diagnosis.id": d.id, "icore.diagnosis.defect": d.defect,
                    "icore.diagnosis.step": -1 if d.step is None else d.step,
                    "icore.diagnosis.obligations": list(d.obligations),
                    "icore.diagnosis.assertions": list(d.assertions),
                    "icore.diagnosis.events": list(d.events),
                    "icore.diagnosis.responsible": d.responsible or "",
                    "icore.diagnosis.detail": d.detail[:1000]})
            if s.hard_flags:
                span.set_status(Status(StatusCode.ERROR, f"{s.hard_flags} hard flag(s)"))


ERROR_ATTR = N.ERROR_TYPE


# --------------------------------------------------------------- OTLP JSON file exporter
def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, Sequence):
        return {"arrayValue": {"values": [_any_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _kv(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in (attrs or {}).items()]


_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP ``ExportTraceServiceRequest`` (protobuf JSON mapping) for ``spans``.

    Ids are lowercase hex, times decimal-string nanoseconds, enums integers — the format
    the OpenTelemetry Collector's file exporter writes and every OTLP/HTTP JSON receiver
    reads.
    """
    by_res: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for s in spans:
        res = s.resource
        entry = by_res.setdefault(id(res), (res, {}))
        scope = s.instrumentation_scope
        skey = (scope.name if scope else "", (scope.version or "") if scope else "")
        ctx = s.context
        assert ctx is not None
        d: dict[str, Any] = {
            "traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x"),
            "name": s.name, "kind": s.kind.value + 1,
            "startTimeUnixNano": str(s.start_time or 0),
            "endTimeUnixNano": str(s.end_time or 0), "attributes": _kv(s.attributes),
            "events": [{"timeUnixNano": str(e.timestamp), "name": e.name,
                        "attributes": _kv(e.attributes)} for e in s.events],
            "status": {"code": _STATUS[s.status.status_code],
                       **({"message": s.status.description} if s.status.description else {})},
        }
        if s.parent is not None:
            d["parentSpanId"] = format(s.parent.span_id, "016x")
        if s.links:
            d["links"] = [{"traceId": format(lk.context.trace_id, "032x"),
                           "spanId": format(lk.context.span_id, "016x"),
                           "attributes": _kv(lk.attributes)} for lk in s.links]
        entry[1].setdefault(skey, []).append(d)
    return {"resourceSpans": [
        {"resource": {"attributes": _kv(res.attributes)},
         "scopeSpans": [{"scope": {"name": n, **({"version": v} if v else {})}, "spans": ss}
                        for (n, v), ss in scopes.items()]}
        for res, scopes in by_res.values()]}


class DeliveryCheck(SpanExporter):
    """Wraps an exporter and counts the spans it failed to deliver (issue 29).

    An OTLP exporter reports a failed batch only to the SDK's log; this wrapper keeps the
    count so a command can end with a non-zero exit when its spans were lost.

    Attributes:
        inner: the wrapped exporter.
        failed: spans in batches that returned FAILURE or raised.
        delivered: spans in batches that returned SUCCESS.
        last_error: the last exception raised by ``inner.export`` (its text).
    """

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = 0
        self.delivered = 0
        self.last_error = ""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Delegate, counting the batch as delivered or failed; never raises."""
        try:
            res = self.inner.export(spans)
        except Exception as exc:  # an exporter must not raise; count it as lost
            self.last_error = f"{type(exc).__name__}: {exc}"
            res = SpanExportResult.FAILURE
        if res == SpanExportResult.SUCCESS:
            self.delivered += len(spans)
        else:
            self.failed += len(spans)
        return res

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return bool(self.inner.force_flush(timeout_millis))


class OtlpJsonFileExporter(SpanExporter):
    """Appends each export batch as one JSON line of ``ExportTraceServiceRequest``.

    That is the Collector file exporter's format (e.g. ``run.otlp.json``), which
    ``icore audit`` reads back.

    Args:
        path: the file (created; appended to).

    Raises:
        ExportError: the file cannot be created or appended to (checked up front, so a
            run never loses its spans silently).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ExportError(f"cannot write OTLP JSON: {exc}", file=str(self.path),
                              field="<root>") from None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write one line; FAILURE when the file cannot be written."""
        line = json.dumps(otlp_json(spans), separators=(",", ":"))
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release (the file is closed after every batch)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every batch is written synchronously."""
        return True


@contextmanager
def exporting(*, endpoint: str | None = None, headers: Mapping[str, str] | None = None,
              capture_content: bool | None = None) -> Iterator[OtelExporter]:
    """An :class:`OtelExporter` that is flushed and shut down on exit.

    Raises:
        ExportError: the endpoint is not an http(s) URL.
    """
    ex = OtelExporter(endpoint=endpoint, headers=headers, capture_content=capture_content)
    try:
        yield ex
    finally:
        ex.shutdown()


__all__ = [
    "DeliveryCheck",
    "OtelExporter",
    "OtlpJsonFileExporter",
    "SpanCounter",
    "decision_attributes",
    "exporting",
    "make_provider",
    "otlp_json",
    "traces_endpoint",
]
