"""``run_planfence``: the one call behind ``icore bench planfence`` (planfence Sec. 5,
App. A.6, B, C)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from icore.bench._errors import TransportUnavailable
from icore.bench._planfence_presets import preset_cells
from icore.bench._planfence_report import write_outputs
from icore.bench._planfence_run import RunResult, run_cells

TRANSPORTS = ("inproc", "tcp")
"""Transports of the replay: in-process virtual time (default) or loopback TCP."""


def run_planfence(preset: str, out: Path, *, jobs: int = 2, transport: str = "inproc",
                  seed: int = 0, command: str = "", plots: bool = True,
                  progress: Callable[[int, int], None] | None = None
                  ) -> tuple[RunResult, dict[str, Any]]:
    """Run a preset and write CSV + JSON + PNG + markdown into ``out``.

    Args:
        preset: a preset name (see :data:`icore.bench.PLANFENCE_PRESETS`) or ``paper``.
        out: output folder (created).
        jobs: worker processes.
        transport: ``inproc`` (virtual time) or ``tcp``.
        seed: master seed mixed into every schedule.
        command: the command line, recorded in the outputs.
        plots: write PNG figures.
        progress: ``progress(done, total)`` callback over jobs.

    Returns:
        The :class:`RunResult` and the JSON summary document.

    Raises:
        UnknownPreset: no such preset.
        TransportUnavailable: ``transport="tcp"`` (see the message) or an unknown name.
    """
    if transport not in TRANSPORTS:
        raise TransportUnavailable(f"unknown transport {transport!r}", transport=transport,
                                   known=list(TRANSPORTS))
    if transport == "tcp":
        raise TransportUnavailable(
            "the PlanFence replay over real loopback TCP is not implemented yet: the "
            "replay's clock is virtual and its cost model (trace links, per-RPC "
            "handshakes) lives in the in-process transport; use --transport inproc, or "
            "`icore bench net` for real TCP measurements", transport=transport)
    cells = preset_cells(preset, seed)
    result = run_cells(cells, workers=jobs, progress=progress)
    doc = write_outputs(result, out, preset=preset, seed=seed, command=command,
                        transport=transport, plots=plots)
    return result, doc


__all__ = ["TRANSPORTS", "run_planfence"]
