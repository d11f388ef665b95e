"""Declaration package D = (O_D, M_D, Ω, V, I_D) (icore Sec. 3; design.md 4.1).

Built in Python (:class:`DeclarationPackage`) or loaded from YAML/JSON
(:func:`load_declaration`, :func:`declaration_from_dict`). Loading validates the document
against a schema and then cross-checks names; every error is a
:class:`~icore.state.DeclarationPackageError` naming the file, the path inside the
document and the problem. Every interface of I_D has a built-in default, so a small D is
a few lines.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pydantic
import yaml

from icore._files import not_a_regular_file
from icore.state._errors import DeclarationPackageError, InterfaceError, ValidatorError
from icore.state._model import (
    JSON,
    Assertion,
    AssertionKind,
    Event,
    Obligation,
    Proposal,
    RecordRef,
    Status,
)

if TYPE_CHECKING:
    from icore.state._state import State

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
    records: tuple[RecordRef, ...]
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
        """Assertions of a declared progress field whose value differs from the slot's
        previous value (a re-assertion of the same value is not a change)."""
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


# ------------------------------------------------------------------ built-in validators
def _v_always(inp: ValidatorInput) -> bool:
    return True


def _v_never(inp: ValidatorInput) -> bool:
    return False


def _v_event_field_equals(inp: ValidatorInput) -> bool:
    fld, want = inp.params.get("field"), inp.params.get("value")
    return bool(inp.events) and all(e.fields.get(str(fld)) == want for e in inp.events)


def _v_event_type_present(inp: ValidatorInput) -> bool:
    want = inp.params.get("type")
    return any(e.type == want for e in inp.events)


def _v_has_records(inp: ValidatorInput) -> bool:
    return len(inp.records) >= int(inp.params.get("min", 1))


def _v_payload_equals(inp: ValidatorInput) -> bool:
    return bool(inp.payload == inp.params.get("value"))


BUILTIN_VALIDATORS: Mapping[str, ValidatorFn] = {
    "always": _v_always,
    "never": _v_never,
    "event_field_equals": _v_event_field_equals,
    "event_type_present": _v_event_type_present,
    "has_records": _v_has_records,
    "payload_equals": _v_payload_equals,
}
"""Built-in validators: ``always``, ``never``, ``event_field_equals`` (params field, value:
every cited event has it), ``event_type_present`` (params type), ``has_records`` (params
min, default 1), ``payload_equals`` (params value)."""


# ------------------------------------------------------------------ built-in interfaces
def capability_value(agent: AgentDecl, obligation: Obligation) -> float:
    """Built-in ``value``: the agent's declared capability for the obligation's kind, or 0."""
    return float(agent.capabilities.get(obligation.kind, 0.0))


def capability_feasible(agent: AgentDecl, obligation: Obligation) -> bool:
    """Built-in ``feasible``: the agent declares a capability for the obligation's kind."""
    return obligation.kind in agent.capabilities


def any_feasible(agent: AgentDecl, obligation: Obligation) -> bool:
    """Built-in ``feasible`` variant: every agent is feasible."""
    return True


def declared_weight(obligation: Obligation) -> float:
    """Built-in ``weight``: the weight declared when the obligation was created."""
    return obligation.weight


def uniform_weight(obligation: Obligation) -> float:
    """Built-in ``weight`` variant: 1 for every obligation."""
    return 1.0


def assigned_view(agent: str, state: State) -> JSON:
    """Built-in ``local_view``: the agent's assigned obligations and open ones it may take."""
    decl = state.decl.agents.get(agent)
    mine = []
    open_ = []
    for o in state.obligations.values():
        if o.assignee == agent:
            mine.append({"id": o.id, "kind": o.kind, "status": str(o.effective_status)})
        elif o.assignee is None and o.status == Status.OPEN and decl is not None:
            if checked_feasible(state.decl.interfaces, decl, o):
                open_.append({"id": o.id, "kind": o.kind})
    return {"agent": agent, "assigned": mine, "open": open_}


