"""PlanFence workflow templates and deterministic replay schedules.

Implements planfence Sec. 5.1, App. A.6, B and C (design.md 3.5).

Pure: no I/O, no clock. A :class:`Schedule` is a function of ``(template, params)`` only,
so every policy replays the identical schedule ("paired schedules", App. A.1).

The corpus is 30 templates = 3 families (reservation, fulfillment, deployment) x 10
seeds. One episode has ``H`` work units. Each protected action takes two of them (the plan
is formed, then the action is attempted) and every owner update takes one, so the number
of actions and updates follows from the nominal update target ``rho`` (Sec. 5.1)::

    actions = round(H / (2 + rho))
    updates = min(round(rho * actions), H - 2 * actions)

At ``H = 64`` this realizes exactly the paper's 0.25, 1.0, 42/11 = 3.82 and 14 updates
per protected action for ``rho`` = 0.25, 1, 4, 16 (11 actions and 42 updates at
``rho = 4``, Table 1). Remaining work units are idle (no public-state change).

Staged races (Sec. 5.2): ``min(actions, updates)`` actions, chosen by the seed, get one
owner revision of one of their true dependencies between plan formation and the action.
The other updates revise uniformly chosen shared keys at uniformly chosen positions, so
they may also fall between a plan and its action.

Parameters beyond the paper's primary setting: dependency count ``d``, parent depth (the
plan cites its inputs through ``depth - 1`` intermediate derived records), declared-scope
faults (omission probability, over-declaration, Fig. 6), and per-action fault injection
for the fail-closed study (App. C: owner outage, missing lineage, malformed head, second
change).
"""

from __future__ import annotations

import enum
import hashlib
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from icore.live import FAMILIES, SEEDS_PER_FAMILY

UNIT_MS = 1174.2
"""Duration of one live work unit (a role call) in ms: the median audited Qwen3.5
role-call duration; planfence Fig. 2 draws 10% of it (117.42 ms) as its reference line
(App. A.1). The controlled replay runs recorded decisions back to back and does not use
it unless asked (``icore_lab.bench.NetSpec.unit_ms``)."""

_KINDS: dict[str, tuple[str, ...]] = {
    "reservation": ("requirement", "availability", "fare", "policy", "calendar",
                    "loyalty", "budget", "traveler"),
    "fulfillment": ("order", "inventory", "address", "carrier", "payment", "stock",
                    "rate", "customs"),
    "deployment": ("build", "config", "manifest", "approval", "quota", "region",
                   "canary", "secret"),
}
_ACTIONS = {"reservation": "book", "fulfillment": "ship", "deployment": "release"}


class Fault(enum.StrEnum):
    """Per-action fault injected at the action boundary (planfence App. C)."""

    NONE = "none"
    OUTAGE = "outage"
    """The owner of the raced dependency does not answer (timeout)."""
    MISSING_LINEAGE = "missing_lineage"
    """An intermediate record of the plan's lineage is missing at the executor."""
    MALFORMED_HEAD = "malformed_head"
    """The owner's head reply for the raced dependency is malformed."""
    SECOND_CHANGE = "second_change"
    """The owner revises the raced dependency again during the one replan."""


@dataclass(frozen=True, slots=True)
class Template:
    """One workflow template: a family and a seed (30 in all).

    Attributes:
        family: ``reservation``, ``fulfillment`` or ``deployment``.
        seed: 0..9.
    """

    family: str
    seed: int

    @property
    def id(self) -> str:
        """Stable template id, e.g. ``reservation-03``."""
        return f"{self.family}-{self.seed:02d}"


TEMPLATES: tuple[Template, ...] = tuple(Template(f, s) for f in FAMILIES
                                        for s in range(SEEDS_PER_FAMILY))
