"""Every policy runs in a live run: five agent processes over mutual-TLS TCP, scripted
backend, one post-plan revision (planfence Sec. 5.2; about 1.5 s per policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.fence import Policy
from icore.live import default_manifest, run_live


@pytest.mark.parametrize("policy", list(Policy), ids=str)
def test_every_policy_runs_live(policy: Policy, tmp_path: Path) -> None:
    """Safe policies catch the revision and replan once; the unsafe baselines act on the
    obsolete plan; every decision names the policy; the team stops cleanly."""
    res = run_live(default_manifest("reservation"), tmp_path / "run", policy=policy.value)
    assert res.policy == policy.value and not res.error and not res.crashes
    assert res.processes_left == () and res.records_lost == ()
    task = res.tasks[0]
    assert task.executed and all(d["policy"] == policy.value for d in task.gate)
    if policy.safe:
        assert res.succeeded == 1 and res.invalid_actions == 0
        assert [d["reason"] for d in task.gate] == ["stale", "valid"] and task.replanned
    else:
        assert task.invalid and not task.replanned
        assert [d["reason"] for d in task.gate] == ["not_validated"]