def canonical_normalize(state: State) -> JSON:
    """Built-in ``normalize``: :func:`icore.state.normalize` (design.md 4.3)."""
    from icore.state._normalize import normalize

    return normalize(state)


def roots_done(state: State) -> bool:
    """Built-in ``terminal``: a terminal marker is active, or every required root is done."""
    return state.terminal_default()


def status_change_progress(transition: Transition) -> bool:
    """Built-in ``progress``: a productive operation changed a declared progress field
    (``parameters.progress_fields``, default status and result). Re-asserting the value
    a slot already holds is not progress (docs/audit.md "Patience")."""
    return transition.operation.productive and bool(transition.changed())


def priority_responsible(state: State, diagnosis: DiagnosisLike) -> str | None:
    """Built-in ``responsible`` (icore Sec. 4): routes by the defect and D's priority rule.

    Assignment defects go to the first agent of the assignment authority; work/evidence
    defects to the current assignee of the first affected obligation or the proposer of
    the flagged attempt, in the order ``parameters.responsible_priority`` fixes.
    """
    if diagnosis.defect == "assignment":
        auth = checked_assignment_authority(state.decl.interfaces, state)
        return auth[0] if auth else None
    assignee = None
    for oid in diagnosis.obligations:
        o = state.obligations.get(oid)
        if o is not None and o.assignee is not None:
            assignee = o.assignee
            break
    order = (
        (assignee, diagnosis.proposer)
        if state.decl.parameters.responsible_priority == "assignee"
        else (diagnosis.proposer, assignee)
    )
    for agent in order:
        if agent is not None:
            return agent
    return None


def role_authority(role: str) -> Callable[[State], tuple[str, ...]]:
    """Built-in ``assignment authority``: the agents with ``role`` (sorted ids)."""

    def authority(state: State) -> tuple[str, ...]:
        return tuple(sorted(a.id for a in state.decl.agents.values() if role in a.roles))

    return authority


@dataclass(frozen=True, slots=True)
class Interfaces:
    """I_D with built-in defaults (design.md 4.1).

    The incremental metrics assume ``value``, ``feasible`` and ``weight`` depend only on
    their arguments (the agent declaration and the obligation), not on the rest of X.

    The state checks every answer it uses before it writes anything: ``weight`` must be a
    finite real >= 0, ``value`` a real in [0, 1], ``feasible``, ``progress`` and
    ``terminal`` a bool, ``local_view`` plain JSON, ``responsible`` an agent id of M_D or
    None, ``assignment_authority`` a tuple/list of agent ids of M_D.
    Anything else, or an exception, is an :class:`~icore.state.InterfaceError` and the
    change is not recorded.
    """

    value: Callable[[AgentDecl, Obligation], float] = capability_value
    weight: Callable[[Obligation], float] = declared_weight
    feasible: Callable[[AgentDecl, Obligation], bool] = capability_feasible
    local_view: Callable[[str, State], JSON] = assigned_view
    normalize: Callable[[State], JSON] = canonical_normalize
    terminal: Callable[[State], bool] = roots_done
    progress: Callable[[Transition], bool] = status_change_progress
    responsible: Callable[[State, DiagnosisLike], str | None] = priority_responsible
    assignment_authority: Callable[[State], tuple[str, ...]] = field(
        default_factory=lambda: role_authority(ASSIGNER_ROLE)
    )


# ------------------------------------------------------------------ checked interface calls
# Interfaces are D's code: a wrong answer is a defect of D, reported as InterfaceError
# naming the interface, what it was asked and what it returned. The state calls them only
# through these, and only before it writes anything (docs/state.md "Log").
def _call(
    interface: str, field: str | Callable[[], str], fn: Callable[..., Any], *args: Any,
    **ctx: Any,
) -> Any:
    """Call ``fn(*args)``; ``field`` (or a function building it, called only on error)
    names the call in the :class:`InterfaceError`."""
    try:
        return fn(*args)
    except InterfaceError:  # a nested checked interface already named the culprit
        raise
    except Exception as exc:  # D's own failure, typed (like a validator's)
        raise _raised(interface, field if isinstance(field, str) else field(), exc,
                      **ctx) from exc