"""The 30 templates, family-major."""


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    """Schedule parameters (design.md 3.5). Defaults are Table 1's primary setting.

    Attributes:
        agents: team size N (3-8); agent-0 is the executor, agent-1 the planner.
        keys: shared semantic keys |X|.
        work_units: episode length H.
        rho: nominal update target per protected action.
        deps: true dependencies per action d.
        depth: parent hops from the plan to its dependency records (1 = direct).
        content_bytes: approximate size of one record's content ("compact" state).
        staged: stage one revision between plan and action for min(actions, updates)
            actions.
        omit_prob: probability that each true dependency but the first is left out of
            the declared scope D(a) (Fig. 6 left).
        overdeclare: extra keys declared (and cited by the plan) beyond the true ones
            (Fig. 6 right).
        fault: fault injected at every staged-race action (App. C).
        race_seed: extra seed mixed in (App. C: 100 race seeds per template).
        master_seed: the run's seed (CLI ``--seed``).
        artifact_bytes: size of the changed public artifact every protected action
            fetches and verifies twice (the large-artifact control of App. A.6 / B);
            0 = none. It does not shape the schedule: with and without the artifact
            the steps are identical.
    """

    agents: int = 5
    keys: int = 8
    work_units: int = 64
    rho: float = 4.0
    deps: int = 1
    depth: int = 1
    content_bytes: int = 96
    staged: bool = True
    omit_prob: float = 0.0
    overdeclare: int = 0
    fault: Fault = Fault.NONE
    race_seed: int = 0
    master_seed: int = 0
    artifact_bytes: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.agents <= 64:
            raise ValueError(f"agents must be in [2, 64], not {self.agents}")
        if self.keys < 1 or self.work_units < 2 or self.rho < 0:
            raise ValueError("keys >= 1, work_units >= 2 and rho >= 0 are required")
        if not 1 <= self.deps <= self.keys:
            raise ValueError(f"deps must be in [1, keys], not {self.deps}")
        if self.deps + self.overdeclare > self.keys:
            raise ValueError("deps + overdeclare must not exceed keys")
        if self.depth < 1 or not 0.0 <= self.omit_prob <= 1.0:
            raise ValueError("depth >= 1 and omit_prob in [0, 1] are required")
        if not 0 <= self.artifact_bytes <= 1024 * 1024:
            raise ValueError(f"artifact_bytes must be in [0, 1 MiB], not {self.artifact_bytes}")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        d = asdict(self)
        d["fault"] = self.fault.value
        return d


