"""The matched controlled-live study of planfence App. A.5 (Table 2), over live teams.

3 workflow families x 10 seeds x {owner-head freshness, centralized lineage, PlanFence}
= 90 attempts. Each task forms a plan over the initial requirement, then receives one
owner revision before the protected action. Every policy runs the identical 30 tasks on
its own live team (one process per agent, authenticated TCP; centralized lineage adds the
central memory service). The table reports task success, invalid primary actions,
successful replans, redundant auditor actions and the model's accepted vs total responses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icore._files import write_owned
from icore.live._results import LiveRunResult, RunObserver
from icore.live._run_manifest import RunManifest, default_manifest, manifest_from_dict
from icore.live._runner import Reporter, run_live
from icore.live._workflow import FAMILIES, FAMILY_SPECS, SEEDS_PER_FAMILY, make_task

MATCHED_POLICIES = ("owner_head_freshness", "centralized_lineage", "planfence")
"""The three methods of Table 2, in its row order."""

POLICY_LABELS = {"owner_head_freshness": "Owner-head freshness",
                 "centralized_lineage": "Centralized lineage", "planfence": "PlanFence"}
MEMORY_LABELS = {"owner_head_freshness": "Replicated", "centralized_lineage": "Shared",
                 "planfence": "Replicated"}


def matched_manifest(base: RunManifest | None = None, *, concurrency: int = 10) -> RunManifest:
    """The team manifest of the matched study: every family's tool, revision on."""
    m = base or default_manifest("reservation")
    data = m.model_dump()
    data["tools"] = list(data["tools"])
    names = {t["name"] for t in data["tools"]}
    for fam in FAMILIES:
        act = FAMILY_SPECS[fam].action
        if act not in names:
            data["tools"].append({"name": act, "depends_on": ["req/{task}"]})
    data.update(name="matched-study", revision=True, concurrency=concurrency, crash=None)
    return manifest_from_dict(data, file="<matched study>")


@dataclass(frozen=True)
class MatchedRow:
    """One row of the matched table (one policy over every task)."""

    policy: str
    tasks: int
    succeeded: int
    invalid: int
    successful_replans: int
    redundant_auditor: int
    accepted: int
    responses: int
    blocked: int
    duration_s: float
    by_family: dict[str, dict[str, int]] = field(default_factory=dict)
    llm: dict[str, int] = field(default_factory=dict)
    mode: str = ""

    def cells(self) -> list[str]:
        """Table 2 cells."""
        return [POLICY_LABELS.get(self.policy, self.policy), MEMORY_LABELS.get(self.policy, ""),
                f"{self.succeeded}/{self.tasks}", f"{self.invalid}/{self.tasks}",
                f"{self.successful_replans}/{self.tasks}" if self.successful_replans else "-",
                str(self.redundant_auditor), f"{self.accepted}/{self.responses}"]


TABLE_HEADER = ("Method", "Memory", "Task success", "Invalid primary / scheduled",
                "Successful replans", "Redundant auditor actions", "Accepted / responses")


@dataclass(frozen=True)
class MatchedResult:
    """The matched study: one :class:`MatchedRow` and one :class:`LiveRunResult` per policy."""

    rows: tuple[MatchedRow, ...]
    runs: dict[str, LiveRunResult]
    out_dir: Path
    duration_s: float

    def row(self, policy: str) -> MatchedRow:
        """The row of ``policy``."""
        return next(r for r in self.rows if r.policy == policy)

    def markdown(self) -> str:
        """The table as Markdown."""
        lines = ["| " + " | ".join(TABLE_HEADER) + " |",
                 "|" + "---|" * len(TABLE_HEADER)]
        lines += ["| " + " | ".join(r.cells()) + " |" for r in self.rows]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"duration_s": round(self.duration_s, 2), "out_dir": str(self.out_dir),
                "rows": [r.__dict__ for r in self.rows],
                "reports": {p: str(r.report) for p, r in self.runs.items()}}


def _row(policy: str, res: LiveRunResult) -> MatchedRow:
    fam: dict[str, dict[str, int]] = {}
    for t in res.tasks:
        d = fam.setdefault(t.family, {"tasks": 0, "succeeded": 0, "invalid": 0,
                                      "replans": 0, "redundant": 0})
        d["tasks"] += 1
        d["succeeded"] += t.success
        d["invalid"] += t.invalid
        d["replans"] += t.successful_replan
        d["redundant"] += t.redundant_auditor
    return MatchedRow(policy, len(res.tasks), res.succeeded, res.invalid_actions,
                      res.successful_replans, res.redundant_auditor_actions, res.accepted,
                      res.responses, res.blocked, round(res.duration_s, 2), fam, res.llm,
                      str(res.negotiation.get("mode", "")))


def run_matched(out_dir: str | Path, *, manifest: RunManifest | None = None,
                families: Iterable[str] = FAMILIES,
                seeds: Iterable[int] = range(SEEDS_PER_FAMILY),
                policies: Sequence[str] = MATCHED_POLICIES,
                concurrency: int = 10, reporter: Reporter | None = None,
                observer: RunObserver | None = None) -> MatchedResult:
    """Run the matched study (planfence App. A.5) on live teams.

    Args:
        out_dir: study folder (one run folder per policy, plus ``matched.json`` and
            ``matched.md``).
        manifest: base team manifest (agents, ownership, backend); default: the embedded
            reservation manifest with every family's tool added.
        families: workflow families of the task grid (default all three).
        seeds: template seeds of the task grid (default 0..9).
        policies: policies compared (default the three of Table 2).
        concurrency: workflows run at once on each team.
        reporter: writes each policy's HTML report (see :func:`run_live`).
        observer: watches every run (:class:`~icore.live.RunObserver`).

    Returns:
        :class:`MatchedResult`.
    """
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    m = matched_manifest(manifest, concurrency=concurrency)
    specs = [make_task(f, s) for f in families for s in seeds]
    runs: dict[str, LiveRunResult] = {}
    for pol in policies:
        runs[pol] = run_live(m, out / pol, policy=pol, tasks=specs, reporter=reporter,
                             observer=observer)
    res = MatchedResult(tuple(_row(p, r) for p, r in runs.items()), runs, out,
                        time.perf_counter() - t0)
    # the study's folder may be the user's: never over a file icore did not write
    write_owned(out / "matched.json", json.dumps(res.to_json(), indent=1).encode("utf-8"))
    write_owned(out / "matched.md", (res.markdown() + "\n").encode("utf-8"))
    return res
