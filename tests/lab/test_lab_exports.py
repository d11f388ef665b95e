"""The lab's public export lists are pinned, like the library's (style habit 2).

tests/test_exports.py pins the library's front doors; the lab's live here so that the
library's tests run with the lab absent.
"""

from __future__ import annotations

import importlib

import pytest

PINNED = {
    "icore_lab.bench": [
        "BOOTSTRAP_DRAWS", "PLANFENCE_PRESETS", "TIE_THRESHOLD", "TRANSPORTS", "ActionRow",
        "Agg", "BadOption", "BenchError", "CampaignResult", "Cell", "EpisodeResult",
        "NetSpec", "Ordering", "OutputUnavailable", "PairedComparison", "PolicySpec",
        "ReplayFailed", "TraceUnavailable", "TransportUnavailable", "UnknownPreset",
        "aggregate", "binomial_upper", "check_count", "check_positive_seconds",
        "cluster_bootstrap_diff", "orderings", "practical_tie", "preset_cells", "replay",
        "run_cells", "run_planfence",
    ],
    "icore_lab.bench.planfence": [
        "BOOTSTRAP_DRAWS", "PRESETS", "TABLE10_HEADER", "TIE_THRESHOLD", "TRANSPORTS",
        "ActionRow", "Agg", "CampaignResult", "Cell", "Episode", "EpisodeResult",
        "InprocTransport", "NetSpec", "Ordering", "PairedComparison", "PolicySpec",
        "ReplayTransport", "ReplayWorld", "TcpTransport", "aggregate", "binomial_upper",
        "cluster_bootstrap_diff", "orderings", "practical_tie", "preset_cells", "replay",
        "run_cells", "run_planfence", "run_selector", "table10_markdown", "table10_rows",
    ],
    "icore_lab.bench.icore": [
        "PRESETS", "cross_validate", "cv_score", "default_jobs", "evaluate",
        "evaluate_grid", "markdown", "with_llm_rows", "write_outputs",
    ],
    "icore_lab.bench.micro": [
        "BEFORE_COMMITS_PER_S", "EXECUTORS", "PAPER_KIB_PER_ACTION", "PEERS", "SIZES",
        "TRACES", "WRITERS", "Figures", "Pair", "PeersResult", "SeamCase", "SeamFigure",
        "SeamWorld", "fence_cases", "percentile", "run_backends", "run_core_bench",
        "run_fig2_virtual", "run_import_bench", "run_otel_bench", "run_peers",
        "run_seam_bench",
        "run_state_bench", "run_validation", "size_label",
    ],
    "icore_lab.agents": ["LLMTeam", "SimEnvironment", "SimTeam", "SimWorld", "introduce"],
    "icore_lab.net": [
        "DEFAULT_ATT_TRACE", "DEFAULT_BASE_DELAY_MS", "DEFAULT_RTO_MS", "DEFAULT_TLS_COST",
        "LINK_NAMES", "PACKET_BYTES", "SEGMENT_HEADER_BYTES", "SEGMENT_PAYLOAD_BYTES",
        "TRACE_FILES", "AsyncVirtualTransport", "FixedLink", "HostCost", "HostCpu", "Link",
        "LinkPair", "Loopback", "TlsCost", "TraceLink", "VirtualTimeLoop",
        "VirtualTransport", "default_att_trace", "link_by_name", "path_by_name",
        "run_virtual", "traces_dir", "wire_bytes",
    ],
    "icore_lab.workloads": [
        "BOUND_MODES", "FAILURE_PROBABILITY", "FAMILIES", "SEEDS_PER_FAMILY", "TASK_MODES",
        "TEMPLATES", "UNIT_MS", "ActStep", "Fault", "FaultProfile", "FaultSettings", "Idle",
        "PlanStep", "RaceOutcome", "Revision", "Schedule", "Step", "TaskInstance",
        "TaskMode", "Template", "Update", "WorkItem", "WorkerProfile", "WorkloadParams",
        "action_update_counts", "build_schedule", "declaration", "make_instance",
        "schedules", "staged_race", "terminal_performance",
    ],
    "icore_lab.cli": ["MODULES", "register"],
}


@pytest.mark.parametrize("module", sorted(PINNED))
def test_exports_pinned(module: str) -> None:
    """``__all__`` equals the pinned list and every name resolves."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PINNED[module])
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_workload_families_are_the_live_families() -> None:
    """The replay's workload families are the live runs' (one tuple, planfence Sec. 5.1)."""
    import icore.live
    import icore_lab.workloads

    assert icore_lab.workloads.FAMILIES is icore.live.FAMILIES
    assert icore_lab.workloads.SEEDS_PER_FAMILY == icore.live.SEEDS_PER_FAMILY


def test_virtual_transports_implement_owner_access() -> None:
    """The virtual-time transports satisfy the memory layer's protocols by signature."""
    from icore.memory import AsyncOwnerAccess, OwnerAccess
    from icore_lab.net import AsyncVirtualTransport, VirtualTransport

    assert {"query_heads", "fetch"} <= set(dir(VirtualTransport))
    assert issubclass(VirtualTransport, OwnerAccess)
    assert issubclass(AsyncVirtualTransport, AsyncOwnerAccess)
