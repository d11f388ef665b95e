"""Injected time and id sources (style habit 10).

Pure layers never read the wall clock; they take a :class:`Clock`. Replays use
:class:`ManualClock` so a recorded run gives the same decisions byte for byte.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of time in milliseconds."""

    def now_ms(self) -> float:
        """Return the current time in milliseconds."""
        ...


class WallClock:
    """Monotonic wall clock (``time.perf_counter``), in ms."""

    def now_ms(self) -> float:
        """Return monotonic time in milliseconds."""
        return time.perf_counter() * 1000.0


class ManualClock:
    """A clock that only moves when told to; used for replay and virtual time."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._t = float(start_ms)

    def now_ms(self) -> float:
        """Return the current virtual time in ms."""
        return self._t

    def advance(self, delta_ms: float) -> None:
        """Move time forward by ``delta_ms`` (must be >= 0).

        Raises:
            ValueError: if ``delta_ms`` is negative.
        """
        if delta_ms < 0:
            raise ValueError(f"cannot move a clock backwards (delta_ms={delta_ms})")
        self._t += delta_ms

    def set(self, t_ms: float) -> None:
        """Jump to ``t_ms`` (must not be earlier than now)."""
        self.advance(t_ms - self._t)
