"""Components of a declaration package D (icore Sec. 3; design.md 4.1).

The parts D = (O_D, M_D, Ω, V, I_D) is built from: observable types, agents, operations
with their effect templates and preconditions, validator specs, the ``progress``
transition, the parameters (ε, H, τ, Prop. 4). Plain frozen data; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from icore.state._xmodel import (
    JSON,
    Assertion,
    AssertionKind,
    CitedRecord,
    Event,
    Proposal,
    Status,
)

TASK_ROLE = "task"
"""Role of the agent that introduces task obligations (the environment)."""
ASSIGNER_ROLE = "assigner"
"""Default role authorized to revise assignments (design.md 4.1 "assignment authority")."""
BOUND_CONDITIONS = frozenset({"decomposable", "validator_adequacy", "value_calibration"})
_UNKNOWN: Any = object()
"""Sentinel: the previous value of a slot is not known (every assertion counts)."""
"""Conditions D must declare for cq to be reported as a performance bound (icore Prop. 4)."""



# --------------------------------------------------------------------------- components
@dataclass(frozen=True, slots=True)
class ObservableType:
    """An observable action or artifact type of O_D.

    Attributes:
        name: type name used by events.
        kind: ``"action"`` or ``"artifact"``.
        fields: semantic fields every event of this type must carry (extra fields allowed).
    """

    name: str
    kind: Literal["action", "artifact"] = "action"
    fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentDecl:
    """An agent of M_D.

    Attributes:
        id: agent id.
        capabilities: work kind -> declared capability value in [0, 1] (the built-in
            ``value`` and ``feasible`` interfaces read it).
        roles: roles such as ``assigner``, ``verifier``, ``task``.
    """

    id: str
    capabilities: Mapping[str, float] = field(default_factory=dict)
    roles: tuple[str, ...] = ()


EffectTarget = Literal["subject", "new", "any"]


@dataclass(frozen=True, slots=True)
class EffectTemplate:
    """One declared effect of an operation (an assertion template).

    Attributes:
        kind: the assertion kind.
        values: allowed values (None: any value).
        key: required slot key (None: any key).
        target: ``subject`` (the proposal's target), ``new`` (an obligation created by
            the same proposal) or ``any``.
        many: the template may be matched by one or more effects (else exactly one).
    """

    kind: AssertionKind
    values: tuple[JSON, ...] | None = None
    key: str | None = None
    target: EffectTarget = "subject"
    many: bool = False


@dataclass(frozen=True, slots=True)
class Preconditions:
    """Declared preconditions of an operation, checked on the proposal's target.

    Attributes:
        status_in: the target's effective status must be one of these (None: any).
        deps_done: every dependency of the target is discharged or settled.
        assignee_is_proposer: the target is assigned to the proposer.
        target_required: the proposal must name an existing target obligation.
    """

    status_in: tuple[Status, ...] | None = None
    deps_done: bool = False
    assignee_is_proposer: bool = False
    target_required: bool = True


@dataclass(frozen=True, slots=True)
class OperationDecl:
    """An operation of Ω (icore Def. 6).

    Attributes:
        name: operation name.
        proposers: who may propose it: agent ids, ``role:<role>`` or ``*``.
        preconditions: checked on the target.
        effects: the declared effects; a proposal's effects must match them exactly.
        requires: validator names whose passing certificates the proposal must carry.
        productive: the operation advances work (used by ``progress``).
        removes: it may take obligations out of W (status ``superseded``).
        transports: removal is backed by a ``transported_to`` relation.
        settles: removal/settlement is backed by a passing certificate.
    """

    name: str
    proposers: tuple[str, ...] = ("*",)
    preconditions: Preconditions = field(default_factory=Preconditions)
    effects: tuple[EffectTemplate, ...] = ()
    requires: tuple[str, ...] = ()
    productive: bool = False
    removes: bool = False
    transports: bool = False
    settles: bool = False


@dataclass(frozen=True, slots=True)
class ValidatorInput:
    """What a validator sees: cited events, cited records, payload, its parameters."""

    events: tuple[Event, ...]
    records: tuple[CitedRecord, ...]
    payload: JSON
    params: Mapping[str, JSON]


ValidatorFn = Callable[[ValidatorInput], bool]


@dataclass(frozen=True, slots=True)
class ValidatorSpec:
    """A validator of V: a deterministic, versioned check.

    Attributes:
        name: validator name (also the certificate kind).
        fn: the check; must be deterministic and return a bool.
        version: version string recorded in every certificate.
        params: JSON parameters passed in :class:`ValidatorInput`.
        source: where it came from (``builtin:<name>`` or ``module:attr``).
    """

    name: str
    fn: ValidatorFn
    version: str = "1"
    params: Mapping[str, JSON] = field(default_factory=dict)
    source: str = "<python>"


@dataclass(frozen=True, slots=True)
class Transition:
    """A committed transition, as given to the ``progress`` interface (icore Alg. 1).

    Attributes:
        operation: the operation's declaration.
        proposal: the proposal.
        assertions: the assertions it commits.
        before: for each assertion (same order), the value its slot held before (None
            when the slot was empty), so ``progress`` can tell a change from a
            re-assertion.
        fields: D's declared progress fields (``parameters.progress_fields``).
    """

    operation: OperationDecl
    proposal: Proposal
    assertions: tuple[Assertion, ...]
    before: tuple[JSON, ...] = ()
    fields: tuple[str, ...] = ("status", "result")

    def changed(self) -> tuple[Assertion, ...]:
        """Assertions of a declared progress field whose value differs from the slot's previous one.

        A re-assertion of the same value is not a change.
        """
        before = self.before if len(self.before) == len(self.assertions) else (
            (_UNKNOWN,) * len(self.assertions)
        )
        return tuple(
            a
            for a, old in zip(self.assertions, before, strict=True)
            if str(a.kind) in self.fields and (old is _UNKNOWN or old != a.value)
        )


class DiagnosisLike(Protocol):
    """What ``responsible`` needs from a diagnosis F (icore Sec. 4; design.md 4.4)."""

    @property
    def defect(self) -> str:
        """``"work"``, ``"evidence"`` or ``"assignment"``."""
        ...

    @property
    def obligations(self) -> Sequence[str]:
        """Affected obligation ids."""
        ...

    @property
    def proposer(self) -> str | None:
        """Proposer of the flagged attempt, if any."""
        ...


@dataclass(frozen=True, slots=True)
class Parameters:
    """Parameters of D (design.md 4.1, 4.3).

    Attributes:
        epsilon: stability tolerance ε (Def. 9), >= 0.
        patience: H, iterations without progress before a trigger, >= 1.
        tau: quality threshold τ in [0, 1].
        responsible_priority: ``"assignee"`` or ``"proposer"`` first for work defects.
        p_min: success probability of a sound-and-stable component (Prop. 4), or None.
        bound_conditions: conditions D declares (``decomposable``, ``validator_adequacy``,
            ``value_calibration``); all three plus ``p_min`` make Prop. 4 a bound.
        progress_fields: assertion kinds whose *change* counts as progress (the
            built-in ``progress`` and per-obligation patience), default status, result.
    """

    epsilon: float = 0.1
    patience: int = 5
    tau: float = 0.5
    responsible_priority: Literal["assignee", "proposer"] = "assignee"
    p_min: float | None = None
    bound_conditions: tuple[str, ...] = ()
    progress_fields: tuple[str, ...] = ("status", "result")

    @property
    def bound_declared(self) -> bool:
        """True when D declares every Prop. 4 condition and ``p_min``."""
        return self.p_min is not None and BOUND_CONDITIONS.issubset(self.bound_conditions)
