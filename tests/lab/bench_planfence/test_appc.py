"""App. C mechanism studies on a subset of race seeds (planfence Table 11, Fig. 6)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from icore_lab.bench.planfence._analysis import aggregate, orderings
from icore_lab.bench.planfence._presets import appc, fig6
from icore_lab.bench.planfence._run import run_cells
from icore_lab.workloads import TEMPLATES


@pytest.fixture(scope="module")
def appc_result() -> dict[tuple[str, str, str], object]:
    cells = [replace(c, templates=TEMPLATES[::3]) for c in appc(race_seeds=3,
                                                                 small_seeds=2)]
    return aggregate(run_cells(cells, workers=1).rows)  # type: ignore[return-value]


def test_replan_counts(appc_result: dict) -> None:
    """Replan: every race valid; no replan: every race blocked; freshness and local
    replica: every race invalid (30 races here, 3,000 in the preset)."""
    g = {p: a for (s, c, p), a in appc_result.items() if c == "races"}
    assert g["planfence"].actions == 30
    assert (g["planfence"].executed, g["planfence"].invalid) == (30, 0)
    assert g["planfence_noreplan"].blocked == 30
    assert g["owner_head_freshness"].invalid == 30
    assert g["local_replica"].invalid == 30


@pytest.mark.parametrize("depth", [1, 2, 8])
def test_depth(appc_result: dict, depth: int) -> None:
    """Full traversal authorizes intact chains; the direct-parent check only depth 1;
    a missing intermediate blocks both."""
    full = appc_result[("appc", f"depth={depth} intact", "planfence")]
    direct = appc_result[("appc", f"depth={depth} intact", "planfence_direct")]
    assert full.executed == full.actions and full.invalid == 0
    assert direct.executed == (direct.actions if depth == 1 else 0)
    if depth > 1:
        miss = appc_result[("appc", f"depth={depth} missing", "planfence")]
        assert miss.executed == 0


@pytest.mark.parametrize("fault", ["outage", "missing_lineage", "malformed_head",
                                   "second_change"])
def test_fail_closed_vs_fail_open(appc_result: dict, fault: str) -> None:
    """Fail-closed blocks every faulted action; fail-open issues each one invalid."""
    fc = appc_result[("appc", f"fault={fault}", "planfence")]
    fo = appc_result[("appc", f"fault={fault}", "planfence_failopen")]
    assert fc.blocked == fc.actions == 20
    assert fo.invalid == fo.actions


def test_orderings_reproduced(appc_result: dict) -> None:
    """The App. C orderings all hold on the subset."""
    ords = {o.id: o for o in orderings(appc_result)}
    assert ords["appc.replan"].reproduced
    assert ords["appc.depth"].reproduced
    assert ords["appc.fail_closed"].reproduced


def test_fig6_overdeclaration_and_omission() -> None:
    """Over-declaration: 4 -> 36 heads per validation, still safe; omission: p=0 safe,
    p=0.5 unsafe in some races."""
    cells = [replace(c, templates=TEMPLATES[::3], race_seeds=c.race_seeds[:4])
             for c in fig6(race_seeds=4, small_seeds=2)
             if c.cell in ("omit=0", "omit=0.5", "overdeclare=0", "overdeclare=32")]
    aggs = aggregate(run_cells(cells, workers=1).rows)
    assert aggs[("fig6", "overdeclare=0", "planfence")].heads_per_validation == 4
    assert aggs[("fig6", "overdeclare=32", "planfence")].heads_per_validation == 36
    assert aggs[("fig6", "overdeclare=32", "planfence")].invalid == 0
    assert aggs[("fig6", "omit=0", "planfence")].invalid == 0
    assert aggs[("fig6", "omit=0.5", "planfence")].invalid > 0
