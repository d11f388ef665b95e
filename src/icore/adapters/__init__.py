"""Real traces in, exports out (design.md 2, ``adapters/``; data flow 3: audit a recorded run).

- Importers: Who&When Hand-Crafted (Magentic-One) and Algorithm-Generated (CaptainAgent /
  AG2) JSON (:func:`load_who_and_when`), and a generic JSONL event format
  (:func:`load_jsonl`), all into a source-neutral :class:`Trace`.
- :func:`audit_trace` builds X = (G, Q, Π) over the family's declaration package
  (:func:`magentic_one_declaration`, :func:`captain_agent_declaration`,
  :func:`generic_declaration`) and derives diagnoses; :func:`attribute` and :func:`score`
  do failure attribution (per-candidate features from X, :data:`FEATURES`; a learned,
  transparent scorer, :func:`fit_scorer`; baselines; an optional :class:`LLMAttributor`);
  :func:`to_prov` / :func:`write_prov` export PROV-JSON.
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
    ActionLineage,
    ValidationPoint,
    lineage_of,
    trace_lineages,
    validation_point,
)
from icore.adapters._attribution import (
    BASELINES,
    PUBLISHED,
    PUBLISHED_BEST,
    Attribution,
    AttributionScore,
    ChainLink,
    Prediction,
    ScoreRow,
    agent_counts,
    attribute,
    first_error_marker,
    first_output_after_replan,
    first_unsupported,
    last_agent_before_answer,
    majority_agent,
    random_expectation,
    rank_candidates,
    score,
    shipped_models,
    speakers,
)
from icore.adapters._decl import (
    HUMAN,
    captain_agent_declaration,
    generic_declaration,
    magentic_one_declaration,
)
from icore.adapters._errors import AdapterError, ExportError
from icore.adapters._evidence import (
    capabilities,
    check_answer,
    check_ledger,
    check_output,
    classify,
)
from icore.adapters._features import FEATURES, Candidate, Feature, candidates, feature_names
from icore.adapters._jsonl import load_jsonl, parse_jsonl
from icore.adapters._llm_attribution import MODES as LLM_MODES
from icore.adapters._llm_attribution import LLMAttributor
from icore.adapters._otel_import import (
    ICORE_LIVE,
    OTEL,
    OtelSpan,
    iter_file_spans,
    load_otlp,
    load_otlp_runs,
    parse_otlp,
    parse_otlp_runs,
    parse_spans,
    spans_to_trace,
)
from icore.adapters._otel_live import audit_live_trace
from icore.adapters._prov import ICORE_NS, read_prov, to_prov, validate_prov, write_prov
from icore.adapters._results import AuditResult, Finding, FlagPlace, MetricPoint, RunSummary
from icore.adapters._scorer import (
    REGULARIZATION_C,
    ModelSet,
    RankedCandidate,
    ScorerModel,
    fit_model_set,
    fit_scorer,
    group_key,
    load_shipped_model,
)
from icore.adapters._trace import (
    Annotation,
    Ledger,
    Step,
    StepKind,
    Trace,
    as_bool,
    as_step,
    name_key,
)
from icore.adapters._trace_audit import (
    ROOT,
    audit_file,
    audit_path,
    audit_trace,
    collect_paths,
    declaration_for,
    load_trace,
)
from icore.adapters._trace_places import FlagPlaces
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
        otlp_json,
        traces_endpoint,
    )

_OTEL_EXPORT = ("DeliveryCheck", "OtelExporter", "OtlpJsonFileExporter", "SpanCounter",
                "decision_attributes", "exporting", "make_provider", "otlp_json", "traces_endpoint")


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
    "BASELINES",
    "CAPTAIN_AGENT",
    "DEFAULT_MAX_INPUT_MB",
    "ENV_MAX_INPUT",
    "FEATURES",
    "HUMAN",
    "ICORE_LIVE",
    "ICORE_NS",
    "LLM_MODES",
    "MAGENTIC_ONE",
    "OTEL",
    "PUBLISHED",
    "PUBLISHED_BEST",
    "REGULARIZATION_C",
    "ROOT",
    "ActionLineage",
    "AdapterError",
    "Annotation",
    "Attribution",
    "AttributionScore",
    "AuditResult",
    "Candidate",
    "ChainLink",
    "DeliveryCheck",
    "ExportError",
    "Feature",
    "Finding",
    "FlagPlace",
    "FlagPlaces",
    "LLMAttributor",
    "Ledger",
    "MetricPoint",
    "ModelSet",
    "OtelExporter",
    "OtelSpan",
    "OtlpJsonFileExporter",
    "Prediction",
    "RankedCandidate",
    "RunSummary",
    "ScoreRow",
    "ScorerModel",
    "SpanCounter",
    "Step",
    "StepKind",
    "Trace",
    "ValidationPoint",
    "agent_counts",
    "as_bool",
    "as_step",
    "attribute",
    "audit_file",
    "audit_live_trace",
    "audit_path",
    "audit_trace",
    "candidates",
    "capabilities",
    "captain_agent_declaration",
    "check_answer",
    "check_ledger",
    "check_output",
    "check_size",
    "classify",
    "collect_paths",
    "decision_attributes",
    "declaration_for",
    "detect_family",
    "exporting",
    "feature_names",
    "finite_float",
    "first_error_marker",
    "first_output_after_replan",
    "first_unsupported",
    "fit_model_set",
    "fit_scorer",
    "generic_declaration",
    "group_key",
    "iter_file_spans",
    "last_agent_before_answer",
    "lineage_of",
    "load_captain_agent",
    "load_jsonl",
    "load_magentic_one",
    "load_otlp",
    "load_otlp_runs",
    "load_shipped_model",
    "load_trace",
    "load_who_and_when",
    "magentic_one_declaration",
    "majority_agent",
    "make_provider",
    "max_input_bytes",
    "name_key",
    "otlp_json",
    "parse_captain_agent",
    "parse_jsonl",
    "parse_magentic_one",
    "parse_otlp",
    "parse_otlp_runs",
    "parse_spans",
    "parse_who_and_when_data",
    "random_expectation",
    "rank_candidates",
    "read_prov",
    "score",
    "shipped_models",
    "spans_to_trace",
    "speakers",
    "time_ns",
    "to_prov",
    "trace_lineages",
    "traces_endpoint",
    "validate_prov",
    "validation_point",
    "write_prov",
]
