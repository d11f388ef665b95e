"""The six iCORE task modes of the controlled evaluation (icore Sec. 5; design.md 4.5).

Pure: an instance is a function of ``(mode, seed)`` only, so every condition replays the
identical instance ("matched instances"). Each mode declares its validators, weights and
ground-truth terminal performance ``Perf``; :func:`declaration` builds the declaration
package D an iCORE state is kept under.

Calibration model (first principles, docs/audit.md): worker ``a`` has a skill
``s_a(k)`` per work kind ``k``; an attempt at an obligation of kind ``k:tier`` succeeds
with probability ``p = clip(s_a(k) * f(tier), 0.05, 0.98)``, ``f(easy) = 1``,
``f(hard) = 0.55``, rounded to 0.01. D declares exactly ``value(a, o) = p`` (value
calibration holds by construction). Tests catch a wrong result with probability
``coverage`` (1 except in the review mode); reviewers judge correctly with probability
``review_accuracy``. Where D declares the Proposition 4 conditions (deadline, review,
allocation: decomposable Perf, adequate validators, calibrated values), ``p_min`` is the
least probability that a certified (sound) component is correct:
``min p / (p + (1-p)(1-coverage)(1-review_accuracy))`` over declared capabilities.

=================== ======================================================= ==========
mode                structure                                               Perf
=================== ======================================================= ==========
``build_chain``     a linear chain; each stage depends on the previous one  weighted
                                                                            correct prefix
``decomposition``   subtasks (parent ``synth``) then a synthesis over all    ½ subtasks +
                                                                            ½ synthesis
``compat_merge``    part pairs sharing an interface record, then merges      merges correct
``deadline``        independent items under a tight budget                   weighted correct
``review``          items submitted for review, verified by a verifier       weighted correct
                                                                            and verified
``allocation``      many kinds, specialist workers, a noisy assigner         weighted correct
=================== ======================================================= ==========
"""

from __future__ import annotations

import enum
import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from icore.state import (
    ASSIGNER_ROLE,
    TASK_ROLE,
    AgentDecl,
    AssertionKind,
    DeclarationPackage,
    EffectTemplate,
    Interfaces,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    StateView,
    Status,
    ValidatorInput,
    ValidatorSpec,
)

KINDS = ("code", "data", "docs", "infra")
"""Work kinds; an obligation's kind is ``<kind>:<tier>``."""
TIER_FACTOR = {"easy": 1.0, "hard": 0.55}
"""Success-probability factor per difficulty tier (the calibration model)."""
TIER_WEIGHT = {"easy": 1.0, "hard": 2.0}
"""Declared weight per tier."""
VERIFIER_ROLE = "verifier"
FAILURE_PROBABILITY = 0.05
"""Declared failure probability δ of the Proposition 4 check."""


class TaskMode(enum.StrEnum):
    """The six task modes (design.md 4.5)."""

    BUILD_CHAIN = "build_chain"
    DECOMPOSITION = "decomposition"
    COMPAT_MERGE = "compat_merge"
    DEADLINE = "deadline"
    REVIEW = "review"
    ALLOCATION = "allocation"


TASK_MODES: tuple[TaskMode, ...] = tuple(TaskMode)
BOUND_MODES = frozenset({TaskMode.DEADLINE, TaskMode.REVIEW, TaskMode.ALLOCATION})
"""Modes whose D declares the Proposition 4 conditions."""


@dataclass(frozen=True, slots=True)
class WorkItem:
    """A task obligation as the environment introduces it.

    Attributes:
        id: obligation id.
        kind: ``<kind>:<tier>``.
        weight: declared weight.
        deps: obligations that must be done first.
        parent: decomposition parent, if any.
        spec: PlanFence key of the specification the work is built against.
        review: the item must be verified by a verifier before it is done.
    """

    id: str
    kind: str
    weight: float
    deps: tuple[str, ...] = ()
    parent: str | None = None
    spec: str = ""
    review: bool = False

    @property
    def tier(self) -> str:
        """``easy`` or ``hard``."""
        return self.kind.split(":", 1)[1]


