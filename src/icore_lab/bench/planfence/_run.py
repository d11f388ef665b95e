"""Run preset cells: deduplicated jobs over both cores, rows tagged with their cells.

A job is one schedule (template x race seed x params) on one network under every policy
variant any cell asks for on it. Jobs run in worker processes (``jobs > 1``) or inline;
the result does not depend on the number of workers or their order (every job is a pure
function of its inputs, rows are sorted afterwards).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icore.net import TransportError
from icore_lab.bench._checks import check_count
from icore_lab.bench._errors import ReplayFailed
from icore_lab.bench.planfence._presets import Cell
from icore_lab.bench.planfence._replay import replay
from icore_lab.bench.planfence._spec import MAX_SYNC_ATTEMPTS, ActionRow, NetSpec, PolicySpec
from icore_lab.workloads import Template, WorkloadParams, build_schedule


@dataclass(frozen=True)
class Job:
    """One schedule replayed under several policy variants.

    Attributes:
        params: workload parameters (race seed included).
        net: the network.
        template: the template.
        specs: the policy variants.
        transport: ``inproc`` or ``tcp``.
    """

    params: WorkloadParams
    net: NetSpec
    template: Template
    specs: tuple[PolicySpec, ...]
    transport: str = "inproc"

    @property
    def key(self) -> tuple[WorkloadParams, NetSpec, Template]:
        """Identity of the schedule + network."""
        return (self.params, self.net, self.template)


def run_job(job: Job) -> tuple[tuple[WorkloadParams, NetSpec, Template],
                               dict[str, list[ActionRow]]]:
    """Replay the job's schedule under each of its policies (pure function of ``job``)."""
    sched = build_schedule(job.template, job.params)
    out: dict[str, list[ActionRow]] = {}
    for spec in job.specs:
        try:
            out[spec.label] = list(replay(sched, spec, job.net,
                                          transport=job.transport).rows)
        except TransportError as exc:
            # only a synchronous step that exhausted its retries gets here (a blocked
            # action is a row, not an error)
            raise ReplayFailed(
                f"{spec.label} on {job.template.id} over {job.net.label}: "
                f"a synchronous coordination step failed {MAX_SYNC_ATTEMPTS} times "
                f"({exc}); the trace has no usable capacity there",
                template=job.template.id, link=job.net.link,
                offset_ms=job.net.offset_ms, policy=spec.label) from exc
    return job.key, out


def _worker_init() -> None:
    # Ctrl-C is the parent's to handle: it stops the pool; workers stay quiet
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def plan_jobs(cells: Sequence[Cell], transport: str = "inproc") -> list[Job]:
    """Deduplicate the (schedule, network, policy) work of ``cells`` into jobs."""
    specs_by_key: dict[tuple[WorkloadParams, NetSpec, Template], dict[str, PolicySpec]] = {}
    for c in cells:
        for rs in c.race_seeds:
            p = replace(c.params, race_seed=rs)
            for t in c.templates:
                d = specs_by_key.setdefault((p, c.net, t), {})
                for s in c.specs:
                    d.setdefault(s.label, s)
    jobs = [Job(p, n, t, tuple(d[k] for k in sorted(d)), transport)
            for (p, n, t), d in specs_by_key.items()]
    # longest first keeps both cores busy until the end
    jobs.sort(key=lambda j: -(j.params.work_units * len(j.specs) * (j.params.keys ** 0.5)))
    return jobs


@dataclass
class CampaignResult:
    """Rows of every cell of a run.

    Attributes:
        cells: the cells run.
        rows: one dict per (cell, template, race seed, policy, action).
        elapsed_s: wall-clock seconds of the replay (not virtual time).
        jobs: number of deduplicated jobs.
        episodes: number of (schedule, policy) replays.
        workers: worker processes used.
    """

    cells: list[Cell]
    rows: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    jobs: int = 0
    episodes: int = 0
    workers: int = 1


ROW_FIELDS = ("study", "cell", "template", "family", "race_seed", "policy", "action",
              "raced", "fault", "executed", "invalid", "replanned", "reason", "stall_ms",
              "bytes", "rpcs", "heads_checked", "validations", "artifact_fetches",
              "artifact_violations")
"""Columns of ``rows.csv`` (facet columns follow)."""


def run_cells(cells: Sequence[Cell], *, workers: int = 1, transport: str = "inproc",
              progress: Callable[[int, int], None] | None = None) -> CampaignResult:
    """Run every cell.

    Args:
        cells: cells of one or more presets.
        workers: worker processes (1 = inline).
        transport: ``inproc`` (virtual time) or ``tcp`` (real loopback TCP).
        progress: called as ``progress(done_jobs, total_jobs)``.

    Returns:
        :class:`CampaignResult` with rows in a deterministic order.

    Raises:
        BadOption: ``workers`` is not an integer >= 1.
        ReplayFailed: an episode could not finish (the message names template,
            network and policy).
    """
    check_count("workers", workers)
    t0 = time.perf_counter()
    jobs = plan_jobs(cells, transport)
    done: dict[tuple[WorkloadParams, NetSpec, Template], dict[str, list[ActionRow]]] = {}
    if progress:
        progress(0, len(jobs))
    if workers <= 1 or len(jobs) <= 1:
        for i, j in enumerate(jobs, 1):
            k, v = run_job(j)
            done[k] = v
            if progress:
                progress(i, len(jobs))
    else:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else \
            mp.get_context()
        with ctx.Pool(min(workers, len(jobs)), initializer=_worker_init) as pool:
            for i, (k, v) in enumerate(pool.imap_unordered(run_job, jobs, chunksize=1), 1):
                done[k] = v
                if progress:
                    progress(i, len(jobs))
    res = CampaignResult(cells=list(cells), jobs=len(jobs),
                    episodes=sum(len(j.specs) for j in jobs), workers=max(1, workers))
    for c in cells:
        for rs in c.race_seeds:
            p = replace(c.params, race_seed=rs)
            for t in c.templates:
                per = done[(p, c.net, t)]
                for s in c.specs:
                    for r in per[s.label]:
                        row: dict[str, Any] = {
                            "study": c.study, "cell": c.cell, "template": r.template,
                            "family": r.family, "race_seed": rs, "policy": r.policy,
                            "action": r.action, "raced": r.raced, "fault": r.fault,
                            "executed": r.executed, "invalid": r.invalid,
                            "replanned": r.replanned, "reason": r.reason,
                            "stall_ms": r.stall_ms, "bytes": r.bytes, "rpcs": r.rpcs,
                            "heads_checked": r.heads_checked,
                            "validations": r.validations,
                            "artifact_fetches": r.artifact_fetches,
                            "artifact_violations": r.artifact_violations,
                            "exact_lineage": s.exact_lineage,
                        }
                        row.update({f"f_{k}": v for k, v in c.facets.items()})
                        res.rows.append(row)
    res.elapsed_s = time.perf_counter() - t0
    return res


__all__ = ["ROW_FIELDS", "CampaignResult", "Job", "plan_jobs", "run_cells", "run_job"]
