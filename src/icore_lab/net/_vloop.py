"""An asyncio event loop that runs on virtual time (design.md 3.4 "virtual time").

:class:`VirtualTimeLoop` reads time from a :class:`icore._clock.ManualClock`; whenever the
loop would sleep (nothing is ready, the next timer is in the future) it advances the
clock to that timer instead of waiting. So ``asyncio.sleep``, ``asyncio.wait_for`` and
``asyncio.gather`` keep their meaning, concurrency is simulated exactly, and a run takes
as long as its CPU work. The idea is trio's ``MockClock(autojump_threshold=0)``.

Use it only for code that does no real I/O: a real socket would see virtual timeouts.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from icore._clock import ManualClock

T = TypeVar("T")


class _VirtualSelector(selectors.BaseSelector):
    """A selector that never blocks: it jumps the clock to the next timer instead."""

    def __init__(self, clock: ManualClock) -> None:
        self._inner = selectors.DefaultSelector()
        self._clock = clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        """Register ``fileobj`` with the real selector (the loop's self-pipe)."""
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        """Unregister ``fileobj`` from the real selector."""
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        """Change what ``fileobj`` is watched for, in the real selector."""
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Return what is ready now; else advance the clock by ``timeout`` s and return [].

        With ``timeout=None`` (no timer scheduled) it blocks for real, since only another
        thread can then wake the loop.
        """
        ready = self._inner.select(0)
        if ready:
            return ready
        if timeout is None:
            # nothing scheduled and nothing ready: only another thread could wake us;
            # block for real (call_soon_threadsafe writes to the self-pipe)
            return self._inner.select(None)
        if timeout > 0:
            self._clock.advance(timeout * 1000.0)
        return []

    def close(self) -> None:
        """Close the real selector."""
        self._inner.close()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        """The real selector's file-object map."""
        return self._inner.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """Event loop whose ``time()`` is ``clock.now_ms() / 1000`` and which never waits.

    Args:
        clock: the shared :class:`ManualClock` (a new one starting at 0 when None).
    """

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock if clock is not None else ManualClock()
        super().__init__(selector=_VirtualSelector(self.clock))

    def time(self) -> float:
        """Return virtual time in seconds."""
        return self.clock.now_ms() / 1000.0


def run_virtual(coro: Coroutine[Any, Any, T], clock: ManualClock | None = None) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop` over ``clock``."""
    loop = VirtualTimeLoop(clock)
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
