"""Protected calls refused where this process's gate did not decide (planfence App. A.3).

Two kinds of refusal reach an in-process recording without a gate decision of its own:

* **before the gate** in this process: a fenced call refused ``not_read`` (the agent held
  no read of a fact the call depends on), a human's "no" to a fenced call, ...;
* **at the** ``icore mcp`` **gateway**: the tool is an MCP tool served through the
  gateway, which refuses with an MCP ``isError`` result whose text starts with
  :func:`refusal_head` (``PlanFence blocked <tool> (<reason>)``). The gateway also puts
  its verdict in the result's ``_meta["icore/gate"]``, but the frameworks' MCP clients
  drop ``_meta`` (langchain-mcp-adapters) or do not trace it (the OpenAI Agents SDK), so
  the text is what the recorders read (:func:`read_refusal`; tests/mcp pins that the
  gateway's text and this parser agree).

Both are written as the gateway writes its own pre-gate refusals: a ``blocked`` PlanFence
decision line (no frontier or heads: no versions were compared here), so ``icore audit``
counts the call as a blocked protected action in either trace. A gateway refusal seen
in process is also the calling agent's plan, and a ``stale`` one waits for its replan:
the agent's next call of the same tool (:func:`record_tool_result`), so the in-process
audit counts the replan as the gateway's audit does. Pure: no I/O, no clock, no framework
import.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icore.fence import INVALID_ARGUMENTS, DecisionEntry, Outcome, Reason
from icore.integrations._recorder_lines import plan_before, take_replan_of
from icore.integrations._trace_data import bounded_args, text_of

if TYPE_CHECKING:
    from icore.integrations._recorder import RunRecorder
    from icore.workspace import Call

GATEWAY_POLICY = "icore mcp gateway"
"""The ``policy`` of a refusal the ``icore mcp`` gateway made (before or without a gate
decision, or its gate's refusal seen from the agent's side)."""
BEFORE_GATE_POLICY = "before the gate"
"""The ``policy`` of a fenced call refused in process before its gate decided."""
ARGS_INVALID = INVALID_ARGUMENTS
"""The reason of a fenced call refused before its gate because its arguments do not fit
the tool's schema (nothing ran, nothing was validated; QA qa-fw7 S3): the one name,
:data:`icore.fence.INVALID_ARGUMENTS` (it was ``args_invalid`` here, which traces
written before still hold; ``icore audit`` reads it as the same reason)."""
REFUSAL_PREFIX = "PlanFence blocked "
"""How every PlanFence refusal text the model reads starts."""
_HEAD = re.compile(r"PlanFence blocked (?P<tool>[^\s()]+) \((?P<reason>[a-z][a-z0-9_]*)\)"
                   r"(?=[:.\n]|$)")
MAX_DETAIL_CHARS = 2000
"""A refusal's detail is cut to this many characters in its decision line."""


