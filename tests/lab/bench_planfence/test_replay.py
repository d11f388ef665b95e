"""The replay harness: determinism, byte accounting, policy labels."""

from __future__ import annotations

import dataclasses
import math

import pytest

from icore.fence import Policy
from icore.records import TraversalMode
from icore_lab.bench import BadOption, NetSpec, PolicySpec, replay
from icore_lab.net import DEFAULT_TLS_COST
from icore_lab.workloads import TEMPLATES, WorkloadParams, build_schedule


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
def test_same_seed_same_rows() -> None:
    """Two replays of one schedule give identical rows (virtual time, no wall clock)."""
    s = build_schedule(TEMPLATES[4])
    for pol in (Policy.PLANFENCE, Policy.METADATA_SYNC, Policy.BATCHED_ALL_KEY):
        a = replay(s, PolicySpec(pol), NetSpec(link="att", offset_ms=5000))
        b = replay(s, PolicySpec(pol), NetSpec(link="att", offset_ms=5000))
        assert a.rows == b.rows
        assert a.total_bytes == b.total_bytes


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
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


@pytest.mark.usefixtures("shared_data")  # reads the AT&T trace
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


_NONNEG = ("offset_ms", "base_delay_ms", "server_time_ms", "host_ms",
           "handshake_client_ms", "handshake_server_ms", "unit_ms")


@pytest.mark.parametrize(("field", "value"), [
    *((f, v) for f in _NONNEG for v in (-1.0, math.nan, math.inf, "1", True)),
    ("timeout_s", 0.0), ("timeout_s", -2.0), ("timeout_s", math.inf),
    ("timeout_s", math.nan), ("link", "nosuch"), ("link", ""), ("link", None),
])
def test_netspec_refuses_bad_values(field: str, value: object) -> None:
    """A bad NetSpec field is a BadOption naming it at construction (and through
    ``dataclasses.replace``), not a silent nonsense replay."""
    with pytest.raises(BadOption) as ei:
        NetSpec(**{field: value})  # type: ignore[arg-type]
    assert ei.value.fields["option"] == field
    assert isinstance(ei.value, ValueError)
    with pytest.raises(BadOption):
        dataclasses.replace(NetSpec(), **{field: value})


@pytest.mark.parametrize("link", ["loopback", "att", "att-2016", "tmobile", "verizon"])
def test_netspec_accepts_known_links_and_bounds(link: str) -> None:
    """Every known link, zero costs and integer values construct fine."""
    n = NetSpec(link=link, offset_ms=0, base_delay_ms=0, server_time_ms=0, host_ms=0,
                handshake_client_ms=0, handshake_server_ms=0, unit_ms=0, timeout_s=1)
    assert n.link == link


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "2"])
def test_metadata_sync_needs_k_at_least_one(k: object) -> None:
    """Metadata sync with K < 1 (or a non-int K) is a BadOption on ``k``."""
    with pytest.raises(BadOption) as ei:
        PolicySpec(Policy.METADATA_SYNC, k=k)  # type: ignore[arg-type]
    assert ei.value.fields["option"] == "k"
    assert PolicySpec(Policy.METADATA_SYNC, k=16).label == "metadata_sync_k16"


def test_policyspec_refuses_a_non_policy() -> None:
    """A policy given as a string is refused, not replayed as an unknown policy."""
    with pytest.raises(BadOption) as ei:
        PolicySpec("planfence")  # type: ignore[arg-type]
    assert ei.value.fields["option"] == "policy"


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"spec": "planfence"}, "spec"),
    ({"net": "att"}, "net"),
    ({"transport": "udp"}, "transport"),
    ({"schedule": None}, "schedule"),
])
def test_replay_refuses_bad_arguments(kwargs: dict[str, object], option: str) -> None:
    """``replay`` checks its argument types and transport name up front."""
    args: dict[str, object] = {"schedule": build_schedule(TEMPLATES[0]),
                               "spec": PolicySpec(Policy.PLANFENCE), **kwargs}
    with pytest.raises(BadOption) as ei:
        replay(**args)  # type: ignore[arg-type]
    assert ei.value.fields["option"] == option
