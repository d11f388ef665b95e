"""Reads spent by a call whose outcome is unknown (QA qa-new14 S2, issue 29).

A protected call whose started tool body failed leaving its effect open (a timeout after
the carrier API sent the goods: anything but the integrations' ``NoEffect``) may have
acted. The reads it derived from were the agent's evidence for *that* decision; a second
call planned from the same reads (the model's next message repeating the call, a new
tool-call id) would be authorized by the very observation the first call consumed, and
act twice. So those reads stop backing any protected call that depends on their keys,
until the agent reads the keys again: the check the model is told to make.

Why every call depending on the keys, not only the same tool: the effect is unknown, so
nothing the agent read before it tells what the world now holds for those facts; a
different tool acting on them (``dispatch_express`` after ``dispatch``) would act on the
same stale picture. The cost is one read. A call whose body raised ``NoEffect`` spends
nothing (nothing ran: the read still backs its retry).

The wording the model reads is one for every seam (:func:`unknown_outcome_text`,
:func:`check_first`; :mod:`icore.integrations._rerun` gives the same helpers). Pure: no
I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

_MAX_SPENT = 4096
_PAUSES = frozenset({("icore.integrations._approvals", "ApprovalChanged"),
                     ("icore.integrations.ag2._human", "StoppedAfterHuman"),
                     ("langgraph.errors", "GraphBubbleUp")})
"""Exceptions a tool body raises on purpose, not failures (a pause, a changed approval):
the integrations' control flow (``icore.integrations._tool_failed``), named here."""


class NoEffect(Exception):
    """Raised by a protected tool's body to say the call failed and had no effect.

    Any other exception from a body the gate authorized and started leaves the call's
    outcome unknown (it may have made its effect before it raised: a booking committed,
    then a connection reset): recorded ``may_have_run: true``, counted ``outcome
    unknown`` by ``icore audit`` (``--fail-on unknown`` fails), and its reads are spent
    (:class:`Spent`). Raise ``NoEffect`` (or a subclass) only when the tool knows nothing
    was done (``raise NoEffect("card declined") from exc``): recorded ``may_have_run:
    false``, counted ``failed after authorization``. :meth:`Agent.execute
    <icore.workspace.Agent.execute>`, LangGraph, the OpenAI Agents SDK, AG2 and CrewAI
    fenced tools read it alike (``from icore.integrations import NoEffect`` is this
    class); the framework then treats it as any exception of the tool.
    """


def error_text(exc: BaseException) -> str:
    """``Type: message`` of a tool's exception (its first line, at most 300 characters).

    Never raises: an exception whose ``__str__`` raises is named by its type alone.
    """
    try:
        text = str(exc)
    except Exception:
        text = ""
    first = text.splitlines()[0] if text else ""
    return (f"{type(exc).__name__}: {first}" if first else type(exc).__name__)[:300]


