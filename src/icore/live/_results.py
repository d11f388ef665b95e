"""The results of a live run: per task, per run, and the observer watching it.

planfence Sec. 5.2, App. A.2-A.5 (see :mod:`icore.live`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from icore.agents import TALLY_KEYS
from icore.audit import Diagnosis
from icore.live._run_manifest import RunManifest


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one live workflow.

    Attributes:
        task: task id.
        family / seed: the workflow template.
        policy: policy under test.
        success: the primary action ran and was lineage-valid.
        executed: the primary action ran.
        invalid: it ran from a plan whose frontier was not the owner's head.
        replanned: the one replan happened.
        successful_replan: the action ran after the one replan.
        blocked: the gate blocked the action (fail closed).
        block_reason: the gate's reason when blocked.
        redundant_auditor: auditor actions repeating an already-valid action.
        responses / accepted: model (or scripted) responses received / accepted.
        audit_verdict: the auditor's verdict (None when it did not run).
        error: why the workflow stopped early ('' when it ran to the end).
        gate: the gate decisions (dicts).
        steps: step log (name, agent, ok, ms, detail).
        icore: iCORE verdicts of this task's proposals.
        duration_ms: wall time of the workflow.
        lineage: the PlanFence records of the workflow in commit order (``id``, ``key``,
            ``owner``, ``seq``, ``type``, exact ``parents``, ``content`` and the ``role``
            it played: requirement, catalog, shortlist, plan, revision, replan, action),
            the input of the report's lineage picture.
    """

    task: str
    family: str
    seed: int
    policy: str
    success: bool
    executed: bool
    invalid: bool
    replanned: bool
    successful_replan: bool
    blocked: bool
    block_reason: str
    redundant_auditor: int
    responses: int
    accepted: int
    audit_verdict: str | None
    error: str
    gate: tuple[dict[str, Any], ...] = ()
    steps: tuple[dict[str, Any], ...] = ()
    icore: tuple[dict[str, Any], ...] = ()
    duration_ms: float = 0.0
    lineage: tuple[dict[str, Any], ...] = ()
    llm: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LiveRunResult:
    """The outcome of one live run (one team, one policy).

    Attributes:
        name: manifest name.
        policy: policy under test.
        family: workflow family.
        backend: ``scripted`` or ``llm``.
        out_dir: run folder.
        tasks: one :class:`TaskResult` per workflow.
        crashes: agent processes that exited unexpectedly (injected or not).
        interrupted: the run was stopped by Ctrl-C (or cancelled).
        error: a run-level failure ('' when none).
        duration_s: wall time including start-up and shutdown.
        icore: iCORE summary (snd, astab, cq, proposals, hard flags, ...).
        records_checked: committed records verified present after shutdown.
        records_lost: committed records missing after shutdown (must be empty).
        processes_left: agent processes still running after shutdown (must be empty).
        report: path of ``report.html`` (None when not written).
        timeline: ``(proposal number, snd, astab, cq)`` after each audited proposal.
        state: the run's iCORE state X (:class:`icore.state.State`; not serialized).
        diagnoses: iCORE-Audit's diagnosis F of each hard flag, in flag order, as the
            run's ledger made them (:func:`icore.audit.diagnose_flags`; not serialized).
    """

    name: str
    policy: str
    family: str
    backend: str
    out_dir: Path
    tasks: tuple[TaskResult, ...]
    crashes: tuple[dict[str, Any], ...] = ()
    interrupted: bool = False
    error: str = ""
    duration_s: float = 0.0
    icore: Mapping[str, Any] = field(default_factory=dict)
    records_checked: int = 0
    records_lost: tuple[str, ...] = ()
    processes_left: tuple[str, ...] = ()
    pids: Mapping[str, int] = field(default_factory=dict)
    report: Path | None = None
    timeline: tuple[tuple[int, float, float, float], ...] = ()
    state: Any = field(default=None, repr=False, compare=False)
    negotiation: Mapping[str, Any] = field(default_factory=dict)
    diagnoses: tuple[Diagnosis, ...] = field(default=(), repr=False, compare=False)

    # -- aggregates -----------------------------------------------------------------
    @property
    def succeeded(self) -> int:
        """Tasks completed with a valid primary action."""
        return sum(t.success for t in self.tasks)

    @property
    def invalid_actions(self) -> int:
        """Invalid primary actions issued."""
        return sum(t.invalid for t in self.tasks)

    @property
    def successful_replans(self) -> int:
        """Tasks whose action ran after the one replan."""
        return sum(t.successful_replan for t in self.tasks)

    @property
    def redundant_auditor_actions(self) -> int:
        """Auditor actions repeating an already-valid action."""
        return sum(t.redundant_auditor for t in self.tasks)

    @property
    def responses(self) -> int:
        """Model responses (scripted: decisions) in total."""
        return sum(t.responses for t in self.tasks)

    @property
    def accepted(self) -> int:
        """Accepted responses."""
        return sum(t.accepted for t in self.tasks)

    @property
    def llm(self) -> dict[str, int]:
        """Decision counters summed over the tasks (see :func:`decision_tally`)."""
        out = dict.fromkeys(TALLY_KEYS, 0)
        for t in self.tasks:
            for k in TALLY_KEYS:
                out[k] += int(t.llm.get(k, 0))
        return out

    @property
    def blocked(self) -> int:
        """Actions blocked by the gate."""
        return sum(t.blocked for t in self.tasks)

    def summary(self) -> dict[str, Any]:
        """The headline numbers (JSON)."""
        return {"name": self.name, "policy": self.policy, "family": self.family,
                "backend": self.backend, "tasks": len(self.tasks),
                "succeeded": self.succeeded, "invalid_actions": self.invalid_actions,
                "successful_replans": self.successful_replans, "blocked": self.blocked,
                "redundant_auditor_actions": self.redundant_auditor_actions,
                "responses": self.responses, "accepted": self.accepted,
                "crashes": len(self.crashes), "interrupted": self.interrupted,
                "error": self.error, "duration_s": round(self.duration_s, 3),
                "records_checked": self.records_checked,
                "records_lost": len(self.records_lost),
                "processes_left": len(self.processes_left), "icore": dict(self.icore),
                "llm": self.llm, "negotiation": dict(self.negotiation)}

    def to_json(self) -> dict[str, Any]:
        """Everything (JSON-ready)."""
        d = self.summary()
        d["out_dir"] = str(self.out_dir)
        d["report"] = str(self.report) if self.report else None
        d["crash_details"] = list(self.crashes)
        d["pids"] = dict(self.pids)
        d["records_lost_ids"] = list(self.records_lost)
        d["task_results"] = [asdict(t) for t in self.tasks]
        return d


class RunObserver(Protocol):
    """Watches a live run as it happens.

    E.g. the OpenTelemetry exporter of :mod:`icore.adapters`. Every method is called from
    the run's event loop; none may raise (an observer's failure must never stop a run) or
    block for long.
    """

    def run_started(self, manifest: RunManifest, policy: str) -> None:
        """The team is about to start (``manifest`` as run, ``policy`` under test)."""

    def audit_call(self, call: str, task: str, args: Mapping[str, Any],
                   outcome: Mapping[str, Any]) -> None:
        """One step recorded in iCORE (see :data:`icore.live.AuditListener`)."""

    def task_done(self, result: TaskResult) -> None:
        """One workflow finished (successfully or not)."""

    def run_done(self, result: LiveRunResult) -> None:
        """The run finished; ``result`` is final (report and ``run.json`` written)."""
