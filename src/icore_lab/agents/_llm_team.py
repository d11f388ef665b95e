"""An LLM-backed iCORE agent team behind an OpenAI-compatible endpoint (design.md 4.5).

:class:`LLMTeam` has the interface of :class:`~icore.agents.SimTeam` (a host policy that
also answers feedback) and the same task world: what an attempt produces is still drawn
from the calibrated world, but every *decision* is the model's, made with one grounded
tool call exactly like the live PlanFence backend (planfence App. A.2; see
:mod:`icore.agents._llm`): the system instruction names the role and the workflow family,
the user object holds the role's local evidence, the one tool's JSON schema enumerates
every permitted choice, and a violation gets one public correction.

* ``Schedule_D`` (:meth:`LLMTeam.propose`): the tool enumerates the enabled actions of
  the team (a lead assignment names the worker, so the model picks it).
* Feedback (:meth:`LLMTeam.recover`): the routed agent reads the logged feedback text
  (verbatim, the text in X) and answers with a tool built from its role: a worker repairs
  or reports failure, a verifier verifies or declines, the lead names a worker for each
  affected obligation.

A decision whose corrected response still violates the schema is a *rejected proposal*:
``propose`` returns None (a nonproductive step, nothing committed) and ``recover``
returns no recovery (the audit rejects it). Nothing falls back to the first option, the
auditor's alternatives or the simulator's own choice. An unusable server (after the
retries of the backend) raises :class:`~icore.agents.LLMUnavailable`; it is never counted
as a model decision. Requires the ``openai`` package (``pip install 'icore[llm]'``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.agents import (
    DecisionOutcome,
    DecisionRequest,
    LLMDecider,
    LLMSettings,
    LLMUnavailable,
    ToolSpec,
    decision_tally,
    enum_prop,
    object_schema,
)
from icore.audit import Feedback, HostView
from icore.state import Proposal
from icore_lab.agents._sim_world import SimWorld
from icore_lab.agents._simulated import ASSIGN_EPS, Card, SimTeam
from icore_lab.workloads import TaskInstance

FAMILY = "iCORE-audited {mode} team task"
"""The workflow family named in the system instruction (planfence App. A.2 shape)."""


def _label(actor: str, verb: str, item: str, to: str | None = None) -> str:
    return f"{actor}:{verb}:{item}" + (f"->{to}" if to else "")


@dataclass(slots=True)
class LLMTeam(SimTeam):
    """A team whose decisions come from an LLM (same interface as ``SimTeam``).

    Attributes:
        settings: the endpoint (or pass ``decider``).
        decider: the grounded tool-call backend (built from ``settings`` when None).
        decisions: every decision outcome (``DecisionOutcome.to_dict()``), in order.
        rejected: decisions that failed after the one correction (rejected proposals).
    """

    settings: LLMSettings | None = None
    decider: Any = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0

    def __post_init__(self) -> None:
        SimTeam.__post_init__(self)
        if self.decider is None:
            if self.settings is None:
                raise ValueError("LLMTeam needs settings or a decider")
            self.decider = LLMDecider(self.settings.to_config(), transcript=[])

    @classmethod
    def create(cls, inst: TaskInstance, world: SimWorld, settings: LLMSettings) -> LLMTeam:
        """A team for ``inst`` talking to the endpoint in ``settings``."""
        return cls(inst=inst, world=world, settings=settings)

    # ------------------------------------------------------------------ counters
    @property
    def requests(self) -> int:
        """Chat-completion requests answered by the server."""
        return int(self.decider.requests)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens reported by the server."""
        return int(self.decider.prompt_tokens)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens reported by the server."""
        return int(self.decider.completion_tokens)

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """What was sent and received (see :class:`~icore.agents.LLMDecider`)."""
        return list(self.decider.transcript or [])

    def tally(self) -> dict[str, int]:
        """Decision counters (see :func:`~icore.agents.decision_tally`)."""
        return decision_tally(self.decisions)

    # ------------------------------------------------------------------ the model
    def _decide(self, role: str, user: Mapping[str, Any], tool: ToolSpec
                ) -> Mapping[str, Any] | None:
        req = DecisionRequest(role, FAMILY.format(mode=self.inst.mode.value), user, tool,
                              scripted={})
        out: DecisionOutcome = self.decider.decide(req)
        self.decisions.append(out.to_dict())
        if out.infrastructure:
            raise LLMUnavailable("the model server failed during an iCORE run",
                                 reason=out.error, role=role)
        if not out.ok:
            self.rejected += 1
            return None
        return out.args

    def _options(self) -> list[tuple[str, str, Card, str | None]]:
        """Enabled actions: ``(label, actor, card, assignee)``."""
        opts: list[tuple[str, str, Card, str | None]] = []
        for actor in self._actors:
            card = self._action_for(actor)
            if card is None:
                continue
            if actor == "lead":
                for w in self._workers:
                    opts.append((_label(actor, "assign", card.item.id, w), actor, card, w))
            else:
                verb = "verify" if actor in self.inst.verifiers else "work"
                opts.append((_label(actor, verb, card.item.id), actor, card, None))
        return opts

    def _assign_to(self, c: Card, to: str) -> Proposal:
        """The lead's assignment the model chose; the world notes a weaker choice."""
        kind = c.item.kind
        best = max(w.capability[kind] for w in self._workers.values())
        if best - self._workers[to].capability[kind] > ASSIGN_EPS:
            self.world.inject("assignment", c.item.id)
        return self._assign(c, best=False, to=to)

    # ------------------------------------------------------------------ Schedule_D
    def propose(self, view: HostView) -> Proposal | None:
        """Ask the model which enabled action the team takes next.

        Returns:
            The proposal, or None (rejected or nothing enabled: a nonproductive step).
        """
        self.calls += 1
        opts = self._options()
        if not opts:
            return None
        labels = [o[0] for o in opts]
        cards = {o[2].item.id: o[2] for o in opts}
        user = {
            "step": view.step,
            "items": [{"item": c.item.id, "kind": c.item.kind, "status": c.status,
                       "assignee": c.assignee} for c in cards.values()],
            # local evidence only: capabilities for the kinds of the enabled items
            "workers": [{"worker": w.id, "capability": {
                k: round(v, 2) for k, v in w.capability.items()
                if k in {c.item.kind for c in cards.values()}}}
                for w in self._workers.values()],
            "options": labels,
        }
        tool = ToolSpec("take_next_action", "Choose the team's next action.",
                        object_schema({"option": enum_prop(labels, "one enabled action")}))
        got = self._decide("team coordinator", user, tool)
        if got is None:
            return None
        _, actor, card, to = opts[labels.index(str(got["option"]))]
        if actor == "lead":
            assert to is not None
            return self._assign_to(card, to)
        if actor in self._workers:
            return self._work(actor, card, feedback=False)
        return self._verify(actor, card)

    def recover(self, feedback: Feedback, view: HostView) -> Sequence[Proposal]:
        """The routed agent reads the logged feedback text and answers with a tool call.

        A rejected decision is an empty (rejected) recovery.
        """
        self.calls += 1
        agent = feedback.to
        briefs = [{"obligation": b.id, "kind": b.kind, "status": b.status,
                   "assignee": b.assignee, "missing": list(b.missing),
                   "alternatives": [[a, round(v, 3)] for a, v in b.alternatives]}
                  for b in feedback.obligations]
        user = {"you": agent, "defect": feedback.defect, "feedback": feedback.text,
                "obligations": briefs}
        if feedback.defect == "assignment":
            return self._reassign(agent, feedback, user)
        for b in feedback.obligations:
            c = self.board.get(b.id)
            if c is None:
                continue
            if agent in self._workers and (c.assignee == agent or b.assignee == agent):
                tool = ToolSpec("answer_feedback", "Answer iCORE-Audit's feedback.",
                                object_schema({"action": enum_prop(
                                    ["repair", "report_failure"],
                                    "repair: redo with fresh evidence; report_failure: "
                                    "report honestly that it cannot be done")}))
                got = self._decide(agent, user, tool)
                if got is None:
                    return ()
                c.stall_left = 0
                c.cache = None  # feedback: re-read the current specification heads
                c.assignee = agent
                if got["action"] == "report_failure":
                    c.failures = self.inst.retries + 1
                return (self._work(agent, c, feedback=True),)
            if agent in self.inst.verifiers and b.status == "submitted":
                tool = ToolSpec("answer_feedback", "Answer iCORE-Audit's feedback.",
                                object_schema({"action": enum_prop(["verify", "decline"])}))
                got = self._decide(agent, user, tool)
                if got is None or got["action"] == "decline":
                    return ()
                return (self._verify(agent, c),)
        return ()

    def _reassign(self, agent: str, feedback: Feedback, user: Mapping[str, Any]
                  ) -> Sequence[Proposal]:
        if agent != "lead":
            return ()
        cards = [(b.id, self.board[b.id]) for b in feedback.obligations if b.id in self.board]
        if not cards:
            return ()
        workers = list(self._workers)
        tool = ToolSpec("answer_feedback", "Name the worker for each affected obligation "
                                           "(the current assignee keeps it).",
                        object_schema({oid: enum_prop(workers) for oid, _ in cards}))
        got = self._decide(agent, user, tool)
        if got is None:
            return ()
        return [self._assign_to(c, str(got[oid])) for oid, c in cards
                if str(got[oid]) != c.assignee]
