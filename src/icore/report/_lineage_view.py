"""Lineage pictures of protected actions from PlanFence records and gate decisions.

Input is the JSON the fence already produces: records as ``{id, key, owner, seq, type,
parents, content?, role?}`` and decisions as :meth:`icore.fence.GateDecision.to_dict`. The
gate's own frontier F(x) and heads H(x) are shown as recorded; a policy that computes no
frontier (``owner_head_freshness``) is shown with the versions its roots cite as exact
parents instead, labelled so (planfence Sec. 3, eq. 1; Alg. 1). Formatting only: which
version is "stale" is read off F(x) and H(x), nothing is re-validated here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from icore.adapters import APPROVED, REISSUED, ActionLineage, ValidationPoint, lineage_of
from icore.errors import visible
from icore.fence import DecisionEntry
from icore.report._view_model import (
    DecisionStepView,
    LineageView,
    RecordView,
    ValidationView,
)

_SHORT = 8


def short(record_id: object) -> str:
    """The first 8 characters of a record id (how pages name records)."""
    return str(record_id)[:_SHORT]


def _summary(content: Any, limit: int = 90) -> str:
    if content is None:
        return ""
    if isinstance(content, Mapping):
        if "args" in content and isinstance(content["args"], Mapping):
            content = content["args"]
        elif "items" in content and isinstance(content["items"], list):
            return f"{len(content['items'])} item(s)"
        elif "candidates" in content and isinstance(content["candidates"], list):
            return f"{len(content['candidates'])} candidate(s)"
    text = json.dumps(content, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def record_views(records: Sequence[Mapping[str, Any]]) -> tuple[RecordView, ...]:
    """The :class:`RecordView` of each record dict (duplicates by id dropped)."""
    seen: set[str] = set()
    out = []
    for r in records:
        rid = str(r.get("id", ""))
        if not rid or rid in seen:
            continue
        seen.add(rid)
        seq = r.get("seq")
        role = str(r.get("role") or r.get("type", ""))
        out.append(RecordView(
            id=rid, key=visible(str(r.get("key", ""))), owner=visible(str(r.get("owner", ""))),
            seq=int(seq) if isinstance(seq, int) else None, type=str(r.get("type", "")),
            role=role, parents=tuple(str(p) for p in r.get("parents") or ()),
            summary=_summary(r.get("content"), _ACTION_LIMIT if role == "action" else 90)))
    return tuple(out)


_ACTION_LIMIT = 4096
"""Characters of an action record's arguments shown in full (the arguments the tool saw,
defaults and nested models included); other records' content is cut at 90."""


def _validation(p: ValidationPoint, numbers: Mapping[int, int] | None = None
                ) -> ValidationView:
    """The view of one validation point (F(x) and its source come from adapters).

    ``numbers``: the run's own number of each gate counter value (:func:`run_numbers`).
    """
    e = p.entry
    heads, frontier = dict(e.heads), dict(p.frontier)
    keys = list(dict.fromkeys([*e.deps, *frontier, *heads]))
    return ValidationView(
        point=(numbers or {}).get(e.point, e.point), outcome=e.outcome, reason=e.reason,
        policy=e.policy,
        replanned=e.replanned, roots=e.roots, deps=tuple(visible(k) for k in e.deps),
        frontier=tuple((visible(k), frontier[k]) for k in keys if k in frontier),
        frontier_source=p.frontier_source,
        heads=tuple((visible(k), heads[k]) for k in keys if k in heads),
        stale=tuple(visible(k) for k in p.verdict.stale), detail=visible(e.detail))


def _newest(key: str, by_id: Mapping[str, RecordView]) -> RecordView | None:
    """The record of ``key`` with the highest sequence number among ``by_id`` (or None)."""
    versions = [r for r in by_id.values() if r.key == key and r.seq is not None]
    return max(versions, key=lambda r: r.seq or 0) if versions else None


def _version(rid: str, by_id: Mapping[str, RecordView]) -> str:
    """A version as the reader sees it: ``seq <n> <short id>``.

    ``n`` is the owner sequence (planfence App. A: one counter per owner over all its
    keys), so a key's versions may go seq 1 -> seq 4 with nothing missed; never printed
    as ``v<n>``, which reads as a per-key version count.
    """
    r = by_id.get(rid)
    return f"seq {r.seq} {short(rid)}" if r is not None and r.seq is not None else short(rid)


def _status_of(outcome: str, reason: str) -> str:
    if outcome == "authorized":
        return "ok" if reason == "valid" else "warn"
    if outcome == "replan_required":
        return "warn"
    return "bad"


