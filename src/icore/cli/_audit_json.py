"""``icore audit``'s per-run JSON, its counts of protected actions and ``--fail-on``.

Thin: reads what :mod:`icore.adapters` and :mod:`icore.report` computed (the lineage
verdicts, the summary), computes nothing of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from icore.adapters import (
    APPROVED,
    FAILED_AFTER_AUTHORIZATION,
    OUTCOME_UNKNOWN,
    REISSUED,
    REJECTED_BY_HUMAN,
    UNCOUNTABLE,
    AuditResult,
    counted_as,
)
from icore.attribution import Attribution
from icore.cli._audit_q import detail_json
from icore.report import LineageView, flag_views, lineage_views, report_filename

FAIL_ON = ("hard-flags", "unsound", "invalid", "unknown", "not-ended")
"""``--fail-on`` conditions: a hard flag in any run; a run whose final snd < 1 (some
obligation of W(X) rests on unsound assertions); a protected action in a trace's
PlanFence records that ran from a stale plan; a protected action whose outcome is
unknown (authorized, its result never recorded or its error leaves the effect open: it
may have run); a run that ended without a terminal marker (stopped, killed, cut off; a
run paused for a human is not one)."""


def plain(obj: Any) -> Any:
    """A dataclass as JSON-ready data (tuples as lists)."""
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(
        obj, type) else obj


STATUSES = ("valid", FAILED_AFTER_AUTHORIZATION, OUTCOME_UNKNOWN, "INVALID", "unchecked",
             "blocked", "not issued")
"""The counts of protected actions (:func:`icore.adapters.counted_as`: the statuses of
:func:`icore.fence.action_status`, a ``valid`` or ``unchecked`` action whose tool then
failed counted as failed after authorization, one whose result a run stopped at once
never recorded as outcome unknown), in the order ``--json``'s ``actions``
counts and the console's line list them."""


def action_counts(lineage: list[dict[str, Any]]) -> dict[str, int]:
    """Protected actions per count (every one, 0 when none) and their ``total``."""
    out = dict.fromkeys(STATUSES, 0)
    for lv in lineage:
        # "outcome": "unknown" holds the recorded may_have_run (else the old text rule)
        c = counted_as(lv["status"], lv.get("error"), unknown=lv.get("outcome") == "unknown",
                       leaves_open=False)
        out[c] = out.get(c, 0) + 1
    out["total"] = len(lineage)
    return out


def run_counts(r: AuditResult) -> dict[str, int]:
    """A run's protected actions per count (:func:`action_counts` of its verdicts)."""
    return action_counts([{"status": lv.status, "error": lv.error,
                           "outcome": "unknown" if lv.outcome_unknown else None}
                          for lv in r.lineage])  # the verdicts, no picture rendered (#29)


def action_line(r: AuditResult) -> str | None:
    """The console's line of a run's protected actions per count (None: it has none)."""
    views = r.lineage
    counts = run_counts(r)
    if not counts["total"]:
        return None
    said = ", ".join(f"{n} {st}" for st, n in counts.items() if st != "total" and n)
    human = [(a, sum(lv.human == a for lv in views)) for a in (APPROVED, REJECTED_BY_HUMAN)]
    asked = "; ".join(f"{n} {a} by a human" for a, n in human if n)
    line = f"protected actions of {r.trace.id}: {counts['total']} ({said})"
    if (resent := sum(bool(lv.resent_unchanged) for lv in views)):  # QA qa-new10c S2
        asked = "; ".join(x for x in (asked, f"{resent} replan(s) resent unchanged (the "
                                      "stale call's arguments again: see the report)") if x)
    if (again := sum(lv.reissue_of is not None for lv in views)):  # QA qa-new14 S2
        asked = "; ".join(x for x in (asked, f"{again} {REISSUED} (the same call from the "
                                      "same versions: it may have run twice)") if x)
    return f"{line}; {asked}" if asked else line


ARGS_SHOWN = 2048
"""Bytes of a call's canonical JSON arguments ``--json`` shows whole (else a preview)."""


def call_fields(agent: str | None, record: str | None, args: str | None,
                branch: str | None = None) -> dict[str, Any]:
    """``agent``, ``branch``, ``record``, ``args`` (or ``args_preview``), ``args_digest``.

    ``args``: canonical JSON text (:attr:`icore.adapters.ActionLineage.args`); the keys
    of what is None are left out.
    """
    out: dict[str, Any] = {}
    if agent is not None:
        out["agent"] = agent
    if branch is not None:
        out["branch"] = branch
    if record is not None:
        out["record"] = record
    if args is not None:
        data = args.encode("utf-8", "surrogatepass")
        if len(data) <= ARGS_SHOWN:
            out["args"] = json.loads(args)
        else:
            out["args_preview"] = args[:256] + "…"
        out["args_digest"] = "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    return out


