"""Host policies: agents that act in live runs and audited simulations.

* live runs (issue 8): the run manifest, the five-agent workflow over one process per
  agent with mutual-TLS owner services, scripted and LLM (OpenAI-compatible) backends,
  the matched study (planfence App. A.5); see docs/live-runs.md. (Framework drop-ins
  such as LangGraph live in :mod:`icore.integrations`.)
"""

from icore.agents._decide import (
    SYSTEM_PROMPT,
    Decider,
    DecisionOutcome,
    DecisionRequest,
    ToolSpec,
    check_call,
)
from icore.agents._live import (
    RunObserver,
    RunResult,
    TaskResult,
    arun_live,
    run_live,
    run_policies,
)
from icore.agents._live_audit import AuditListener, LiveAudit, live_declaration
from icore.agents._llm import (
    MODES,
    LLMConfig,
    LLMDecider,
    LLMUnavailable,
    Negotiation,
    decision_tally,
    discover_slots,
    negotiate,
)
from icore.agents._manifest import (
    ManifestError,
    RunManifest,
    default_manifest,
    load_manifest,
    manifest_from_dict,
)
from icore.agents._matched import MatchedResult, MatchedRow, matched_manifest, run_matched
from icore.agents._scripted import ScriptedDecider
from icore.agents._team import AgentCrashed, LiveRunError, LiveTeam, StepTimeout
from icore.agents._workflow import FAMILY_SPECS, ROLES, TaskSpec, make_task

__all__ = [
    "FAMILY_SPECS",
    "MODES",
    "ROLES",
    "SYSTEM_PROMPT",
    "AgentCrashed",
    "AuditListener",
    "Decider",
    "DecisionOutcome",
    "DecisionRequest",
    "LLMConfig",
    "LLMDecider",
    "LLMUnavailable",
    "LiveAudit",
    "LiveRunError",
    "LiveTeam",
    "ManifestError",
    "MatchedResult",
    "MatchedRow",
    "Negotiation",
    "RunManifest",
    "RunObserver",
    "RunResult",
    "ScriptedDecider",
    "StepTimeout",
    "TaskResult",
    "TaskSpec",
    "ToolSpec",
    "arun_live",
    "check_call",
    "decision_tally",
    "default_manifest",
    "discover_slots",
    "live_declaration",
    "load_manifest",
    "make_task",
    "manifest_from_dict",
    "matched_manifest",
    "negotiate",
    "run_live",
    "run_matched",
    "run_policies",
]

# iCORE controlled evaluation (issue 6): simulated heterogeneous agents and the LLM team
from icore.agents._llm_icore import LLMSettings, LLMTeam
from icore.agents._sim_world import SimWorld
from icore.agents._simulated import SimEnvironment, SimTeam, introduce

__all__ += ["LLMSettings", "LLMTeam", "SimEnvironment", "SimTeam", "SimWorld", "introduce"]