@dataclass(frozen=True, slots=True)
class FaultProfile:
    """Injected faults of one simulated agent (icore Sec. 5 controlled setting).

    Attributes:
        claim: probability of claiming completion without evidence after a failed attempt.
        stall: probability of stalling when first taking up an obligation.
        stall_len: nonproductive steps a stall lasts.
        delete: probability of dropping a hard obligation without evidence.
    """

    claim: float = 0.0
    stall: float = 0.0
    stall_len: int = 0
    delete: float = 0.0
    fabricate: float = 0.0
    gaming: float = 0.0
    ignore_feedback: float = 0.0
    misread_feedback: float = 0.0
    stale_input: float = 0.0


@dataclass(frozen=True, slots=True)
class FaultSettings:
    """Faults that can fool a naive auditor, declared per setting.

    See issue 14 and docs/audit.md "Fault model". Each is a probability per
    opportunity, drawn with common random numbers, so matched instances differ only by
    what the conditions do.

    Attributes:
        fabricate: after a failed attempt, the worker presents a passing test *authored
            by another agent* (fabricated evidence; validators check authorship).
        gaming: a wrong result is presented with a test that passes a weak check (the
            plausible-but-wrong result; only review catches it where declared).
        ignore_feedback: the routed agent ignores feedback (proposes nothing).
        misread_feedback: the routed agent misreads it (a worker repeats its claim with
            no evidence; the lead moves the work to a worker the feedback did not name).
        sigma: standard deviation of the noise between declared capability values (what
            D and the lead read) and the true success probabilities.
        stale_input: a worker whose cached specification an owner revised certifies its
            work over a record it derived from the old version (its own current head,
            whose parent is the superseded specification) instead of citing the
            specification: a certificate over inputs that are no longer current, which
            only revocation along derivation lineage catches (docs/state.md).
    """

    fabricate: float = 0.0
    gaming: float = 0.0
    ignore_feedback: float = 0.0
    misread_feedback: float = 0.0
    sigma: float = 0.0
    stale_input: float = 0.0

    def label(self) -> str:
        """A short name, e.g. ``fab=0.3,sigma=0.1`` (``none`` for the default)."""
        parts = [f"{k}={v:g}" for k, v in (
            ("fab", self.fabricate), ("gaming", self.gaming), ("ignore", self.ignore_feedback),
            ("misread", self.misread_feedback), ("sigma", self.sigma),
            ("stale", self.stale_input)) if v]
        return ",".join(parts) or "none"


@dataclass(frozen=True, slots=True)
class WorkerProfile:
    """A simulated worker: true success probabilities, faults, and declared values.

    The true success probability is per obligation kind; ``declared`` holds the
    capability values D declares for it, equal to the true ones unless the instance's
    ``sigma`` > 0.
    """

    id: str
    capability: Mapping[str, float]
    faults: FaultProfile
    declared: Mapping[str, float] | None = None

    @property
    def declared_capability(self) -> Mapping[str, float]:
        """What D declares (and the lead reads)."""
        return self.capability if self.declared is None else self.declared


@dataclass(frozen=True, slots=True)
class Revision:
    """An owner revises the record of ``key`` before iteration ``step``."""

    step: int
    key: str


