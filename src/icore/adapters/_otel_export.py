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

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import SpanKind, Status, StatusCode

from icore.adapters import _otel_names as N
from icore.adapters._errors import ExportError
from icore.adapters._otel_attrs import (
    AttrValue,
    SpanChain,
    _decision_dict,
    _guardrail_span,
    _json,
    decision_attributes,
    is_root,
)
from icore.adapters._otel_run import _LiveSpans
from icore.adapters._otlp_file import ERROR_ATTR, DeliveryCheck, OtlpJsonFileExporter, otlp_json
from icore.errors import brief
from icore.fence import (
    ActionResult,
    DecisionEntry,
    DecisionLog,
    Fence,
    GateDecision,
    ProtectedTool,
    Replanner,
)
from icore.records import RecordId

if TYPE_CHECKING:
    from icore.adapters._results import AuditResult
    from icore.live import LiveRunResult, RunManifest, TaskResult


_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL of ``url``: a bare base gets ``/v1/traces`` appended.

    ``http://127.0.0.1:6006`` -> ``http://127.0.0.1:6006/v1/traces``; a URL with a path
    (``https://cloud.langfuse.com/api/public/otel/v1/traces``) is used as given.

    Raises:
        ExportError: not a str, or not an ``http(s)://`` URL.
    """
    if not isinstance(url, str):
        raise ExportError(f"OTLP/HTTP endpoint must be an http(s) URL (a str), not "
                          f"{type(url).__name__}", file="<otlp>", field="endpoint")
    u = url.strip()
    if not u.startswith(("http://", "https://")):
        raise ExportError(f"OTLP/HTTP endpoint must be an http(s) URL, not {url!r}",
                          file="<otlp>", field="endpoint")
    rest = u.split("://", 1)[1]
    if "/" not in rest or (rest.endswith("/") and rest.count("/") == 1):
        return u.rstrip("/") + "/v1/traces"
    return u


_BSP_ENV: tuple[tuple[str, str, int, int], ...] = (
    # variable, BatchSpanProcessor argument, the SDK's default, smallest value allowed
    ("OTEL_BSP_MAX_QUEUE_SIZE", "max_queue_size", 2048, 1),
    ("OTEL_BSP_SCHEDULE_DELAY", "schedule_delay_millis", 5000, 1),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "max_export_batch_size", 512, 1),
    ("OTEL_BSP_EXPORT_TIMEOUT", "export_timeout_millis", 30000, 0),
)


_TEXT_ENV = ("OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS",
             "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
"""Variables the SDK sends as text: bytes that are no UTF-8 fail at each export."""


def otel_env_settings(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The ``OTEL_*`` variables icore's exporter depends on, checked before any span.

    The batch span processor's settings (``OTEL_BSP_*``) are read here and passed to it
    explicitly: the SDK, reading them itself, logged a Python traceback for a
    non-integer and raised a bare ValueError for a value <= 0 (issue 29). The variables
    the SDK sends as text (resource attributes, service name, headers) must be UTF-8:
    bytes that are not failed with a traceback at each export.

    Args:
        env: the environment (default ``os.environ``).

    Returns:
        ``BatchSpanProcessor`` keyword arguments: ``max_queue_size``,
        ``schedule_delay_millis``, ``max_export_batch_size`` (counts),
        ``export_timeout_millis`` (ms); the SDK's defaults for unset variables.

    Raises:
        ExportError: an ``OTEL_BSP_*`` variable that is set but is not a whole number
            (>= 1; the export timeout >= 0), a batch size over the queue size, or a text
            variable holding bytes that are not UTF-8 (field: the variable).
    """
    e = os.environ if env is None else env
    for var in _TEXT_ENV:
        try:
            e.get(var, "").encode("utf-8")
        except UnicodeEncodeError:
            raise ExportError("holds bytes that are not UTF-8", file="<environment>",
                              field=var) from None
    out: dict[str, int] = {}
    for var, arg, default, least in _BSP_ENV:
        raw = e.get(var, "").strip()
        if not raw:
            out[arg] = default
            continue
        try:
            value = int(raw)
        except ValueError:
            value = least - 1
        if value < least:
            raise ExportError(f"must be a whole number >= {least}, not {raw[:40]!r}",
                              file="<environment>", field=var)
        out[arg] = value
    if out["max_export_batch_size"] > out["max_queue_size"]:
        raise ExportError("must be <= $OTEL_BSP_MAX_QUEUE_SIZE "
                          f"({out['max_export_batch_size']} > {out['max_queue_size']})",
                          file="<environment>", field="OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
    return out


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

    Raises:
        ExportError: an ``OTEL_*`` variable is no valid setting (:func:`otel_env_settings`).
    """
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=traces_endpoint(endpoint) if endpoint else None,
                                    headers=dict(headers) if headers else None)
    attrs: dict[str, str] = {}
    if service_name or not os.environ.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = service_name or "icore"
    provider = TracerProvider(resource=Resource.create(attrs))
    if batch:
        bsp = otel_env_settings()
        provider.add_span_processor(BatchSpanProcessor(
            exporter, max_queue_size=bsp["max_queue_size"],
            schedule_delay_millis=bsp["schedule_delay_millis"],
            max_export_batch_size=bsp["max_export_batch_size"],
            export_timeout_millis=bsp["export_timeout_millis"]))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


class SpanCounter(SpanProcessor):
    """A span processor that only counts ended spans (for benchmarks; negligible cost)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        """Count one ended span."""
        self.ended += 1


def _check_exporter_args(endpoint: Any, headers: Any, capture_content: Any) -> None:
    """Refuse :class:`OtelExporter` arguments of the wrong type (ExportError, field named)."""
    if endpoint is not None and not isinstance(endpoint, str):
        raise ExportError(f"endpoint must be an http(s) URL or file:PATH (a str), not "
                          f"{type(endpoint).__name__}", file="<otlp>", field="endpoint")
    if headers is not None and (not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
        raise ExportError("headers must be a mapping of header names to str values",
                          file="<otlp>", field="headers")
    if capture_content is not None and not isinstance(capture_content, bool):
        raise ExportError(f"capture_content must be True, False or None, not "
                          f"{type(capture_content).__name__}", file="<otlp>",
                          field="capture_content")


def _user_provider() -> trace.TracerProvider | None:
    p = trace.get_tracer_provider()
    return None if isinstance(p, trace.ProxyTracerProvider | trace.NoOpTracerProvider) else p


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

    Raises:
        ExportError: ``endpoint`` is neither None nor a str (an ``http(s)://`` URL or
            ``file:PATH``), ``headers`` not a mapping of str to str, ``capture_content``
            neither None nor a bool (field named), or the URL or file is refused
            (:func:`traces_endpoint`, :class:`OtlpJsonFileExporter`).
    """

    def __init__(self, *, endpoint: str | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 headers: Mapping[str, str] | None = None,
                 capture_content: bool | None = None) -> None:
        _check_exporter_args(endpoint, headers, capture_content)
        provider = tracer_provider or (None if endpoint else _user_provider())
        self._own = provider is None
        self._closed = False
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
        self.chain = SpanChain()
        """Digests and chains the gate and human-answer spans (#29)."""
        self._live = _LiveSpans(self)
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
        """Flush, and shut down the provider when the exporter created it. Idempotent."""
        if self._closed:
            return
        self._closed = True
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
            self._live.started(manifest, policy)

    def audit_call(self, call: str, task: str, args: Mapping[str, Any],
                   outcome: Mapping[str, Any]) -> None:
        """One step recorded by the live audit (:data:`icore.live.AuditListener`)."""
        with self._lock, self._safe():
            self._live.step(call, task, args, outcome)

    def task_done(self, result: TaskResult) -> None:
        """Close the workflow's spans with its outcome."""
        with self._lock, self._safe():
            self._live.task_done(result)

    def run_done(self, result: LiveRunResult) -> None:
        """Close the run span with the run's summary and iCORE metrics."""
        with self._lock, self._safe():
            self._live.run_done(result)


    # -- the library's fence decisions ----------------------------------------------------
    def decision(self, d: GateDecision) -> None:
        """Record one gate decision (a ``Fence(log=...)`` callable).

        Inside :meth:`protect` (or any recording span) it becomes an
        ``icore.gate_decision`` event of the current span plus a child ``apply_guardrail
        PlanFence`` span (GenAI guardrail attributes and a ``gen_ai.guardrail.result``
        event); on its own, a standalone ``apply_guardrail PlanFence`` span.
        """
        self.decision_sink(_decision_dict(d))

    def decision_sink(self, d: Mapping[str, Any] | DecisionEntry) -> None:
        """Record one logged decision (a ``DecisionLog(sink=...)`` sink; dict or entry)."""
        if isinstance(d, DecisionEntry):
            d = d.to_dict()
        cur = trace.get_current_span()
        if cur.is_recording():
            cur.add_event(N.EV_GATE, {N.DECISION: str(d.get("outcome")),
                                      N.REASON: str(d.get("reason")),
                                      N.G + "point": int(d.get("point") or 0)})
        _guardrail_span(self.tracer, d, {}, chain=self.chain).end()

    def human_answer(self, tool: str, approved: bool, *, request: str | None = None,
                     args: Mapping[str, Any] | None = None) -> None:
        """Record a human's answer to a protected call put to them (#29).

        An ``apply_guardrail human`` span (a child of the current span, e.g. the call's
        :meth:`protect` span) with ``icore.approval.tool``, ``.approved``, ``.request``
        (the :class:`~icore.workspace.ApprovalRequest` id, when known: the audit then
        links the answer to exactly that call) and, with ``capture_content``, ``.args``
        (JSON); ``icore audit`` of the trace says "approved by a human" (or rejected) on
        the call's lineage, as for a JSONL recording.

        Raises:
            ExportError: ``tool`` is not a non-empty string or ``approved`` not a bool.
        """
        if not isinstance(tool, str) or not tool:
            raise ExportError(f"must be the tool's name, not {brief(tool)}",
                              file="<human_answer>", field="tool")
        if not isinstance(approved, bool):
            raise ExportError(f"must be True or False, not {brief(approved)}",
                              file="<human_answer>", field="approved")
        said = "approved" if approved else "rejected"
        attrs: dict[str, AttrValue] = {
            N.OPERATION: N.APPLY_GUARDRAIL, N.SPAN_KIND: "GUARDRAIL", N.GR_COMPONENT: "human",
            N.GR_RESULT_TYPE: "approval", N.GR_RESULT_VALUE: said,
            N.APPROVAL + "tool": tool, N.APPROVAL + "approved": approved}
        if request is not None:
            attrs[N.APPROVAL + "request"] = str(request)
        with self._safe():  # never stop a run over telemetry
            if args is not None and self.capture_content:
                attrs[N.APPROVAL + "args"] = _json(dict(args))
            root = is_root()
            span = self.tracer.start_span(f"{N.APPLY_GUARDRAIL} human", kind=SpanKind.CLIENT,
                                          attributes=attrs)
            self.chain.seal(span, attrs, N.APPROVAL, root=root)
            span.end()

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
        root = is_root()  # then its trace ends with it: sealed at its end (#29)
        with self.tracer.start_as_current_span(f"{N.EXECUTE_TOOL} {tool.name}",
                                               attributes=attrs) as span:
            try:
                res = fence.execute(tool, roots=roots, args=args, replan=replan)
            finally:
                if root:
                    self.chain.end(span)
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
        if s.answer_checked is False:  # a final answer with nothing to check it against
            attrs["icore.answer_checked"] = False
        if s.paused:  # no end yet: the run waits for a human at an interrupt
            attrs[N.PAUSED] = True
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
    "otel_env_settings",
    "otlp_json",
    "traces_endpoint",
]
