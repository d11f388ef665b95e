"""A fenced AG2 call and the human's answer (issue 28 item 5; planfence App. A.3).

The gate binds an approval to the request the human was asked (:func:`asked_request`:
the call's normalised arguments and the versions of D(a) its agent read), validates a
call again after a question its body asked (:func:`recheck`), records a call stopped
at the human's answer (:func:`record_stop`) and hands the model the changed facts'
current values (:func:`hand_over`). :mod:`icore.integrations.ag2._human` notes which
calls a human was asked about.
"""

from __future__ import annotations

import json
from typing import Any

from icore.fence import DecisionLog, Fence, GateDecision, ProtectedTool
from icore.integrations import FenceGuard, RunRecorder
from icore.integrations.ag2._human import (
    AfterHuman,
    StoppedAfterHuman,
    always_granted,
    was_asked,
)
from icore.workspace import Agent as TeamAgent
from icore.workspace import ApprovalRequest


def recheck(fence: Fence, ptool: ProtectedTool, root: str,
             args: dict[str, Any]) -> AfterHuman:
    """Validate the call's action record again (after a human answered in the body)."""
    async def check() -> None:
        d = await fence.acheck(ptool, roots=[root], args=args)
        if not d.authorized:
            raise StoppedAfterHuman(d, root, dict(args))

    return check


def record_stop(rec: RunRecorder | None, who: str | None, name: str, fence: Fence,
                 stop: StoppedAfterHuman) -> None:
    """Record a call stopped after the human's answer.

    Its first decision (authorized), the second (refused) one, and the blocked call.
    """
    if rec is None:
        return
    log = fence.log
    entries = list(log) if isinstance(log, DecisionLog) else []
    first = next((d for d in reversed(entries) if d.roots == (stop.root,)
                  and d.authorized), None)
    lookup = fence.lookup or (fence.install.get if fence.install is not None else None)
    rec.gate(who, name, stop.result(first), lookup=lookup)



NOT_ASKED: Any = object()
"""A call no human was asked about (or one the human approved for every call)."""


def asked_request(team: TeamAgent | None, guard: FenceGuard, name: str, context: Any,
                   event: Any, args: dict[str, Any], turn: Any) -> ApprovalRequest | None:
    """The request a human approved for this call, or :data:`NOT_ASKED`.

    A human answered before the gate (``approval_required()``, a hook of the user's): the
    call is bound to its :class:`~icore.workspace.ApprovalRequest`, the normalised
    arguments that reached the gate and the versions of D(a) this agent read for the
    call's model turn (the facts the human was shown the call from). Only that exact
    request runs; a replan (other arguments, or the same ones from other versions) is
    refused ``approval_changed``. None when the request cannot be built (an unread fact,
    a broken ``depends_on``): the approved call is then refused, fail closed, unless the
    gate refuses it first with the real cause. An "always" answer (AG2's bypass for the
    tool) approves every call: :data:`NOT_ASKED`.
    """
    if team is None or not was_asked(context) or always_granted(context, event):
        asked: ApprovalRequest | None = NOT_ASKED
        return asked
    try:
        deps = guard.depends_on
        keys = deps(args) if callable(deps) else deps
        return team.request_for(name, args, keys, turn=turn)
    except Exception:  # fail closed: refused approval_changed (or by the gate first)
        return None


def hand_over(team: TeamAgent | None, d: GateDecision) -> dict[str, Any]:
    """The changed facts' current values, now the agent's reads (its next turn's basis)."""
    if team is None:
        return {}
    out: dict[str, Any] = {}
    for key in sorted(d.fresh):
        try:
            out[key] = team.read(key)
        except Exception:  # the owner did not answer: the value is not handed over
            continue
    return out



def record_approval(rec: RunRecorder, who: str, name: str, args: dict[str, Any]
                    ) -> dict[str, Any]:
    """A human's "yes" to a call put to them before its gate (``approval_required()``).

    A ``thought`` with ``answered_by: "human"``, ``decision: "approve"``, the tool and
    its arguments, as the LangGraph and OpenAI Agents SDK recorders write a human's
    answer; the gate's decision follows it. Returns the line (a call refused before its
    gate names its ``task`` there: the audit links the answer to it exactly).
    """
    line: dict[str, Any] = rec.add(
        who, "thought", f"a human answered approve for {name} "
        f"{json.dumps(args, sort_keys=True, default=str)}", answered_by="human",
        decision="approve", tool=name, args=args)
    return line
