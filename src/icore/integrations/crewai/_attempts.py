"""What a fenced CrewAI call remembers of its attempts: outcome unknown, the human's answer.

CrewAI runs a tool that raised again, up to its usage limit, within the same model
message (QA qa-new10b S3: a payment that timed out was authorized and run six times). A
call whose attempt failed leaving its effect open (any exception from its body but
:class:`~icore.integrations.NoEffect`, QA qa-new12b S2) is not run
again in that message: :class:`UnknownAttempts` remembers it and the next attempt of the
same call is refused (fail closed), the model told the earlier outcome is unknown.

:class:`HumanAsk` wraps ``approve=``: a "yes" is recorded (the audit shows the call
approved by a human, as for the other integrations), and a callback that raises is an
:class:`ApprovalFailed` the tool records as a refused call (the audit shows it). Pure but
for the recorder it is given.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from icore.integrations._approvals import canon
from icore.integrations._call_ledger import UNKNOWN, CallLedger
from icore.integrations._recorder import RunRecorder
from icore.integrations._rerun import RETRY_UNKNOWN, outcome_unknown, retry_message
from icore.integrations._tool_failed import describe
from icore.workspace import ApprovalRequest, Approver, read_answer

APPROVAL_FAILED = "approval_failed"
"""The reason of a call refused because its ``approve=`` callback raised."""

_KEEP = 256
"""Calls :class:`UnknownAttempts` remembers (the oldest forgotten first)."""


class UnknownAttempts:
    """Calls (model turn, tool arguments) whose attempt failed with its outcome unknown.

    Held in a :class:`~icore.integrations._call_ledger.CallLedger` (thread-safe) as
    :data:`~icore.integrations._call_ledger.UNKNOWN`, at most :data:`_KEEP` calls, the
    oldest forgotten first. A call without a model turn (outside a CrewAI executor run)
    is never remembered.
    """

    def __init__(self) -> None:
        self._ledger = CallLedger(_KEEP)

    def note(self, turn: Hashable | None, args: Mapping[str, Any], exc: BaseException
             ) -> None:
        """Remember the call when ``exc`` leaves its outcome unknown."""
        if outcome_unknown(exc):
            self._ledger.settle(_key(turn, args), UNKNOWN, describe(exc)[:300])

    def earlier(self, turn: Hashable | None, args: Mapping[str, Any]) -> str | None:
        """The error of the same call's earlier attempt in this turn, else None."""
        got = self._ledger.earlier(_key(turn, args))
        return got.value if got is not None and got.how == UNKNOWN else None


def _key(turn: Hashable | None, args: Mapping[str, Any]) -> Hashable | None:
    return None if turn is None else (turn, canon(dict(args)))


class ApprovalFailed(Exception):
    """``approve=`` raised: the call is refused (nothing ran); ``error`` is what it raised."""

    def __init__(self, tool: str, error: BaseException) -> None:
        self.tool, self.error = tool, error
        super().__init__(f"PlanFence refused {tool} ({APPROVAL_FAILED}): asking for "
                         f"approval failed ({describe(error)[:300]}); nothing ran. "
                         "Do not retry it now: report that the approval could not be asked")


class HumanAsk:
    """``approve=`` of one fenced call: the human's "yes" recorded; a raise refused.

    Args:
        approve: the application's ``approve(request)``.
        tool: the tool's name.
        recorder: where the "yes" is written (None: not recorded).
        agent: the agent the recorded answer names.
    """

    def __init__(self, approve: Approver, tool: str, recorder: RunRecorder | None,
                 agent: str) -> None:
        self._approve, self._tool = approve, tool
        self._rec, self._agent = recorder, agent

    def __call__(self, request: ApprovalRequest) -> Any:
        """The human's answer to ``request``, unchanged; its "yes" recorded.

        Raises:
            ApprovalFailed: ``approve`` raised an ``Exception`` (chained).
        """
        try:
            answer = self._approve(request)
        except Exception as exc:
            raise ApprovalFailed(self._tool, exc) from exc
        verdict = read_answer(answer)
        if self._rec is not None and verdict.approved and verdict.id in (None, request.id):
            self._rec.add(self._agent, "thought",
                          f"a human approved {self._tool} {canon(dict(request.args))}",
                          approval={"tool": self._tool, "approved": True,
                                    "request": request.id})
        return answer


__all__ = ["APPROVAL_FAILED", "RETRY_UNKNOWN", "ApprovalFailed", "HumanAsk",
           "UnknownAttempts", "outcome_unknown", "retry_message"]
