"""The rules of icore Definition 6 that do not need a run (design.md 4.3).

:class:`Verdict` (a check's outcome), the event and effect checks shared with the
trusted-import path (:mod:`icore.state._trusted_import`), effect matching against an
operation's templates, running one validator of V twice (:func:`run_validator`) and
the transport rule (:func:`transport_problem`). Pure: nothing here changes X.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from icore._frozen import positional
from icore.state._components import EffectTemplate, OperationDecl, ValidatorInput
from icore.state._entries import Body
from icore.state._json import is_json, is_plain
from icore.state._view import DeclarationLike, StateView
from icore.state._xmodel import (
    JSON,
    Assertion,
    AssertionKind,
    Certificate,
    Decision,
    Effect,
    Event,
    EventSpec,
    HardFlag,
    Obligation,
    Proposal,
    ReasonCode,
    RejectionReason,
    Status,
)

# enum members as globals: read off the class, each costs a lookup (hot paths)
(_K_ASSIGNEE, _K_NODE, _K_RELATION, _K_STATUS) = (
    AssertionKind.ASSIGNEE, AssertionKind.NODE, AssertionKind.RELATION, AssertionKind.STATUS)

_DONE = (Status.DISCHARGED, Status.SETTLED)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of :func:`check_legality` (icore Def. 6).

    Attributes:
        decision: commit or reject.
        proposal: the proposal, with its assigned id.
        reasons: typed rejection reasons (empty on commit).
        flags: hard flags the rejection raises (empty on commit).
        assertions: assertions a commit adds (empty on reject).
        certificates: certificates V issued on the proposal's requests (on reject, the
            ones that ran, for diagnosis; they are not added to Π).
        progress: D's ``progress`` predicate on the committed transition.
        base_seq: the state's sequence number when audited (a verdict applies only there).
        bodies: the log entry bodies that record this verdict.
        progressed: obligations whose declared progress field the commit changed (empty
            unless ``progress``): what per-obligation patience resets.
    """

    decision: Decision
    proposal: Proposal
    reasons: tuple[RejectionReason, ...]
    flags: tuple[HardFlag, ...]
    assertions: tuple[Assertion, ...]
    certificates: tuple[Certificate, ...]
    progress: bool
    base_seq: int
    bodies: tuple[Body, ...]
    progressed: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        """True for a commit."""
        return self.decision == Decision.COMMIT

    @property
    def codes(self) -> frozenset[ReasonCode]:
        """The set of reason codes."""
        return frozenset(r.code for r in self.reasons)

    @property
    def touched(self) -> tuple[str, ...]:
        """Obligations the proposal's effects name (sorted, unique)."""
        return tuple(sorted({e.obligation for e in self.proposal.effects}))


def check_event(
    spec: EventSpec, eid: str, state: StateView, pending: set[str]
) -> tuple[ReasonCode, str] | None:
    """Check one event against O_D, M_D and G (plus ``pending`` ids of the same proposal)."""
    ot = state.decl.observables.get(spec.type)
    if ot is None:
        return (ReasonCode.INVALID_EVENT, f"event type {spec.type!r} is not declared in O_D")
    if spec.agent not in state.decl.agents:
        return (ReasonCode.UNKNOWN_AGENT, f"event agent {spec.agent!r} is not in M_D")
    if eid in state.events or eid in pending:
        return (ReasonCode.INVALID_EVENT, f"event id {eid!r} is already used")
    missing = [f for f in ot.fields if f not in spec.fields]
    if missing:
        return (ReasonCode.INVALID_EVENT, f"event {eid!r} lacks declared fields {missing}")
    for c in spec.causes:
        if c not in state.events and c not in pending:
            return (ReasonCode.INVALID_EVENT, f"event {eid!r} has unknown cause {c!r}")
    f = spec.fields
    if type(f) is dict and is_plain(f):  # str keys and plain values: JSON, no copy needed
        return None
    if not all(isinstance(k, str) for k in f) or not is_json(dict(f)):
        return (ReasonCode.INVALID_EVENT, f"event {eid!r} fields are not JSON")
    return None