def _raised(interface: str, field: str, exc: Exception, **ctx: Any) -> InterfaceError:
    """The :class:`InterfaceError` for an interface call that raised ``exc``."""
    return InterfaceError(
        f"raised {type(exc).__name__}: {exc}", interface=interface, field=field, value=exc,
        **ctx,
    )


def _real(out: Any, low: float, high: float | None) -> float | None:
    """``out`` as a float in [low, high] (high None: unbounded), or None."""
    if type(out) is float:  # the common case, without the ABC check
        if not math.isfinite(out) or out < low or (high is not None and out > high):
            return None
        return out
    if not isinstance(out, numbers.Real) or isinstance(out, bool):
        return None
    try:
        v = float(out)
    except (OverflowError, ValueError, TypeError):
        return None
    if not math.isfinite(v) or v < low or (high is not None and v > high):
        return None
    return v


def checked_weight(ifaces: Interfaces, o: Obligation) -> float:
    """``weight(o)``: a finite number >= 0.

    Raises:
        InterfaceError: it raised or returned anything else.
    """
    out = _call("weight", lambda: f"weight({o.id})", ifaces.weight, o, obligation=o.id)
    v = _real(out, 0.0, None)
    if v is None:
        raise InterfaceError(
            f"returned {out!r:.80}; expected a finite number >= 0",
            interface="weight",
            field=f"weight({o.id})",
            value=out,
            obligation=o.id,
        )
    return v


def checked_value(ifaces: Interfaces, agent: AgentDecl, o: Obligation) -> float:
    """``value(agent, o)``: a number in [0, 1] (design.md 4.1).

    Raises:
        InterfaceError: it raised or returned anything else.
    """
    def field() -> str:
        return f"value({agent.id}, {o.id})"

    try:  # _call, inlined: this runs for every agent on every touched obligation
        out = ifaces.value(agent, o)
    except InterfaceError:
        raise
    except Exception as exc:
        raise _raised("value", field(), exc, agent=agent.id, obligation=o.id) from exc
    if type(out) is float and 0.0 <= out <= 1.0:  # the common case (finite by the bounds)
        return out
    v = _real(out, 0.0, 1.0)
    if v is None:
        raise InterfaceError(
            f"returned {out!r:.80}; expected a number in [0, 1]",
            interface="value",
            field=field(),
            value=out,
            agent=agent.id,
            obligation=o.id,
        )
    return v


def checked_feasible(ifaces: Interfaces, agent: AgentDecl, o: Obligation) -> bool:
    """``feasible(agent, o)``: a bool.

    Raises:
        InterfaceError: it raised or returned a non-bool.
    """
    try:  # _call, inlined: this runs for every agent on every touched obligation
        out = ifaces.feasible(agent, o)
    except InterfaceError:
        raise
    except Exception as exc:
        raise _raised("feasible", f"feasible({agent.id}, {o.id})", exc, agent=agent.id,
                      obligation=o.id) from exc
    if out is True or out is False:
        return out

    def field() -> str:
        return f"feasible({agent.id}, {o.id})"

    if not isinstance(out, bool):
        raise InterfaceError(
            f"returned {out!r:.80}; expected a bool",
            interface="feasible",
            field=field(),
            value=out,
            agent=agent.id,
            obligation=o.id,
        )
    return out


def checked_progress(ifaces: Interfaces, transition: Transition) -> bool:
    """``progress(transition)``: a bool.

    Raises:
        InterfaceError: it raised or returned a non-bool.
    """
    pid = transition.proposal.id
    op = transition.operation.name
    field = f"progress({pid})"
    out = _call("progress", field, ifaces.progress, transition, proposal=pid, operation=op)
    if not isinstance(out, bool):
        raise InterfaceError(
            f"returned {out!r:.80}; expected a bool",
            interface="progress",
            field=field,
            value=out,
            proposal=pid,
            operation=op,
        )
    return out


