"""Host policies: the agents that decide, in live runs and in audited runs.

* the decision interface (:class:`Decider`, :class:`DecisionRequest`,
  :class:`DecisionOutcome`, :class:`ToolSpec`, :func:`check_call`) and its backends: a
  scripted one (:class:`ScriptedDecider`, byte-for-byte replayable) and an
  OpenAI-compatible LLM one (:class:`LLMDecider`, :func:`negotiate`, planfence App. A.3);
* the endpoint settings of an LLM-backed team or attributor (:class:`LLMSettings`).

The simulated teams of the iCORE controlled evaluation (icore Sec. 5) and the LLM team
live in the lab, :mod:`icore_lab.agents`.

The PlanFence live multi-process run that hosts these deciders (one OS process per agent,
mutual-TLS owner services, the matched study) is :mod:`icore.live`, one layer above; the
framework drop-ins (LangGraph, ...) are :mod:`icore.integrations`.

Import rule: agents import records, memory, fence, net, state and audit only.
"""

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
from icore.agents._llm_settings import LLMSettings
from icore.agents._scripted import ScriptedDecider

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
    "LLMUnavailable",
    "Negotiation",
    "ScriptedDecider",
    "ToolSpec",
    "check_call",
    "decider_from_config",
    "decision_tally",
    "discover_slots",
    "dumps_transcript",
    "enum_prop",
    "fit_timeouts",
    "negotiate",
    "negotiated_backend",
    "object_schema",
]