def lineage_view(anchor: str, title: str, records: Sequence[Mapping[str, Any]],
                 decisions: Sequence[DecisionEntry | Mapping[str, Any]], *,
                 status: str | None = None, outcome_note: str = "") -> LineageView:
    """The lineage picture of one protected action.

    Args:
        anchor: HTML id suffix (``lin-<anchor>``).
        title: heading (task and action).
        records: the records of the workflow (plan, requirement versions, action...).
        decisions: the gate's decisions for this action, in order
            (:class:`~icore.fence.DecisionEntry` or its dict).
        status: ``valid`` / ``INVALID`` / ``blocked`` / ``not issued`` when the caller
            knows it (a live run's ground truth); None derives it from the last decision
            (:func:`icore.fence.action_status`: authorized with a stale F(x) ->
            ``INVALID``; authorized with neither a frontier nor the records to read one
            from -> ``unchecked``).
        outcome_note: extra words for the reason line (e.g. the auditor's verdict).

    Returns:
        The :class:`LineageView`.

    Raises:
        icore.fence.DecisionFormatError: a decision dict is malformed.
    """
    entries = [d if isinstance(d, DecisionEntry) else DecisionEntry.from_dict(d)
               for d in decisions]
    return render_lineage(lineage_of(anchor, title, records, entries, status=status),
                          outcome_note=outcome_note)


def run_numbers(lineages: Sequence[ActionLineage]) -> dict[int, int]:
    """The run's own validation numbers: each gate counter value -> 1, 2, ... in order.

    The gate numbers its validations per agent handle; two runs sharing one (two crews at
    once) showed "validation #8" in a run of four decisions (QA qa-new10b S4). Point 0
    (a refusal before the gate) keeps its number.
    """
    seen = sorted({p.entry.point for a in lineages for p in a.points if p.entry.point > 0})
    return {n: i for i, n in enumerate(seen, 1)}