class EffectView(Protocol):
    """What :func:`check_effect_value` reads of X: D and Q's obligations."""

    @property
    def decl(self) -> DeclarationLike:
        """D."""
        ...

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations."""
        ...


_ASSERTABLE = frozenset(Status) - {Status.REPAIR_PENDING}


def _assertable(value: object) -> bool:
    """``value`` equals a status other than ``repair_pending`` (as ``==`` compares)."""
    try:
        return value in _ASSERTABLE
    except TypeError:  # unhashable: equal to no status
        return False


def check_effect_value(
    e: Effect, state: EffectView, new_obligations: set[str]
) -> tuple[ReasonCode, str] | None:
    """Check an effect's value is well formed for its kind."""
    known = state.obligations
    if not isinstance(e.key, str):
        return (ReasonCode.EFFECT_MISMATCH, "effect key must be a string")
    if e.kind == _K_NODE:
        v = e.value
        if not isinstance(v, dict) or not isinstance(v.get("kind"), str):
            return (ReasonCode.EFFECT_MISMATCH, "node value must be a mapping with a 'kind'")
        w = v.get("weight", 1.0)
        if not isinstance(w, (int, float)) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
            return (ReasonCode.EFFECT_MISMATCH, f"node weight {w!r} is not a finite number >= 0")
        refs = list(v.get("deps", ()))
        if v.get("parent") is not None:
            refs.append(v["parent"])
        for r in refs:
            if r not in known and r not in new_obligations:
                return (ReasonCode.UNKNOWN_OBLIGATION, f"node refers to unknown obligation {r!r}")
    elif e.kind == _K_STATUS:
        if not _assertable(e.value):
            return (ReasonCode.EFFECT_MISMATCH, f"{e.value!r} is not an assertable status")
    elif e.kind == _K_ASSIGNEE:
        if e.value is not None and e.value not in state.decl.agents:
            return (ReasonCode.UNKNOWN_AGENT, f"assignee {e.value!r} is not in M_D")
    elif (
        e.kind == _K_RELATION and e.value not in known and e.value not in new_obligations
    ):
        return (ReasonCode.UNKNOWN_OBLIGATION, f"relation to unknown obligation {e.value!r}")
    if not is_json(e.value):
        return (ReasonCode.EFFECT_MISMATCH, "effect value is not JSON")
    return None


def _fits(e: Effect, t_kind: AssertionKind, t: object, p: Proposal, new: set[str]) -> bool:
    assert isinstance(t, EffectTemplate)
    if e.kind != t_kind:
        return False
    if t.key is not None and e.key != t.key:
        return False
    if t.values is not None and e.value not in t.values:
        return False
    if t.target == "subject":
        return e.obligation == p.target
    if t.target == "new":
        return e.obligation in new
    return True


def match_effects(op: OperationDecl, p: Proposal, new: set[str]) -> str | None:
    """Check the effects are exactly ``op``'s declared effects, independent of order.

    Legal iff there is an assignment of effects to templates in which every effect has
    a template it fits, every template gets at least one effect and a template without
    ``many`` gets exactly one. Found by bipartite matching (augmenting paths): first a
    matching that gives every template one effect, then augmenting paths that place each
    effect no ``many`` template accepts ("rigid") on a single template, freeing an effect
    a ``many`` template can absorb. By the Mendelsohn–Dulmage argument this finds an
    assignment whenever one exists. Cost O(|T|·|E|·(|T|+|E|)) for T templates, E effects.
    """
    ts = op.effects
    effs = p.effects
    fits = [[i for i, t in enumerate(ts) if _fits(e, t.kind, t, p, new)] for e in effs]
    for j, e in enumerate(effs):
        if not fits[j]:
            return (
                f"effect {e.kind}:{e.key or '-'}={e.value!r} on {e.obligation!r} matches no "
                f"declared effect of {op.name!r}"
            )
    by_t: list[list[int]] = [[] for _ in ts]
    for j, fl in enumerate(fits):
        for i in fl:
            by_t[i].append(j)
    owner: list[int | None] = [None] * len(ts)  # template -> effect
    held: list[int | None] = [None] * len(effs)  # effect -> template

    def cover(i: int, seen: set[int]) -> bool:  # give template i an effect
        for j in by_t[i]:
            if j in seen:
                continue
            seen.add(j)
            k = held[j]
            if k is None or cover(k, seen):
                owner[i], held[j] = j, i
                return True
        return False

    for i, t in enumerate(ts):
        if not cover(i, set()):
            return f"declared effect {t.kind} (target {t.target}) of {op.name!r} is missing"
    flexible = [any(ts[i].many for i in fl) for fl in fits]

    def place(j: int, seen: set[int]) -> bool:  # give effect j a template, keeping cover
        for i in fits[j]:
            if i in seen:
                continue
            seen.add(i)
            k = owner[i]
            assert k is not None
            if flexible[k] or place(k, seen):
                if flexible[k]:
                    held[k] = None
                owner[i], held[j] = j, i
                return True
        return False

    for j, e in enumerate(effs):
        if held[j] is None and not flexible[j] and not place(j, set()):
            return (
                f"effect {e.kind}:{e.key or '-'}={e.value!r} on {e.obligation!r} has no "
                f"declared effect of {op.name!r} left (each is used once)"
            )
    return None


