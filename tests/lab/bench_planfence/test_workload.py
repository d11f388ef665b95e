"""Schedules: deterministic, paper counts, staged races (planfence Sec. 5.1)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from icore_lab.workloads import (
    FAMILIES,
    TEMPLATES,
    ActStep,
    PlanStep,
    Update,
    WorkloadParams,
    action_update_counts,
    build_schedule,
)


def test_thirty_templates_three_families() -> None:
    """3 families x 10 seeds, unique ids."""
    assert len(TEMPLATES) == 30
    assert {t.family for t in TEMPLATES} == set(FAMILIES)
    assert len({t.id for t in TEMPLATES}) == 30


@pytest.mark.parametrize(("rho", "want"), [(0.25, (28, 7)), (1.0, (21, 21)),
                                           (4.0, (11, 42)), (16.0, (4, 56))])
def test_counts_match_the_paper_at_h64(rho: float, want: tuple[int, int]) -> None:
    """H=64 realizes 0.25, 1.0, 42/11 and 14 updates per protected action."""
    assert action_update_counts(64, rho) == want


def test_same_inputs_same_schedule() -> None:
    """A schedule is a pure function of (template, params)."""
    for t in TEMPLATES[:5]:
        assert build_schedule(t) == build_schedule(t)


def test_seed_changes_schedule() -> None:
    """The master seed and the race seed both change the schedule."""
    t = TEMPLATES[0]
    a = build_schedule(t)
    assert build_schedule(t, WorkloadParams(master_seed=1)).steps != a.steps
    assert build_schedule(t, WorkloadParams(race_seed=1)).steps != a.steps


def test_every_action_is_raced_in_table1_setting() -> None:
    """rho=4: every one of the 11 actions gets a revision of a true dependency between
    its plan and its action."""
    for t in TEMPLATES:
        s = build_schedule(t)
        assert (s.n_actions, s.n_updates, s.n_races) == (11, 42, 11)
        assert len(s.steps) == 64
        open_plans: dict[int, PlanStep] = {}
        revised: dict[int, set[str]] = {}
        for st in s.steps:
            if isinstance(st, PlanStep):
                open_plans[st.action] = st
                revised[st.action] = set()
            elif isinstance(st, Update):
                for a in revised:
                    revised[a].add(st.key)
            elif isinstance(st, ActStep):
                p = open_plans.pop(st.action)
                assert st.raced
                assert revised.pop(st.action) & set(p.true_deps)


def test_owners_are_not_the_executor() -> None:
    """Shared keys are owned by agents other than the executor."""
    s = build_schedule(TEMPLATES[3], WorkloadParams(agents=3, keys=16))
    assert s.executor not in set(s.owners.values())
    assert len(s.keys) == 16


def test_omission_keeps_first_dependency() -> None:
    """Omission drops dependencies from D(a) but never the first one."""
    p = replace(WorkloadParams(work_units=3, rho=1.0), deps=4, omit_prob=1.0)
    s = build_schedule(TEMPLATES[0], p)
    plan = next(st for st in s.steps if isinstance(st, PlanStep))
    assert plan.declared == plan.true_deps[:1]
    assert len(plan.cited) == 4


def test_bad_params_rejected() -> None:
    """Inconsistent parameters raise ValueError."""
    with pytest.raises(ValueError, match="deps"):
        WorkloadParams(deps=9, keys=8)
    with pytest.raises(ValueError, match="agents"):
        WorkloadParams(agents=1)