def action_update_counts(work_units: int, rho: float) -> tuple[int, int]:
    """Return ``(actions, updates)`` for an episode (see module docstring)."""
    actions = max(1, round(work_units / (2.0 + rho)))
    actions = min(actions, work_units // 2)
    updates = max(0, min(round(rho * actions), work_units - 2 * actions))
    return actions, updates


# --- schedule steps -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Update:
    """The owner of ``key`` commits a new version (one work unit).

    Attributes:
        key: the revised shared key.
        owner: its owner o(key).
        value: the new content value (deterministic).
        race_for: the action this revision races (None for background churn).
    """

    key: str
    owner: str
    value: str
    race_for: int | None = None


@dataclass(frozen=True, slots=True)
class PlanStep:
    """The planner forms the plan of action ``action`` (one work unit).

    Attributes:
        action: action index within the episode.
        true_deps: keys whose values the action's arguments really depend on.
        declared: the tool wrapper's declared scope D(a).
        cited: keys the plan cites (true deps plus over-declared keys).
        depth: parent hops from the plan root to the dependency records.
    """

    action: int
    true_deps: tuple[str, ...]
    declared: tuple[str, ...]
    cited: tuple[str, ...]
    depth: int


@dataclass(frozen=True, slots=True)
class ActStep:
    """The executor attempts protected action ``action`` (one work unit).

    Attributes:
        action: action index.
        raced: whether a revision of a true dependency was staged since its plan.
        fault: fault injected at this action boundary.
        fault_key: the dependency the fault targets (the raced key).
    """

    action: int
    raced: bool
    fault: Fault = Fault.NONE
    fault_key: str | None = None


@dataclass(frozen=True, slots=True)
class Idle:
    """A work unit without public-state change."""


Step = Update | PlanStep | ActStep | Idle


@dataclass(frozen=True)
class Schedule:
    """A deterministic episode schedule (identical under every policy).

    Attributes:
        template: the template.
        params: the parameters it was built from.
        agents: agent ids; ``agents[0]`` executes, ``agents[1]`` plans.
        executor / planner: the two roles.
        keys: the shared semantic keys X.
        owners: key -> owner o(x) (agents other than the executor).
        initial: key -> initial content value.
        steps: the work units in order.
        action_name: the family's protected tool name.
        n_actions / n_updates / n_races: counts.
    """

    template: Template
    params: WorkloadParams
    agents: tuple[str, ...]
    executor: str
    planner: str
    keys: tuple[str, ...]
    owners: Mapping[str, str]
    initial: Mapping[str, str]
    steps: tuple[Step, ...]
    action_name: str
    n_actions: int
    n_updates: int
    n_races: int = field(default=0)


def _rng(template: Template, params: WorkloadParams) -> random.Random:
    # a stable digest (never Python's salted hash) of everything that shapes the schedule
    p = params.to_dict()
    p.pop("artifact_bytes", None)  # the artifact rides on the actions, not the schedule
    text = f"{template.family}|{template.seed}|" + "|".join(f"{k}={p[k]}" for k in sorted(p))
    digest = hashlib.sha256(text.encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _value(rng: random.Random, kind: str, n: int, size: int) -> str:
    body = f"{kind}:{n}:" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                    for _ in range(max(8, size - 40)))
    return body


def build_schedule(template: Template, params: WorkloadParams | None = None) -> Schedule:
    """Build the schedule of one template under ``params`` (pure, deterministic).

    Args:
        template: one of :data:`TEMPLATES` (any family/seed pair is accepted).
        params: :class:`WorkloadParams` (default: Table 1 primary setting).

    Returns:
        The :class:`Schedule`.

    Raises:
        ValueError: an unknown family or inconsistent parameters.
    """
    params = params or WorkloadParams()
    if template.family not in _KINDS:
        raise ValueError(f"unknown family {template.family!r}; expected one of {FAMILIES}")
    rng = _rng(template, params)
    fam = template.family
    agents = tuple(f"agent-{i}" for i in range(params.agents))
    executor, planner = agents[0], agents[1]
    kinds = _KINDS[fam]
    keys = tuple(f"{fam}/{kinds[i % len(kinds)]}-{i // len(kinds)}"
                 for i in range(params.keys))
    owner_pool = list(agents[1:])
    rng.shuffle(owner_pool)
    owners = {k: owner_pool[i % len(owner_pool)] for i, k in enumerate(keys)}
    initial = {k: _value(rng, k, 0, params.content_bytes) for k in keys}
    revision = dict.fromkeys(keys, 0)

    n_act, n_upd = action_update_counts(params.work_units, params.rho)
    n_races = min(n_act, n_upd) if params.staged else 0
    raced = set(rng.sample(range(n_act), n_races))

    def update(key: str, race_for: int | None) -> Update:
        revision[key] += 1
        return Update(key, owners[key], _value(rng, key, revision[key],
                                               params.content_bytes), race_for)

    # races and churn are placed as ("race"|"churn", key, action) markers first and
    # turned into Update steps in order, so revision numbers follow schedule order
    blocks: list[list[Any]] = []
    for a in range(n_act):
        true_deps = tuple(sorted(rng.sample(keys, params.deps)))
        declared = [true_deps[0]]
        for k in true_deps[1:]:
            if not (params.omit_prob > 0 and rng.random() < params.omit_prob):
                declared.append(k)
        extra: list[str] = []
        if params.overdeclare:
            pool = [k for k in keys if k not in true_deps]
            extra = sorted(rng.sample(pool, params.overdeclare))
        cited = tuple(sorted({*true_deps, *extra}))
        plan = PlanStep(a, true_deps, tuple(sorted({*declared, *extra})), cited,
                        params.depth)
        block: list[Any] = [plan]
        fault, fault_key = Fault.NONE, None
        if a in raced:
            rkey = rng.choice(true_deps)
            block.append(("race", rkey, a))
            fault, fault_key = params.fault, rkey
        block.append(ActStep(a, a in raced, fault, fault_key))
        blocks.append(block)
    # background churn: the updates not used by races, at uniform positions
    flat: list[Any] = [s for b in blocks for s in b]
    for _ in range(n_upd - n_races):
        flat.insert(rng.randrange(len(flat) + 1), ("churn", rng.choice(keys), None))
    steps: list[Step] = []
    for s in flat:
        if isinstance(s, tuple):
            steps.append(update(s[1], s[2]))
        else:
            steps.append(s)
    steps.extend(Idle() for _ in range(params.work_units - len(steps)))
    return Schedule(template=template, params=params, agents=agents, executor=executor,
                    planner=planner, keys=keys, owners=owners, initial=initial,
                    steps=tuple(steps), action_name=_ACTIONS[fam], n_actions=n_act,
                    n_updates=n_upd, n_races=n_races)


def schedules(params: WorkloadParams | None = None,
              templates: tuple[Template, ...] = TEMPLATES) -> list[Schedule]:
    """Build the schedules of every template under ``params``."""
    return [build_schedule(t, params) for t in templates]


__all__ = [
    "FAMILIES",
    "SEEDS_PER_FAMILY",
    "TEMPLATES",
    "UNIT_MS",
    "ActStep",
    "Fault",
    "Idle",
    "PlanStep",
    "Schedule",
    "Step",
    "Template",
    "Update",
    "WorkloadParams",
    "action_update_counts",
    "build_schedule",
    "schedules",
]
