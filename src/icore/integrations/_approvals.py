"""Approvals bound to the request a human was asked (issue 28 item 5; planfence App. A.3).

Shared by the framework seams whose human decides before the call reaches the gate (the
Agents SDK's ``needs_approval``, AG2's ``approval_required()`` and hooks): an approved call
runs only as the :class:`~icore.workspace.ApprovalRequest` the human was asked (its
arguments and the versions of D(a) it derives from); anything else is refused
``approval_changed``. The messages the model reads and the record of such a refusal.
Pure: no framework import.
"""

from __future__ import annotations

import json
from typing import Any

from icore.fence import ActionResult, DecisionLog, GateDecision, Outcome, Replan
from icore.integrations._fenced import FenceGuard
from icore.integrations._recorder import RunRecorder
from icore.workspace import APPROVAL_CHANGED, ApprovalRequest


class ApprovalChanged(Exception):
    """Fence mode: the call about to run is not the approved one (raised in the tool)."""

    def __init__(self, approved: dict[str, Any], fresh: dict[str, Any]) -> None:
        super().__init__("changed after approval")
        self.approved, self.fresh = approved, fresh


def canon(args: Any) -> str:
    """Arguments as canonical JSON text (compared, never stored).

    Arguments nested too deeply for the interpreter's stack get a text of their own
    object (equal to no other arguments: an approval never covers them), never a
    ``RecursionError`` (#28).
    """
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    except RecursionError:
        return f"<nested too deeply: {id(args)}>"




def fence_changed(name: str, approved: Any, fresh: Any) -> str:
    """The model-facing refusal of a low-level (``fence=``) call replanned after approval.

    The human's approval covered ``approved`` (JSON arguments) from the old versions,
    ``fresh`` is the replanned call's; either way nothing ran (planfence App. A.3, one
    replan; docs/workspace.md "Approvals bound to the call").
    """
    same = canon(approved) == canon(fresh)
    what = ("the replanned call derives from a fresh plan (the same arguments from other "
            "versions)" if same else f"the fresh call {json.dumps(fresh, default=str)} is "
            f"not the approved {json.dumps(approved, default=str)}")
    return (f"PlanFence blocked {name} (approval_changed): the plan changed while the human "
            f"decided and {what}; nothing ran. Call {name} again with the fresh arguments "
            "to ask the human again")


def changed(name: str, approved: Any, req: ApprovalRequest,
             asked: ApprovalRequest | None, *, unbound: str | None = None) -> str:
    """Why an approved call does not run: it is not the request the human approved.

    ``asked`` None: no request was tied to the approval; ``unbound`` says why, as the
    seam knows it (default: the request could not be built when the human was asked).
    Only what the seam knows is said: never "another process" unless it is (QA
    qa-new15a S2: a tool built again in the same process was told so).
    """
    fresh = dict(req.args)
    if asked is None:
        why = unbound or ("the approval cannot be tied to the versions the call derives "
                          "from: no request with those versions could be noted when the "
                          "human was asked")
    elif canon(dict(asked.args)) != canon(fresh):
        why = (f"the plan changed while the human decided and the fresh call "
               f"{json.dumps(fresh, default=str)} is not the approved "
               f"{json.dumps(approved, default=str)}")
    else:
        keys = sorted(k for k, rid in req.basis if dict(asked.basis).get(k) != rid)
        why = (f"the same arguments now derive from newer versions of "
               f"{', '.join(keys) or 'its facts'} than the ones the human approved")
    return (f"PlanFence blocked {name} (approval_changed): {why}; nothing ran. Call {name} "
            "again (with arguments decided from the current values) to ask the human "
            "again")


def record_changed(rec: RunRecorder, guard: FenceGuard, name: str,
                    first: tuple[str, ...], fresh: list[Replan], args: Any, message: str,
                    who: str | None) -> None:
    """Fence mode: a call refused ``approval_changed`` after the gate authorized it.

    Its decisions (the original roots', then the fresh plan's) are found in the fence's
    :class:`~icore.fence.DecisionLog` and written with the replan and the blocked output.
    """
    log = guard.fence.log
    wanted = [first, *(tuple(r.roots) for r in fresh[-1:])]
    found: list[GateDecision] = []
    for d in reversed(list(log)) if isinstance(log, DecisionLog) else ():
        if d.action == name and d.roots in wanted and d.roots not in [x.roots for x in found]:
            found.insert(0, d)
            if len(found) == len(wanted):
                break
    if not found:
        rec.tool_call(who or "executor", name, args, f"BLOCKED: {APPROVAL_CHANGED}: "
                      f"{message}", error=True, blocked=True)
        return
    res = ActionResult(Outcome.BLOCKED, False, None, tuple(found), bool(fresh),
                       found[-1].roots, dict(args), message)
    fence = guard.fence
    lookup = fence.lookup or (fence.install.get if fence.install is not None else None)
    rec.gate(who, name, res, lookup=lookup, refused=APPROVAL_CHANGED)


