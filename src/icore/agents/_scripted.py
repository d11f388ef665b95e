"""The scripted backend: deterministic decisions from the workflow template.

The embedded default of ``icore run``: no network, no model. Each decision returns the
template's answer (:attr:`DecisionRequest.scripted`) after the same schema check a model's
answer passes, so a template bug shows up as a violation rather than a silent commit.
"""

from __future__ import annotations

from icore.agents._decide import DecisionOutcome, DecisionRequest, check_call


class ScriptedDecider:
    """Deterministic role decisions (one accepted response per decision)."""

    name = "scripted"

    def decide(self, request: DecisionRequest) -> DecisionOutcome:
        """Return the template's decision, checked against the grounded tool."""
        args, bad = check_call(request.tool, request.tool.name, dict(request.scripted))
        if bad is not None:
            return DecisionOutcome(False, None, responses=1, accepted=0, violations=(bad,),
                                   error=f"scripted decision violates the schema: {bad}")
        return DecisionOutcome(True, args)