@dataclass(frozen=True, slots=True)
class TaskInstance:
    """One matched instance of a task mode.

    Attributes:
        mode: the task mode.
        seed: the instance seed.
        items: task obligations (introduced at the start).
        workers: worker profiles.
        verifiers: verifier ids (review mode).
        assigner_noise: standard deviation of the assigner's noise on declared values.
        coverage: probability a test catches a wrong result.
        review_accuracy: probability a verifier judges a result correctly.
        revisions: scheduled owner revisions.
        budget: iteration budget (agent calls).
        retries: failed attempts before an honest worker reports failure.
    """

    mode: TaskMode
    seed: int
    items: tuple[WorkItem, ...]
    workers: tuple[WorkerProfile, ...]
    verifiers: tuple[str, ...]
    assigner_noise: float
    coverage: float
    review_accuracy: float
    revisions: tuple[Revision, ...]
    budget: int
    retries: int = 2

    @property
    def specs(self) -> tuple[str, ...]:
        """Every specification key (sorted, unique)."""
        return tuple(sorted({i.spec for i in self.items}))

    @property
    def declares_bound(self) -> bool:
        """True when D declares the Proposition 4 conditions for this mode.

        Only where they hold: not when declared values are noisy (value calibration
        fails) or wrong results can pass the tests (validator adequacy fails).
        """
        return self.mode in BOUND_MODES and all(
            w.declared is None and w.faults.gaming == 0.0 for w in self.workers
        )

    @property
    def p_min(self) -> float:
        """Least probability that a certified component is correct (module docstring)."""
        miss = (1.0 - self.coverage) * (
            (1.0 - self.review_accuracy) if self.mode == TaskMode.REVIEW else 1.0
        )
        best = 1.0
        for w in self.workers:
            for p in w.capability.values():
                best = min(best, p / (p + (1.0 - p) * miss))
        return round(math.floor(best * 1000) / 1000, 3)


def _rng(*parts: object) -> random.Random:
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def capability(skill: float, tier: str) -> float:
    """The calibration model: success probability of an attempt (module docstring)."""
    return round(min(0.98, max(0.05, skill * TIER_FACTOR[tier])), 2)


def _kind(r: random.Random, hard: float) -> str:
    return f"{r.choice(KINDS)}:{'hard' if r.random() < hard else 'easy'}"


def _workers(
    r: random.Random, mode: TaskMode, n: int, fs: FaultSettings | None = None, seed: int = 0
) -> tuple[WorkerProfile, ...]:
    out = []
    specialist = mode == TaskMode.ALLOCATION
    stall_scale = 2.0 if mode == TaskMode.DEADLINE else 1.0
    delete_scale = 1.6 if mode == TaskMode.DECOMPOSITION else 1.0
    for i in range(n):
        skills = {}
        for k in KINDS:
            lo, hi = (0.2, 0.6) if specialist else (0.45, 0.85)
            skills[k] = r.uniform(lo, hi)
        if specialist or r.random() < 0.6:
            skills[r.choice(KINDS)] = r.uniform(0.85, 1.0)
        cap = {f"{k}:{t}": capability(s, t) for k, s in skills.items() for t in TIER_FACTOR}
        faults = FaultProfile(
            claim=0.45 if r.random() < 0.5 else 0.0,
            stall=min(0.9, 0.3 * stall_scale) if r.random() < 0.4 else 0.0,
            stall_len=r.randint(5, 8),
            delete=min(0.9, 0.4 * delete_scale) if r.random() < 0.35 else 0.0,
        )
        declared = None
        if fs is not None and fs != FaultSettings():
            faults = replace(faults, fabricate=fs.fabricate, gaming=fs.gaming,
                             ignore_feedback=fs.ignore_feedback,
                             misread_feedback=fs.misread_feedback,
                             stale_input=fs.stale_input)
            if fs.sigma > 0:
                # a separate stream: the true values (and the instance) stay the same
                nr = _rng("icore-sigma", mode, seed, i, fs.sigma)
                declared = {k: round(min(1.0, max(0.0, v + nr.gauss(0.0, fs.sigma))), 2)
                            for k, v in cap.items()}
        out.append(WorkerProfile(f"w{i + 1}", cap, faults, declared))
    return tuple(out)