def render_lineage(lineage: ActionLineage, *, outcome_note: str = "",
                   numbers: Mapping[int, int] | None = None) -> LineageView:
    """The lineage picture of one protected action judged by adapters (render only).

    Args:
        lineage: the action (:attr:`icore.adapters.AuditResult.lineage`).
        outcome_note: extra words for the reason line (e.g. the auditor's verdict).
        numbers: the run's validation numbers (:func:`run_numbers`); None: the gate's.

    Returns:
        The :class:`LineageView`.
    """
    recs = record_views(lineage.records)
    by_id = {r.id: r for r in recs}
    points = tuple(_validation(p, numbers) for p in lineage.points)
    status = lineage.status
    steps: list[DecisionStepView] = []
    stale_by: list[str] = []
    at = f" at step {lineage.human_step}" if lineage.human_step is not None else ""
    if lineage.human == APPROVED:  # the human's yes comes before the gate (QA qa-new9 S3)
        steps.append(DecisionStepView("human", f"approved by a human{at}", "ok",
                                      "a recorded human answer approved this call"))
    elif lineage.human is not None and lineage.human_step is not None:
        steps.append(DecisionStepView("human", f"rejected by a human{at}", "bad",
                                      "a recorded human answer rejected this call"))
    for i, p in enumerate(points):
        if p.replanned and i > 0:
            new = ", ".join(short(r) for r in p.roots)
            steps.append(DecisionStepView("replan", f"replan → plan {new}", "warn",
                                          "one isolated replan over the fresh records"))
        label = f"validate #{p.point}: {p.outcome} / {p.reason}"
        tip = "; ".join(
            f"{k}: F={_version(dict(p.frontier).get(k, '-'), by_id)} "
            f"H={_version(dict(p.heads).get(k, '-'), by_id)}" for k in p.deps)
        steps.append(DecisionStepView("validate", label, _status_of(p.outcome, p.reason),
                                      tip or p.detail))
        heads = dict(p.heads)
        for k in p.stale:
            if heads[k] not in stale_by:
                stale_by.append(heads[k])
    last = points[-1] if points else None
    action = next((r.id for r in reversed(recs) if r.role == "action"), None) or lineage.record
    error = lineage.error
    if last is not None:
        if last.outcome == "authorized" and error is not None:
            steps.append(DecisionStepView(
                "authorized", f"authorized → executed, failed: {error[:120]}", "bad",
                error))
        elif last.outcome == "authorized" and lineage.outcome_unknown:
            steps.append(DecisionStepView(
                "authorized", "authorized → forwarded, no result recorded", "warn",
                last.detail))
        elif last.outcome == "authorized":
            steps.append(DecisionStepView(
                "authorized", "authorized → executed" if action or status != "blocked"
                else "authorized", "bad" if status == "INVALID" else "ok", last.detail))
        elif last.outcome == "blocked":
            steps.append(DecisionStepView("blocked", f"blocked: {last.reason}", "bad",
                                          last.detail))
        else:
            steps.append(DecisionStepView("blocked", "not executed", "bad", last.detail))
    reason = _reason(status, points, by_id)
    if lineage.ran_anyway is not None and last is not None:  # the trace contradicts the gate
        steps.append(DecisionStepView("ran", "recorded as run anyway", "bad",
                                      lineage.ran_anyway))
        who = "a human rejected it" if last.reason == "approval_rejected" else \
            f"the gate refused it ({last.outcome} / {last.reason}, policy {last.policy})"
        reason = (f"INVALID: {who}, yet a recorded tool output says the call ran: "
                  f"{lineage.ran_anyway.strip()[:160]!r}. An effect no authorization covers "
                  "(or an edited trace).")
    elif lineage.ran_anyway is not None:  # a "ran" output no decision covers (#29)
        steps.append(DecisionStepView("ran", "recorded as run, no decision", "bad",
                                      lineage.ran_anyway))
        reason = (f"INVALID: a recorded tool output says protected tool "
                  f"{lineage.title.split(' · ')[0]} ran, beyond the calls the gate "
                  f"authorized: {lineage.ran_anyway.strip()[:160]!r}. An effect no "
                  "authorization covers (or an edited trace).")
    if lineage.edited is not None:  # the trace contradicts its own record ids (fail closed)
        said = ("a decision does not match its digest" if "match its digest" in
                lineage.edited else "a record does not match its id")
        steps.append(DecisionStepView("edited", said, "bad", lineage.edited))
        reason = f"INVALID: {lineage.edited}, a verdict that cannot be trusted."
    if error is not None:  # the tool's outcome beside the gate's verdict (issue 28)
        reason = f"{reason.rstrip('.')}; the tool then failed: {error.strip().rstrip('.')}."
    if lineage.outcome_unknown and error is None:  # QA qa-crew S4: no result recorded
        reason = (f"{reason.rstrip('.')}; its outcome is unknown: it was authorized and "
                  "forwarded, but the run did not end normally and no result of the call "
                  "was recorded (it may have run).")
    if lineage.human == APPROVED:  # the verdict first, as every reason reads
        when = "while the call ran, after the gate" if lineage.human_during \
            else "before the gate"
        reason = f"{reason.rstrip('.')} (approved by a human{at}, {when})."
    elif lineage.human is not None and not reason.startswith("REJECTED by a human"):
        reason = f"{reason.rstrip('.')} (rejected by a human{at})."
    if outcome_note:
        reason = f"{reason} {outcome_note}".strip()
    if lineage.resent_unchanged:  # a warning beside the verdict (QA qa-new10c S2)
        said = RESENT_UNCHANGED.format(keys=", ".join(lineage.resent_unchanged))
        steps.append(DecisionStepView("resent", "resent unchanged", "warn", said))
        reason = f"{reason.rstrip('.')}; {said}."
    if lineage.reissue_of is not None:  # QA qa-new14 S2: it may have acted twice
        said = REISSUED_NOTE.format(first=lineage.reissue_of)
        steps.append(DecisionStepView("reissued", REISSUED, "bad", said))
        reason = f"{reason.rstrip('.')}; {said}."
    if lineage.called_again is not None:  # QA qa-new13a S4: re-read, then called
        steps.append(DecisionStepView("again", "called again", "ok", lineage.called_again))
        reason = f"{reason.rstrip('.')}; {lineage.called_again}."
    return LineageView(lineage.action, lineage.title, status, reason, recs, points, tuple(steps),
                       tuple(stale_by), action, last.roots if last else (), error,
                       lineage.outcome_unknown, lineage.human, lineage.human_step,
                       lineage.resent_unchanged, lineage.args, lineage.agent,
                       lineage.branch, lineage.reissue_of, lineage.called_again)


RESENT_UNCHANGED = ("replan resent unchanged: its arguments are the stale call's although "
                    "the fresh value of {keys} handed over differs from the one it was "
                    "planned from (the host may have retried the refused call blindly)")
"""The warning of a replan resent unchanged (:attr:`LineageView.resent_unchanged`)."""

REISSUED_NOTE = (REISSUED + ": the same call as {first} (same arguments, authorized from "
                 "the same versions), whose outcome is unknown; it may have run twice")
"""The note of an action reissued after an unknown outcome (:attr:`LineageView.reissue_of`)."""


