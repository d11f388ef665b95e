"""Live runs as OpenTelemetry spans: the RunObserver side of the OTel exporter.

Part of :mod:`icore.adapters._otel_export` (split for size, issue 26): the run span, one
workflow span per task, agent and plan steps, the protected tool call with its gate
decisions and the executed action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from icore.adapters import _otel_names as N
from icore.adapters._otel_attrs import AttrValue, _guardrail_span, _json, _now, _outcome_events
from icore.adapters._otlp_file import ERROR_ATTR

if TYPE_CHECKING:
    from icore.adapters._otel_export import OtelExporter
    from icore.live import LiveRunResult, RunManifest, TaskResult


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


class _LiveSpans:
    """The live-run side of :class:`~icore.adapters.OtelExporter` (a RunObserver's spans).

    One run span, a workflow span per task, agent/plan steps, the protected tool call with
    its gate decisions (``apply_guardrail`` children) and the executed action. Not
    thread-safe: the exporter calls it under its lock, never raising into the run.

    Args:
        exporter: the exporter whose tracer and ``capture_content`` it uses.
    """

    def __init__(self, exporter: OtelExporter) -> None:
        self._exporter = exporter
        self._run = _RunSpans()

    @property
    def tracer(self) -> trace.Tracer:
        """The exporter's tracer."""
        return self._exporter.tracer

    @property
    def capture_content(self) -> bool:
        """Whether tool arguments and results are recorded (the exporter's setting)."""
        return self._exporter.capture_content

    def started(self, manifest: RunManifest, policy: str) -> None:
        """Open the run span (one trace per run)."""
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

    def task_done(self, result: TaskResult) -> None:
        """Close the workflow's spans with its outcome."""
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
        self._exporter.chain.end(s)  # the run's gate spans counted (#29)
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

    def step(self, call: str, task: str, args: Mapping[str, Any],
             outcome: Mapping[str, Any]) -> None:
        """One step recorded by the live audit: its span under the workflow's span."""
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
                            start=now, chain=self._exporter.chain)
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