def make_instance(
    mode: TaskMode | str, seed: int, faults: FaultSettings | None = None
) -> TaskInstance:
    """The matched instance ``(mode, seed)``, deterministic, under the fault setting ``faults``.

    The default setting adds no fault beyond each worker's claim/stall/delete faults.
    """
    mode = TaskMode(mode)
    r = _rng("icore-task", mode, seed)
    items: list[WorkItem] = []
    verifiers: tuple[str, ...] = ()
    coverage, accuracy, noise = 1.0, 0.85, 0.2
    n_workers = 4 + r.randint(0, 1)
    if mode == TaskMode.BUILD_CHAIN:
        n = r.randint(8, 11)
        prev: tuple[str, ...] = ()
        for i in range(n):
            k = _kind(r, 0.35)
            items.append(WorkItem(f"s{i + 1}", k, TIER_WEIGHT[k.split(":")[1]], prev,
                                  spec=f"spec/s{i + 1}"))
            prev = (f"s{i + 1}",)
        budget = 3 * n
    elif mode == TaskMode.DECOMPOSITION:
        k_n = r.randint(6, 9)
        subs = []
        for i in range(k_n):
            k = _kind(r, 0.45)
            subs.append(WorkItem(f"t{i + 1}", k, TIER_WEIGHT[k.split(":")[1]], (), "synth",
                                 spec=f"spec/t{i + 1}"))
        items = [WorkItem("synth", "docs:easy", 3.0, (), None, spec="spec/synth"), *subs]
        items[0] = WorkItem("synth", "docs:easy", 3.0, tuple(s.id for s in subs), None,
                            spec="spec/synth")
        budget = 3 * (k_n + 1)
    elif mode == TaskMode.COMPAT_MERGE:
        m = r.randint(3, 4)
        for i in range(m):
            ka, kb = _kind(r, 0.3), _kind(r, 0.3)
            items.append(WorkItem(f"a{i + 1}", ka, TIER_WEIGHT[ka.split(":")[1]],
                                  spec=f"iface/{i + 1}"))
            items.append(WorkItem(f"b{i + 1}", kb, TIER_WEIGHT[kb.split(":")[1]],
                                  spec=f"iface/{i + 1}"))
            items.append(WorkItem(f"m{i + 1}", "infra:easy", 1.0, (f"a{i + 1}", f"b{i + 1}"),
                                  spec=f"iface/{i + 1}"))
        budget = 3 * len(items)
    elif mode == TaskMode.DEADLINE:
        n = r.randint(10, 13)
        for i in range(n):
            k = _kind(r, 0.3)
            items.append(WorkItem(f"d{i + 1}", k, TIER_WEIGHT[k.split(":")[1]],
                                  spec=f"spec/d{i + 1}"))
        budget = math.ceil(1.8 * n)
    elif mode == TaskMode.REVIEW:
        n = r.randint(7, 10)
        coverage = 0.8
        verifiers = ("v1", "v2")
        for i in range(n):
            k = _kind(r, 0.35)
            items.append(WorkItem(f"r{i + 1}", k, TIER_WEIGHT[k.split(":")[1]],
                                  spec=f"spec/r{i + 1}", review=True))
        budget = 4 * n
    else:  # ALLOCATION
        n = r.randint(12, 15)
        noise = 0.35
        n_workers = 6
        for i in range(n):
            k = _kind(r, 0.3)
            items.append(WorkItem(f"c{i + 1}", k, TIER_WEIGHT[k.split(":")[1]],
                                  spec=f"spec/c{i + 1}"))
        budget = math.ceil(2.5 * n)
    workers = _workers(r, mode, n_workers, faults, seed)
    keys = sorted({i.spec for i in items})
    n_rev = r.randint(1, 3)
    revisions = tuple(
        sorted(
            (Revision(r.randint(int(0.15 * budget), int(0.7 * budget)), r.choice(keys))
             for _ in range(n_rev)),
            key=lambda v: (v.step, v.key),
        )
    )
    return TaskInstance(mode, seed, tuple(items), workers, verifiers, noise, coverage, accuracy,
                        revisions, budget)


# ------------------------------------------------------------------ D for the task modes
def _passed(inp: ValidatorInput) -> bool:
    """A passing test of the work it certifies, run by the work's author.

    The cited ``work`` event and ``test`` events, each test caused by that work, on the
    same item, authored by the same agent (fabricated evidence by another agent fails).
    """
    works = [e for e in inp.events if e.type == "work"]
    tests = [e for e in inp.events if e.type == "test"]
    if len(works) != 1 or not tests or len(works) + len(tests) != len(inp.events):
        return False
    w = works[0]
    return all(
        t.fields.get("passed") is True
        and w.id in t.causes
        and t.agent == w.agent
        and t.fields.get("item") == w.fields.get("item")
        for t in tests
    )


