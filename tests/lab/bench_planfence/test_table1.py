"""Table 1 safety and availability counts (planfence Sec. 5.2, Table 1, App. A.6).

The counts are protocol outcomes, so they are checked on the Table 1 schedules (30
templates x 11 staged races, rho=4, 8 keys, N=5, H=64) over loopback for every policy,
and over the AT&T trace for the two unsafe baselines and PlanFence.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from icore_lab.bench import Cell, run_cells
from icore_lab.bench.planfence._analysis import aggregate
from icore_lab.bench.planfence._presets import TABLE1_POLICIES, table1
from icore_lab.bench.planfence._spec import NetSpec

EXACT = [s.label for s in TABLE1_POLICIES if s.exact_lineage]


@functools.cache
def _loopback(policy: str) -> object:
    """One policy over the 30 Table 1 schedules on loopback (cached per process)."""
    spec = next(s for s in TABLE1_POLICIES if s.label == policy)
    cell = replace(table1()[0], net=NetSpec(link="loopback"), specs=(spec,))
    return next(iter(aggregate(run_cells([cell], workers=1).rows).values()))


def test_exact_lineage_policies_are_the_seven() -> None:
    """Seven exact-lineage rows; local replica, freshness and K=4 are controls."""
    assert EXACT == ["centralized_lineage", "metadata_sync_k1", "per_key_all_key",
                     "batched_all_key", "planfence", "majority_replica", "all_replica"]


@pytest.mark.parametrize("policy", ["local_replica", "owner_head_freshness"])
def test_unsafe_baselines_issue_330_invalid(policy: str) -> None:
    """Acting from fresh state without lineage issues every staged race invalid."""
    a = _loopback(policy)
    assert (a.actions, a.invalid, a.executed) == (330, 330, 330)  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy", EXACT)
def test_exact_lineage_zero_invalid_all_complete(policy: str) -> None:
    """Every exact-lineage policy: 0 invalid, 330/330 completed, one replan each."""
    a = _loopback(policy)
    assert (a.actions, a.invalid, a.executed) == (330, 0, 330)  # type: ignore[attr-defined]
    assert a.replanned == 330  # type: ignore[attr-defined]


def test_delayed_sync_trades_safety() -> None:
    """Metadata sync K=4 issues invalid actions (a safety-cost sensitivity)."""
    assert _loopback("metadata_sync_k4").invalid > 0  # type: ignore[attr-defined]


@functools.cache
def _att() -> dict[str, object]:
    """Every Table 1 policy over the AT&T trace (the preset's own cell), per policy."""
    aggs = aggregate(run_cells(table1(), workers=2).rows)
    return {p: a for (_, _, p), a in aggs.items()}


@pytest.mark.parametrize("policy", EXACT)
@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
def test_att_exact_lineage_complete_330(policy: str) -> None:
    """On the AT&T trace too, every exact-lineage policy issues 0 invalid and completes
    330/330 (Table 1): concurrent handshakes share the trace's opportunities."""
    a = _att()[policy]
    assert (a.actions, a.invalid, a.executed) == (330, 0, 330)  # type: ignore[attr-defined]


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
def test_att_counts_and_planfence_costs() -> None:
    """On the AT&T trace: the same unsafe counts; PlanFence pays ~3 RPCs with a new
    TLS connection each (~8 KiB/action, the paper's 8.1), the least stall and traffic of
    the safe policies, and more stall than the freshness-only read it extends."""
    aggs = _att()
    assert aggs["owner_head_freshness"].invalid == 330  # type: ignore[attr-defined]
    assert aggs["local_replica"].invalid == 330  # type: ignore[attr-defined]
    pf = aggs["planfence"]
    assert 7.0 < pf.kib < 10.0  # type: ignore[attr-defined]
    assert pf.stall_ms > aggs["owner_head_freshness"].stall_ms  # type: ignore[attr-defined]
    for p in EXACT:
        if p != "planfence":
            assert pf.stall_ms < aggs[p].stall_ms, p  # type: ignore[attr-defined]
            assert pf.kib < aggs[p].kib, p  # type: ignore[attr-defined]


def test_cell_is_plain_data() -> None:
    """Cells are hashable-free data; scheduled actions count every policy."""
    c: Cell = table1()[0]
    assert c.scheduled_actions() == 330 * len(TABLE1_POLICIES)
