"""Microbenchmarks of the parts (I/O layer): each prints figures, none is asserted on.

Module map:

==================  ============================================================
``_core_gate``      ``icore bench core``: gate decisions/s and store commits/s
``_contention``     contended commits: writers racing on hot keys
``_net``            ``icore bench net``: transport costs (planfence Fig. 2, Sec. 5.4)
``_backends``       ``icore bench net --backend nats``: owner memory backends
``_peers``          ``icore bench peers``: icore's owner service vs Redis, NATS, etcd
                    (``_peers_systems``: the peers; ``_peers_icore``: icore's service)
``_otel``           ``icore bench otel``: OpenTelemetry export and import
``_import_bench``   ``icore bench import``: streamed import of big traces (time, RSS)
``_import_inputs``  its inputs: big OTLP / Phoenix / Langfuse / JSONL traces
``_state_bench``    ``icore bench state``: the iCORE state (design.md 4.4)
``_seam_bench``     ``icore bench integrations``: fenced vs unfenced calls (issue 28)
``_loopback``       free ports, waiting for a listener, a byte-counting relay
==================  ============================================================

The entry points are the ``icore bench ...`` commands; the modules are imported where
used.
"""

import importlib
from typing import TYPE_CHECKING, Any

from icore._extras import lazy_attributes

if TYPE_CHECKING:
    from icore_lab.bench.micro._backends import EXECUTORS, WRITERS, run_backends
    from icore_lab.bench.micro._core_gate import BEFORE_COMMITS_PER_S, run_core_bench
    from icore_lab.bench.micro._import_bench import run as run_import_bench
    from icore_lab.bench.micro._net import (
        PAPER_KIB_PER_ACTION,
        SIZES,
        TRACES,
        percentile,
        run_fig2_virtual,
        run_validation,
        size_label,
    )
    from icore_lab.bench.micro._otel import run as run_otel_bench
    from icore_lab.bench.micro._peers import PEERS, Figures, PeersResult, run_peers
    from icore_lab.bench.micro._seam_bench import (
        Pair,
        SeamCase,
        SeamFigure,
        SeamWorld,
        fence_cases,
        run_seam_bench,
    )
    from icore_lab.bench.micro._state_bench import run as run_state_bench

_HOMES: dict[str, tuple[str, ...]] = {
    "icore_lab.bench.micro._backends": ("EXECUTORS", "WRITERS", "run_backends"),
    "icore_lab.bench.micro._core_gate": ("BEFORE_COMMITS_PER_S", "run_core_bench"),
    "icore_lab.bench.micro._net": (
        "PAPER_KIB_PER_ACTION", "SIZES", "TRACES", "percentile", "run_fig2_virtual",
        "run_validation", "size_label",
    ),
    "icore_lab.bench.micro._peers": ("PEERS", "Figures", "PeersResult", "run_peers"),
    "icore_lab.bench.micro._seam_bench": ("Pair", "SeamCase", "SeamFigure", "SeamWorld",
                                "fence_cases", "run_seam_bench"),
}
"""Front-door names by the module that defines them, imported on first use."""

_RENAMED: dict[str, tuple[str, str]] = {
    "run_import_bench": ("icore_lab.bench.micro._import_bench", "run"),
    "run_otel_bench": ("icore_lab.bench.micro._otel", "run"),
    "run_state_bench": ("icore_lab.bench.micro._state_bench", "run"),
}
"""Front-door name -> (module, name there) for the two entry points both called ``run``."""

_lazy = lazy_attributes(
    __name__, {name: module for module, names in _HOMES.items() for name in names})


def __getattr__(name: str) -> Any:
    """Import a front-door name on first use (PEP 562) and cache it on the package."""
    if name not in _RENAMED:
        return _lazy(name)
    module, attr = _RENAMED[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes and every exported name (loaded or not)."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BEFORE_COMMITS_PER_S",
    "EXECUTORS",
    "PAPER_KIB_PER_ACTION",
    "PEERS",
    "SIZES",
    "TRACES",
    "WRITERS",
    "Figures",
    "Pair",
    "PeersResult",
    "SeamCase",
    "SeamFigure",
    "SeamWorld",
    "fence_cases",
    "percentile",
    "run_backends",
    "run_core_bench",
    "run_fig2_virtual",
    "run_import_bench",
    "run_otel_bench",
    "run_peers",
    "run_seam_bench",
    "run_state_bench",
    "run_validation",
    "size_label",
]
