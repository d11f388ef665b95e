"""What a change does to Q's obligations: the one transition function (design.md 4.2).

:func:`obligation_steps` is pure: given read access to X (:class:`ObligationSource`)
and the bodies of one change, it returns, body by body, the obligations each body
touches *as it leaves them* (new objects: X's own are never changed in place), their
sets of assertions citing revoked evidence, and which assertion each new assertion
supersedes. The state uses it twice with the same code: before the log write, to
compute and check the interface values of every touched obligation
(:meth:`State._prepare <icore.state.State>`), and when applying the entries, to install
exactly those obligations (:meth:`State._apply <icore.state.State>`). No preview can
drift from the apply step because there is no second copy of the rules.

The rules (design.md 4.2, docs/state.md "Revocation"):

- a ``node`` assertion creates its obligation (:func:`new_obligation`);
- an assertion becomes the active one of its slot (kind, key) and updates the read
  fields (status, assignee, result); the slot's previous assertion is superseded and
  leaves the obligation's revoked-dependency set;
- an assertion whose justification cites a revoked certificate (revoked before, or by an
  earlier body of the same change) joins that set;
- a revocation adds the assertions it reaches to their obligations' sets;
- an obligation is ``repair_pending`` while its set is non-empty (a supersession that
  empties it clears the flag; nothing else does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from icore.state._entries import AssertionImported, Body, Committed, Revoked
from icore.state._refs import ActiveIds, ActiveLayouts, Ref, active_ref, aid
from icore.state._xmodel import Assertion, AssertionKind, Justification, Obligation, Status

# enum members as globals: read off the class, each costs a lookup (hot paths)
(_K_ASSIGNEE, _K_NODE, _K_RESULT, _K_STATUS) = (
    AssertionKind.ASSIGNEE, AssertionKind.NODE, AssertionKind.RESULT, AssertionKind.STATUS)

_STATUS = {str(s): s for s in Status}
_SLOTS: dict[tuple[str, str], tuple[str, str]] = {}
"""Interned (kind, key) slot tuples: one object per distinct slot, not one per obligation."""
_ACTIVE = ActiveLayouts()
"""Obligations' active maps: one key layout per slot sequence, the ids' numbers each (issue 29)."""

TOUCHING = (Committed, AssertionImported, Revoked)
"""Body types that change obligations (the others leave Q's obligations alone)."""


class ObligationSource(Protocol):
    """What :func:`obligation_steps` reads of X."""

    def obligation_now(self, obligation_id: str) -> Obligation:
        """The obligation as X holds it (KeyError if unknown)."""
        ...

    def revoked_dependents(self, obligation_id: str) -> Iterable[str]:
        """Active assertions of the obligation that cite revoked evidence."""
        ...

    def is_revoked(self, certificate_id: str) -> bool:
        """The certificate was revoked."""
        ...

    def assertion_now(self, assertion_id: str) -> Assertion:
        """An assertion of Q (KeyError if unknown)."""
        ...


@dataclass(slots=True)
class ObligationStep:
    """What one body does to Q's obligations.

    Attributes:
        obligations: every obligation the body touches, as the body leaves it (new
            objects), in the order first touched.
        dependents: for each of them, its active assertions citing revoked evidence
            after the body (an empty set: none).
        supersedes: new assertion id -> the ref (:func:`~icore.state._refs.ref`) of the
            assertion it replaces in its slot.
        created: obligations the body creates (``node`` assertions), in order.
    """

    obligations: dict[str, Obligation] = field(default_factory=dict)
    dependents: dict[str, set[str]] = field(default_factory=dict)
    supersedes: dict[str, Ref] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)


def new_obligation(a: Assertion) -> Obligation:
    """The obligation a ``node`` assertion creates."""
    v = a.value
    return Obligation(
        id=a.obligation,
        kind=str(v["kind"]),
        weight=float(v.get("weight", 1.0)),
        parent=v.get("parent"),
        deps=tuple(v.get("deps", ())),
        required_root=bool(v.get("required_root", False)),
    )


def set_slot(o: Obligation, a: Assertion) -> None:
    """Make ``a`` the active assertion of its slot in ``o`` and update the read fields."""
    slot = (str(a.kind), a.key)
    o.active = _ACTIVE.put(o.active, _SLOTS.setdefault(slot, slot), a.id)  # o.active unchanged
    if a.kind == _K_STATUS:
        o.status = _STATUS[a.value]
    elif a.kind == _K_ASSIGNEE:
        o.assignee = a.value
    elif a.kind == _K_RESULT:
        o.result = a.value