def refusal_head(tool: str, reason: str) -> str:
    """The first words of a refusal: ``PlanFence blocked <tool> (<reason>)``.

    The gateway's refusal texts start with it (then ``:`` and the hint); so do the
    in-process fenced tools' messages. :func:`read_refusal` reads it back.
    """
    return f"{REFUSAL_PREFIX}{tool} ({reason})"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal read from a tool result's text.

    Attributes:
        tool: the tool the refusal names (the gateway's name of it).
        reason: the reason code (``stale``, ``not_read``, ``second_change``, ...).
        text: the whole refusal text the model read.
    """

    tool: str
    reason: str
    text: str


def result_text(result: Any) -> str:
    """The text of a tool result as a framework hands it over.

    A string; an MCP text item (``{"type": "text", "text": ...}``, what the Agents SDK
    traces for an MCP call); a list of such items; an MCP result (``content`` items);
    anything else: ``""``.
    """
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping):
        if isinstance(result.get("text"), str):
            return str(result["text"])
        content = result.get("content")
        return result_text(content) if isinstance(content, str | list | tuple) else ""
    if isinstance(result, list | tuple):
        return "\n".join(t for t in (result_text(r) for r in result) if t)
    return ""


def read_refusal(result: Any, tool: str | None = None) -> Refusal | None:
    """The PlanFence refusal a tool result carries, else None.

    Args:
        result: the result (see :func:`result_text`); its text must *start* with
            :func:`refusal_head` (leading white space aside): a tool whose output merely
            quotes a refusal is not refused.
        tool: the called tool's name, when known: the refusal must name it (or, for a
            client that prefixes the server's tool names, its last part).

    Returns:
        The :class:`Refusal`, or None when the result is not a PlanFence refusal.
    """
    text = result_text(result).lstrip()
    m = _HEAD.match(text)
    if m is None:
        return None
    named = m.group("tool")
    if tool is not None and tool != named and not tool.endswith(("_" + named, "." + named,
                                                                 "/" + named, "-" + named)):
        return None
    return Refusal(named, m.group("reason"), text)


def blocked_line(tool: str, task: str, reason: str, policy: str, detail: str = "",
                 deps: Sequence[str] = ()) -> dict[str, Any]:
    """The PlanFence decision line of a call refused without a gate decision here.

    ``blocked`` with ``reason`` and ``policy`` (:data:`GATEWAY_POLICY`,
    :data:`BEFORE_GATE_POLICY`, ``approval``), no frontier or heads (no versions were
    compared), so the audit lists the call as a blocked protected action.
    """
    e = DecisionEntry(outcome=Outcome.BLOCKED.value, reason=reason, action=tool,
                      deps=tuple(sorted(deps)), policy=policy,
                      detail=detail[:MAX_DETAIL_CHARS], task=task)
    return {"planfence": {"decision": e.to_dict(digest=True)}}


def record_blocked(rec: RunRecorder, tool: str, reason: str, policy: str,
                   detail: str = "") -> str:
    """Write the blocked decision line of one refused call into ``rec``; its task name."""
    task = rec.next_task(tool)
    rec.add_lines([blocked_line(tool, task, reason, policy, detail)])
    return task


def replan_refused(rec: RunRecorder, who: str, tool: str, args: Mapping[str, Any] | None
                   ) -> bool:
    """A call refused before its gate that is the replan of ``who``'s stale ``tool`` call.

    The model re-planned from the fresh values it was handed (a human then said no to
    the new call, before its gate): its plan lines are written as
    :meth:`~icore.integrations.RunRecorder.gate` writes a replan (the stale call's plan,
    then ``replan: true`` with its plan id), so the audit counts the replan (issue 28).
    Returns False when no stale call of ``who`` waits.
    """
    with rec._lock:
        scope = next((sc for sc in rec._stale if sc[:2] == (who, tool)), None)
        stale = take_replan_of(rec._stale, scope, None) if scope is not None else None
    if stale is None:
        return False
    roots, planner, plan_id = stale[:3]
    if plan_id is None:
        plan_id = rec._new_plan_id(tool)
        plan_before(rec, stale[5], planner, f"plan for {tool}", roots=list(roots),
                    plan_id=plan_id)
    rec.plan(who, f"replan for {tool}: {text_of(dict(args or {}))}", replan=True,
             plan_id=plan_id)
    return True


def with_given_args(call: Call, given: Mapping[str, Any] | None) -> Call:
    """``call`` as recorded: a refusal of unencodable or oversized arguments keeps them.

    On an ``args_not_json``, ``args_too_large`` or ``invalid_arguments`` (a NaN) refusal
    the workspace binds no
    arguments (its call's ``args`` is ``{}``); the trace records what the model gave
    instead, bounded (:func:`~icore.integrations._trace_data.bounded_args`; QA qa-crew
    S4).
    """
    if call.args or not given or call.reason not in ("args_not_json", "args_too_large",
                                                     INVALID_ARGUMENTS):
        return call
    return dataclasses.replace(call, args=bounded_args(given))


def refused_call(rec: RunRecorder, agent: str, tool: str, args: Mapping[str, Any] | None,
                 content: Any, *, reason: str, policy: str = BEFORE_GATE_POLICY,
                 detail: str = "", **fields: Any) -> str:
    """A fenced call refused before its gate decided, as every recorder writes it.

    The blocked decision line (:func:`record_blocked`: the audit counts the call as a
    blocked protected action, as the gateway's audit counts its own pre-gate refusals)
    and the call's refused output (exit code 1, ``blocked``, ``reason``). ``policy``:
    :data:`BEFORE_GATE_POLICY` (``not_read``, arguments that do not fit, ...) or
    ``approval`` (a human's "no" before the gate). Returns the call's task name.
    """
    task = record_blocked(rec, tool, reason, policy, detail or str(content))
    rec.tool_call(agent, tool, args, content, error=True, blocked=True, reason=reason,
                  task=task, **fields)
    return task


def record_tool_result(rec: RunRecorder, agent: str, tool: str, args: Mapping[str, Any] | None,
                       result: Any, *, error: bool = False, may_refuse: bool = True,
                       **fields: Any) -> Refusal | None:
    """Record a tool call whose result may be the ``icore mcp`` gateway's refusal.

    A refusal (when ``may_refuse``: :func:`read_refusal` of ``result`` naming ``tool``): the
    agent's plan for the call, a blocked decision (:data:`GATEWAY_POLICY`), a gate line
    and the call as refused (exit code 1, ``blocked``, ``reason``); a ``stale`` one waits
    for its replan. Any call (refused or not) of ``tool`` by ``agent`` after a stale
    refusal is that replan (a ``plan`` line with ``replan: true`` and the refused call's
    plan id). Otherwise the call as it ran (``error``: it failed).

    Returns:
        The refusal, or None when the result is not one.
    """
    got = read_refusal(result, tool) if may_refuse else None
    said = f"{tool}: {_args_text(args)}"
    plan_id = rec.gateway_stale.pop((agent, tool), None)
    if plan_id is not None:
        rec.plan(agent, f"replan for {said}", replan=True, plan_id=plan_id)
    if got is None:
        rec.tool_call(agent, tool, args, result, error=error, **fields)
        return None
    task = record_blocked(rec, tool, got.reason, GATEWAY_POLICY, got.text)
    if plan_id is None:
        plan_id = task
        rec.plan(agent, f"plan for {said}", plan_id=plan_id)
    if got.reason == Reason.STALE.value:
        rec.gateway_stale[(agent, tool)] = plan_id
    rec.add(agent, "thought", f"gate {Outcome.BLOCKED.value}/{got.reason} for {tool}",
            gate={"outcome": Outcome.BLOCKED.value, "reason": got.reason, "tool": tool,
                  "replanned": False, "policy": GATEWAY_POLICY}, task=task)
    rec.tool_call(agent, tool, args, got.text, error=True, blocked=True,
                  reason=got.reason, refused_by=GATEWAY_POLICY, task=task, **fields)
    return got


def _args_text(args: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(args or {}), default=str, ensure_ascii=False, sort_keys=True)