def _json_problem(out: Any) -> str | None:
    """Why ``out`` is not plain JSON (None when it is)."""
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def checked_terminal(ifaces: Interfaces, state: State) -> bool:
    """``terminal(X)``: a bool (icore Alg. 1 stops on it; design.md 4.1, 4.4).

    Raises:
        InterfaceError: it raised or returned a non-bool.
    """
    field = "terminal(X)"
    out = _call("terminal", field, ifaces.terminal, state)
    if not isinstance(out, bool):
        raise InterfaceError(
            f"returned {out!r:.80}; expected a bool", interface="terminal", field=field, value=out
        )
    return out


def checked_local_view(ifaces: Interfaces, agent: str, state: State) -> JSON:
    """``local_view(agent, X)``: plain JSON (what the agent is shown; design.md 4.1).

    Raises:
        InterfaceError: it raised or returned something that is not JSON (NaN included).
    """
    field = f"local_view({agent}, X)"
    out = _call("local_view", field, ifaces.local_view, agent, state, agent=agent)
    problem = _json_problem(out)
    if problem is not None:
        raise InterfaceError(
            f"returned {out!r:.80}; expected JSON ({problem})",
            interface="local_view",
            field=field,
            value=out,
            agent=agent,
        )
    return out  # type: ignore[no-any-return]


def checked_assignment_authority(ifaces: Interfaces, state: State) -> tuple[str, ...]:
    """``assignment_authority(X)``: a tuple or list of agent ids of M_D (design.md 4.4).

    Raises:
        InterfaceError: it raised, returned something else (a bare string included), or
            named an agent not declared in M_D.
    """
    field = "assignment_authority(X)"
    out = _call("assignment_authority", field, ifaces.assignment_authority, state)
    if not isinstance(out, (tuple, list)) or not all(isinstance(a, str) for a in out):
        raise InterfaceError(
            f"returned {out!r:.80}; expected a tuple of agent ids",
            interface="assignment_authority",
            field=field,
            value=out,
        )
    unknown = [a for a in out if a not in state.decl.agents]
    if unknown:
        raise InterfaceError(
            f"returned {out!r:.80}; {unknown[0]!r} is not an agent of M_D",
            interface="assignment_authority",
            field=field,
            value=out,
            agent=unknown[0],
        )
    return tuple(out)


def checked_responsible(ifaces: Interfaces, state: State, diagnosis: DiagnosisLike) -> str | None:
    """``responsible(X, F)``: an agent id of M_D, or None (nobody; icore Sec. 4).

    Raises:
        InterfaceError: it raised, returned a non-string, or named an agent not declared
            in M_D (``.fields["diagnosis"]`` is F's id when it has one).
    """
    did = getattr(diagnosis, "id", None)
    ctx: dict[str, Any] = {} if did is None else {"diagnosis": did}
    field = f"responsible(X, {did if did is not None else 'F'})"
    out = _call("responsible", field, ifaces.responsible, state, diagnosis, **ctx)
    if out is None:
        return None
    if not isinstance(out, str) or out not in state.decl.agents:
        what = "an agent of M_D" if isinstance(out, str) else "an agent id or None"
        raise InterfaceError(
            f"returned {out!r:.80}; expected {what}",
            interface="responsible",
            field=field,
            value=out,
            **ctx,
        )
    return out


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


# ------------------------------------------------------------------ the package
def _proposer_ref_ok(ref: str, agents: Mapping[str, AgentDecl], roles: set[str]) -> bool:
    if ref == "*":
        return True
    if ref.startswith("role:"):
        return ref[5:] in roles
    return ref in agents


