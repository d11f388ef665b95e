"""Real traces in, exports out (design.md 2, ``adapters/``; data flow 3: audit a recorded run).

- Importers: Who&When Hand-Crafted (Magentic-One) and Algorithm-Generated (CaptainAgent /
  AG2) JSON (:func:`load_who_and_when`), and a generic JSONL event format
  (:func:`load_jsonl`), all into a source-neutral :class:`Trace`.
- :func:`audit_trace` builds X = (G, Q, Π) over the family's declaration package
  (:func:`magentic_one_declaration`, :func:`captain_agent_declaration`,
  :func:`generic_declaration`) and derives diagnoses; :func:`attribute` and :func:`score`
  do failure attribution; :func:`to_prov` / :func:`write_prov` export PROV-JSON.

Import rule: adapters import records, memory, fence, net, state, audit, workloads and
agents only. Errors: :class:`AdapterError` (``ErrorCode.ADAPTER``) names the file and field.
See docs/audit-real-runs.md.
"""

from icore.adapters._attribution import (
    PUBLISHED_BEST,
    Attribution,
    AttributionScore,
    ChainLink,
    ScoreRow,
    attribute,
    score,
    speakers,
)
from icore.adapters._audit import (
    ROOT,
    AuditResult,
    Diagnosis,
    MetricPoint,
    RunSummary,
    audit_path,
    audit_trace,
    collect_paths,
    declaration_for,
    load_trace,
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
from icore.adapters._jsonl import load_jsonl, parse_jsonl
from icore.adapters._prov import ICORE_NS, read_prov, to_prov, validate_prov, write_prov
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

__all__ = [
    "CAPTAIN_AGENT",
    "HUMAN",
    "ICORE_NS",
    "MAGENTIC_ONE",
    "PUBLISHED_BEST",
    "ROOT",
    "AdapterError",
    "Annotation",
    "Attribution",
    "AttributionScore",
    "AuditResult",
    "ChainLink",
    "Diagnosis",
    "ExportError",
    "Ledger",
    "MetricPoint",
    "RunSummary",
    "ScoreRow",
    "Step",
    "StepKind",
    "Trace",
    "as_bool",
    "as_step",
    "attribute",
    "audit_path",
    "audit_trace",
    "capabilities",
    "captain_agent_declaration",
    "check_answer",
    "check_ledger",
    "check_output",
    "classify",
    "collect_paths",
    "declaration_for",
    "detect_family",
    "generic_declaration",
    "load_captain_agent",
    "load_jsonl",
    "load_magentic_one",
    "load_trace",
    "load_who_and_when",
    "magentic_one_declaration",
    "name_key",
    "parse_captain_agent",
    "parse_jsonl",
    "parse_magentic_one",
    "parse_who_and_when_data",
    "read_prov",
    "score",
    "speakers",
    "to_prov",
    "validate_prov",
    "write_prov",
]
