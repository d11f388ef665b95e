"""The replay harness: determinism, byte accounting, policy labels."""

from __future__ import annotations

import pytest

from icore.bench import NetSpec, PolicySpec, replay
from icore.fence import Policy
from icore.net import DEFAULT_TLS_COST
from icore.records import TraversalMode
from icore.workloads import TEMPLATES, WorkloadParams, build_schedule


def test_same_seed_same_rows() -> None:
    """Two replays of one schedule give identical rows (virtual time, no wall clock)."""
    s = build_schedule(TEMPLATES[4])
    for pol in (Policy.PLANFENCE, Policy.METADATA_SYNC, Policy.BATCHED_ALL_KEY):
        a = replay(s, PolicySpec(pol), NetSpec(link="att", offset_ms=5000))
        b = replay(s, PolicySpec(pol), NetSpec(link="att", offset_ms=5000))
        assert a.rows == b.rows
        assert a.total_bytes == b.total_bytes


def test_other_seed_other_costs() -> None:
    """Another master seed gives another schedule and other costs."""
    a = replay(build_schedule(TEMPLATES[0]), PolicySpec(Policy.PLANFENCE))
    b = replay(build_schedule(TEMPLATES[0], WorkloadParams(master_seed=7)),
               PolicySpec(Policy.PLANFENCE))
    assert a.rows != b.rows


def test_planfence_bytes_are_handshakes_plus_frames() -> None:
    """On loopback, a raced PlanFence action is 3 RPCs on new TLS connections: the
    bytes are 3 full handshakes + close alerts + the encoded frames."""
    res = replay(build_schedule(TEMPLATES[0]), PolicySpec(Policy.PLANFENCE),
                 NetSpec(link="loopback"))
    tls = DEFAULT_TLS_COST
    per_conn = tls.handshake_bytes + 2 * tls.close + 2 * tls.record_overhead
    for row in res.rows:
        assert row.rpcs == 3
        frames = row.bytes - 3 * per_conn
        assert 0 < frames < 3 * 1024


def test_connection_reuse_is_cheaper() -> None:
    """Reusing connections removes the per-RPC handshakes."""
    s = build_schedule(TEMPLATES[0])
    new = replay(s, PolicySpec(Policy.PLANFENCE), NetSpec(link="att"))
    reuse = replay(s, PolicySpec(Policy.PLANFENCE),
                   NetSpec(link="att", new_connection_per_rpc=False))
    assert reuse.total_bytes < new.total_bytes / 3
    assert reuse.total_stall_ms < new.total_stall_ms


@pytest.mark.parametrize(("spec", "label", "exact"), [
    (PolicySpec(Policy.METADATA_SYNC, k=1), "metadata_sync_k1", True),
    (PolicySpec(Policy.METADATA_SYNC, k=4), "metadata_sync_k4", False),
    (PolicySpec(Policy.PLANFENCE, mode=TraversalMode.DIRECT), "planfence_direct", False),
    (PolicySpec(Policy.PLANFENCE, replan=False), "planfence_noreplan", True),
    (PolicySpec(Policy.PLANFENCE, fail_open=True), "planfence_failopen", False),
    (PolicySpec(Policy.OWNER_HEAD_FRESHNESS), "owner_head_freshness", False),
])
def test_labels(spec: PolicySpec, label: str, exact: bool) -> None:
    """Row labels and the exact-lineage flag."""
    assert spec.label == label
    assert spec.exact_lineage is exact


def test_all_key_checks_every_key() -> None:
    """Batched all-key checks |X| heads per validation; PlanFence only d."""
    s = build_schedule(TEMPLATES[1], WorkloadParams(keys=32))
    ba = replay(s, PolicySpec(Policy.BATCHED_ALL_KEY), NetSpec(link="loopback"))
    pf = replay(s, PolicySpec(Policy.PLANFENCE), NetSpec(link="loopback"))
    assert all(r.heads_checked == 2 * 32 for r in ba.rows)
    assert all(r.heads_checked == 2 for r in pf.rows)
    assert sum(r.bytes for r in ba.rows) > 2 * sum(r.bytes for r in pf.rows)
