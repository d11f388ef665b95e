"""A protected call handed to its tool again is not run twice (issue 28; planfence App. A.3).

Frameworks hand one model message's tool call to the tool again without a new model
decision: LangGraph re-runs a ``ToolNode`` on ``Command(resume=...)``, a node's
``RetryPolicy`` and ``invoke(None, config)`` after a crash; the Agents SDK runs an
approved call once per ``Runner.run`` of a saved ``RunState`` (a retried or
double-clicked "approve" resumes one saved state twice); CrewAI retries a tool that
raised within the same model message. Such a call must not have its effect twice: a
:class:`CallLedger` remembers each call (a key naming the call: its run or model turn,
tool-call id and arguments) from its first attempt on, and a later attempt gets the
first one's answer (its result or refusal) instead of running; an attempt whose outcome
is unknown (still running in another attempt, or it raised after its body started, any
exception but ``NoEffect``: :func:`~icore.integrations._rerun.outcome_unknown`) is
refused :data:`RETRY_UNKNOWN`. One ledger serves the Agents SDK
(``openai_agents._tools``), LangGraph (``langgraph._replays.StepMemory`` extends it with
its running events) and CrewAI (``crewai._attempts.UnknownAttempts``). Pure: no I/O, no
clock, no framework import.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from icore.integrations._rerun import RETRY_UNKNOWN

STARTED, RAN, REFUSED, UNKNOWN = "started", "ran", "refused", "unknown"
"""How a call's first attempt stands: running (or it died mid-call), ran (value: its
result), refused (value: the refusal the model read), raised after its body started so
its outcome is unknown (value: the error, as text)."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """The first attempt of a call, as a later attempt finds it.

    Attributes:
        how: :data:`STARTED` (still running, or it never finished), :data:`RAN`,
            :data:`REFUSED` or :data:`UNKNOWN`.
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

    A key None (a call with no identity: no tool-call id, no model turn) is never
    remembered: every attempt of it is a first attempt.

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

    def __len__(self) -> int:
        """Calls held now (at most ``keep``)."""
        with self._lock:
            return len(self._calls)

    def begin(self, key: Hashable | None) -> Earlier | None:
        """Start an attempt of the call ``key``.

        Returns:
            None for its first attempt (now marked :data:`STARTED`; always for a key
            None), else the first attempt's :class:`Earlier` (nothing is marked: this
            attempt must not run).
        """
        if key is None:
            return None
        with self._lock:
            got = self._calls.get(key)
            if got is not None:
                return got
            self._calls[key] = Earlier(STARTED)
            self._started(key)
            self._bound()
            return None

    def earlier(self, key: Hashable | None) -> Earlier | None:
        """The first attempt of ``key`` held now, else None (nothing is marked)."""
        if key is None:
            return None
        with self._lock:
            return self._calls.get(key)

    def settle(self, key: Hashable | None, how: str | None, value: Any = None) -> None:
        """Record how the first attempt of ``key`` ended (``how`` None: forget it).

        Forget a call nothing of which ran (paused, or an error before its gate): a later
        attempt is then its first. A call no longer held (the oldest, forgotten while it
        ran) is held again, as the newest. A key None: nothing.

        Raises:
            ValueError: ``how`` is not :data:`RAN`, :data:`REFUSED`, :data:`UNKNOWN` or
                None.
        """
        if how not in (RAN, REFUSED, UNKNOWN, None):
            raise ValueError(f"how must be ran, refused, unknown or None, got {how!r}")
        if key is None:
            return
        with self._lock:
            if how is None:
                self._calls.pop(key, None)
            else:
                self._calls[key] = Earlier(how, value)
            self._ended(key)
            self._bound()

    def _bound(self) -> None:
        # under the lock: the oldest calls forgotten past keep
        while len(self._calls) > self._keep:
            old, _ = self._calls.popitem(last=False)
            self._ended(old)

    def _started(self, key: Hashable) -> None:
        """Under the lock: ``key``'s first attempt was just marked :data:`STARTED`."""

    def _ended(self, key: Hashable) -> None:
        """Under the lock: ``key``'s attempt settled, or ``key`` was forgotten."""


__all__ = ["RAN", "REFUSED", "RETRY_UNKNOWN", "STARTED", "UNKNOWN", "CallLedger", "Earlier"]
