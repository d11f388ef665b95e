"""The iCORE evaluation harnesses (icore Sec. 5; design.md 4.5; I/O layer).

Module map:

=================  =============================================================
``_evaluate``      ``icore bench icore``: conditions on matched instances, presets
``_loop``          the loop-level representation ablation (claim 1)
``_repr``          representation sufficiency: which defects G, Q or X detect
``_stats``         paired bootstrap, Wilcoxon, the Prop. 4 check, tables
``_report``        CSV, JSON, PNG and markdown outputs
``_attribution``   the failure-attribution protocol on real traces (Who&When)
=================  =============================================================

The entry points are the ``icore bench icore`` / ``icore bench attribution`` commands;
the modules are imported where used (numpy and friends only when a bench runs).
"""

from typing import TYPE_CHECKING

from icore._extras import lazy_attributes

if TYPE_CHECKING:
    from icore_lab.bench.icore._attribution import (
        cross_validate,
        cv_score,
        markdown,
        with_llm_rows,
        write_outputs,
    )
    from icore_lab.bench.icore._evaluate import PRESETS, default_jobs, evaluate, evaluate_grid

_HOMES: dict[str, tuple[str, ...]] = {
    "icore_lab.bench.icore._attribution": (
        "cross_validate", "cv_score", "markdown", "with_llm_rows", "write_outputs",
    ),
    "icore_lab.bench.icore._evaluate": ("PRESETS", "default_jobs", "evaluate", "evaluate_grid"),
}
"""Front-door names by the module that defines them, imported on first use (numpy and
friends load only when a bench runs)."""

__getattr__ = lazy_attributes(
    __name__, {name: module for module, names in _HOMES.items() for name in names})


def __dir__() -> list[str]:
    """The module's attributes and every exported name (loaded or not)."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "PRESETS",
    "cross_validate",
    "cv_score",
    "default_jobs",
    "evaluate",
    "evaluate_grid",
    "markdown",
    "with_llm_rows",
    "write_outputs",
]