def leaves_effect_open(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a started tool body, leaves the call's effect open.

    True for every exception but :class:`NoEffect` and the integrations' pauses (a
    LangGraph ``interrupt()``, an AG2 in-tool human stop, a changed approval).
    """
    if isinstance(exc, NoEffect):
        return False
    return not any((c.__module__, c.__name__) in _PAUSES for c in type(exc).__mro__)


def check_first(tool: str) -> str:
    """The advice closing every "outcome unknown" text the model reads (one wording)."""
    return f"check its effect before calling {tool} again, or report the unknown outcome"


def unknown_outcome_text(tool: str, error: str) -> str:
    """What the model reads of a fenced call whose started body raised (not ``NoEffect``).

    ``error``: the exception as ``Type: message`` (cut by the caller). The framework's
    own text (an error, a traceback) said only that it failed; the call may have made its
    effect first (a card charged, then a timeout), so calling it again may act twice. The
    same wording as the refusal of a repeat (:func:`spent_detail`), the LangGraph step
    memory's and the MCP gateway's ("check its effect before calling again").
    """
    return (f"{tool} failed with {error}; it may have run (it started before it failed), "
            f"so its outcome is unknown: {check_first(tool)}")


def failure_of(value: Any) -> str | None:
    """The error text of a call's value that says its outcome is unknown, else None.

    The integrations' fenced tools return their body's failure as a value with
    ``may_have_run`` (True: the body started and raised, not ``NoEffect``) and ``error``
    (``Type: message``); any other value is a result.
    """
    try:
        if getattr(value, "may_have_run", False) is not True:
            return None
        error = getattr(value, "error", "")
    except Exception:  # a result whose attributes raise is a result
        return None
    return error if isinstance(error, str) and error else "an error"


RUNNING_ELSEWHERE = "running elsewhere"
"""The ``error`` a :class:`Spent` entry holds for a call refused ``call_running`` (the
same call runs now in another process or thread: its outcome is not known yet)."""


def spent_detail(tool: str, error: str, keys: Iterable[str]) -> str:
    """The detail of a call refused because its keys' reads were spent by ``tool``.

    Args:
        tool: the earlier call whose outcome is unknown.
        error: its failure (``Type: message``), or :data:`RUNNING_ELSEWHERE`.
        keys: the keys of the refused call whose reads that call consumed.
    """
    names = ", ".join(sorted(keys))
    if error == RUNNING_ELSEWHERE:
        return (f"{tool} is running now elsewhere (another process or thread of the app), "
                f"so its outcome is unknown: {check_first(tool)}. This agent's read of "
                f"{names} no longer backs a call: read {names} again to check (a call made "
                f"after that read may run)")
    return (f"{unknown_outcome_text(tool, error)}. That call was authorized by this "
            f"agent's read of {names}, which no longer backs a call: read {names} again "
            f"to check (a call made after that read may run)")


class Spent:
    """The keys whose reads a call with an unknown outcome consumed, per run scope.

    Holds the agent's read history and turn snapshots (the same dicts, under the same
    lock): :meth:`spend` drops the consumed reads from both, :meth:`read` clears a key
    once the agent reads it again. Thread-safe.

    Args:
        seen: run scope -> key -> the versions read (the agent's ``_seen``).
        turns: ``(scope, turn)`` -> the turn's basis snapshot (the agent's ``_turns``).
        lock: the agent's lock.
    """

    def __init__(self, seen: Mapping[Hashable | None, dict[str, Any]],
                 turns: Mapping[tuple[Hashable | None, Hashable], dict[str, Any]],
                 lock: threading.RLock) -> None:
        self._seen = seen
        self._turns = turns
        self._lock = lock
        self._spent: OrderedDict[tuple[Hashable | None, str], tuple[str, str]] = \
            OrderedDict()

    def spend(self, scope: Hashable | None, keys: Iterable[str], tool: str,
              error: str) -> None:
        """``tool``'s outcome is unknown: its reads of ``keys`` in ``scope`` are spent."""
        wanted = frozenset(keys)
        with self._lock:
            hist = self._seen.get(scope)
            for k in wanted:
                if hist is not None:
                    hist.pop(k, None)
                self._spent[(scope, k)] = (tool, error)
                self._spent.move_to_end((scope, k))
            for (s, _), snap in self._turns.items():
                if s == scope:
                    for k in wanted:
                        snap.pop(k, None)
            while len(self._spent) > _MAX_SPENT:
                self._spent.popitem(last=False)

    def everywhere(self, keys: Iterable[str], tool: str, error: str) -> None:
        """:meth:`spend` ``keys`` in every run scope the agent has read in (and None)."""
        wanted = frozenset(keys)
        with self._lock:
            for scope in {None, *self._seen}:
                self.spend(scope, wanted, tool, error)

    def read(self, scope: Hashable | None, keys: Iterable[str]) -> None:
        """The agent read ``keys`` again in ``scope``: they back calls again."""
        with self._lock:
            for k in keys:
                self._spent.pop((scope, k), None)

    def why(self, scope: Hashable | None, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Key -> ``(tool, error)`` of the unknown-outcome call that spent its read."""
        with self._lock:
            return {k: got for k in keys if (got := self._spent.get((scope, k))) is not None}


__all__ = ["RUNNING_ELSEWHERE", "NoEffect", "Spent", "check_first", "error_text", "failure_of",
           "leaves_effect_open", "spent_detail", "unknown_outcome_text"]
