"""Optional LLM failure attribution over an OpenAI-compatible endpoint, with X as context.

The three strategies of the Who&When paper (Zhang et al., ICML 2025, Sec. 4), each given
the X-derived evidence of every step (failed certificates by kind, unsound/revoked
assertions, unstable assignments, stalls, cq drops: the non-zero features of
:mod:`icore.attribution._features`) next to the message, and the learned scorer's top
candidates as hints:

- ``all-at-once``: the whole log in one request; the model names agent and step;
- ``step-by-step``: one request per candidate step, in order, asking whether this step is
  the decisive mistake; the first "yes" is the answer (bounded by ``max_steps``);
- ``hybrid``: all-at-once names the agent, then step-by-step over that agent's steps.

A reply that is not the requested JSON falls back to the scorer's prediction (counted in
:attr:`LLMAttributor.parse_failures`); transport errors propagate. The default of every
icore command stays LLM-free. Requires ``pip install 'icore[llm]'``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from icore.adapters import AdapterError, AuditResult, name_key
from icore.agents import LLMSettings, LLMUnavailable
from icore.attribution._features import Candidate, candidates
from icore.attribution._rank import Attribution, _chain, attribute
from icore.attribution._scorer import ModelSet, ScorerModel

MODES = ("all-at-once", "step-by-step", "hybrid")
"""The strategies of the Who&When paper."""

SYSTEM = (
    "You analyse the log of a failed multi-agent run and find the decisive mistake: the "
    "agent and the step (message index) whose error caused the failure. Each message comes "
    "with evidence an auditor derived from the run's state (failed checks, unstable "
    "assignments, stalls, quality drops). Answer with JSON only."
)
_JSON = re.compile(r"\{.*\}", re.S)
_EXCERPT = 600


def _parse(text: str) -> dict[str, Any] | None:
    m = _JSON.search(text or "")
    if m is None:
        return None
    try:
        v = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, dict) else None


def evidence_line(c: Candidate) -> str:
    """The X-derived evidence of one candidate.

    Its binary features that hold and its non-zero graded ones.
    """
    skip = {"position", "agent_share", "ordinal", "agent_ordinal", "to_next_failure",
            "to_stall", "is_output", "is_instruction", "is_plan", "is_bookkeeping"}
    parts = [f"{k}" if v == 1.0 else f"{k}={v:.2f}" for k, v in c.features.items()
             if v and k not in skip]
    return ", ".join(parts) or "none"


def context(result: AuditResult, cands: Sequence[Candidate], *, ground_truth: bool,
            hints: Sequence[tuple[str, int]] = ()) -> str:
    """The prompt body: task, (ground truth), every candidate message with its evidence."""
    t = result.trace
    text = {s.index: s.content for s in t.steps}
    lines = [f"Task: {t.question.strip()[:2000]}"]
    if ground_truth and t.ground_truth:
        lines.append(f"Correct answer: {t.ground_truth}")
    lines.append("Messages (index, agent, kind; excerpt; evidence):")
    for c in cands:
        body = re.sub(r"\s+", " ", text.get(c.step, ""))[:_EXCERPT]
        lines.append(f"[{c.step}] {c.agent} ({c.kind}): {body}\n    evidence: "
                     f"{evidence_line(c)}")
    if hints:
        lines.append("An evidence-based scorer ranks these first: " + "; ".join(
            f"{a} at step {s}" for a, s in hints))
    return "\n".join(lines)


@dataclass
class LLMAttributor:
    """Failure attribution by an LLM with X-derived evidence as context.

    Attributes:
        settings: the endpoint.
        mode: ``all-at-once``, ``step-by-step`` or ``hybrid``.
        ground_truth: show the run's expected answer (the "with ground truth" setting).
        model: the scorer whose top candidates are given as hints and used as fallback
            (None: the shipped model set).
        max_steps: at most this many step-by-step requests per run.
        client: an OpenAI client (made from ``settings`` when None).
        requests, parse_failures: counters.
    """

    settings: LLMSettings
    mode: str = "hybrid"
    ground_truth: bool = False
    model: ScorerModel | ModelSet | None = None
    max_steps: int = 40
    client: Any = None
    requests: int = 0
    parse_failures: int = 0
    transcript: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise AdapterError(f"unknown LLM attribution mode {self.mode!r} (use one of "
                               f"{', '.join(MODES)})", file="<llm>", field="mode")
        if self.client is None:
            try:
                from openai import OpenAI
            except ImportError as exc:  # pragma: no cover - installed with icore[llm]
                raise AdapterError("the LLM mode needs the openai package: pip install "
                                   "'icore[llm]'", file="<llm>", field="openai") from exc
            self.client = OpenAI(base_url=self.settings.base_url,
                                 api_key=self.settings.api_key,
                                 timeout=self.settings.timeout_s, max_retries=0)

    def _ask(self, user: str) -> dict[str, Any] | None:
        try:
            resp = self.client.chat.completions.create(
                model=self.settings.model,
                messages=[{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": user}],
                temperature=self.settings.temperature,
            )
        except Exception as exc:  # the client's transport and HTTP errors
            if not _is_api_error(exc):
                raise
            raise LLMUnavailable(
                f"LLM attribution: the model server at {self.settings.base_url} cannot be "
                f"used ({type(exc).__name__}: {str(exc)[:200]}); check --llm-base-url",
                base_url=self.settings.base_url, reason=type(exc).__name__) from None
        self.requests += 1
        text = resp.choices[0].message.content or ""
        self.transcript.append({"user": user, "assistant": text})
        got = _parse(text)
        if got is None:
            self.parse_failures += 1
        return got

    def _all_at_once(self, ctx: str, cands: Sequence[Candidate]) -> tuple[str, int] | None:
        got = self._ask(ctx + '\n\nWhich agent and step caused the failure? Answer '
                        '{"agent": "<name>", "step": <index>, "reason": "<why>"}.')
        if got is None:
            return None
        agent, step = got.get("agent"), got.get("step")
        if isinstance(step, str) and step.strip().isascii() and step.strip().isdigit():
            step = int(step)
        by_step = {c.step: c for c in cands}
        if isinstance(step, int) and step in by_step:
            return by_step[step].agent, step
        if isinstance(agent, str):
            mine = [c for c in cands if name_key(c.agent) == name_key(agent)]
            if mine:
                return mine[0].agent, mine[0].step
        self.parse_failures += 1
        return None

    def _step_by_step(self, ctx: str, cands: Sequence[Candidate]) -> tuple[str, int] | None:
        for c in list(cands)[: self.max_steps]:
            got = self._ask(f"{ctx}\n\nConsider step {c.step} ({c.agent}) only, given the "
                            "steps before it. Is it the decisive mistake that caused the "
                            'failure? Answer {"error": true} or {"error": false}.')
            if got is not None and got.get("error") is True:
                return c.agent, c.step
        return None

    def attribute(self, result: AuditResult) -> Attribution | None:
        """Attribute one run (None if recorded as successful).

        Raises:
            LLMUnavailable: the model server cannot be reached or answers with an HTTP
                error (the message names the base URL).
        """
        base = attribute(result, model=self.model, ground_truth=self.ground_truth)
        if base is None:
            return None
        cands = candidates(result)
        if not cands:
            return base
        hints = [(c.agent, c.step) for c in base.candidates]
        ctx = context(result, cands, ground_truth=self.ground_truth, hints=hints)
        pick: tuple[str, int] | None
        if self.mode == "all-at-once":
            pick = self._all_at_once(ctx, cands)
        elif self.mode == "step-by-step":
            pick = self._step_by_step(ctx, cands)
        else:
            first = self._all_at_once(ctx, cands)
            pick = first
            if first is not None:
                mine = [c for c in cands if c.agent == first[0]]
                pick = self._step_by_step(ctx, mine) or first
        if pick is None:
            return Attribution(base.run, base.agent, base.step, base.diagnosis, base.chain,
                               f"llm:{self.mode} (fallback {base.rule})", base.candidates,
                               base.model)
        did, chain = _chain(result, pick[1])
        return Attribution(base.run, pick[0], pick[1], did, chain, f"llm:{self.mode}",
                           base.candidates, f"{self.settings.model} via {self.settings.base_url}")


def _is_api_error(exc: BaseException) -> bool:
    """True for an error of the OpenAI client (connection, timeout, HTTP status)."""
    try:
        import openai
    except ImportError:  # pragma: no cover - a client given without the package
        return False
    return isinstance(exc, openai.APIError)


__all__ = ["MODES", "LLMAttributor", "context", "evidence_line"]