class DeclarationPackage:
    """D = (O_D, M_D, Ω, V, I_D) (icore Sec. 3; design.md 4.1).

    Args:
        name: package name.
        version: package version.
        observables: O_D.
        agents: M_D.
        operations: Ω.
        validators: V.
        interfaces: I_D (built-in defaults).
        parameters: ε, H, τ and the Prop. 4 declaration.
        file: where it came from, used in error messages.

    Raises:
        DeclarationPackageError: duplicate names, a proposer or required validator that is
            not declared, a template target/kind mismatch, out-of-range parameters.
    """

    def __init__(
        self,
        *,
        name: str = "D",
        version: str = "1",
        observables: Iterable[ObservableType] = (),
        agents: Iterable[AgentDecl] = (),
        operations: Iterable[OperationDecl] = (),
        validators: Iterable[ValidatorSpec] = (),
        interfaces: Interfaces | None = None,
        parameters: Parameters | None = None,
        file: str = "<python>",
    ) -> None:
        self.name = name
        self.version = version
        self.file = file
        self.observables: dict[str, ObservableType] = _index(observables, "observables", file)
        self.agents: dict[str, AgentDecl] = _index(agents, "agents", file)
        self.operations: dict[str, OperationDecl] = _index(operations, "operations", file)
        self.validators: dict[str, ValidatorSpec] = _index(validators, "validators", file)
        self.interfaces = interfaces or Interfaces()
        self.parameters = parameters or Parameters()
        self._check()
        self._effect_kinds = {
            name: frozenset(t.kind for t in op.effects) for name, op in self.operations.items()
        }

    def _check(self) -> None:
        f = self.file
        p = self.parameters
        if not (math.isfinite(p.epsilon) and p.epsilon >= 0):
            raise DeclarationPackageError("epsilon must be >= 0", file=f, path="parameters.epsilon")
        if p.patience < 1:
            raise DeclarationPackageError(
                "patience must be >= 1", file=f, path="parameters.patience"
            )
        if not 0.0 <= p.tau <= 1.0:
            raise DeclarationPackageError("tau must be in [0, 1]", file=f, path="parameters.tau")
        if p.p_min is not None and not 0.0 <= p.p_min <= 1.0:
            raise DeclarationPackageError(
                "p_min must be in [0, 1]", file=f, path="parameters.p_min"
            )
        unknown = set(p.bound_conditions) - BOUND_CONDITIONS
        if unknown:
            raise DeclarationPackageError(
                f"unknown bound conditions {sorted(unknown)}",
                file=f,
                path="parameters.bound_conditions",
            )
        for i, ag in enumerate(self.agents.values()):
            for cap, v in ag.capabilities.items():
                if not (isinstance(v, int | float) and 0.0 <= v <= 1.0):
                    raise DeclarationPackageError(
                        f"capability value {v!r} is not in [0, 1]",
                        file=f,
                        path=f"agents[{i}].capabilities.{cap}",
                    )
        for i, ob in enumerate(self.observables.values()):
            if ob.kind not in ("action", "artifact"):
                raise DeclarationPackageError(
                    f"kind must be action or artifact, not {ob.kind!r}",
                    file=f,
                    path=f"observables[{i}].kind",
                )
        roles = {r for a in self.agents.values() for r in a.roles}
        for i, op in enumerate(self.operations.values()):
            base = f"operations[{i}]"
            if not op.proposers:
                raise DeclarationPackageError("no proposers", file=f, path=f"{base}.proposers")
            for j, ref in enumerate(op.proposers):
                if not _proposer_ref_ok(ref, self.agents, roles):
                    raise DeclarationPackageError(
                        f"proposer {ref!r} is not a declared agent or role",
                        file=f,
                        path=f"{base}.proposers[{j}]",
                    )
            for j, req in enumerate(op.requires):
                if req not in self.validators:
                    raise DeclarationPackageError(
                        f"required certificate {req!r} is not a declared validator",
                        file=f,
                        path=f"{base}.requires[{j}]",
                    )
            if not op.effects:
                raise DeclarationPackageError("no effects declared", file=f, path=f"{base}.effects")
            for j, t in enumerate(op.effects):
                if t.kind == AssertionKind.NODE and t.target != "new":
                    raise DeclarationPackageError(
                        "a node effect must have target 'new'",
                        file=f,
                        path=f"{base}.effects[{j}].target",
                    )
                if t.kind == AssertionKind.STATUS and t.values is not None:
                    for k, v in enumerate(t.values):
                        if v not in Status.__members__.values():
                            raise DeclarationPackageError(
                                f"{v!r} is not a status",
                                file=f,
                                path=f"{base}.effects[{j}].values[{k}]",
                            )
            if op.transports and not op.removes:
                raise DeclarationPackageError(
                    "transports requires removes", file=f, path=f"{base}.transports"
                )
        for i, vs in enumerate(self.validators.values()):
            if not callable(vs.fn):
                raise DeclarationPackageError(
                    "validator is not callable", file=f, path=f"validators[{i}]"
                )

    # -- queries ---------------------------------------------------------------------
    def effect_kinds(self, operation: str) -> frozenset[AssertionKind]:
        """Assertion kinds ``operation`` declares effects of (empty if undeclared)."""
        return self._effect_kinds.get(operation, frozenset())

    def may_propose(self, agent: str, operation: str) -> bool:
        """True if ``agent`` is declared and authorized to propose ``operation``."""
        op = self.operations.get(operation)
        ag = self.agents.get(agent)
        if op is None or ag is None:
            return False
        for ref in op.proposers:
            if ref == "*" or ref == agent or (ref.startswith("role:") and ref[5:] in ag.roles):
                return True
        return False

    def validate(self, validator: str, inp: ValidatorInput) -> bool:
        """Run validator ``validator`` of V once on ``inp``.

        Raises:
            KeyError: ``validator`` is not declared.
            ValidatorError: the validator raised or returned a non-boolean.
        """
        spec = self.validators[validator]
        try:
            out = spec.fn(inp)
        except Exception as exc:  # wrapped: a validator's own failure, typed
            raise ValidatorError(
                f"validator raised {type(exc).__name__}: {exc}", validator=validator
            ) from exc
        if not isinstance(out, bool):
            raise ValidatorError(
                f"validator returned {type(out).__name__}, not bool", validator=validator
            )
        return out

    def fingerprint(self) -> str:
        """A stable sha256 over the declarative content (interface code excluded).

        Covers name, version, observables, agents (capabilities, roles), operations (all
        fields), validators (name, version, source, params) and parameters.
        """
        import dataclasses
        import hashlib

        def plain(obj: Any) -> Any:
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
                return {
                    f.name: plain(getattr(obj, f.name))
                    for f in dataclasses.fields(obj)
                    if f.name != "fn"
                }
            if isinstance(obj, Mapping):
                return {str(k): plain(v) for k, v in sorted(obj.items())}
            if isinstance(obj, list | tuple):
                return [plain(v) for v in obj]
            return obj

        doc = {
            "name": self.name,
            "version": self.version,
            "observables": plain(self.observables),
            "agents": plain(self.agents),
            "operations": plain(self.operations),
            "validators": plain(self.validators),
            "parameters": plain(self.parameters),
        }
        body = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    def __repr__(self) -> str:
        return (
            f"DeclarationPackage(name={self.name!r}, version={self.version!r}, "
            f"agents={len(self.agents)}, operations={len(self.operations)})"
        )


