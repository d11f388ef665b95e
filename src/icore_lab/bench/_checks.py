"""Argument checks shared by the harness entry points (``run_*``, ``evaluate``).

Each check raises :class:`~icore_lab.bench.BadOption` naming the parameter
(``fields['option']``) and the rejected value (``fields['value']``), so a library caller
gets a typed ``ValueError`` and the CLI can exit 2 with a message naming both.
"""

from __future__ import annotations

import math

from icore_lab.bench._errors import BadOption


def check_count(option: str, value: int, *, minimum: int = 1) -> None:
    """Require an integer ``>= minimum`` (booleans are refused).

    Raises:
        BadOption: ``value`` is not an integer or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadOption(f"{option} must be an integer >= {minimum}, got {value!r}",
                        option=option, value=value)


def check_positive_seconds(option: str, value: float) -> None:
    """Require a finite number of seconds ``> 0`` (NaN and infinity are refused).

    Raises:
        BadOption: ``value`` is not a number, is NaN or infinite, or is ``<= 0``.
    """
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise BadOption(f"{option} must be a finite number > 0, got {value!r}",
                        option=option, value=value)


__all__ = ["check_count", "check_positive_seconds"]
