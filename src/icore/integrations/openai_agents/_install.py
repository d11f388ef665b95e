"""Installing the Agents SDK recording processors of overlapping ``recording()`` blocks.

The SDK has one process-wide list of trace processors. Several recording blocks may be
open at once (concurrent runs, each in its own block): each block adds its processor
next to the others' and removes only its own, and an exclusive block keeps the other
blocks' processors (it removes the exporters only); the processors installed before are
put back when the last exclusive block ends. Which processor records a run is decided by
the run's own identity (:meth:`RecordingProcessor._mine`): the trace ids claimed here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from icore.errors import IntegrationError

_MAX_CLAIMS = 4096


def _ours(proc: Any) -> bool:
    return getattr(proc, "ICORE_RECORDING", False) is True


def claim(trace_id: str, proc: Any) -> None:
    """``proc``'s block started the trace ``trace_id``."""
    with _INSTALL_LOCK:
        _CLAIMS[trace_id] = proc
        while len(_CLAIMS) > _MAX_CLAIMS:
            _CLAIMS.popitem(last=False)


def claimant(trace_id: str) -> Any:
    """The processor whose block started ``trace_id`` (None when unknown)."""
    with _INSTALL_LOCK:
        return _CLAIMS.get(trace_id)


_INSTALL_LOCK = threading.Lock()
_CLAIMS: OrderedDict[str, Any] = OrderedDict()
"""Trace id -> the processor whose :func:`recording` block started it."""


@dataclass
class _Installed:
    """The recording blocks open in the process (several may overlap: concurrent runs)."""

    exclusive: int = 0
    saved: list[Any] = field(default_factory=list)
    """The other processors, put back when the last exclusive block ends."""
    switched_on: bool = False
    """Tracing was off for the process and an exclusive block switched it on."""


_OPEN = _Installed()


def _processors(provider: Any) -> list[Any] | None:
    known = getattr(getattr(provider, "_multi_processor", None), "_processors", None)
    return list(known) if isinstance(known, tuple | list) else None


def install(provider: Any, proc: Any, *, exclusive: bool, off: bool) -> None:
    """Install ``proc`` next to the processors of other open blocks (never replacing them).

    Raises:
        IntegrationError: ``exclusive`` with a provider whose processors are unknown.
    """
    with _INSTALL_LOCK:
        now = _processors(provider)
        if not exclusive:
            provider.register_processor(proc)
            return
        if now is None:
            raise IntegrationError("cannot replace the trace processors of this provider",
                                   framework="openai_agents",
                                   provider=type(provider).__name__)
        if _OPEN.exclusive == 0:  # the first exclusive block: the others leave for now
            _OPEN.saved = [p for p in now if not _ours(p)]
            _OPEN.switched_on = off
        _OPEN.exclusive += 1
        provider.set_processors([p for p in now if _ours(p)] + [proc])
        if off:  # only recording processors receive traces in the block: nothing leaves
            provider.set_disabled(False)


def uninstall(provider: Any, proc: Any, *, exclusive: bool) -> None:
    """Remove ``proc``; the last exclusive block puts the other processors back."""
    with _INSTALL_LOCK:
        now = _processors(provider)
        if now is None:
            return  # switched off (proc.active), as the provider cannot remove it
        keep = [p for p in now if p is not proc]
        if exclusive:
            _OPEN.exclusive -= 1
            if _OPEN.exclusive == 0:
                keep = _OPEN.saved + keep
                _OPEN.saved = []
                if _OPEN.switched_on:
                    provider.set_disabled(True)
                _OPEN.switched_on = False
        provider.set_processors(keep)
