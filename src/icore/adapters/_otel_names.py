"""Attribute and span names shared by the OpenTelemetry exporter and importer.

No opentelemetry import here: the importer (OTLP JSON in) works without the ``otel``
extra. Names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``; the
standalone open-telemetry/semantic-conventions-genai repository, v0.1.0: operations
``invoke_workflow``, ``invoke_agent``, ``plan``, ``execute_tool``, ``apply_guardrail`` and
the ``gen_ai.guardrail.*`` result attributes),
OpenInference (``openinference.span.kind`` and friends, so Phoenix renders the spans) and
icore's own ``icore.*`` namespace (docs/observability.md, "Attributes").
"""

from __future__ import annotations

SCOPE = "icore"
"""Instrumentation scope name of every span icore emits."""

# GenAI semantic conventions
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
REQUEST_MODEL = "gen_ai.request.model"
ERROR_TYPE = "error.type"
WORKFLOW_NAME = "gen_ai.workflow.name"
"""The workflow's name before semantic-conventions-genai v0.1.0 (now ``gen_ai.agent.name``)."""
INVOKE_AGENT = "invoke_agent"
INVOKE_WORKFLOW = "invoke_workflow"
PLAN = "plan"
EXECUTE_TOOL = "execute_tool"
APPLY_GUARDRAIL = "apply_guardrail"
GR_COMPONENT = "gen_ai.guardrail.component.name"
GR_POLICY = "gen_ai.guardrail.policy.id"
GR_SOURCE = "gen_ai.guardrail.source"
GR_RESULT_TYPE = "gen_ai.guardrail.result.type"
GR_RESULT_VALUE = "gen_ai.guardrail.result.value"
GR_RESULT_REASON = "gen_ai.guardrail.result.reason"
EV_GUARDRAIL_RESULT = "gen_ai.guardrail.result"
GATE_COMPONENT = "PlanFence"
"""``gen_ai.guardrail.component.name`` of every gate decision icore emits."""
GATE_SOURCE = "tool_input"
"""``gen_ai.guardrail.source``: the gate judges a tool call before it runs."""
GATE_RESULT = "outcome"
"""``gen_ai.guardrail.result.type``: the gate's own result field (authorized,
replan_required, blocked), its ``reason`` code in ``gen_ai.guardrail.result.reason``."""

# OpenInference
SPAN_KIND = "openinference.span.kind"
OI_AGENT_NAME = "agent.name"
OI_TOOL_NAME = "tool.name"
OI_SESSION = "session.id"
OI_INPUT = "input.value"
OI_OUTPUT = "output.value"
OI_MODEL = "llm.model_name"

# icore: the run, the replayable audit calls, PlanFence, iCORE
PAUSED = "icore.paused"
"""Boolean: the run (on the root span) or this step stopped waiting for a human (an
``interrupt()``), the JSONL recorder's ``pause`` marker; a paused root has no end."""
APPROVAL = "icore.approval."
"""Prefix of a human's answer to a protected call on a span (``OtelExporter.
human_answer``): ``tool`` (string), ``approved`` (boolean), ``request`` (the
``ApprovalRequest`` id, optional), ``args`` (the call's arguments as JSON, optional)."""
RUN_NAME = "icore.run.name"
RUN_POLICY = "icore.run.policy"
RUN_FAMILY = "icore.run.family"
RUN_MANIFEST = "icore.run.manifest"
CALL = "icore.call"
SEQ = "icore.seq"
TASK = "icore.task"
EVENT_TYPE = "icore.event.type"
EVENT_ID = "icore.event.id"
EVENT_FIELDS = "icore.event.fields"
EVENT_CAUSES = "icore.event.causes"
RECORD_ID = "icore.record.id"
RECORD_KEY = "icore.record.key"
RECORD_OWNER = "icore.record.owner"
RECORD_SEQ = "icore.record.seq"
PLAN_OPTION = "icore.plan.option"
PLAN_REQ_KEY = "icore.plan.requirement.key"
PLAN_REQ_ID = "icore.plan.requirement.id"
REPLAN = "icore.replan"
REPLAN_COUNT = "icore.replan.count"
DECISION = "icore.decision"
REASON = "icore.reason"
OPTION = "icore.action.option"
LINEAGE_KEY = "icore.lineage.key"
LINEAGE_FRONTIER = "icore.lineage.frontier"
GATE_EVENT = "icore.gate.event"
AUDIT_VERDICT = "icore.audit.verdict"
AUDIT_REQ_KEY = "icore.audit.requirement.key"
AUDIT_REQ_ID = "icore.audit.requirement.id"
OBLIGATION = "icore.obligation"
G = "icore.gate."
"""Prefix of one gate decision's attributes (``icore.gate.outcome``, ``.roots``, ...)."""
CHAIN = "icore.chain."
"""Prefix of a gate or human-answer span's link in its exporter's chain: ``writer``
(string), ``seq`` (int), ``prev`` (string; :mod:`icore._line_chain`, #29)."""
CHAIN_END = "icore.chain_end."
"""Prefix of a trace's seal (``writer``, ``lines``: how many spans its chain holds,
``last``: the link of its last) on the trace's root span at its end (a live run's span,
a root ``execute_tool`` or gate span), so a gate span lost after the last one is seen
(#29)."""

# span events
EV_METRICS = "icore.metrics"
EV_FLAG = "icore.hard_flag"
EV_DIAGNOSIS = "icore.diagnosis"
EV_GATE = "icore.gate_decision"

__all__ = ["SCOPE"]
