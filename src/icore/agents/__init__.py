"""Host policies: the agents that decide, in live runs and in audited simulations.

* the decision interface (:class:`Decider`, :class:`DecisionRequest`,
  :class:`DecisionOutcome`, :class:`ToolSpec`, :func:`check_call`) and its backends: a
  scripted one (:class:`ScriptedDecider`, byte-for-byte replayable) and an
  OpenAI-compatible LLM one (:class:`LLMDecider`, :func:`negotiate`, planfence App. A.3);
* the iCORE controlled evaluation (icore Sec. 5, issue 6): simulated heterogeneous agents
  (:class:`SimTeam`, :class:`SimEnvironment`, :class:`SimWorld`, :func:`introduce`) and the
  LLM team (:class:`LLMTeam`, :class:`LLMSettings`).

The PlanFence live multi-process run that hosts these deciders (one OS process per agent,
mutual-TLS owner services, the matched study) is :mod:`icore.live`, one layer above; the
framework drop-ins (LangGraph, ...) are :mod:`icore.integrations`.

Import rule: agents import records, memory, fence, net, state, audit and workloads only.
"""

from typing import TYPE_CHECKING

from icore._extras import lazy_attributes
from icore.agents._decide import (
    SYSTEM_PROMPT,
    Decider,
    DecisionOutcome,
    DecisionRequest,
    ToolSpec,
    check_call,
    enum_prop,
    object_schema,
)
from icore.agents._llm import (
    MODES,
    TALLY_KEYS,
    LLMConfig,
    LLMDecider,
    LLMUnavailable,
    Negotiation,
    decider_from_config,
    decision_tally,
    discover_slots,
    dumps_transcript,
    fit_timeouts,
    negotiate,
    negotiated_backend,
)
from icore.agents._scripted import ScriptedDecider

if TYPE_CHECKING:
    from icore.agents._llm_icore import LLMSettings, LLMTeam
    from icore.agents._sim_world import SimWorld
    from icore.agents._simulated import SimEnvironment, SimTeam, introduce

_ICORE: dict[str, str] = {
    "LLMSettings": "icore.agents._llm_icore", "LLMTeam": "icore.agents._llm_icore",
    "SimWorld": "icore.agents._sim_world", "SimEnvironment": "icore.agents._simulated",
    "SimTeam": "icore.agents._simulated", "introduce": "icore.agents._simulated",
}
"""The iCORE evaluation names by module, imported on first use: they load :mod:`icore.state`
and :mod:`icore.audit`, which a live-run agent process never needs."""

__getattr__ = lazy_attributes(__name__, _ICORE)


def __dir__() -> list[str]:
    """The module's attributes and every exported name (loaded or not)."""
    return sorted(set(globals()) | set(__all__))

__all__ = [
    "MODES",
    "SYSTEM_PROMPT",
    "TALLY_KEYS",
    "Decider",
    "DecisionOutcome",
    "DecisionRequest",
    "LLMConfig",
    "LLMDecider",
    "LLMSettings",
    "LLMTeam",
    "LLMUnavailable",
    "Negotiation",
    "ScriptedDecider",
    "SimEnvironment",
    "SimTeam",
    "SimWorld",
    "ToolSpec",
    "check_call",
    "decider_from_config",
    "decision_tally",
    "discover_slots",
    "dumps_transcript",
    "enum_prop",
    "fit_timeouts",
    "introduce",
    "negotiate",
    "negotiated_backend",
    "object_schema",
]