def run_validator(fn: object, inp: ValidatorInput) -> tuple[bool | None, str]:
    """Run a validator of V on one input.

    This is the one validator runner (Definition 6 and trace import).

    The validator is run twice: raising, a non-boolean or two different answers is a
    validator inconsistency (icore Def. 6; design.md 4.1).

    Returns:
        (verdict, "") or (None, why it is inconsistent).
    """
    assert callable(fn)
    try:
        r1 = fn(inp)
        r2 = fn(inp)
    except Exception as exc:  # a validator's failure is data, not a crash (design.md 4.1)
        return None, f"raised {type(exc).__name__}: {exc}"
    if not isinstance(r1, bool) or not isinstance(r2, bool):
        return None, f"returned a non-boolean ({type(r1).__name__})"
    if r1 != r2:
        return None, "returned different verdicts on the same input (non-deterministic)"
    return r1, ""


def transport_problem(
    state: StateView,
    removed: str,
    to: object,
    created: dict[str, JSON],
    tied: set[str],
) -> str | None:
    """Why ``removed`` -> ``to`` is not valid transport evidence, or None (icore Def. 6).

    A removal counts as transported only to a replacement that the same proposal creates
    (``created``: obligation id -> its node value) or that settlement evidence ties to
    the removed obligation (a passing certificate citing both, ``tied``), and only if the
    replacement carries the same required coverage: it is open work (not settled or
    superseded) and, when the removed obligation is a required root, a required root too.
    """
    if not isinstance(to, str) or to == removed:
        return "transported_to must name another obligation"
    old = state.obligations.get(removed)
    root = bool(old is not None and old.required_root)
    if to in created:
        v = created[to]
        if root and not (isinstance(v, dict) and v.get("required_root")):
            return f"replacement {to!r} of a required root is not a required root"
        return None
    o = state.obligations.get(to)
    if o is None:
        return f"replacement {to!r} does not exist"
    if not (removed in tied and to in tied):
        return (
            f"replacement {to!r} is neither created by the proposal nor tied to {removed!r} "
            "by a passing certificate citing both"
        )
    if o.status in (Status.SETTLED, Status.SUPERSEDED):
        return f"replacement {to!r} is closed ({o.status}); it cannot carry the work"
    if root and not o.required_root:
        return f"replacement {to!r} of a required root is not a required root"
    return None


def make_event(spec: EventSpec, eid: str, state: StateView,
               fields: Mapping[str, JSON] | None = None) -> Event:
    """Build the G event for ``spec`` (kind from O_D, time from the state's clock).

    ``fields``: the event's fields as the caller holds them (e.g. the trace import's
    compact :class:`~icore.state._share.Fields`); default a copy of ``spec.fields``.
    """
    ot = state.decl.observables[spec.type]
    return _event(eid, spec.type, ot.kind, spec.agent,
                  dict(spec.fields) if fields is None else fields, tuple(spec.causes),
                  float(state.clock.now_ms()))


_event = positional(Event)  # an event per step of an import: no per-field setattr (#29)
