"""PlanFence controlled replay and its campaigns.

Implements planfence Sec. 5, App. A.1, A.6, B, C; design.md 3.3-3.5.

Module map (lowest first; no module imports one listed after it):

==============  ================================================================
``_spec``       what a replay runs and returns: :class:`PolicySpec`, :class:`NetSpec`,
                :class:`ActionRow`, :class:`EpisodeResult`, modelled costs
``_services``   the owner services of an episode's world (:class:`ReplayWorld`, the
                App. C faulty handler, replica views) and the transport protocol
``_inproc``     :class:`InprocTransport`: in-process, virtual time (the default)
``_tcp``        :class:`TcpTransport`: real TCP + mutual TLS on 127.0.0.1
``_replay``     :class:`Episode` (one schedule under one policy, over a transport
                passed in) and :func:`replay`
``_presets``    the paper's presets as cells
``_run``        cells -> deduplicated jobs -> rows (:class:`CampaignResult`)
``_stats``      App. A.1 statistics
``_analysis``   aggregates and the paper's orderings
``_plots``      figures (matplotlib)
``_report``     CSV, JSON, PNG and markdown outputs
``_preset``     :func:`run_planfence`: one preset end to end
``_selector``   the App. B.2 policy selector
==============  ================================================================

Policies themselves (validators, head sources, strategies) live in :mod:`icore.fence`.
"""

from typing import TYPE_CHECKING

from icore._extras import lazy_attributes
from icore_lab.bench.planfence._analysis import Agg, Ordering, aggregate, orderings
from icore_lab.bench.planfence._inproc import InprocTransport
from icore_lab.bench.planfence._preset import TRANSPORTS, run_planfence
from icore_lab.bench.planfence._presets import PRESETS, Cell, preset_cells
from icore_lab.bench.planfence._replay import Episode, replay
from icore_lab.bench.planfence._run import CampaignResult, run_cells
from icore_lab.bench.planfence._services import ReplayTransport, ReplayWorld
from icore_lab.bench.planfence._spec import ActionRow, EpisodeResult, NetSpec, PolicySpec
from icore_lab.bench.planfence._stats import (
    BOOTSTRAP_DRAWS,
    TIE_THRESHOLD,
    PairedComparison,
    binomial_upper,
    cluster_bootstrap_diff,
    practical_tie,
)
from icore_lab.bench.planfence._tcp import TcpTransport

if TYPE_CHECKING:
    from icore_lab.bench.planfence._selector import (
        TABLE10_HEADER,
        run_selector,
        table10_markdown,
        table10_rows,
    )

_SELECTOR = ("TABLE10_HEADER", "run_selector", "table10_markdown", "table10_rows")
"""The App. B.2 selector's names, imported on first use (it needs numpy)."""

__getattr__ = lazy_attributes(
    __name__, dict.fromkeys(_SELECTOR, "icore_lab.bench.planfence._selector"))


def __dir__() -> list[str]:
    """The module's attributes and every exported name (loaded or not)."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BOOTSTRAP_DRAWS",
    "PRESETS",
    "TABLE10_HEADER",
    "TIE_THRESHOLD",
    "TRANSPORTS",
    "ActionRow",
    "Agg",
    "CampaignResult",
    "Cell",
    "Episode",
    "EpisodeResult",
    "InprocTransport",
    "NetSpec",
    "Ordering",
    "PairedComparison",
    "PolicySpec",
    "ReplayTransport",
    "ReplayWorld",
    "TcpTransport",
    "aggregate",
    "binomial_upper",
    "cluster_bootstrap_diff",
    "orderings",
    "practical_tie",
    "preset_cells",
    "replay",
    "run_cells",
    "run_planfence",
    "run_selector",
    "table10_markdown",
    "table10_rows",
]