def run_json(r: AuditResult, att: Attribution | None, out: Path | None,
             views: tuple[LineageView, ...] | None = None) -> dict[str, Any]:
    """One run's entry of ``--json``.

    ``views``: :func:`icore.report.lineage_views` of ``r`` when the caller built them
    already (for the report); None: built here, from the run's one lineage build.

    ``lineage`` lists every protected action (``action``: its task in the trace,
    ``tool``: the tool it called) with its status (the gate's lineage
    verdict), reason and, for a tool that failed after its authorization, its ``error``
    (``"outcome": "unknown"`` for an authorized call whose result was never recorded);
    ``actions`` counts them (``valid``, ``failed after authorization``, ``outcome
    unknown``, ``INVALID``,
    ``unchecked``, ``blocked``, ``not issued``; each action once) with their ``total``:
    a gateway's refusals are the ``blocked`` ones. ``"human": "approved"`` (or
    ``"rejected"``) and ``human_step`` (the step of the recorded answer) for an action a
    human answered (QA qa-new9 S3). Which call it was (#28, QA qa-new10 S3): ``agent``
    (who made it), ``branch`` (the parallel branch it was made in, e.g. a LangGraph
    ``Send`` branch ``"worker[1]/tools"``; only for a call made in one), ``record`` (its
    action record id), ``args`` (the arguments the gate
    bound, or the refused call's; an object of at most :data:`ARGS_SHOWN` bytes of JSON,
    else ``args_preview``, its first 256 characters) and ``args_digest``
    (``sha256:<16 hex>`` of their canonical JSON), each when recorded.
    ``"resent_unchanged": [keys]`` for a replan whose arguments are its stale call's
    although those facts' handed-over values differ (a warning, QA qa-new10c S2).
    ``"reissue_of": action`` for an action reissued after an unknown outcome: the same
    tool and arguments as that earlier action, authorized from the same versions, while
    the earlier one's outcome is unknown (it may have run twice, QA qa-new14 S2).
    ``"called_again": text`` for a call refused ``not_read`` / ``stale``: the next call of
    its tool by its agent that ran, and what it had read (QA qa-new13a S4).
    ``paused``: the run is paused, waiting for a human (no terminal marker, its last step
    a pause; every run has the key, #29). ``warnings``: the import's warnings, when any
    (a record or decision line that does not match its digest, gate activity with no
    PlanFence line, ...). ``chain_broken``: why, when a writer's chain of digested lines
    breaks or the writer marker's promises do (every action ``INVALID``; ``--fail-on
    invalid`` fails the run even when no action is left to count, QA qa-new13a S2).
    ``obligations``, ``agents``, ``timeline`` (and ``obligations_left_off``,
    ``timeline_sampled`` when bounded): Q, per-agent counts and the metric timeline
    (:func:`icore.cli._audit_q.detail_json`, QA qa-new15c S3).
    """
    tools = {str(e.task or e.action or "action"): e.action  # the group names of lineage
             for e in getattr(r.trace.planfence, "decisions", ())}
    for task, tool in (getattr(r.trace.planfence, "gated", None) or {}).items():
        tools.setdefault(task, tool)  # a call whose decision line was cut (qa-new15b)
    lineage = [{"action": lv.id, "tool": tools.get(lv.id), "status": lv.status,
                "reason": lv.reason,
                **({"error": lv.error} if lv.error is not None else {}),
                **({"outcome": "unknown"} if lv.outcome_unknown else {}),
                **({"human": lv.human} if lv.human is not None else {}),
                **({"human_step": lv.human_step} if lv.human_step is not None else {}),
                **({"resent_unchanged": list(lv.resent_unchanged)}
                   if lv.resent_unchanged else {}),
                **({"reissue_of": lv.reissue_of} if lv.reissue_of is not None else {}),
                **({"called_again": lv.called_again} if lv.called_again is not None else {}),
                **call_fields(lv.caller, lv.action, lv.args, lv.branch)}
               for lv in (views if views is not None else lineage_views(r))]
    return {
        "id": r.trace.id, "file": r.trace.file,
        "report": str(out / report_filename(r.trace.id)) if out is not None else None,
        "summary": r.summary().to_json(),
        "flags": [plain(f) for f in flag_views(r.state, r.event_step,
                                                       places=r.flag_places)],
        "diagnoses": [d.to_json() for d in r.diagnoses],
        "attribution": att.to_json() if att is not None else None,
        "paused": r.paused,
        "actions": action_counts(lineage),
        "lineage": lineage,
        **({"warnings": list(r.trace.warnings)} if r.trace.warnings else {}),
        **({"chain_broken": broken} if (broken := getattr(
            r.trace.planfence, "chain_broken", None)) else {}),
        **detail_json(r),
    }


def failing(runs: list[dict[str, Any]], fails: frozenset[str],
             not_ended: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The ``--fail-on`` conditions that hold, one line per condition.

    ``not_ended``: the ids of the runs that ended without a terminal marker and are not
    paused (what ``not-ended`` fails on). ``invalid`` and ``unknown`` also fail a run
    whose protected actions cannot be counted (its warning says
    :data:`~icore.adapters.UNCOUNTABLE`: gate activity with no PlanFence line, as a
    trace cut before them): nothing there can be shown valid or known (fail closed).
    """
    def holds(cond: str, j: dict[str, Any]) -> bool:
        if cond in ("invalid", "unknown") and any(  # fail closed (QA qa-new15b S3)
                UNCOUNTABLE in str(w) for w in j.get("warnings", ())):
            return True
        if cond == "hard-flags":
            return bool(j["summary"]["hard_flags"] > 0)
        if cond == "unsound":
            return bool(j["summary"]["snd"] < 1.0)
        if cond == "unknown":
            return bool(j["actions"].get(OUTCOME_UNKNOWN, 0) > 0)
        if cond == "not-ended":
            return j["id"] in not_ended
        return bool(j.get("chain_broken")) or any(lv["status"] == "INVALID"
                                                  for lv in j["lineage"])

    out = []
    for cond in FAIL_ON:
        if cond in fails:
            hit = [j["id"] for j in runs if holds(cond, j)]
            if hit:
                out.append(f"{cond}: {len(hit)} run(s): {', '.join(hit[:10])}"
                           f"{' …' if len(hit) > 10 else ''}")
    return out


__all__ = ["FAIL_ON", "STATUSES", "action_counts", "action_line", "failing", "plain", "run_json"]
