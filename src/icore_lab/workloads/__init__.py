"""Workloads: PlanFence workflow templates and schedules, iCORE task modes (pure)."""

from icore_lab.workloads._planfence import (
    FAMILIES,
    SEEDS_PER_FAMILY,
    TEMPLATES,
    UNIT_MS,
    ActStep,
    Fault,
    Idle,
    PlanStep,
    Schedule,
    Step,
    Template,
    Update,
    WorkloadParams,
    action_update_counts,
    build_schedule,
    schedules,
)
from icore_lab.workloads._race import RaceOutcome, staged_race

__all__ = [
    "FAMILIES",
    "SEEDS_PER_FAMILY",
    "TEMPLATES",
    "UNIT_MS",
    "ActStep",
    "Fault",
    "Idle",
    "PlanStep",
    "RaceOutcome",
    "Schedule",
    "Step",
    "Template",
    "Update",
    "WorkloadParams",
    "action_update_counts",
    "build_schedule",
    "schedules",
    "staged_race",
]

# iCORE task modes (issue 6)
from icore_lab.workloads._tasks import (
    BOUND_MODES,
    FAILURE_PROBABILITY,
    TASK_MODES,
    FaultProfile,
    FaultSettings,
    Revision,
    TaskInstance,
    TaskMode,
    WorkerProfile,
    WorkItem,
    declaration,
    make_instance,
    terminal_performance,
)

__all__ += [
    "BOUND_MODES",
    "FAILURE_PROBABILITY",
    "TASK_MODES",
    "FaultProfile",
    "FaultSettings",
    "Revision",
    "TaskInstance",
    "TaskMode",
    "WorkItem",
    "WorkerProfile",
    "declaration",
    "make_instance",
    "terminal_performance",
]
