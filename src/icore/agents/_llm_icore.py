"""An LLM-backed iCORE agent team behind an OpenAI-compatible endpoint (design.md 4.5).

:class:`LLMTeam` has the interface of :class:`~icore.agents.SimTeam` (a host policy that
also answers feedback) and the same task world: what an attempt produces is still drawn
from the calibrated world, but every *decision* is the model's: which enabled action
the team takes next (``Schedule_D``), and how the routed agent answers iCORE-Audit's
feedback (repair, report failure honestly, or reassign to a named agent). The feedback
text the model reads is exactly the text logged in X.

A reply that is not the requested JSON falls back to the first option (counted in
:attr:`LLMTeam.parse_failures`); transport errors propagate. Requires the ``openai``
package (``pip install 'icore[llm]'``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.agents._sim_world import SimWorld
from icore.agents._simulated import Card, SimTeam
from icore.audit import Feedback, HostView
from icore.state import Proposal
from icore.workloads._tasks import TaskInstance

SYSTEM = (
    "You coordinate a team of software agents working on a shared task. Each turn you get "
    "numbered options and answer with JSON only, e.g. {\"choice\": 0}. When you receive "
    "iCORE-Audit feedback, answer with {\"action\": \"repair\"} to redo the work with "
    "fresh evidence, {\"action\": \"report_failure\"} to report it honestly, or "
    "{\"action\": \"reassign\", \"to\": \"<agent>\"} to move it to a better agent."
)


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Endpoint settings.

    Attributes:
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``.
        model: model name.
        api_key: key sent to the endpoint (local servers accept anything).
        timeout_s: request timeout, in seconds.
        temperature: sampling temperature.
    """

    base_url: str
    model: str = "gpt-4o-mini"
    api_key: str = "not-needed"
    timeout_s: float = 30.0
    temperature: float = 0.0


_JSON = re.compile(r"\{.*\}", re.S)


def parse_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (models often wrap it in prose), or None."""
    m = _JSON.search(text or "")
    if m is None:
        return None
    try:
        v = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, dict) else None


@dataclass(slots=True)
class LLMTeam(SimTeam):
    """A team whose decisions come from an LLM (same interface as ``SimTeam``)."""

    settings: LLMSettings | None = None
    client: Any = None
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_failures: int = 0
    transcript: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        SimTeam.__post_init__(self)
        if self.client is None:
            if self.settings is None:
                raise ValueError("LLMTeam needs settings or a client")
            from openai import OpenAI

            self.client = OpenAI(
                base_url=self.settings.base_url,
                api_key=self.settings.api_key,
                timeout=self.settings.timeout_s,
                max_retries=0,
            )

    @classmethod
    def create(cls, inst: TaskInstance, world: SimWorld, settings: LLMSettings) -> LLMTeam:
        """A team for ``inst`` talking to the endpoint in ``settings``."""
        return cls(inst=inst, world=world, settings=settings)

    # ------------------------------------------------------------------ the model
    def _ask(self, user: str) -> dict[str, Any] | None:
        s = self.settings
        resp = self.client.chat.completions.create(
            model=s.model if s else "model",
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            temperature=s.temperature if s else 0.0,
        )
        self.requests += 1
        usage = getattr(resp, "usage", None)
        if usage is not None:
            self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        text = resp.choices[0].message.content or ""
        self.transcript.append({"user": user, "assistant": text})
        got = parse_json(text)
        if got is None:
            self.parse_failures += 1
        return got

    def _options(self) -> list[tuple[str, Card]]:
        opts = []
        for actor in self._actors:
            card = self._action_for(actor)
            if card is not None:
                opts.append((actor, card))
        return opts

    # ------------------------------------------------------------------ Schedule_D
    def propose(self, view: HostView) -> Proposal | None:
        """Ask the model which enabled action the team takes next."""
        self.calls += 1
        opts = self._options()
        if not opts:
            return None
        lines = [f"Step {view.step}. Options:"]
        for i, (actor, card) in enumerate(opts):
            what = {"lead": "assign"}.get(actor, "verify" if actor in self.inst.verifiers
                                          else "work on")
            lines.append(f"{i}: {actor} {what} {card.item.id} ({card.item.kind}, "
                         f"status {card.status})")
        lines.append('Answer {"choice": <number>}.')
        got = self._ask("\n".join(lines))
        i = got.get("choice", 0) if got else 0
        if not isinstance(i, int) or not 0 <= i < len(opts):
            self.parse_failures += 1
            i = 0
        actor, card = opts[i]
        if actor == "lead":
            return self._assign(card, best=False)
        if actor in self._workers:
            return self._work(actor, card, feedback=False)
        return self._verify(actor, card)

    def recover(self, feedback: Feedback, view: HostView) -> Sequence[Proposal]:
        """Show the model the logged feedback text and act on its answer."""
        self.calls += 1
        got = self._ask(
            f"You are {feedback.to}.\n{feedback.text}\n"
            'Answer {"action": "repair"}, {"action": "report_failure"} or '
            '{"action": "reassign", "to": "<agent>"}.'
        ) or {}
        action = got.get("action", "repair")
        if feedback.defect == "assignment" or action == "reassign":
            if feedback.to != "lead":
                return ()
            out = []
            for b in feedback.obligations:
                c = self.board.get(b.id)
                to = got.get("to") or (b.alternatives[0][0] if b.alternatives else None)
                if c is None or not isinstance(to, str) or to not in self._workers:
                    continue
                out.append(self._assign(c, best=True, to=to))
            return out
        for b in feedback.obligations:
            c = self.board.get(b.id)
            if c is None or feedback.to not in self._workers:
                continue
            c.stall_left = 0
            c.cache = None
            c.assignee = feedback.to
            if action == "report_failure":
                c.failures = self.inst.retries + 1
            return (self._work(feedback.to, c, feedback=True),)
        return ()
