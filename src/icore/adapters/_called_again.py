"""A ``not_read`` / ``stale`` refusal linked to the call that ran after it (QA qa-new13a S4).

A call refused because its agent had not read (``not_read``) or had read an outdated
version (``stale``) of a fact it depends on is followed, in an honest run, by the agent
reading the fact again and calling once more. The report showed the refusal and the
later call apart, so a reader could not see that the agent re-read and then called.
:func:`called_again` links each such refusal to the next call of the same tool by the
same agent on a common fact that ran, with the versions that call was authorized
from (its frontier F(x) over the refused call's dependency scope D(a); planfence Sec.
3): "refused not_read at line 4; called again at line 9 (ship-2) after reading
order/7@2". Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from icore.adapters._lineage_types import ActionLineage
from icore.fence import Outcome, action_ran

REFUSALS = ("not_read", "stale")
"""The refusals linked to the next call that ran."""


def _read(key: str, rid: str, seqs: Mapping[str, Any]) -> str:
    seq = seqs.get(rid)
    return f"{key}@{seq}" if type(seq) is int else f"{key}@{rid[:12]}"


def _shared(refused: Any, later: Any) -> bool:
    """Whether two decisions of one tool act on a common fact: their D(a) meet.

    A decision's dependency scope is its ``deps`` (else the keys of its frontier). Two
    calls with no dependency at all are the same call again (nothing tells them apart).
    """
    mine = set(refused.deps or refused.frontier)
    theirs = set(later.deps or later.frontier)
    return bool(mine & theirs) or not (mine or theirs)


def called_again(lineages: Sequence[ActionLineage], records: Sequence[Mapping[str, Any]],
                 lines: Mapping[str, int]) -> tuple[ActionLineage, ...]:
    """``lineages``, each ``not_read`` / ``stale`` refusal with its :attr:`called_again`.

    Args:
        lineages: the trace's actions, in first-decision order.
        records: the trace's record lines (a version's ``seq`` is read from them).
        lines: task -> the line of its first decision (JSONL traces;
            :attr:`~icore.adapters.PlanfenceLog.task_lines`); a task without one is named
            by its task only.

    The next call is the first later action of the same tool, made by the same agent
    (both unknown counts as the same), on a common fact (their dependency scopes share a
    key: ``place_order(gadget)`` is not the widget order called again), whose status says
    it ran (:func:`icore.fence.action_ran`); a refusal no later call follows keeps None.
    """
    seqs = {r["id"]: r.get("seq") for r in records if isinstance(r.get("id"), str)}
    out = list(lineages)
    for i, a in enumerate(out):
        if not a.points:
            continue
        last = a.points[-1].entry
        if action_ran(a.status) or last.outcome == Outcome.AUTHORIZED.value \
                or last.reason not in REFUSALS:
            continue
        for b in out[i + 1:]:
            if not b.points or b.points[0].entry.action != last.action \
                    or b.agent != a.agent or not action_ran(b.status):
                continue
            first = b.points[0].entry
            if not _shared(last, first):  # another fact's call (QA qa-new17b #4)
                continue
            keys = [k for k in (last.deps or first.frontier) if k in first.frontier]
            reads = ", ".join(_read(k, first.frontier[k], seqs) for k in keys[:6])
            at, then = lines.get(a.action), lines.get(b.action)
            out[i] = replace(a, called_again=(
                f"refused {last.reason}" + (f" at line {at}" if at else f" ({a.action})")
                + "; called again" + (f" at line {then}" if then else "")
                + f" ({b.action})" + (f" after reading {reads}" if reads else "")))
            break
    return tuple(out)


__all__ = ["REFUSALS", "called_again"]