def _index(items: Iterable[Any], what: str, file: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        name = item.id if isinstance(item, AgentDecl) else item.name
        if not isinstance(name, str) or not name:
            raise DeclarationPackageError("empty name", file=file, path=f"{what}[{i}]")
        if name in out:
            raise DeclarationPackageError(
                f"duplicate name {name!r}", file=file, path=f"{what}[{i}]"
            )
        out[name] = item
    return out


# ------------------------------------------------------------------ schema (YAML/JSON)
class _Spec(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=False)


class _ObservableSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    kind: Literal["action", "artifact"] = "action"
    fields: list[str] = []


class _AgentSpec(_Spec):
    id: str = pydantic.Field(min_length=1)
    capabilities: dict[str, pydantic.confloat(ge=0.0, le=1.0)] = {}  # type: ignore[valid-type]
    roles: list[str] = []


class _EffectSpec(_Spec):
    kind: AssertionKind
    values: list[Any] | None = None
    key: str | None = None
    target: Literal["subject", "new", "any"] = "subject"
    many: bool = False


class _PreSpec(_Spec):
    status_in: list[Status] | None = None
    deps_done: bool = False
    assignee_is_proposer: bool = False
    target_required: bool = True


class _OperationSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    proposers: list[str] = ["*"]
    preconditions: _PreSpec = _PreSpec()
    effects: list[_EffectSpec]
    requires: list[str] = []
    productive: bool = False
    removes: bool = False
    transports: bool = False
    settles: bool = False


class _ValidatorSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    version: str = "1"
    builtin: str | None = None
    callable: str | None = None
    params: dict[str, Any] = {}


class _ParamSpec(_Spec):
    epsilon: float = pydantic.Field(default=0.1, ge=0.0)
    patience: int = pydantic.Field(default=5, ge=1)
    tau: float = pydantic.Field(default=0.5, ge=0.0, le=1.0)
    responsible_priority: Literal["assignee", "proposer"] = "assignee"
    p_min: float | None = pydantic.Field(default=None, ge=0.0, le=1.0)
    bound_conditions: list[Literal["decomposable", "validator_adequacy", "value_calibration"]] = []
    progress_fields: list[
        Literal["status", "assignee", "result", "claim", "relation", "terminal"]
    ] = ["status", "result"]


class _InterfaceSpec(_Spec):
    value: str = "capability"
    weight: str = "declared"
    feasible: str = "capability"
    local_view: str = "assigned"
    normalize: str = "canonical"
    terminal: str = "roots_done"
    progress: str = "status_change"
    responsible: str = "priority"
    assignment_authority: str = "role:assigner"


class _PackageSpec(_Spec):
    name: str = "D"
    version: str = "1"
    parameters: _ParamSpec = pydantic.Field(default_factory=_ParamSpec)
    observables: list[_ObservableSpec] = []
    agents: list[_AgentSpec] = []
    operations: list[_OperationSpec] = []
    validators: list[_ValidatorSpec] = []
    interfaces: _InterfaceSpec = _InterfaceSpec()


_BUILTIN_INTERFACES: dict[str, dict[str, Any]] = {
    "value": {"capability": capability_value},
    "weight": {"declared": declared_weight, "uniform": uniform_weight},
    "feasible": {"capability": capability_feasible, "any": any_feasible},
    "local_view": {"assigned": assigned_view},
    "normalize": {"canonical": canonical_normalize},
    "terminal": {"roots_done": roots_done},
    "progress": {"status_change": status_change_progress},
    "responsible": {"priority": priority_responsible},
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def _import_callable(ref: str, file: str, path: str) -> Callable[..., Any]:
    mod_name, sep, attr = ref.partition(":")
    if not sep or not mod_name or not attr:
        raise DeclarationPackageError(
            f"{ref!r} is not of the form 'module:attribute'", file=file, path=path
        )
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise DeclarationPackageError(
            f"cannot import {ref!r}: {exc}", file=file, path=path
        ) from exc
    if not callable(obj):
        raise DeclarationPackageError(f"{ref!r} is not callable", file=file, path=path)
    return obj  # type: ignore[no-any-return]


def declaration_from_dict(data: Any, *, file: str = "<dict>") -> DeclarationPackage:
    """Build D from a parsed YAML/JSON document (design.md 4.1).

    Args:
        data: the document (a mapping).
        file: name used in error messages.

    Raises:
        DeclarationPackageError: naming ``file``, the path and the problem, for a schema
            violation, an unknown built-in, an unimportable callable or a cross-reference
            to an undeclared agent, role or validator.
    """
    if not isinstance(data, Mapping):
        raise DeclarationPackageError(
            f"top level must be a mapping, not {type(data).__name__}", file=file, path="<root>"
        )
    try:
        spec = _PackageSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise DeclarationPackageError(
            err["msg"], file=file, path=_path(tuple(err["loc"])), errors=len(exc.errors())
        ) from None
    validators = []
    for i, v in enumerate(spec.validators):
        path = f"validators[{i}]"
        if (v.builtin is None) == (v.callable is None):
            raise DeclarationPackageError(
                "give exactly one of 'builtin' and 'callable'", file=file, path=path
            )
        if v.builtin is not None:
            if v.builtin not in BUILTIN_VALIDATORS:
                raise DeclarationPackageError(
                    f"unknown built-in validator {v.builtin!r} (known: "
                    f"{', '.join(sorted(BUILTIN_VALIDATORS))})",
                    file=file,
                    path=f"{path}.builtin",
                )
            fn = BUILTIN_VALIDATORS[v.builtin]
            source = f"builtin:{v.builtin}"
        else:
            assert v.callable is not None
            fn = _import_callable(v.callable, file, f"{path}.callable")
            source = v.callable
        validators.append(
            ValidatorSpec(name=v.name, fn=fn, version=v.version, params=v.params, source=source)
        )
    ifaces: dict[str, Any] = {}
    for name, ref in spec.interfaces.model_dump().items():
        path = f"interfaces.{name}"
        if name == "assignment_authority":
            if ref.startswith("role:"):
                ifaces[name] = role_authority(ref[5:])
            else:
                ifaces[name] = _import_callable(ref, file, path)
            continue
        builtins = _BUILTIN_INTERFACES[name]
        if ref in builtins:
            ifaces[name] = builtins[ref]
        elif ":" in ref:
            ifaces[name] = _import_callable(ref, file, path)
        else:
            raise DeclarationPackageError(
                f"unknown built-in {ref!r} (known: {', '.join(sorted(builtins))})",
                file=file,
                path=path,
            )
    p = spec.parameters
    return DeclarationPackage(
        name=spec.name,
        version=spec.version,
        file=file,
        observables=[ObservableType(o.name, o.kind, tuple(o.fields)) for o in spec.observables],
        agents=[AgentDecl(a.id, dict(a.capabilities), tuple(a.roles)) for a in spec.agents],
        operations=[
            OperationDecl(
                name=o.name,
                proposers=tuple(o.proposers),
                preconditions=Preconditions(
                    status_in=None
                    if o.preconditions.status_in is None
                    else tuple(o.preconditions.status_in),
                    deps_done=o.preconditions.deps_done,
                    assignee_is_proposer=o.preconditions.assignee_is_proposer,
                    target_required=o.preconditions.target_required,
                ),
                effects=tuple(
                    EffectTemplate(
                        kind=e.kind,
                        values=None if e.values is None else tuple(e.values),
                        key=e.key,
                        target=e.target,
                        many=e.many,
                    )
                    for e in o.effects
                ),
                requires=tuple(o.requires),
                productive=o.productive,
                removes=o.removes,
                transports=o.transports,
                settles=o.settles,
            )
            for o in spec.operations
        ],
        validators=validators,
        interfaces=Interfaces(**ifaces),
        parameters=Parameters(
            epsilon=p.epsilon,
            patience=p.patience,
            tau=p.tau,
            responsible_priority=p.responsible_priority,
            p_min=p.p_min,
            bound_conditions=tuple(p.bound_conditions),
            progress_fields=tuple(p.progress_fields),
        ),
    )


def load_declaration(path: str | Path) -> DeclarationPackage:
    """Load D from a ``.yaml``/``.yml`` or ``.json`` file (design.md 4.1).

    Raises:
        DeclarationPackageError: the path is not a regular file (a FIFO, a device, a
            folder: refused by kind without opening it), or the file is missing,
            unparsable, or invalid (the error names the file, the path inside it and the
            problem).
    """
    p = Path(path)
    file = str(p)
    if (problem := not_a_regular_file(p)) is not None:
        raise DeclarationPackageError(f"{problem}; refusing to read it", file=file,
                                      path="<root>")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclarationPackageError(f"cannot read: {exc}", file=file, path="<root>") from exc
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DeclarationPackageError(f"cannot parse: {exc}", file=file, path="<root>") from exc
    except RecursionError:
        raise DeclarationPackageError("cannot parse: nested too deeply", file=file,
                                      path="<root>") from None
    return declaration_from_dict(data, file=file)
