"""Workloads: PlanFence workflow templates and schedules, iCORE task modes (pure)."""

from icore.workloads._race import RaceOutcome, staged_race

__all__ = ["RaceOutcome", "staged_race"]
