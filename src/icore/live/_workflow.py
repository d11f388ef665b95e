"""Live workflow templates: the five-agent reservation, fulfillment and deployment tasks.

planfence Sec. 5.2, App. A.2-A.5.

Pure: the content of one task is a function of ``(family, seed, task id)`` only, so the
scripted backend replays the same decisions byte for byte and every policy of the matched
study faces the identical task.

A task has a requirement (owned by the reviser), a catalog (owned by the retriever), a
shortlist of locally eligible candidates (retriever), a plan (planner), the primary action
outcome (executor) and an audit verdict (auditor). The post-plan revision changes the
requirement's decisive attribute so that no candidate eligible before the revision is
eligible after it: acting on the old plan is a stale-plan action.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icore.live._errors import LiveManifestError

ROLES = ("planner", "retriever", "reviser", "executor", "auditor")
"""The five roles of the live workflows (planfence Sec. 5.2)."""

MAX_CANDIDATES = 5
"""Locally eligible candidates shown to a role (planfence App. A.2)."""


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """What a workflow family looks like.

    Attributes:
        family: family name.
        action: the protected primary action (tool name).
        request_prefix: prefix of the application-level request id.
        attr: the requirement attribute a candidate must match.
        values: possible values of ``attr``.
        item: what a catalog candidate is.
        id_prefix: prefix of candidate ids.
        rank: the numeric candidate field the planner minimises.
    """

    family: str
    action: str
    request_prefix: str
    attr: str
    values: tuple[str, ...]
    item: str
    id_prefix: str
    rank: str


FAMILY_SPECS: Mapping[str, FamilySpec] = {
    "reservation": FamilySpec("reservation", "book", "trip", "city",
                              ("Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao"),
                              "hotel", "H", "price"),
    "fulfillment": FamilySpec("fulfillment", "ship", "order", "region",
                              ("north", "south", "east", "west", "central", "coast"),
                              "warehouse", "W", "eta_h"),
    "deployment": FamilySpec("deployment", "release", "svc", "version",
                             ("1.4.0", "1.4.1", "1.5.0", "2.0.0", "2.0.1", "2.1.0"),
                             "build", "B", "size_mb"),
}
"""The three families, in the order of the paper's tables (planfence Sec. 5.1)."""

FAMILIES: tuple[str, ...] = tuple(FAMILY_SPECS)
"""The three workflow families (planfence Sec. 5.1), in order; the lab's workloads
(:mod:`icore_lab.workloads`) use the same tuple."""

SEEDS_PER_FAMILY = 10
"""Seeds per family: 3 x 10 = 30 templates (planfence Sec. 5.1)."""


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One live task (a workflow template instance).

    Attributes:
        task: task id, also the suffix of every key (``req/<task>``).
        family: workflow family.
        seed: template seed.
        requirement: initial requirement content.
        revision: the post-plan revision's content.
        catalog: catalog content (list of candidates).
    """

    task: str
    family: str
    seed: int
    requirement: Mapping[str, Any]
    revision: Mapping[str, Any]
    catalog: Sequence[Mapping[str, Any]]

    @property
    def spec(self) -> FamilySpec:
        """The family spec."""
        return FAMILY_SPECS[self.family]

    def key(self, kind: str) -> str:
        """Return the semantic key of ``kind`` (req, cat, short, plan, act, audit)."""
        return f"{kind}/{self.task}"


def make_task(family: str, seed: int, task: str | None = None) -> TaskSpec:
    """Build the task of template ``(family, seed)``.

    Args:
        family: ``reservation``, ``fulfillment`` or ``deployment``.
        seed: template seed (0..9 in the study; any int works).
        task: task id (default ``<family>-<seed:02d>``).

    Raises:
        LiveManifestError: an unknown family, a seed that is no int or a task that is no
            str (a ``ValueError``; field ``family``, ``seed`` or ``task``).
    """
    if not isinstance(family, str) or family not in FAMILY_SPECS:
        raise LiveManifestError(f"unknown workflow family {family!r}; use one of "
                                f"{tuple(FAMILY_SPECS)}", path="family")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LiveManifestError(f"seed must be an int, not {type(seed).__name__}",
                                path="seed")
    if task is not None and (not isinstance(task, str) or not task):
        raise LiveManifestError(f"task must be a non-empty str or None, not {task!r:.60}",
                                path="task")
    fs = FAMILY_SPECS[family]
    rng = _rng("live-task", family, seed)
    first, second, *others = rng.sample(fs.values, len(fs.values))
    catalog = []
    # 3 candidates matching the initial requirement, 3 matching the revision, 2 others
    attrs = [first] * 3 + [second] * 3 + others[:2]
    for i, v in enumerate(attrs):
        catalog.append({"id": f"{fs.id_prefix}{i + 1}", fs.attr: v,
                        fs.rank: rng.randint(40, 400)})
    order = list(range(len(catalog)))
    rng.shuffle(order)
    catalog = [dict(catalog[i], id=f"{fs.id_prefix}{n + 1}") for n, i in enumerate(order)]
    tid = task or f"{family}-{seed:02d}"
    request = f"{fs.request_prefix}-{seed:02d}"
    req = {"request": request, fs.attr: first, "note": f"{fs.item} for {request}"}
    rev = {"request": request, fs.attr: second, "note": f"{fs.item} for {request} (revised)"}
    return TaskSpec(tid, family, seed, req, rev, tuple(catalog))


def eligible(requirement: Mapping[str, Any], catalog: Sequence[Mapping[str, Any]],
             family: str) -> list[dict[str, Any]]:
    """Candidates matching the requirement, best first, at most :data:`MAX_CANDIDATES`."""
    fs = FAMILY_SPECS[family]
    ok = [dict(c) for c in catalog if c.get(fs.attr) == requirement.get(fs.attr)]
    ok.sort(key=lambda c: (c.get(fs.rank, 0), c["id"]))
    return ok[:MAX_CANDIDATES]


def opaque_digest(record_id: str) -> str:
    """An opaque, model-facing digest of a requirement revision (never the raw id)."""
    return "rev-" + hashlib.sha256(b"icore-live-revision:" + record_id.encode()).hexdigest()[:10]
