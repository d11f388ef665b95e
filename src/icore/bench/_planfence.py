"""``run_planfence``: the one call behind ``icore bench planfence`` (planfence Sec. 5,
App. A.6, B, C)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from icore.bench._checks import check_count
from icore.bench._errors import BadOption, TransportUnavailable
from icore.bench._planfence_presets import preset_cells
from icore.bench._planfence_report import write_outputs
from icore.bench._planfence_run import RunResult, run_cells
from icore.net import TRACE_FILES

TRANSPORTS = ("inproc", "tcp")
"""Transports of the replay: in-process virtual time (default) or loopback TCP."""


def run_planfence(preset: str, out: Path, *, jobs: int = 2, transport: str = "inproc",
                  seed: int = 0, command: str = "", plots: bool = True,
                  link: str | None = None, base_delay_ms: float | None = None,
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
        link: replace every cell's link by this one (e.g. ``loopback`` for a real-TCP
            run, where trace shaping would run in real time); offsets are kept.
        base_delay_ms: replace every cell's one-way base delay on trace links, in ms
            (default: :data:`icore.net.DEFAULT_BASE_DELAY_MS`, mm-link semantics);
            a sensitivity knob, recorded in every cell label.
        progress: ``progress(done, total)`` callback over jobs.

    Returns:
        The :class:`RunResult` and the JSON summary document.

    Raises:
        UnknownPreset: no such preset.
        TransportUnavailable: an unknown transport, or ``tcp`` for a preset with App. C
            fault injection.
        BadOption: ``jobs`` is not an integer >= 1, or ``base_delay_ms`` is negative or
            not finite.
    """
    check_count("jobs", jobs)
    if transport not in TRANSPORTS:
        raise TransportUnavailable(f"unknown transport {transport!r}", transport=transport,
                                   known=list(TRANSPORTS))
    cells = preset_cells(preset, seed)
    if link is not None:
        if link not in ("loopback", *TRACE_FILES):
            raise TransportUnavailable(f"unknown link {link!r}", link=link)
        cells = [replace(c, cell=f"{c.cell} [link={link}]", net=replace(c.net, link=link,
                                        offset_ms=0.0 if link == "loopback"
                                        else c.net.offset_ms),
                         facets={**c.facets, "link": link}) for c in cells]
    if base_delay_ms is not None:
        if not math.isfinite(base_delay_ms) or base_delay_ms < 0:
            raise BadOption(f"base_delay_ms must be a finite number >= 0, "
                            f"got {base_delay_ms}", option="base_delay_ms",
                            value=base_delay_ms)
        cells = [replace(c, cell=f"{c.cell} [delay={base_delay_ms:g}ms]",
                         net=replace(c.net, base_delay_ms=float(base_delay_ms)),
                         facets={**c.facets, "base_delay_ms": base_delay_ms})
                 for c in cells]
    if transport == "tcp":
        faulted = sorted({c.study for c in cells if c.params.fault.value != "none"})
        if faulted:
            raise TransportUnavailable(
                "fault-injection studies run on the in-process transport only; use "
                "--transport inproc for " + ", ".join(faulted), transport=transport)
    result = run_cells(cells, workers=jobs, transport=transport, progress=progress)
    doc = write_outputs(result, out, preset=preset, seed=seed, command=command,
                        transport=transport, plots=plots)
    return result, doc


__all__ = ["TRANSPORTS", "run_planfence"]
