"""Interfaces I_D of a declaration package: built-ins and checked calls (design.md 4.1).

The built-in validators (V) and interfaces (value, feasible, weight, local_view,
normalize, terminal, progress, responsible, assignment authority), the
:class:`Interfaces` bundle, and the ``checked_*`` calls through which the state asks
them (each answer is checked; a wrong one is an :class:`~icore.state.InterfaceError`).
Interfaces that read X type against :class:`~icore.state.StateView`. No I/O.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.state._components import (
    ASSIGNER_ROLE,
    AgentDecl,
    DiagnosisLike,
    Transition,
    ValidatorFn,
    ValidatorInput,
)
from icore.state._errors import InterfaceError
from icore.state._json import json_problem
from icore.state._normalize import normalize
from icore.state._view import InterfacesLike, StateView
from icore.state._xmodel import JSON, Obligation, Status


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


def assigned_view(agent: str, state: StateView) -> JSON:
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


def canonical_normalize(state: StateView) -> JSON:
    """Built-in ``normalize``: :func:`icore.state.normalize` (design.md 4.3)."""
    return normalize(state)


def roots_done(state: StateView) -> bool:
    """Built-in ``terminal``: a terminal marker is active, or every required root is done."""
    return state.terminal_default()


def status_change_progress(transition: Transition) -> bool:
    """Built-in ``progress``: a productive operation changed a declared progress field.

    The fields are ``parameters.progress_fields`` (default status and result). Re-asserting
    the value a slot already holds is not progress (docs/audit.md "Patience").
    """
    return transition.operation.productive and bool(transition.changed())


def priority_responsible(state: StateView, diagnosis: DiagnosisLike) -> str | None:
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


def role_authority(role: str) -> Callable[[StateView], tuple[str, ...]]:
    """Built-in ``assignment authority``: the agents with ``role`` (sorted ids)."""

    def authority(state: StateView) -> tuple[str, ...]:
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
    local_view: Callable[[str, StateView], JSON] = assigned_view
    normalize: Callable[[StateView], JSON] = canonical_normalize
    terminal: Callable[[StateView], bool] = roots_done
    progress: Callable[[Transition], bool] = status_change_progress
    responsible: Callable[[StateView, DiagnosisLike], str | None] = priority_responsible
    assignment_authority: Callable[[StateView], tuple[str, ...]] = field(
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
    """Call ``fn(*args)``, turning its failure into an :class:`InterfaceError`.

    ``field`` (or a function building it, called only on error) names the call in the
    :class:`InterfaceError`.
    """
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


def checked_weight(ifaces: InterfacesLike, o: Obligation) -> float:
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


def checked_value(ifaces: InterfacesLike, agent: AgentDecl, o: Obligation) -> float:
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


def checked_feasible(ifaces: InterfacesLike, agent: AgentDecl, o: Obligation) -> bool:
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


def checked_progress(ifaces: InterfacesLike, transition: Transition) -> bool:
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


def checked_terminal(ifaces: InterfacesLike, state: StateView) -> bool:
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


def checked_local_view(ifaces: InterfacesLike, agent: str, state: StateView) -> JSON:
    """``local_view(agent, X)``: plain JSON (what the agent is shown; design.md 4.1).

    Raises:
        InterfaceError: it raised or returned something that is not JSON (NaN included).
    """
    field = f"local_view({agent}, X)"
    out = _call("local_view", field, ifaces.local_view, agent, state, agent=agent)
    problem = json_problem(out)
    if problem is not None:
        raise InterfaceError(
            f"returned {out!r:.80}; expected JSON ({problem})",
            interface="local_view",
            field=field,
            value=out,
            agent=agent,
        )
    return out  # type: ignore[no-any-return]


def checked_assignment_authority(ifaces: InterfacesLike, state: StateView) -> tuple[str, ...]:
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


def checked_responsible(
    ifaces: InterfacesLike, state: StateView, diagnosis: DiagnosisLike
) -> str | None:
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