def _approved(inp: ValidatorInput) -> bool:
    return bool(inp.events) and all(
        e.type == "review" and e.fields.get("approved") is True for e in inp.events
    )


def _settled(inp: ValidatorInput) -> bool:
    return any(e.type == "confirm" and e.fields.get("obsolete") is True for e in inp.events)


def _completed(inp: ValidatorInput) -> bool:
    return bool(inp.payload is True)


def all_done(state: StateView) -> bool:
    """Terminal predicate of the task modes: no obligation is left to do.

    Every obligation is discharged, settled or superseded, and at least one exists.
    """
    obs = state.obligations
    return bool(obs) and all(
        o.effective_status in (Status.DISCHARGED, Status.SETTLED, Status.SUPERSEDED)
        for o in obs.values()
    )


_REASSIGNABLE = (Status.OPEN, Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING,
                 Status.FAILED)
_WORKABLE = (Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING, Status.FAILED)


def declaration(inst: TaskInstance) -> DeclarationPackage:
    """D of a task instance: observables, agents, operations, validators, interfaces."""
    S = AssertionKind.STATUS
    obs = [
        ObservableType("task", "action", ("item",)),
        ObservableType("assign", "action", ("item", "to")),
        ObservableType("work", "artifact", ("item", "spec")),
        ObservableType("test", "action", ("item", "passed")),
        ObservableType("review", "action", ("item", "approved")),
        ObservableType("message", "action", ("item",)),
        ObservableType("decompose", "action", ("item",)),
        ObservableType("confirm", "action", ("item", "obsolete")),
        ObservableType("deadline", "action", ("item",)),
    ]
    agents = [AgentDecl("env", {}, (TASK_ROLE,)), AgentDecl("lead", {}, (ASSIGNER_ROLE,))]
    agents += [AgentDecl(w.id, dict(w.declared_capability), ("worker",)) for w in inst.workers]
    agents += [AgentDecl(v, {}, (VERIFIER_ROLE,)) for v in inst.verifiers or ("v1",)]
    mine = Preconditions(status_in=_WORKABLE, assignee_is_proposer=True)
    ops = [
        OperationDecl("introduce", (f"role:{TASK_ROLE}",), Preconditions(target_required=False),
                      (EffectTemplate(AssertionKind.NODE, target="new", many=True),)),
        OperationDecl("assign", (f"role:{ASSIGNER_ROLE}",),
                      Preconditions(status_in=_REASSIGNABLE),
                      (EffectTemplate(AssertionKind.ASSIGNEE),
                       EffectTemplate(S, values=(str(Status.ASSIGNED),))),
                      productive=True),
        OperationDecl("message", ("role:worker",), Preconditions(assignee_is_proposer=True),
                      (EffectTemplate(AssertionKind.CLAIM, key="note"),)),
        OperationDecl("submit", ("role:worker",),
                      Preconditions(status_in=_WORKABLE, deps_done=True,
                                    assignee_is_proposer=True),
                      (EffectTemplate(S, values=(str(Status.DISCHARGED),)),
                       EffectTemplate(AssertionKind.RESULT)),
                      requires=("tests_pass",), productive=True),
        OperationDecl("submit_for_review", ("role:worker",),
                      Preconditions(status_in=_WORKABLE, deps_done=True,
                                    assignee_is_proposer=True),
                      (EffectTemplate(S, values=(str(Status.SUBMITTED),)),
                       EffectTemplate(AssertionKind.RESULT)),
                      requires=("tests_pass",), productive=True),
        OperationDecl("verify", (f"role:{VERIFIER_ROLE}",),
                      Preconditions(status_in=(Status.SUBMITTED,)),
                      (EffectTemplate(S, values=(str(Status.DISCHARGED),)),),
                      requires=("review_pass",), productive=True),
        OperationDecl("reject_review", (f"role:{VERIFIER_ROLE}",),
                      Preconditions(status_in=(Status.SUBMITTED,)),
                      (EffectTemplate(S, values=(str(Status.FAILED),)),)),
        OperationDecl("report_failure", ("role:worker",), mine,
                      (EffectTemplate(S, values=(str(Status.FAILED),)),)),
        OperationDecl("drop", ("role:worker",), mine,
                      (EffectTemplate(S, values=(str(Status.SUPERSEDED),)),
                       EffectTemplate(AssertionKind.RELATION, key="transported_to")),
                      removes=True, transports=True),
        OperationDecl("decompose", ("role:worker",), mine,
                      (EffectTemplate(AssertionKind.NODE, target="new", many=True),
                       EffectTemplate(S, values=(str(Status.SUPERSEDED),)),
                       EffectTemplate(AssertionKind.RELATION, key="transported_to")),
                      productive=True, removes=True, transports=True),
        OperationDecl("settle", ("role:worker",), mine,
                      (EffectTemplate(S, values=(str(Status.SETTLED),)),),
                      requires=("settlement",), settles=True, productive=True),
        OperationDecl("close", (f"role:{TASK_ROLE}",), Preconditions(),
                      (EffectTemplate(AssertionKind.TERMINAL),), requires=("completed",)),
    ]
    validators = [
        ValidatorSpec("tests_pass", _passed, "1", source="icore_lab.workloads:tests_pass"),
        ValidatorSpec("review_pass", _approved, "1", source="icore_lab.workloads:review_pass"),
        ValidatorSpec("settlement", _settled, "1", source="icore_lab.workloads:settlement"),
        ValidatorSpec("completed", _completed, "1", source="icore_lab.workloads:completed"),
    ]
    params = Parameters(
        epsilon=0.1,
        patience=4,
        tau=0.6,
        responsible_priority="assignee",
        p_min=inst.p_min if inst.declares_bound else None,
        bound_conditions=("decomposable", "validator_adequacy", "value_calibration")
        if inst.declares_bound
        else (),
    )
    return DeclarationPackage(
        name=f"icore-task-{inst.mode}",
        version="1",
        observables=obs,
        agents=agents,
        operations=ops,
        validators=validators,
        interfaces=Interfaces(terminal=all_done),
        parameters=params,
    )


