"""Experiment harnesses, statistics, tables and figures (I/O layer).

PlanFence controlled replay (planfence Sec. 5, App. A.1, A.6, B, C; design.md 3.3-3.5):
:func:`run_planfence` runs a preset (``table1``, ``fig3``, ... or ``paper``) and writes
CSV + JSON + PNG + a markdown summary; :func:`replay` replays one schedule under one
policy on the virtual-time transport.

Rooms: :mod:`icore_lab.bench.planfence` (the PlanFence replay and its campaigns; this
package re-exports its public API), :mod:`icore_lab.bench.icore` (the iCORE evaluation and
failure attribution), :mod:`icore_lab.bench.micro` (microbenchmarks of the parts);
``_errors`` and ``_checks`` are shared by all three.
"""

from icore_lab.bench._checks import check_count, check_positive_seconds
from icore_lab.bench._errors import (
    BadOption,
    BenchError,
    OutputUnavailable,
    ReplayFailed,
    TraceUnavailable,
    TransportUnavailable,
    UnknownPreset,
)
from icore_lab.bench.planfence import (
    BOOTSTRAP_DRAWS,
    TIE_THRESHOLD,
    TRANSPORTS,
    ActionRow,
    Agg,
    CampaignResult,
    Cell,
    EpisodeResult,
    NetSpec,
    Ordering,
    PairedComparison,
    PolicySpec,
    aggregate,
    binomial_upper,
    cluster_bootstrap_diff,
    orderings,
    practical_tie,
    preset_cells,
    replay,
    run_cells,
    run_planfence,
)
from icore_lab.bench.planfence import PRESETS as PLANFENCE_PRESETS

__all__ = [
    "BOOTSTRAP_DRAWS",
    "PLANFENCE_PRESETS",
    "TIE_THRESHOLD",
    "TRANSPORTS",
    "ActionRow",
    "Agg",
    "BadOption",
    "BenchError",
    "CampaignResult",
    "Cell",
    "EpisodeResult",
    "NetSpec",
    "Ordering",
    "OutputUnavailable",
    "PairedComparison",
    "PolicySpec",
    "ReplayFailed",
    "TraceUnavailable",
    "TransportUnavailable",
    "UnknownPreset",
    "aggregate",
    "binomial_upper",
    "check_count",
    "check_positive_seconds",
    "cluster_bootstrap_diff",
    "orderings",
    "practical_tie",
    "preset_cells",
    "replay",
    "run_cells",
    "run_planfence",
]