def _tail(detail: str) -> str:
    """`` — detail`` for a reason line, its own final period dropped (one period)."""
    detail = detail.strip().rstrip(".")
    return f" — {detail}" if detail else ""


def link_replans(lineages: Sequence[ActionLineage]) -> tuple[LineageView, ...]:
    """The pictures of a run's actions, a stale call linked to the call that replanned it.

    When the model's call is the plan (the workspace API), a replan is two actions: the
    call refused ``replan_required`` / ``stale`` (the model was handed the fresh values)
    and the model's next call, its one replan. Which call replanned which is what the
    trace records (:attr:`~icore.adapters.ActionLineage.replanned_as` /
    ``replan_of``, read off its plan lines), never a later call of the same tool on the
    same facts: that may be another session's call, or a sibling of the same model
    message (#28, QA qa-crew S2). The first reads "stale → replanned as <second>, <its
    status>", the second "replan of <first>"; an unlinked refusal keeps its block.
    Validations are numbered per run (:func:`run_numbers`).
    """
    numbers = run_numbers(lineages)
    views = [render_lineage(a, numbers=numbers) for a in lineages]
    index = {a.action: i for i, a in enumerate(lineages)}
    for i, a in enumerate(lineages):
        j = index.get(a.replanned_as) if a.replanned_as is not None else None
        if j is None or j == i:
            continue
        new, old = views[j], views[i]
        if a.ran_anyway is None and a.edited is None:  # an INVALID refusal keeps its reason
            views[i] = dataclasses.replace(old, reason=(
                f"stale → replanned as {new.id}, {new.status}: "
                f"{old.reason.split(': ', 1)[-1]} The model was handed the fresh values; its "
                "next call was the one replan (this call did not run)."))
        views[j] = dataclasses.replace(new, reason=f"replan of {old.id} (stale): {new.reason}")
    return tuple(views)


def _reason(status: str, points: Sequence[ValidationView],
            by_id: Mapping[str, RecordView]) -> str:
    if not points:
        return "The gate was never asked: no protected action was issued."
    last = points[-1]
    gate = f"gate: {last.outcome} / {last.reason} (policy {last.policy})"
    if status == "INVALID":
        fr, hd = dict(last.frontier), dict(last.heads)
        parts = []
        for k in last.stale or tuple(k for k in last.deps if k in fr and k in hd):
            rev = by_id.get(hd[k])
            who = f" by {rev.owner}" if rev is not None else ""
            parts.append(f"{k}: the plan is bound to {_version(fr[k], by_id)} but the "
                         f"owner's head is {_version(hd[k], by_id)} (revised{who})")
        if not parts:
            # no owner head was read (e.g. local_replica): name the newest version of each
            # cited key among the run's records instead, labelled so
            for k in (k for k in last.deps if k in fr and k not in hd):
                newest = _newest(k, by_id)
                if newest is not None and newest.id != fr[k]:
                    parts.append(f"{k}: the plan is bound to {_version(fr[k], by_id)} but "
                                 f"the run's newest version is {_version(newest.id, by_id)} "
                                 f"(revised by {newest.owner}; the policy read no owner "
                                 "head)")
        why = "; ".join(parts) or "its frontier is not the owners' heads"
        checked = ("the policy did not check the plan's lineage"
                   if last.frontier_source != "gate" else "the gate saw the stale frontier")
        return (f"INVALID: the action ran from a stale plan. {why}. {gate}: {checked}"
                f"{' — ' + last.detail if last.detail else ''}.")
    if status == "unchecked":
        return (f"unchecked: {gate} authorized without a lineage check, and the trace "
                "carries no records of the plan's inputs to check it against.")
    if status == "blocked" and last.reason == "approval_rejected":
        return (f"REJECTED by a human (policy {last.policy}): the call did not run"
                f"{_tail(last.detail)}.")
    if status == "blocked":
        return f"BLOCKED (fail closed): {gate}{_tail(last.detail)}."
    if status == "valid":
        first = points[0]
        if len(points) > 1 and first.stale:
            revs = ", ".join(f"{k} → {_version(dict(first.heads)[k], by_id)}"
                             for k in first.stale)
            return (f"valid: validation #{first.point} found the plan stale ({revs}); one "
                    f"replan; validation #{last.point} authorized with F(x) = H(x)"
                    f"{' — ' + last.detail if last.detail else ''}.")
        return (f"valid: F(x) = H(x) at validation #{last.point}; {gate}"
                f"{' — ' + last.detail if last.detail else ''}.")
    return f"{status}: {gate}."


__all__ = ["lineage_view", "link_replans", "record_views", "render_lineage", "run_numbers",
           "short", "visible"]