def terminal_performance(inst: TaskInstance, correct: Mapping[str, bool]) -> float:
    """Ground-truth terminal performance Perf in [0, 1] (module docstring table).

    Args:
        inst: the instance.
        correct: item id -> whether its final result is correct (for the review mode:
            correct and verified) at the end of the run.
    """
    items = inst.items
    if inst.mode == TaskMode.BUILD_CHAIN:
        total = sum(i.weight for i in items)
        got, ok = 0.0, True
        for i in items:
            ok = ok and correct.get(i.id, False)
            got += i.weight if ok else 0.0
        return got / total
    if inst.mode == TaskMode.DECOMPOSITION:
        subs = [i for i in items if i.parent == "synth"]
        sw = sum(i.weight for i in subs)
        part = sum(i.weight for i in subs if correct.get(i.id, False)) / sw
        whole = correct.get("synth", False) and all(correct.get(i.id, False) for i in subs)
        return 0.5 * part + 0.5 * float(whole)
    if inst.mode == TaskMode.COMPAT_MERGE:
        merges = [i for i in items if i.id.startswith("m")]
        good = sum(1 for m in merges if all(correct.get(x, False) for x in (*m.deps, m.id)))
        return good / len(merges)
    total = sum(i.weight for i in items)
    return sum(i.weight for i in items if correct.get(i.id, False)) / total


def instances(modes: Sequence[TaskMode | str], per_mode: int, *, seed0: int = 0) -> list[
    TaskInstance
]:
    """``per_mode`` matched instances of each mode, seeds ``seed0 .. seed0+per_mode-1``."""
    return [make_instance(m, seed0 + s) for m in modes for s in range(per_mode)]
