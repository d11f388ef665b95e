"""Experiment harnesses, statistics, tables and figures (I/O layer).

PlanFence controlled replay (planfence Sec. 5, App. A.1, A.6, B, C; design.md 3.3-3.5):
:func:`run_planfence` runs a preset (``table1``, ``fig3``, ... or ``paper``) and writes
CSV + JSON + PNG + a markdown summary; :func:`replay` replays one schedule under one
policy on the virtual-time transport.
"""

from icore.bench._errors import (
    BadOption,
    BenchError,
    OutputUnavailable,
    ReplayFailed,
    TraceUnavailable,
    TransportUnavailable,
    UnknownPreset,
)
from icore.bench._planfence import TRANSPORTS, run_planfence
from icore.bench._planfence_analysis import Agg, Ordering, aggregate, orderings
from icore.bench._planfence_presets import PRESETS as PLANFENCE_PRESETS
from icore.bench._planfence_presets import Cell, preset_cells
from icore.bench._planfence_replay import replay
from icore.bench._planfence_run import CampaignResult, run_cells
from icore.bench._planfence_spec import ActionRow, EpisodeResult, NetSpec, PolicySpec
from icore.bench._stats import (
    BOOTSTRAP_DRAWS,
    TIE_THRESHOLD,
    PairedComparison,
    binomial_upper,
    cluster_bootstrap_diff,
    practical_tie,
)

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
    "cluster_bootstrap_diff",
    "orderings",
    "practical_tie",
    "preset_cells",
    "replay",
    "run_cells",
    "run_planfence",
]
