"""Errors of live runs (attached to the ``IcoreError`` tree, code ``live``).

::

    LiveRunError        a live-run step could not complete
      AgentCrashed      the agent process is gone
      StepTimeout       an agent did not answer a step in time
      AgentStepError    the agent answered a step with an error
      ReplyFormatError  the agent's answer is not the step's reply (a missing or
                        mistyped field, named in ``fields["field"]``)

A light module: the agent process (:mod:`icore.live._agent_proc`) reads typed replies
too, and imports no coordinator module.
"""

from __future__ import annotations

from icore.errors import ErrorCode, IcoreError


class LiveManifestError(IcoreError, ValueError):
    """A run manifest is invalid (``fields['path']`` names the offending entry)."""

    code = ErrorCode.LIVE


class LiveRunError(IcoreError):
    """A live-run step could not complete."""

    code = ErrorCode.LIVE


class AgentCrashed(LiveRunError):
    """The agent process is gone (``fields['agent']``)."""


class StepTimeout(LiveRunError):
    """An agent did not answer a step in time."""


class AgentStepError(LiveRunError):
    """The agent answered a step with an error."""


class ReplyFormatError(LiveRunError, ValueError):
    """A step's reply is malformed; its step fails closed, like an agent's error.

    ``fields["field"]`` names the field (e.g. ``plan.record.id``).
    """
