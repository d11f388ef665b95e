"""One protected call's PlanFence lines: the records its decisions cite, and the decisions.

What :meth:`~icore.integrations.RunRecorder.lineage` writes (docs/audit-real-runs.md,
"Generic JSONL format"): ``{"planfence": {"record": ...}}`` for the records a call's
roots cite (roots, their ancestors, the owners' heads and the fresh records of a replan,
each once per run) and ``{"planfence": {"decision": ...}}`` for each gate decision
(:meth:`icore.fence.DecisionEntry.to_dict`), so ``icore audit`` draws the call's lineage
picture (planfence Sec. 3-4, Alg. 1). Pure: no I/O, no clock, no framework import.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from icore.errors import IntegrationError, brief
from icore.fence import ACTION_FIELD, ActionResult, GateDecision, Outcome
from icore.integrations._trace_data import MAX_CONTENT_CHARS, jsonable
from icore.records import Lookup, Record, RecordId
from icore.workspace import APPROVAL_CHANGED, REJECTED

MAX_LINEAGE_RECORDS = 256
"""At most this many records of one call's lineage are written (roots first)."""

_REFUSALS = {
    REJECTED: "the human rejected the call after the gate authorized it; it never ran",
    APPROVAL_CHANGED: "the approval covered another request (other arguments or "
                      "versions); the call never ran",
}
"""The detail of the refusal line the call's lineage writes."""


def after_gate(result: ActionResult, refused: str | None) -> str | None:
    """``refused`` when the gate's last decision authorized a call that did not run."""
    if result.decisions and not result.executed and \
            result.final.outcome is Outcome.AUTHORIZED:
        return refused
    return None


def refusal_lines(decisions: Sequence[GateDecision], task: str, refused: str | None
                   ) -> list[dict[str, Any]]:
    """The lineage line of an authorized call that did not run, if ``refused``.

    A human said no (``approval_rejected``) or the approval covered another request
    (``approval_changed``): the refusal at the last decision's validation point
    (outcome ``blocked``, reason ``refused``, policy ``approval``), so the audit's
    lineage shows the call blocked, never executed.
    """
    if refused is None or not decisions:
        return []
    entry = dataclasses.replace(
        decisions[-1].entry(task=task), outcome=Outcome.BLOCKED.value, reason=refused,
        replanned=False, fresh={}, policy="approval", owners_contacted=0, heads_checked=0,
        detail=_REFUSALS.get(refused, refused))
    return [{"planfence": {"decision": entry.to_dict(digest=True)}}]


def refusal_fields(refused: str | None) -> dict[str, Any]:
    """Extra fields of a refused call's output: a human's "no" as AG2 records it."""
    if refused is None:
        return {}
    if refused == REJECTED:
        return {"ran": False, "answered_by": "human", "decision": "reject"}
    return {"ran": False}


def lineage_records(decisions: Sequence[GateDecision], lookup: Lookup | None
                    ) -> dict[RecordId, tuple[Record, str]]:
    """The records one call's decisions cite, each with its role in the lineage picture.

    Roots first (``action`` for an action record, ``replan`` for a replan's root, else
    ``plan``) with their ancestors as far as ``lookup`` holds them (by record type), then
    every decision's fresh records and the heads newer than the plan's frontier
    (``revision``), at most :data:`MAX_LINEAGE_RECORDS`.
    """
    recs: dict[RecordId, tuple[Record, str]] = {}
    replan_roots = {r for d in decisions if d.replanned for r in d.roots}

    def role(rec: Record) -> str:
        c = rec.content
        if isinstance(c, Mapping) and ACTION_FIELD in c:
            return "action"
        return "replan" if rec.id in replan_roots else "plan"

    def walk(rid: RecordId, root: bool) -> None:
        stack = [(rid, root)]
        while stack and len(recs) < MAX_LINEAGE_RECORDS:
            r, is_root = stack.pop()
            if r in recs:
                continue
            got = lookup(r) if lookup is not None else None
            if got is None:
                continue
            recs[r] = (got, role(got) if is_root else got.type)
            stack.extend((p, False) for p in got.parents if p not in recs)

    for d in decisions:
        for r in d.roots:
            walk(r, True)
    for d in decisions:
        for rec in d.fresh.values():
            if rec.id not in recs:
                recs[rec.id] = (rec, "revision")
        for rid in (*d.frontier.values(), *d.heads.values()):
            walk(rid, False)
        for key, rid in d.heads.items():  # a head newer than the plan's frontier
            if rid in recs and d.frontier.get(key) not in (None, rid):
                recs[rid] = (recs[rid][0], "revision")
    return recs


def lineage_lines(recs: Mapping[RecordId, tuple[Record, str]],
                  decisions: Sequence[GateDecision], task: str, refused: str | None,
                  written: set[str], failed: str | None = None,
                  may_have_run: bool | None = None) -> list[dict[str, Any]]:
    """The PlanFence lines of one call named ``task``.

    A record line for each of ``recs`` not in ``written`` (the ids written before in this
    run; updated) with every field its id covers (``supersedes`` too, when set: the audit
    recomputes the id, QA qa-new9 S3), one decision line per decision, and
    :func:`refusal_lines` when ``refused``. ``failed``: the error of an authorized tool
    that then failed, written as the last decision's ``error``
    (:attr:`icore.fence.DecisionEntry.error`, issue 28) with ``may_have_run`` (whether
    the failure leaves the effect open; False when not given). Each decision line
    carries its digest (:meth:`icore.fence.DecisionEntry.digest`, #29).
    """
    lines: list[dict[str, Any]] = []
    for rec, rrole in recs.values():
        if rec.id in written:
            continue
        written.add(rec.id)
        line: dict[str, Any] = {"id": rec.id, "key": rec.key, "owner": rec.owner,
                                "seq": rec.seq, "type": rec.type,
                                "parents": list(rec.parents), "role": rrole}
        if rec.supersedes is not None:  # hashed into the id: the audit recomputes it
            line["supersedes"] = rec.supersedes
        content = jsonable(rec.content)
        if len(json.dumps(content, default=str)) <= MAX_CONTENT_CHARS:
            line["content"] = content
        lines.append({"planfence": {"record": line}})
    for i, d in enumerate(decisions, 1):
        entry = d.entry(task=task)
        if failed is not None and i == len(decisions) and entry.authorized:
            entry = dataclasses.replace(entry, error=failed, may_have_run=bool(may_have_run))
        lines.append({"planfence": {"decision": entry.to_dict(digest=True)}})
    lines.extend(refusal_lines(decisions, task, refused))
    return lines


def call_args(agent: Any, tool: Any, args: Any) -> None:
    """Refuse a tool call line's ``agent``, ``tool`` or ``args`` of the wrong type.

    Raises:
        IntegrationError: ``agent`` or ``tool`` not a non-empty str, ``args`` neither
            None nor a mapping (``argument`` names which).
    """
    for name, v in (("agent", agent), ("tool", tool)):
        if not isinstance(v, str) or not v:
            raise IntegrationError(f"{name} must be a non-empty string, not "
                                   f"{type(v).__name__} {brief(v)}"[:160], argument=name)
    if args is not None and not isinstance(args, Mapping):
        raise IntegrationError(f"args must be the call's arguments (a mapping) or None, "
                               f"not {type(args).__name__}", argument="args")
