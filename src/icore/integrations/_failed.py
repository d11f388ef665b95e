"""The value a fenced tool that failed after its authorization gives back (issue 28).

Its own module so the recorder can tell a failed call from a result without importing
the guard's wrapping (:mod:`icore.integrations._tool_failed`), and name an exception
(:func:`describe`: the recorder's "the run stopped" line). Pure: no I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from icore.workspace import NoEffect

OPEN_FAILURES: tuple[type[BaseException], ...] = (asyncio.CancelledError, TimeoutError,
                                                  KeyboardInterrupt)
"""Exceptions that stop a tool mid-call, leaving its effect open (it may have had it): a
cancellation (an ``asyncio`` Ctrl-C), a timeout, a Ctrl-C in a sync tool (#29)."""


def leaves_open(exc: BaseException | None) -> bool:
    """Whether an exception from a started tool body leaves the call's effect open.

    True (the outcome is unknown) for every exception but :class:`NoEffect` (looked for
    in a framework's private wrapper too, :func:`own_exception`); None: a failure known
    only as text, open too.
    """
    return exc is None or not isinstance(own_exception(exc), NoEffect)


def own_exception(exc: BaseException) -> BaseException:
    """The tool's own exception of ``exc``.

    A framework's private wrapper (``_``-named, carrying it as ``error``: CrewAI's)
    unwrapped; any other exception is its own.
    """
    inner = getattr(exc, "error", None)
    if type(exc).__name__.startswith("_") and isinstance(inner, BaseException):
        return inner
    return exc


@dataclass(frozen=True, slots=True)
class Failed:
    """What a tool that failed after its authorization gave back.

    Attributes:
        value: what the model reads (a framework's error text); None when it raised.
        error: the failure as text (``"RuntimeError: carrier down"``).
        exc: the exception raised again once the call is recorded (None: handled).
        ran: False when the tool's body provably never ran (a layer between the gate
            and the body, or the framework's own argument check, answered with an
            error): recorded ``ran: false``, not "failed after authorization" (#28).
        open: whether the failure leaves the call's effect open (:attr:`may_have_run`);
            None: judged from :attr:`ran` and :attr:`exc` (:func:`leaves_open`), else
            from the recorder's own :attr:`error` text.
    """

    value: Any
    error: str
    exc: BaseException | None = None
    ran: bool = True
    open: bool | None = None

    @property
    def may_have_run(self) -> bool:
        """True when the tool's body started and failed: it may have had its effect.

        Any exception from a started body but :class:`NoEffect` (:func:`leaves_open`):
        a tool may raise after its effect (QA qa-new12b S2); False when the body never
        ran (:attr:`ran`). Recorded as the decision's ``may_have_run`` (the audit counts
        the call ``outcome unknown``, #29).
        """
        if self.open is not None:
            return self.open
        if not self.ran:
            return False
        if self.exc is not None:
            return leaves_open(self.exc)
        return self.error.strip().partition(":")[0] != NoEffect.__name__

    def reraise(self) -> Any:
        """Raise :attr:`exc` again (its traceback kept); else return :attr:`value`."""
        if self.exc is not None:
            raise self.exc
        return self.value

    @property
    def output(self) -> str:
        """The recorded tool output: ``ERROR: <error>`` (and the model's text, if any)."""
        shown = "" if self.value is None else f" (the model read: {self.value})"
        return f"ERROR: {self.error}{shown}"[:2000]



MAX_ERROR_CHARS = 2000
"""An exception's message is recorded up to this many characters (a tool's 1 MB
``NoEffect`` text went whole into the decision line and the audit's reason)."""


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or ``<its str() raised>`` when the exception's ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:  # the tool's own __str__ failed: its type still says what it was
        return "<its str() raised>"


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (a cancellation named as such), never raising.

    A message over :data:`MAX_ERROR_CHARS` is cut (its length said); an exception whose
    ``__str__`` raises is named by its type (sweep round 9: the ``__str__``'s error
    replaced the tool's own and a ``NoEffect`` was recorded outcome unknown).
    """
    exc = own_exception(exc)  # a wrapper carrying the tool's own exception
    text = message_of(exc)
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[:MAX_ERROR_CHARS]}... ({len(text)} characters)"
    name = type(exc).__name__
    if name == "CancelledError":
        return "CancelledError: the call was cancelled while the tool ran (Ctrl-C / " \
            "task cancelled)"
    return f"{name}: {text}" if text else name

__all__ = ["MAX_ERROR_CHARS", "OPEN_FAILURES", "Failed", "NoEffect", "describe", "leaves_open",
           "message_of", "own_exception"]
