"""Real traces in, exports out (design.md 2, ``adapters/``; data flow 3: audit a recorded run).

- Importers: Who&When Hand-Crafted (Magentic-One) and Algorithm-Generated (CaptainAgent /
  AG2) JSON (:func:`load_who_and_when`), and a generic JSONL event format
  (:func:`load_jsonl`), all into a source-neutral :class:`Trace`.
- :func:`audit_trace` builds X = (G, Q, Π) over the family's declaration package
  (:func:`magentic_one_declaration`, :func:`captain_agent_declaration`,
  :func:`generic_declaration`) and derives diagnoses; :attr:`AuditResult.lineage` judges
  every protected action the run's PlanFence lines carry (:class:`ActionLineage`,
  ``AuditResult.invalid_actions``); the evidence helpers (:func:`output_facts`,
  :func:`tool_facts`, ...) are shared with failure attribution (:mod:`icore.attribution`
  since issue 26); :func:`to_prov` / :func:`write_prov` export PROV-JSON.
- OpenTelemetry: :func:`load_otlp` imports OTLP JSON, Phoenix and Langfuse span exports
  (no extra needed); :class:`OtelExporter` (extra ``icore[otel]``, imported on first use)
  emits live runs, fence decisions and audits as GenAI / OpenInference spans. See
  docs/observability.md.

Import rule: adapters import records, memory, fence, net, state, audit, workloads, agents
and live only. Errors: :class:`AdapterError` (``ErrorCode.ADAPTER``) names the file and
field.
See docs/audit-real-runs.md.
"""

from typing import TYPE_CHECKING, Any

from icore.adapters._action_lineage import (
    APPROVED,
    FAILED_AFTER_AUTHORIZATION,
    REJECTED_BY_HUMAN,
    ActionLineage,
    ValidationPoint,
    counted_as,
    lineage_of,
    trace_lineages,
    validation_point,
)
from icore.adapters._decl import (
    HUMAN,
    captain_agent_declaration,
    generic_declaration,
    magentic_one_declaration,
)
from icore.adapters._errors import AdapterError, ExportError
from icore.adapters._evidence import (
    assumes,
    capabilities,
    check_answer,
    check_ledger,
    check_output,
    classify,
    content_words,
    normalize_answer,
    numbers,
    output_facts,
    tool_facts,
)
from icore.adapters._gate_lines import UNCOUNTABLE
from icore.adapters._jsonl import load_jsonl, parse_jsonl
from icore.adapters._line_steps import FileSteps
from icore.adapters._otel_import import (
    ICORE_LIVE,
    OTEL,
    OtelSpan,
    iter_file_spans,
    iter_otlp_runs,
    load_otlp,
    load_otlp_runs,
    parse_otlp,
    parse_otlp_runs,
    parse_spans,
    spans_to_trace,
)
from icore.adapters._otel_live import audit_live_trace
from icore.adapters._prov import ICORE_NS, read_prov, to_prov, validate_prov, write_prov
from icore.adapters._reissued import REISSUED
from icore.adapters._results import AuditResult, Finding, FlagPlace, MetricPoint, RunSummary
from icore.adapters._trace import (
    Annotation,
    HumanAnswer,
    Ledger,
    LiveRunPart,
    PlanfenceLog,
    Step,
    StepKind,
    Trace,
)
from icore.adapters._trace_audit import (
    OWN_REPORT,
    ROOT,
    PathScan,
    audit_file,
    audit_path,
    audit_trace,
    collect_paths,
    declaration_for,
    load_trace,
    scan_paths,
)
from icore.adapters._trace_places import FlagPlaces
from icore.adapters._trace_values import (
    as_bool,
    as_step,
    name_key,
)
from icore.adapters._unknown_outcome import MAY_HAVE_RUN_MARK, OUTCOME_UNKNOWN
from icore.adapters._unrecorded_calls import missing_decisions
from icore.adapters._values import (
    DEFAULT_MAX_INPUT_MB,
    ENV_MAX_INPUT,
    check_size,
    finite_float,
    max_input_bytes,
    time_ns,
)
from icore.adapters._whowhen import (
    CAPTAIN_AGENT,
    MAGENTIC_ONE,
    detect_family,
    load_captain_agent,
    load_magentic_one,
    load_who_and_when,
    parse_captain_agent,
    parse_magentic_one,
    parse_who_and_when_data,
)

