"""The gate decisions of the protected action whose tool body is running (planfence App. A.3).

:meth:`~icore.fence.Fence.execute` and :meth:`~icore.fence.Fence.aexecute` set them around
the tool body, so code the body runs reads them with :func:`authorizing`: a recorder
that must put the decision authorizing an effect on disk before the effect happens (a
run killed with ``kill -9`` mid-tool still shows the call and its decision, #25). A
context variable: threads and tasks the body starts inherit it as Python's
``contextvars`` do. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from icore.fence._decision import GateDecision

_AUTHORIZING: ContextVar[tuple[GateDecision, ...]] = ContextVar("icore_authorizing",
                                                                 default=())


def authorizing() -> tuple[GateDecision, ...]:
    """The gate decisions of the protected action whose tool body runs in this context.

    In order, the last one authorized the body (the first, after a replan, required
    it); ``()`` outside a tool body a :class:`~icore.fence.Fence` runs (planfence
    App. A.3 step 4: the body runs only on an authorized decision).
    """
    return _AUTHORIZING.get()


@contextmanager
def running(decisions: Sequence[GateDecision]) -> Iterator[None]:
    """Make ``decisions`` what :func:`authorizing` returns in the block (the tool body)."""
    token = _AUTHORIZING.set(tuple(decisions))
    try:
        yield
    finally:
        _AUTHORIZING.reset(token)


__all__ = ["authorizing", "running"]
