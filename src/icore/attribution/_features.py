"""Per-candidate features for failure attribution, read from an audited run's X.

A *candidate* is one (agent, step) pair of a failed run: a recorded message of a team
member (every speaker except the human who poses the task and the code-running terminal,
whose outputs are attributed to the code they ran). Each candidate gets the features of
:data:`FEATURES`, all derived from X = (G, Q, Π) after the audit (icore Sec. 3-4;
docs/audit-real-runs.md, "Failure attribution"):

- Π: certificates that failed at the step, by kind (``output_evidence`` by reason,
  ``ledger_evidence``); assertions the step made that are unsound or later revoked
  (superseded);
- Q: ε-unstable assignments (capability mismatch, the gain of Def. 9) and reassignments;
- G: stall onset and loops (progress events), repeated observations, the coverage of the
  instruction an output answers (the first divergence between an instruction and its
  answer), tool runs that failed;
- metrics: where cq (and astab) first drop.

Relative-position features ("before the first failed certificate", "steps until the
stall") encode the paper's observation that the decisive mistake precedes the failure it
causes. No feature reads an agent's name, the file or the question: structural features
use the framework's roles only (assigner/planner, tool), so a model over them transfers
to runs it has not seen.

Features that need the run's ground-truth answer are marked ``gt`` and are used only in
the "with ground truth" setting (the Who&When paper's two settings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icore.adapters import (
    HUMAN,
    AuditResult,
    Step,
    StepKind,
    assumes,
    content_words,
    normalize_answer,
    numbers,
    output_facts,
    tool_facts,
)
from icore.state import AssertionKind, State, Status


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature of a candidate: name, what it measures, whether it needs ground truth."""

    name: str
    description: str
    gt: bool = False


FEATURES: tuple[Feature, ...] = (
    Feature("is_output", "the step is an agent's output (an artifact in G)"),
    Feature("is_instruction", "the step routes an instruction (assigner role)"),
    Feature("is_plan", "the step is a plan or replan (planner role)"),
    Feature("is_bookkeeping", "the step is a ledger or other orchestrator thought"),
    Feature("position", "relative position of the step in the run (0 = first message)"),
    Feature("first_of_agent", "the speaker's first message in the run"),
    Feature("agent_share", "share of the run's candidate steps spoken by this agent"),
    Feature("ordinal", "log(1 + earlier candidate steps of the same kind)"),
    Feature("agent_ordinal", "log(1 + earlier messages of the same speaker)"),
    Feature("cert_failed", "the step's output_evidence certificate failed (unsupported)"),
    Feature("cert_error", "... failed because the output reports an error"),
    Feature("cert_repeat", "... failed because the output repeats an observation"),
    Feature("cert_code", "... failed because its code failed, printed nothing or never ran"),
    Feature("cert_claim", "... failed because it concludes without observed evidence"),
    Feature("first_failed", "the earliest failed certificate of the run"),
    Feature("before_first_failure", "the step precedes the first failed certificate"),
    Feature("to_next_failure", "steps until the next failed certificate / run length"),
    Feature("ledger_unsupported", "an orchestrator claim at the step failed ledger_evidence"),
    Feature("unsound", "share of the step's assertions that are unsound"),
    Feature("revoked", "what the step asserted was later revoked: the obligation it "
            "created was superseded, or its result replaced"),
    Feature("unstable_assign", "the step made an ε-unstable assignment (capability mismatch)"),
    Feature("assign_gain", "the gain of that assignment (Def. 9), 0 when stable"),
    Feature("reassigned", "the speaker's obligation was reassigned to another agent later"),
    Feature("before_stall", "the step precedes the run's first stall (stall onset)"),
    Feature("to_stall", "steps until the next stall or loop / run length (1: none)"),
    Feature("in_loop", "a ledger at or before the step admits a loop"),
    Feature("repeat_obs", "the output repeats an observation the run already had"),
    Feature("divergence", "share of the answered instruction's words absent from the output"),
    Feature("first_divergence", "the run's first output answering less than half its "
            "instruction"),
    Feature("cq_drop", "how much cq dropped at the step (0: no drop)"),
    Feature("first_cq_drop", "the step where cq first drops"),
    Feature("astab_drop", "how much astab dropped at the step"),
    Feature("novel_numbers", "log(1 + numbers the message states that appear nowhere in G "
            "before it), for messages that observed nothing (no page, no code run)"),
    Feature("first_novel", "the run's first message stating numbers G does not show"),
    Feature("assumes", "the message marks its result as assumed, simulated or estimated"),
    Feature("first_assumes", "the run's first such message"),
    Feature("after_tool_error", "the message answers a tool run that failed"),
    Feature("offers_code", "the message offers code to run"),
    Feature("claims", "the message states a conclusion"),
    Feature("first_claim", "the run's first message stating a conclusion"),
    Feature("introduces_answer", "the first message stating the run's (failed) final answer"),
    Feature("mentions_gt", "the message contains the ground-truth answer", gt=True),
    Feature("after_gt", "the ground-truth answer appeared earlier in the run", gt=True),
)
"""The features, in model order."""

FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)


def feature_names(*, ground_truth: bool) -> tuple[str, ...]:
    """The names used in one setting (without ground truth: the ``gt`` features dropped)."""
    return tuple(f.name for f in FEATURES if ground_truth or not f.gt)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One (agent, step) candidate of a failed run, with its features.

    Attributes:
        agent: the speaker of the step.
        step: index into the source history.
        kind: the step kind (``output``, ``instruction``, ...).
        features: feature name -> value (all of :data:`FEATURE_NAMES`).
    """

    agent: str
    step: int
    kind: str
    features: Mapping[str, float]

    def vector(self, names: Sequence[str]) -> list[float]:
        """The feature values in ``names`` order."""
        return [float(self.features[n]) for n in names]


def _is_candidate(s: Step, tools: set[str]) -> bool:
    return s.agent != HUMAN and s.kind not in (StepKind.TASK, StepKind.TOOL_OUTPUT) \
        and s.agent not in tools


def _contains(text: str, needle: str) -> bool:
    """``needle`` (normalized) occurs in ``text`` (normalized) on word boundaries."""
    if not needle:
        return False
    hay = f" {normalize_answer(text)} "
    return f" {needle} " in hay


def _step_of(result: AuditResult, event_ids: Sequence[str]) -> int | None:
    for e in event_ids:
        s = result.event_step(e)
        if s is not None:
            return s
    return None


_CACHE: dict[int, tuple[AuditResult, tuple[Candidate, ...]]] = {}
_CACHE_SIZE = 1024


def candidates(result: AuditResult) -> list[Candidate]:
    """The candidates of an audited run with every feature of :data:`FEATURES`.

    The ``gt`` features are computed when the trace has a ground truth (0 otherwise);
    :func:`feature_names` chooses which ones a model uses. Results are cached per
    result object (X is not changed after the audit).
    """
    hit = _CACHE.get(id(result))
    if hit is not None and hit[0] is result:
        return list(hit[1])
    out = _candidates(result)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(result)] = (result, tuple(out))
    return out


def _candidates(result: AuditResult) -> list[Candidate]:
    t = result.trace
    x = result.state
    n = max(t.length, 1)
    tools = _role(x, "tool")
    planners = _role(x, "planner")
    cands = [s for s in t.steps if _is_candidate(s, tools)]
    if not cands:
        return []
    idx = {s.index for s in cands}

    # Π: certificates and assertions by source step
    failed_cert: dict[int, str] = {}
    ledger_bad: set[int] = set()
    n_assert: dict[int, int] = {}
    n_unsound: dict[int, int] = {}
    revoked: set[int] = set()
    for a in x.assertions.values():
        j = x.justifications.get(a.id)
        if j is None:
            continue
        st = _step_of(result, j.events)
        if st is None:
            continue
        n_assert[st] = n_assert.get(st, 0) + 1
        if not x.assertion_sound(a.id):
            n_unsound[st] = n_unsound.get(st, 0) + 1
        if a.kind == AssertionKind.NODE and a.obligation in x.obligations and \
                x.obligations[a.obligation].effective_status == Status.SUPERSEDED:
            revoked.add(st)  # the obligation it created was superseded (e.g. a replan)
        elif a.kind == AssertionKind.RESULT and x.superseded_by(a.id) is not None:
            revoked.add(st)  # the result it submitted was replaced
    for c in x.certificates.values():
        if c.verdict:
            continue
        st = _step_of(result, c.events[:1])
        if st is None:
            continue
        if c.validator == "output_evidence":
            failed_cert.setdefault(st, _reason(result, c.events, c.payload))
        elif c.validator == "ledger_evidence":
            ledger_bad.add(st)
    fail_steps = sorted(failed_cert)
    first_fail = fail_steps[0] if fail_steps else None

    # Q: assignments
    unstable: dict[int, float] = {}
    for d in result.diagnoses:
        if d.defect == "assignment" and d.step is not None:
            unstable[d.step] = max(unstable.get(d.step, 0.0), _gain(x, d.obligations))
    reassigned = _reassigned_steps(result)

    # G: progress events
    stall_steps = sorted({d.step for d in result.diagnoses
                          if d.defect == "progress" and d.step is not None})
    first_stall = stall_steps[0] if stall_steps else None
    loop_from = min((s.index for s in t.steps if s.ledger is not None
                     and s.ledger.is_in_loop is True), default=None)

    # metrics: cq / astab drops
    prev_cq, prev_astab = 1.0, 1.0
    drop: dict[int, tuple[float, float]] = {}
    for p in result.timeline:
        drop[p.step] = (max(0.0, prev_cq - p.cq), max(0.0, prev_astab - p.astab))
        prev_cq, prev_astab = p.cq, p.astab
    first_drop = min((s for s, (dc, _) in drop.items() if dc > 1e-9), default=None)

    # instructions and what answers them; repeated observations
    divergence = _divergence(t.steps)
    first_div = min((s for s, v in divergence.items() if v > 0.5), default=None)
    seen: set[str] = set()
    repeat: set[int] = set()
    for s in t.steps:
        if s.kind != StepKind.OUTPUT:
            continue
        key = normalize_answer(s.content)
        if len(key) > 20 and key in seen:
            repeat.add(s.index)
        seen.add(key)

    # unsupported numbers, assumption markers, tool failures, claims
    known: set[str] = set(numbers(t.question))
    novel: dict[int, int] = {}
    facts: dict[int, dict[str, object]] = {}
    after_err: set[int] = set()
    last_tool_error = False
    for s in t.steps:
        if s.kind == StepKind.TOOL_OUTPUT or s.agent in tools:
            last_tool_error = bool(tool_facts(s.content, s.exitcode)["error"])
            known |= numbers(s.content)
            continue
        fx = output_facts(s.content)
        facts[s.index] = fx
        nums = numbers(s.content)
        observed = fx["page"] is not None or fx["code"]
        if s.kind in (StepKind.OUTPUT, StepKind.PLAN) and not observed:
            novel[s.index] = len(nums - known)
        if last_tool_error and s.kind == StepKind.OUTPUT:
            after_err.add(s.index)
        last_tool_error = False
        known |= nums
    first_novel = min((i for i, v in novel.items() if v > 0 and i in idx), default=None)
    first_assume = next((s.index for s in cands if assumes(s.content)), None)
    first_claim = next((s.index for s in cands if facts[s.index]["claims"]), None)

    final = _final_answer(t.steps)
    intro = next((s.index for s in cands if final and _contains(s.content, final)), None)
    gt = normalize_answer(t.ground_truth)
    gt_first = next((s.index for s in t.steps if s.kind != StepKind.TASK and gt
                     and _contains(s.content, gt)), None)

    share: dict[str, int] = {}
    for s in cands:
        share[s.agent] = share.get(s.agent, 0) + 1
    seen_agents: set[str] = set()
    by_kind: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    out: list[Candidate] = []
    for s in cands:
        i = s.index
        fx = facts[i]
        reason = failed_cert.get(i)
        nxt = next((f for f in fail_steps if f >= i), None)
        nstall = next((f for f in stall_steps if f >= i), None)
        dc, da = drop.get(i, (0.0, 0.0))
        f = {
            "is_output": float(s.kind == StepKind.OUTPUT or (
                s.kind == StepKind.PLAN and s.agent not in planners)),
            "is_instruction": float(s.kind == StepKind.INSTRUCTION),
            "is_plan": float(s.kind == StepKind.PLAN),
            "is_bookkeeping": float(s.kind in (StepKind.LEDGER, StepKind.THOUGHT,
                                               StepKind.STALL, StepKind.TERMINATION)),
            "position": i / n,
            "first_of_agent": float(s.agent not in seen_agents),
            "agent_share": share[s.agent] / len(cands),
            "ordinal": math.log1p(by_kind.get(s.kind.value, 0)),
            "agent_ordinal": math.log1p(by_agent.get(s.agent, 0)),
            "cert_failed": float(reason is not None),
            "cert_error": float(reason == "error"),
            "cert_repeat": float(reason == "repeat"),
            "cert_code": float(reason == "code"),
            "cert_claim": float(reason == "claim"),
            "first_failed": float(i == first_fail),
            "before_first_failure": float(first_fail is not None and i < first_fail),
            "to_next_failure": ((nxt - i) / n) if nxt is not None else 1.0,
            "ledger_unsupported": float(i in ledger_bad),
            "unsound": n_unsound.get(i, 0) / n_assert[i] if n_assert.get(i) else 0.0,
            "revoked": float(i in revoked),
            "unstable_assign": float(i in unstable),
            "assign_gain": unstable.get(i, 0.0),
            "reassigned": float(i in reassigned),
            "before_stall": float(first_stall is not None and i < first_stall),
            "to_stall": ((nstall - i) / n) if nstall is not None else 1.0,
            "in_loop": float(loop_from is not None and i >= loop_from),
            "repeat_obs": float(i in repeat),
            "divergence": divergence.get(i, 0.0),
            "first_divergence": float(i == first_div),
            "cq_drop": dc,
            "first_cq_drop": float(i == first_drop),
            "astab_drop": da,
            "novel_numbers": math.log1p(novel.get(i, 0)),
            "first_novel": float(i == first_novel),
            "assumes": float(assumes(s.content)),
            "first_assumes": float(i == first_assume),
            "after_tool_error": float(i in after_err),
            "offers_code": float(bool(fx["code"])),
            "claims": float(bool(fx["claims"])),
            "first_claim": float(i == first_claim),
            "introduces_answer": float(i == intro),
            "mentions_gt": float(bool(gt) and _contains(s.content, gt)),
            "after_gt": float(gt_first is not None and gt_first < i),
        }
        seen_agents.add(s.agent)
        by_kind[s.kind.value] = by_kind.get(s.kind.value, 0) + 1
        by_agent[s.agent] = by_agent.get(s.agent, 0) + 1
        out.append(Candidate(s.agent, i, s.kind.value, f))
    return out


def _role(x: State, role: str) -> set[str]:
    """The agents of D with ``role`` (``planner``, ``tool``, ...)."""
    return {a for a, d in x.decl.agents.items() if role in d.roles}


def _reason(result: AuditResult, events: Sequence[str], payload: object) -> str:
    """Why an ``output_evidence`` certificate failed: error, repeat, code or claim."""
    x = result.state
    fields = x.events[events[0]].fields if events and events[0] in x.events else {}
    if fields.get("error"):
        return "error"
    p = payload if isinstance(payload, Mapping) else {}
    if fields.get("digest") in set(p.get("seen_digests", ())) or (
            fields.get("interaction") and fields.get("page") in set(p.get("seen_pages", ()))):
        return "repeat"
    if fields.get("code"):
        return "code"
    return "claim"


def _gain(x: State, obligations: Sequence[str]) -> float:
    """The largest gain (Def. 9) among the obligations, 0 when none exists."""
    return max((float(x.gain(o)) for o in obligations if o in x.obligations), default=0.0)


def _reassigned_steps(result: AuditResult) -> set[int]:
    """Steps whose obligation's assignee assertion was superseded by another agent's."""
    x = result.state
    out: set[int] = set()
    for a in x.assertions.values():
        if a.kind != AssertionKind.ASSIGNEE:
            continue
        new = x.superseded_by(a.id)
        if new is None or x.assertions[new].value == a.value:
            continue
        j = x.justifications.get(a.id)
        st = _step_of(result, j.events) if j is not None else None
        if st is not None:
            out.add(st)
    return out


def _divergence(steps: Sequence[Step]) -> dict[int, float]:
    """Output step -> share of its instruction's content words that the output lacks.

    The instruction is the one routed to the output's agent; a previous message
    addressed to nobody in particular is not used.
    """
    out: dict[int, float] = {}
    pending: dict[str, set[str]] = {}
    for s in steps:
        if s.kind == StepKind.INSTRUCTION and s.to:
            pending[s.to] = content_words(s.content)
        elif s.kind == StepKind.OUTPUT and s.agent in pending:
            want = pending.pop(s.agent)
            if want:
                have = content_words(s.content)
                out[s.index] = len(want - have) / len(want)
    return out


_FINAL_LINE = re.compile(r"(?im)^\s*(?:final answer|the answer is)\s*[:\-]?\s*(?P<a>.+)$")


def _final_answer(steps: Sequence[Step]) -> str:
    """The run's final answer, normalized; empty when none is stated.

    The answer stated by the termination, else the last ``final answer:`` line of the run.
    """
    for s in reversed(steps):
        if s.final_answer:
            return normalize_answer(s.final_answer)
    for s in reversed(steps):
        found = _FINAL_LINE.findall(s.content)
        if found:
            return normalize_answer(found[-1])
    return ""


__all__ = [
    "FEATURES",
    "FEATURE_NAMES",
    "Candidate",
    "Feature",
    "candidates",
    "feature_names",
]
