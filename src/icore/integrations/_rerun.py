"""One rule for a protected call tried again after its outcome was left unknown (#28).

Frameworks run a tool call again without a new model decision: CrewAI retries a tool
that raised within the same model message (QA qa-new10b S3: a payment that timed out
ran six times); LangGraph re-runs a whole node on ``Command(resume=...)``, on a node's
``RetryPolicy`` and on ``invoke(None, config)`` after a crash. A call whose earlier
attempt failed leaving its effect open (a timeout, a cancellation, an error after the
tool started) is refused with :data:`RETRY_UNKNOWN` instead of run twice, and the model
reads :func:`retry_message`. Pure: no I/O.
"""

from __future__ import annotations

import asyncio

RETRY_UNKNOWN = "earlier_outcome_unknown"
"""The reason of a call refused because the same call's earlier attempt (same model
message) failed with its outcome unknown."""


def outcome_unknown(exc: BaseException) -> bool:
    """True when a tool's exception leaves its effect open: it may have run.

    A timeout (``TimeoutError``, or a client library's ``...Timeout...`` class), a
    cancellation, or an error the ``icore mcp`` gateway marks ``MAY HAVE RUN``; the audit
    counts such a call ``outcome unknown``.
    """
    from icore.adapters import MAY_HAVE_RUN_MARK  # only once a tool raised

    inner = getattr(exc, "error", None)
    if isinstance(inner, BaseException):
        exc = inner
    if isinstance(exc, TimeoutError | asyncio.CancelledError):
        return True
    return "Timeout" in type(exc).__name__ or str(exc).startswith(MAY_HAVE_RUN_MARK)


def retry_message(tool: str, error: str) -> str:
    """What the model reads when the same call is tried again after an unknown outcome.

    ``error``: the earlier attempt's error (``Type: message``), cut by the caller.
    """
    return (f"PlanFence refused {tool} ({RETRY_UNKNOWN}): the same call failed a moment "
            f"ago with {error}; it may have run, so its outcome is unknown and it is not "
            f"run again from this message. Nothing ran now. Check whether it took effect "
            f"before calling {tool} again, or report the unknown outcome")


__all__ = ["RETRY_UNKNOWN", "outcome_unknown", "retry_message"]