if TYPE_CHECKING:
    from icore.adapters._otel_export import (
        DeliveryCheck,
        OtelExporter,
        OtlpJsonFileExporter,
        SpanCounter,
        decision_attributes,
        exporting,
        make_provider,
        otel_env_settings,
        otlp_json,
        traces_endpoint,
    )

_OTEL_EXPORT = ("DeliveryCheck", "OtelExporter", "OtlpJsonFileExporter", "SpanCounter",
                "decision_attributes", "exporting", "make_provider", "otel_env_settings",
                "otlp_json", "traces_endpoint")


def __getattr__(name: str) -> Any:
    """The exporter names, imported on first use (they need the ``otel`` extra)."""
    if name in _OTEL_EXPORT:
        try:
            from icore.adapters import _otel_export
        except ImportError as exc:
            raise ExportError(f"OpenTelemetry export needs the otel extra "
                              f"(pip install 'icore[otel]'): {exc}", file="<otlp>",
                              field="opentelemetry") from exc
        return getattr(_otel_export, name)
    raise AttributeError(f"module 'icore.adapters' has no attribute {name!r}")


__all__ = [
    "APPROVED",
    "CAPTAIN_AGENT",
    "DEFAULT_MAX_INPUT_MB",
    "ENV_MAX_INPUT",
    "FAILED_AFTER_AUTHORIZATION",
    "HUMAN",
    "ICORE_LIVE",
    "ICORE_NS",
    "MAGENTIC_ONE",
    "MAY_HAVE_RUN_MARK",
    "OTEL",
    "OUTCOME_UNKNOWN",
    "OWN_REPORT",
    "REISSUED",
    "REJECTED_BY_HUMAN",
    "ROOT",
    "UNCOUNTABLE",
    "ActionLineage",
    "AdapterError",
    "Annotation",
    "AuditResult",
    "DeliveryCheck",
    "ExportError",
    "FileSteps",
    "Finding",
    "FlagPlace",
    "FlagPlaces",
    "HumanAnswer",
    "Ledger",
    "LiveRunPart",
    "MetricPoint",
    "OtelExporter",
    "OtelSpan",
    "OtlpJsonFileExporter",
    "PathScan",
    "PlanfenceLog",
    "RunSummary",
    "SpanCounter",
    "Step",
    "StepKind",
    "Trace",
    "ValidationPoint",
    "as_bool",
    "as_step",
    "assumes",
    "audit_file",
    "audit_live_trace",
    "audit_path",
    "audit_trace",
    "capabilities",
    "captain_agent_declaration",
    "check_answer",
    "check_ledger",
    "check_output",
    "check_size",
    "classify",
    "collect_paths",
    "content_words",
    "counted_as",
    "decision_attributes",
    "declaration_for",
    "detect_family",
    "exporting",
    "finite_float",
    "generic_declaration",
    "iter_file_spans",
    "iter_otlp_runs",
    "lineage_of",
    "load_captain_agent",
    "load_jsonl",
    "load_magentic_one",
    "load_otlp",
    "load_otlp_runs",
    "load_trace",
    "load_who_and_when",
    "magentic_one_declaration",
    "make_provider",
    "max_input_bytes",
    "missing_decisions",
    "name_key",
    "normalize_answer",
    "numbers",
    "otel_env_settings",
    "otlp_json",
    "output_facts",
    "parse_captain_agent",
    "parse_jsonl",
    "parse_magentic_one",
    "parse_otlp",
    "parse_otlp_runs",
    "parse_spans",
    "parse_who_and_when_data",
    "read_prov",
    "scan_paths",
    "spans_to_trace",
    "time_ns",
    "to_prov",
    "tool_facts",
    "trace_lineages",
    "traces_endpoint",
    "validate_prov",
    "validation_point",
    "write_prov",
]
