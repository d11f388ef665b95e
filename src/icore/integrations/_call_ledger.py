"""A protected call of one model message answered once (issue 28; planfence App. A.3).

A framework can hand one model message's tool call to the tool again: LangGraph re-runs
a ``ToolNode`` on ``Command(resume=...)``, the Agents SDK runs an approved call once per
``Runner.run`` of a saved ``RunState`` (a retried or double-clicked "approve" resumes one
saved state twice). Such a call must not have its effect twice: :class:`CallLedger`
remembers each call (a key naming the call: its run, tool-call id and arguments) from
its first attempt on, and a later attempt gets the first one's answer (its result or
refusal) instead of running; an attempt whose outcome is unknown (still running in
another resume, or it ended mid-call) is refused :data:`RETRY_UNKNOWN`. Pure: no I/O,
no clock, no framework import.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from icore.integrations._rerun import RETRY_UNKNOWN

STARTED, RAN, REFUSED, UNKNOWN = "started", "ran", "refused", "unknown"
"""How a call's attempt stands: running, ran (value: its result), refused (value: the
refusal the model read), ended with its outcome unknown (value: the error, as text)."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """The first attempt of a call, as a later attempt finds it.

    Attributes:
        how: :data:`STARTED` (still running), :data:`RAN`, :data:`REFUSED` or
            :data:`UNKNOWN`.
        value: the result (:data:`RAN`), the refusal text (:data:`REFUSED`), the error
            text (:data:`UNKNOWN`); None while :data:`STARTED`.
    """

    how: str
    value: Any = None

    @property
    def known(self) -> bool:
        """Whether the first attempt's answer can be given again (it ran or was refused)."""
        return self.how in (RAN, REFUSED)


class CallLedger:
    """Calls answered once: key -> the first attempt (thread-safe, bounded).

    Args:
        keep: most calls remembered (the oldest forgotten first; a forgotten call's later
            attempt is a first attempt again).

    Raises:
        ValueError: ``keep`` < 1.
    """

    def __init__(self, keep: int = 4096) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self._keep = keep
        self._lock = threading.Lock()
        self._calls: OrderedDict[Hashable, Earlier] = OrderedDict()

    def begin(self, key: Hashable) -> Earlier | None:
        """Start an attempt of the call ``key``.

        Returns:
            None for its first attempt (now marked :data:`STARTED`), else the first
            attempt's :class:`Earlier` (nothing is marked: this attempt must not run).
        """
        with self._lock:
            got = self._calls.get(key)
            if got is not None:
                return got
            self._calls[key] = Earlier(STARTED)
            while len(self._calls) > self._keep:
                self._calls.popitem(last=False)
            return None

    def settle(self, key: Hashable, how: str | None, value: Any = None) -> None:
        """Record how the first attempt of ``key`` ended (``how`` None: forget it).

        Forget a call nothing of which ran (paused, or an error before its gate): a later
        attempt is then its first.

        Raises:
            ValueError: ``how`` is not :data:`RAN`, :data:`REFUSED`, :data:`UNKNOWN` or
                None.
        """
        if how not in (RAN, REFUSED, UNKNOWN, None):
            raise ValueError(f"how must be ran, refused, unknown or None, got {how!r}")
        with self._lock:
            if how is None:
                self._calls.pop(key, None)
            elif key in self._calls:
                self._calls[key] = Earlier(how, value)


__all__ = ["RAN", "REFUSED", "RETRY_UNKNOWN", "STARTED", "UNKNOWN", "CallLedger", "Earlier"]
