"""A protected call reissued after an earlier call's outcome was left unknown (QA qa-new14 S2).

A call whose started tool body failed leaving its effect open (a timeout after the
carrier API sent the goods) may have acted. A later call of the same tool with the same
arguments, authorized from the very versions the first one was, repeats it on the same
evidence: the model's next message called again, and the effect may have happened twice.
Both are counted ``outcome unknown`` (or the second ``valid``); this pass links the second
to the first, so the run says it was a repeat (:attr:`ActionLineage.reissue_of`). Calls
refused before their gate, and calls authorized after a new read (another version), are
not reissues. Pure: reads the lineages only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from icore.adapters._lineage_types import ActionLineage
from icore.fence import action_ran

REISSUED = "reissued after an unknown outcome"
"""How the console, ``--json`` and the report name a reissued action."""


def _ran(a: ActionLineage) -> bool:
    return bool(a.points) and action_ran(a.status) and a.ran_anyway is None


def _basis(a: ActionLineage) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    """``(tool, args, versions)`` the action was authorized from (None: not comparable)."""
    last = a.points[-1]
    if a.args is None or not last.frontier:
        return None
    return last.entry.action, a.args, tuple(sorted(last.frontier.items()))


def reissued(lineages: Sequence[ActionLineage]) -> tuple[ActionLineage, ...]:
    """``lineages``, each action reissued after an unknown outcome linked to the first.

    An action that ran (the gate authorized it) is a reissue of the earliest earlier
    action of the run whose outcome is unknown (:attr:`ActionLineage.outcome_unknown`,
    set by :func:`~icore.adapters._unknown_outcome.unknown_outcomes`) with the same tool,
    the same arguments (canonical JSON) and the same versions of D(a) at its authorizing
    decision (its frontier). Returns the lineages, those with ``reissue_of`` set.
    """
    out = list(lineages)
    unknown: dict[tuple[str, str, tuple[tuple[str, str], ...]], str] = {}
    for i, a in enumerate(lineages):
        if not _ran(a) or (basis := _basis(a)) is None:
            continue
        first = unknown.get(basis)
        if first is not None and first != a.action:
            out[i] = dataclasses.replace(a, reissue_of=first)
        if a.outcome_unknown:
            unknown.setdefault(basis, a.action)
    return tuple(out)


__all__ = ["REISSUED", "reissued"]
