"""Which call a protected action of a recorded run was (#28, QA qa-new10 S3).

Its action record id, the arguments the record binds (else the ones its refused call's
output names) and the agent that made it (its gate thought or refused output, else the
action record's owner), so ``icore audit --json`` and the report tell two calls of one
tool apart. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from icore.fence import ACTION_FIELD


def made_by(lineages: Sequence[Any], records: Sequence[Mapping[str, Any]],
            callers: Mapping[str, tuple[str, str | None]],
            branches: Mapping[str, str] | None = None) -> list[Any]:
    """``lineages``, each with its action record, arguments, calling agent and branch.

    ``lineages``: :class:`~icore.adapters.ActionLineage` values (typed ``Any`` here: the
    lineage module imports this one).

    (:attr:`~icore.adapters.ActionLineage.record`, ``args``,
    ``agent``; #28, QA qa-new10 S3: two calls of one tool in one turn
    are told apart.) ``branches``: task -> the parallel branch of its call
    (:attr:`~icore.adapters.ActionLineage.branch`, #28).
    """
    by_id = {str(r.get("id")): r for r in records}
    out = []
    for a in lineages:
        root = next((str(p.entry.roots[0]) for p in reversed(a.points) if p.entry.roots),
                    None)
        rec = by_id.get(root) if root is not None else None
        content = rec.get("content") if rec is not None else None
        act = content.get(ACTION_FIELD) if isinstance(content, Mapping) else None
        args = None
        if isinstance(act, Mapping) and isinstance(act.get("args"), Mapping):
            try:
                args = json.dumps(act["args"], sort_keys=True, separators=(",", ":"),
                                  allow_nan=False)
            except (TypeError, ValueError, RecursionError):
                args = None
        made = callers.get(a.action)
        owner = rec.get("owner") if rec is not None else None
        agent = made[0] if made is not None else owner if isinstance(owner, str) else None
        out.append(replace(a, record=root, agent=agent,
                           args=args if args is not None else made[1] if made else None,
                           branch=(branches or {}).get(a.action)))
    return out
