"""One rule for a protected call tried again after its outcome was left unknown (#28).

Frameworks run a tool call again without a new model decision: CrewAI retries a tool
that raised within the same model message (QA qa-new10b S3: a payment that timed out
ran six times); LangGraph re-runs a whole node on ``Command(resume=...)``, on a node's
``RetryPolicy`` and on ``invoke(None, config)`` after a crash. A call whose earlier
attempt failed leaving its effect open (any exception from its started body but
``NoEffect``) is refused with :data:`RETRY_UNKNOWN` instead of run twice, and the model
reads :func:`retry_message`. A call whose body just raised so is told the same at once
(:func:`unknown_outcome_text`, QA qa-new13a S3: AG2 handed the model only the error and
its next message paid again). Pure: no I/O.
"""

from __future__ import annotations

from icore.integrations._failed import leaves_open
from icore.workspace import EARLIER_UNKNOWN, check_first, unknown_outcome_text

RETRY_UNKNOWN = EARLIER_UNKNOWN
"""The reason of a call refused because the same call's earlier attempt (same model
message) failed with its outcome unknown."""


def outcome_unknown(exc: BaseException) -> bool:
    """True when a tool's exception leaves its effect open: it may have run.

    Any exception from the tool's started body (a timeout, a cancellation, a connection
    reset after a commit, QA qa-new12b S2) but :class:`~icore.integrations.NoEffect`,
    which says nothing was done (:func:`~icore.integrations._failed.leaves_open`); the
    audit counts such a call ``outcome unknown``.
    """
    return leaves_open(exc)


def retry_message(tool: str, error: str) -> str:
    """What the model reads when the same call is tried again after an unknown outcome.

    ``error``: the earlier attempt's error (``Type: message``), cut by the caller.
    """
    return (f"PlanFence refused {tool} ({RETRY_UNKNOWN}): the same call failed a moment "
            f"ago with {error}; it may have run, so its outcome is unknown and it is not "
            f"run again from this message. Nothing ran now: {check_first(tool)}")


__all__ = ["RETRY_UNKNOWN", "check_first", "outcome_unknown", "retry_message",
           "unknown_outcome_text"]