def _copy(o: Obligation) -> Obligation:
    return Obligation(
        id=o.id, kind=o.kind, weight=o.weight, parent=o.parent, deps=o.deps,
        required_root=o.required_root, status=o.status, assignee=o.assignee,
        result=o.result, active=o.active, repair_pending=o.repair_pending,  # read-only: shared
    )


def obligation_steps(
    source: ObligationSource, bodies: Sequence[Body], *, fold: bool = False
) -> list[ObligationStep | None]:
    """One :class:`ObligationStep` per body of one change, in order (pure; X unchanged).

    Body k sees X as bodies 1..k-1 leave it. A body that touches no obligation (not a
    :data:`TOUCHING` type) gets None.

    ``fold`` (issue 29: a batch of imports): each obligation is copied once for the whole
    change, not once per body touching it; every step then holds the obligation (and its
    revoked-dependency set) as the *change* leaves it. The supersessions and the order of
    first touches are the same; only a caller that installs each obligation and reads it
    after the last body touching it (:meth:`Applier.apply_batch
    <icore.state._apply.Applier.apply_batch>`) may fold.

    Raises:
        KeyError: a body names an obligation or assertion X does not hold (a malformed
            change; the state checks its inputs before it gets here).
    """
    latest: dict[str, Obligation] = {}  # the newest version of each touched obligation
    deps: dict[str, set[str]] = {}
    added: dict[str, Assertion] = {}
    revoked: set[str] = set()  # certificates revoked by earlier bodies of this change
    steps: list[ObligationStep | None] = []

    def touch(oid: str, step: ObligationStep) -> tuple[Obligation, set[str]]:
        o = step.obligations.get(oid)
        if o is None:
            prev = latest.get(oid)
            if fold and prev is not None:  # this change's own copy: changed in place
                o, d = prev, deps[oid]
            else:
                o = _copy(prev if prev is not None else source.obligation_now(oid))
                d = set(deps[oid] if oid in deps else source.revoked_dependents(oid))
            step.obligations[oid] = latest[oid] = o
            step.dependents[oid] = deps[oid] = d
        return o, step.dependents[oid]

    def assertion(a: Assertion, j: Justification | None, step: ObligationStep) -> None:
        added[a.id] = a
        if a.kind == _K_NODE:
            o = new_obligation(a)
            step.obligations[o.id] = latest[o.id] = o
            step.dependents[o.id] = deps[o.id] = set()
            step.created.append(o.id)
        o, d = touch(a.obligation, step)
        m, slot = o.active, (str(a.kind), a.key)
        old = m.ref(slot) if type(m) is ActiveIds else active_ref(m, slot)
        if old is not None:
            step.supersedes[a.id] = old
            if d:
                d.discard(aid(old))
                if not d:
                    o.repair_pending = False
        set_slot(o, a)
        if j is not None:
            for cid in j.certificates:
                if cid in revoked or source.is_revoked(cid):
                    d.add(a.id)
                    o.repair_pending = True

    for body in bodies:
        if not isinstance(body, TOUCHING):
            steps.append(None)
            continue
        step = ObligationStep({}, {}, {}, [])  # no default factories per body
        steps.append(step)
        if isinstance(body, AssertionImported):
            assertion(body.assertion, body.justification, step)
        elif isinstance(body, Committed):
            for a in body.assertions:
                assertion(a, body.justification, step)
        else:  # Revoked
            revoked.update(body.certificates)
            for revoked_id in body.assertions:
                a = added.get(revoked_id) or source.assertion_now(revoked_id)
                o, d = touch(a.obligation, step)
                o.repair_pending = True
                d.add(revoked_id)
    return steps


def final_obligations(steps: Sequence[ObligationStep | None]) -> Mapping[str, Obligation]:
    """The touched obligations as the whole change leaves them (first-touch order)."""
    touching = [s for s in steps if s is not None and s.obligations]
    if len(touching) == 1:  # the common case: one body changes obligations
        return touching[0].obligations
    out: dict[str, Obligation] = {}
    for s in touching:
        out.update(s.obligations)
    return out
