"""Every reason a protected call is refused for, in one table (planfence App. A.3; #29).

A refused call carries one reason code: in a ``Call`` / ``Gated``, in a ``blocked``
decision line of a trace, in a tool output line (``reason``), in the model's text
(``PlanFence blocked <tool> (<reason>)``) and in the MCP gateway's ``_meta``. The codes
come from the gate (:class:`~icore.fence.Reason`), from refusals before the gate (the
workspace, the integrations) and from the MCP gateway; they were named in each place.
This table is where they are all listed, with their meaning; docs/architecture.md
"Refusal reasons" shows it to users.

One name was given twice: arguments that do not fit the tool's schema were
``args_invalid`` (LangGraph, the Agents SDK) and ``invalid_arguments`` (AG2, CrewAI, the
MCP gateway, README and docs). :data:`INVALID_ARGUMENTS` is the one name written now; a
trace written before reads ``args_invalid`` as it (:func:`canonical_reason`, used by
``icore audit``), so old traces audit unchanged. Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from icore.fence._decision import Reason

INVALID_ARGUMENTS = "invalid_arguments"
"""The reason of a call refused before its gate because an argument does not fit the
tool's schema or is no finite number (NaN, an infinity; named in the detail)."""

NOT_FINITE = "not a finite number"
"""The problem named for a NaN or infinite argument (``"amount: not a finite number"``),
refused :data:`INVALID_ARGUMENTS` on every path."""

REASON_ALIASES: Mapping[str, str] = MappingProxyType({"args_invalid": INVALID_ARGUMENTS})
"""Old reason names (in traces written before) -> the name written now."""

_GATE = {
    Reason.VALID: "the gate authorized the call (lineage-valid: F_a(x) == H(x))",
    Reason.STALE: "a fact the call depends on changed since it was read: replan required",
    Reason.SECOND_CHANGE: "a fact changed again after the one replan: blocked",
    Reason.INCOMPLETE_DECLARATION: "D(a) is empty, invalid, or misses a key the call reads",
    Reason.LINEAGE_INCOMPLETE: "a record the call derives from is missing here",
    Reason.MISSING_BOUNDARY: "a key of D(a) is not reached from the call's roots",
    Reason.FRONTIER_CONFLICT: "two versions of one key are reached from the roots",
    Reason.NO_OWNER: "a key of D(a) has no owner",
    Reason.OWNER_UNAVAILABLE: "an owner did not answer (fail closed)",
    Reason.MALFORMED_HEAD: "an owner's reply is malformed",
    Reason.WRONG_KEY: "an owner's reply names another key or omits one",
    Reason.CONFLICTING_OWNER: "a reply comes from another owner than the one asked",
    Reason.CONFLICTING_REPLY: "a reply carries two entries for one key",
    Reason.ARGS_MISMATCH: "the call's arguments are not the ones its roots bind",
    Reason.FETCH_FAILED: "a changed record could not be fetched or verified",
    Reason.FAIL_OPEN: "ablation only: a blocked decision turned into an authorization",
    Reason.NOT_VALIDATED: "an unsafe baseline authorized without checking lineage",
}

REFUSAL_REASONS: Mapping[str, str] = MappingProxyType({
    **{r.value: f"gate: {text}" for r, text in _GATE.items()},
    "not_read": "before the gate: the agent had not read a fact of D(a) (or a key the "
    "arguments make names no fact); the current values are handed over",
    "approval_rejected": "before the gate: a human did not approve this exact call",
    "approval_changed": "before the gate: the call is not the request the human approved",
    INVALID_ARGUMENTS: "before the gate: an argument does not fit the tool's schema or is "
    "no finite number (NaN, an infinity), named in the detail; nothing ran",
    "args_not_json": "before the gate: an argument has no JSON form (a Python object the "
    "application bound, e.g. a datetime), named in the detail",
    "args_too_large": "before the gate: the arguments are too large to record",
    "earlier_outcome_unknown": "before the gate: the same call failed with an unknown "
    "outcome earlier (in this process, or before a restart on a Workspace.sqlite "
    "folder); it is not run twice",
    "call_running": "before the gate: the same call is running in another live process "
    "(a Workspace.sqlite folder's attempts file); it is not run twice",
    "already_ran": "before the gate: the same call ran before a restart; its recorded "
    "result is handed back, it is not run twice",
    "store_failed": "before the gate: the attempts file of the Workspace.sqlite folder "
    "failed (not a database, unwritable, locked); a StoreError names it, nothing ran",
    "unknown_tool": "the model called a tool the agent does not have (recorded output)",
    "no_session": "MCP gateway: an HTTP call with neither a session nor a client identity",
    "dependency_unreadable": "MCP gateway: a resource the call depends on could not be "
    "read upstream (fail closed)",
    "unverified_protection": "MCP gateway: a protected tool name no upstream serves yet "
    "(fail closed)",
    "gateway_stopping": "MCP gateway: stopping; the call was not run",
    "write_unknown": "MCP gateway: a write of a fact the call depends on has an unknown "
    "outcome (fail closed)",
    "not_owner": "MCP gateway: the session does not speak for the fact's owner",
    "claims_unavailable": "MCP gateway: the write claims shared with other gateways "
    "cannot be read or written (fail closed)",
})
"""Every refusal reason code -> what it means (where it is decided: ``gate``, ``before
the gate``, ``MCP gateway``). Old names are in :data:`REASON_ALIASES`, not here."""


def canonical_reason(reason: object) -> object:
    """``reason`` under the name written now (an old name in a trace: its new name).

    Anything else (another code, a non-str) is returned as it is.
    """
    if isinstance(reason, str):
        return REASON_ALIASES.get(reason, reason)
    return reason


__all__ = ["INVALID_ARGUMENTS", "NOT_FINITE", "REASON_ALIASES", "REFUSAL_REASONS",
           "canonical_reason"]
