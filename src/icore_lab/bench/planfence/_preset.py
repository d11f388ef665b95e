"""``run_planfence``: the one call behind ``icore bench planfence``.

Implements planfence Sec. 5, App. A.6, B, C.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from icore._files import move_aside
from icore_lab.bench._checks import check_count
from icore_lab.bench._errors import (
    OutputUnavailable,
    TraceUnavailable,
    TransportUnavailable,
)
from icore_lab.bench.planfence._presets import Cell, preset_cells
from icore_lab.bench.planfence._report import write_outputs
from icore_lab.bench.planfence._run import CampaignResult, run_cells
from icore_lab.net import TRACE_FILES, path_by_name

TRANSPORTS = ("inproc", "tcp")
"""Transports of the replay: in-process virtual time (default) or loopback TCP."""


def run_planfence(preset: str, out: Path, *, jobs: int = 2, transport: str = "inproc",
                  seed: int = 0, command: str = "", plots: bool = True,
                  link: str | None = None, base_delay_ms: float | None = None,
                  progress: Callable[[int, int], None] | None = None
                  ) -> tuple[CampaignResult, dict[str, Any]]:
    """Run a preset and write CSV + JSON + PNG + markdown into ``out``.

    Args:
        preset: a preset name (see :data:`icore_lab.bench.PLANFENCE_PRESETS`) or ``paper``.
        out: output folder. Created; results appear there only once complete, and
            earlier results found there are first moved to ``<out>.1`` (``.2``, ...).
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
        The :class:`CampaignResult` and the JSON summary document.

    Raises:
        UnknownPreset: no such preset.
        TransportUnavailable: an unknown transport, or ``tcp`` for a preset with App. C
            fault injection.
        BadOption: ``jobs`` is not an integer >= 1, or ``base_delay_ms`` is negative or
            not finite.
        TraceUnavailable: a trace the preset needs is missing or malformed (checked
            before any work starts).
        OutputUnavailable: ``out`` is a file, a non-empty folder without replay
            results, or cannot be written (checked before any work starts).
        ReplayFailed: an episode could not finish.
    """
    check_count("jobs", jobs)
    if transport not in TRANSPORTS:
        raise TransportUnavailable(f"unknown transport {transport!r}", transport=transport,
                                   known=list(TRANSPORTS))
    cells = preset_cells(preset, seed)
    if link is not None:
        if link not in ("loopback", *TRACE_FILES):
            raise TransportUnavailable(
                f"unknown link {link!r}; expected one of loopback, "
                + ", ".join(TRACE_FILES), link=link)
        cells = [replace(c, cell=f"{c.cell} [link={link}]", net=replace(c.net, link=link,
                                        offset_ms=0.0 if link == "loopback"
                                        else c.net.offset_ms),
                         facets={**c.facets, "link": link}) for c in cells]
    if base_delay_ms is not None:
        # NetSpec refuses a negative or non-finite delay (BadOption naming it)
        cells = [replace(c, cell=f"{c.cell} [delay={base_delay_ms:g}ms]",
                         net=replace(c.net, base_delay_ms=base_delay_ms),
                         facets={**c.facets, "base_delay_ms": base_delay_ms})
                 for c in cells]
    if transport == "tcp":
        faulted = sorted({c.study for c in cells if c.params.fault.value != "none"})
        if faulted:
            raise TransportUnavailable(
                "fault-injection studies run on the in-process transport only; use "
                "--transport inproc for " + ", ".join(faulted), transport=transport)
    _check_traces(cells)
    staging = _staging_folder(out)
    published = False
    try:
        result = run_cells(cells, workers=jobs, transport=transport, progress=progress)
        doc = write_outputs(result, staging, preset=preset, seed=seed, command=command,
                            transport=transport, plots=plots)
        _publish(staging, out)
        published = True
    except OSError as exc:
        raise OutputUnavailable(f"cannot write the results into {out}: "
                                f"{exc.strerror or exc}", path=str(out),
                                reason=exc.strerror or str(exc)) from exc
    finally:
        if not published:
            shutil.rmtree(staging, ignore_errors=True)
    return result, doc


_MARKER = "summary.json"
"""A folder holding this file is a previous replay's results (moved aside, not mixed)."""


def _check_traces(cells: Sequence[Cell]) -> None:
    """Load every trace the cells need, in this process, before any work starts."""
    for name in sorted({c.net.link for c in cells} - {"loopback"}):
        try:
            path_by_name(name)
        except ValueError as exc:
            raise TraceUnavailable(f"trace {name!r}: {exc}", link=name) from exc
        except OSError as exc:
            raise TraceUnavailable(f"trace {name!r}: {exc}; set ICORE_TRACES or "
                                   "ICORE_SHARED_DATA", link=name) from exc


def _staging_folder(out: Path) -> Path:
    """Check ``out`` and create the private folder the run writes into.

    Results appear in ``out`` only once every file is written (:func:`_publish`), so a
    failed or interrupted run never leaves a folder that looks complete.

    Raises:
        OutputUnavailable: ``out`` is not a folder, is a folder holding something other
            than replay results, or its parent cannot be written.
    """
    if out.exists() and not out.is_dir():
        raise OutputUnavailable(f"{out} exists and is not a folder", path=str(out),
                                reason="not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / _MARKER).is_file():
        raise OutputUnavailable(f"{out} is not empty and holds no replay results; "
                                "choose another --out", path=str(out), reason="not empty")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial",
                                        dir=out.parent))
        staging.chmod(0o755)  # mkdtemp makes it private; results are for everyone to read
        return staging
    except OSError as exc:
        raise OutputUnavailable(f"cannot create the results folder {out}: "
                                f"{exc.strerror or exc}", path=str(out),
                                reason=exc.strerror or str(exc)) from exc


def _publish(staging: Path, out: Path) -> None:
    """Move finished results into ``out``; earlier results there go to ``out.1``, ...

    The same rule as live runs (:func:`icore.live.run_live`): a rerun never mixes its
    files with, or silently overwrites, an earlier one.
    """
    if out.is_dir():
        if any(out.iterdir()):
            move_aside(out)
        else:
            out.rmdir()
    staging.rename(out)


__all__ = ["TRANSPORTS", "run_planfence"]
