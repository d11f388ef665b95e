"""Drop-ins for the agent frameworks users run (design.md 2, ``integrations/``).

One public subpackage per framework, each an extra, each importing its framework lazily:

* :mod:`icore.integrations.langgraph` (``icore[langgraph]``): fenced tools with plan roots
  from graph state, recorded nodes and a callback handler, a ``BaseCheckpointSaver``
  whose checkpoints are icore records, a ``BaseStore`` over owner memory;
* :mod:`icore.integrations.openai_agents` (``icore[openai-agents]``): fenced
  ``FunctionTool``s with roots from the run context, a tracing processor;
* :mod:`icore.integrations.ag2` (``icore[ag2]``): fenced functions for AG2 agents, message
  hooks that record a chat;
* :mod:`icore.integrations.crewai` (``icore[crewai]``): a fenced ``BaseTool``, an event
  listener.

Shared by all of them (no framework needed): :class:`RunRecorder` (a run into the generic
JSONL trace that ``icore audit`` reads), :class:`FenceGuard` (the PlanFence protected
action behind every fenced tool, planfence App. A.3; with ``agent=`` a
:class:`~icore.workspace.Agent` it builds each call's action record itself),
:class:`ArgNormalizer` / :func:`normalize_args` (arguments in the tool's normal form) and
:class:`Replicator` (records to the replicas that need them; keys named in errors);
:func:`read_refusal` / :func:`refusal_head` (the ``PlanFence blocked <tool> (<reason>)``
text every refusal starts with, the ``icore mcp`` gateway's included: the recorders
record such a tool result as a blocked call, :data:`GATEWAY_POLICY`); :class:`NoEffect`
(a fenced tool's body saying it failed and did nothing: any other exception from a
started body leaves the call's outcome unknown).
:mod:`icore.integrations.cost` builds the cases of ``icore bench integrations`` (fenced vs
unfenced calls per framework).

Import rule: integrations use only the public API of records, fence, memory, workspace,
state and adapters (``tests/test_layering.py``).
"""

from icore.integrations._arg_normal import (
    ArgNormalizer,
    check_tool_function,
    normalize_args,
    signature_model,
)
from icore.integrations._failed import NoEffect
from icore.integrations._fenced import AnyReplanner, FenceGuard, Gated, OnBlock, Scope
from icore.integrations._recorder import RunRecorder, active_recorder
from icore.integrations._refusals import (
    GATEWAY_POLICY,
    Refusal,
    blocked_line,
    read_refusal,
    refusal_head,
)
from icore.integrations._wiring import Replicator
from icore.integrations._writes import Writes

__all__ = ["GATEWAY_POLICY", "AnyReplanner", "ArgNormalizer", "FenceGuard", "Gated", "NoEffect",
           "OnBlock", "Refusal", "Replicator", "RunRecorder", "Scope", "Writes", "active_recorder",
           "blocked_line", "check_tool_function", "normalize_args", "read_refusal", "refusal_head",
           "signature_model"]
